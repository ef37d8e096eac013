//! Entry points for the fuzz targets (`crates/hookgate-providers/fuzz`, feature `fuzzing`):
//! every parser that sees untrusted bytes, reachable without I/O or the binary. Each returns
//! what the parser decided and checks the invariants the rest of hookgate relies on, so a
//! violation panics (a finding) instead of passing silently. Not a stable API.

use http::{HeaderMap, HeaderName, HeaderValue, Method};
use serde_json::Value;

use super::{Answer, Delivery, EndpointOptions, Pack, RequestContext};
use crate::common::{self, MAX_HEADER_VALUE_LEN, MAX_SIGNATURE_ENTRIES};
use crate::{Metadata, Rejection, TrustedSecret};

/// One request as raw bytes, before hyper or the binary looked at it.
#[derive(Debug, Clone, Copy)]
pub struct RawRequest<'a> {
    pub method: &'a [u8],
    pub headers: &'a [(&'a [u8], &'a [u8])],
    pub raw_query: Option<&'a str>,
    pub public_url: Option<&'a str>,
    pub options: &'a EndpointOptions,
    pub body: &'a [u8],
}

/// What the request path answered.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    /// 405: a method the pack does not answer.
    MethodNotAllowed,
    /// 4xx from the pack (415, 400 with a reason, 401).
    Rejected(Rejection),
    /// A verified handshake, answered and never stored.
    Handshake(Answer),
    /// Verified events (one per batch item) and whether the provider requires an answer.
    Events { count: usize, answer: bool },
}

/// A header map as hyper would build it: names or values it refuses are dropped (such a
/// request never reaches a pack).
pub fn header_map(headers: &[(&[u8], &[u8])]) -> HeaderMap {
    let mut map = HeaderMap::new();
    for (name, value) in headers {
        if let (Ok(name), Ok(value)) =
            (HeaderName::from_bytes(name), HeaderValue::from_bytes(value))
        {
            map.append(name, value);
        }
    }
    map
}

/// The whole request path of one pack, in the ingress order of the crate root: method,
/// content type, metadata from headers and query, verification against `secrets` at `now`,
/// then extraction from the verified bytes.
pub fn request_verdict(
    pack: &Pack,
    request: &RawRequest<'_>,
    secrets: &[TrustedSecret<'_>],
    now: i64,
) -> Verdict {
    let Ok(method) = Method::from_bytes(request.method) else {
        return Verdict::MethodNotAllowed;
    };
    if !pack.accepts_method(&method) {
        return Verdict::MethodNotAllowed;
    }
    let headers = header_map(request.headers);
    let ctx = RequestContext {
        method: &method,
        headers: &headers,
        raw_query: request.raw_query,
        public_url: request.public_url,
        options: request.options,
    };
    if !pack.accepts_content_type(headers.get(http::header::CONTENT_TYPE)) {
        return Verdict::Rejected(Rejection::UnsupportedMediaType);
    }
    let outcome = pack.parse_metadata(&ctx).and_then(|metadata| {
        check_metadata(&metadata);
        let verified = pack.verify(&ctx, &metadata, request.body, secrets, now, None)?;
        let key = secrets
            .get(verified.matched_secret_index)
            .expect("the matched index names a trusted secret")
            .key;
        pack.extract(&ctx, &metadata, request.body, Some(key))
    });
    match outcome {
        Err(rejection) => Verdict::Rejected(rejection),
        Ok(Delivery::Handshake(answer)) => Verdict::Handshake(answer),
        Ok(Delivery::Events { events, answer, .. }) => {
            // Only a batch may verify with no events (LINE's verify request).
            assert!(
                !events.is_empty() || pack.batched(),
                "a verified delivery of an unbatched pack carries an event"
            );
            for event in &events {
                assert!(!event.event_id.is_empty(), "every event has an id");
            }
            Verdict::Events {
                count: events.len(),
                answer: answer.is_some(),
            }
        }
    }
}

fn check_metadata(metadata: &Metadata) {
    assert!(
        metadata.signatures.len() <= MAX_SIGNATURE_ENTRIES,
        "more signature candidates than the bound"
    );
}

/// The signature-header syntax of a pack that reads one (`plain`, `key_value`,
/// `versioned_list`; a `timestamp_then_signatures` header, one comma list, is fuzzed with the
/// plain ones), `None` for packs whose signature lives in the body only. The fuzz targets and
/// `scripts/fuzz-seeds.py` group packs by it, in id order.
pub fn signature_format(pack: &Pack) -> Option<&'static str> {
    if pack.signature_header_names.is_empty() {
        return None;
    }
    Some(match pack.format {
        super::SignatureFormat::Plain { .. }
        | super::SignatureFormat::TimestampThenSignatures { .. } => "plain",
        super::SignatureFormat::KeyValue { .. } => "key_value",
        super::SignatureFormat::VersionedList { .. } => "versioned_list",
    })
}

/// The candidates and timestamp of `values` as the pack's first signature header (each value
/// one occurrence), through the pack's signature-header format.
pub fn signature_header(
    pack: &Pack,
    values: &[&[u8]],
) -> Result<(usize, Option<String>), Rejection> {
    let name = pack.signature_header_names[0];
    let mut headers = HeaderMap::new();
    for value in values {
        if let Ok(value) = HeaderValue::from_bytes(value) {
            headers.append(name, value);
        }
    }
    let (candidates, timestamp) = pack.parse_signatures(&headers)?;
    assert!(
        candidates.len() <= MAX_SIGNATURE_ENTRIES,
        "more candidates than the bound"
    );
    if let Some(text) = &timestamp {
        assert!(
            text.len() <= MAX_HEADER_VALUE_LEN,
            "a timestamp longer than its header"
        );
    }
    Ok((candidates.len(), timestamp))
}

/// `application/x-www-form-urlencoded` decoding of one name or value.
pub fn form_decode(raw: &[u8]) -> Vec<u8> {
    let decoded = common::form_decode(raw);
    assert!(decoded.len() <= raw.len(), "decoding never grows the input");
    decoded
}

/// The first form field called `name`.
pub fn form_field(body: &[u8], name: &str) -> Option<Vec<u8>> {
    common::form_field(body, name)
}

/// A form body as the JSON object extraction reads (form deliveries without a payload field).
pub fn form_object(body: &[u8]) -> Value {
    super::extract::form_object(body)
}

/// The sorted parameters `url_params_hmac` signs.
pub fn sorted_params(body: &[u8]) -> Vec<u8> {
    super::schemes::sorted_params(body)
}

/// What extraction reads at a JSON pointer: an identifier and a created-at.
pub fn json_pointer(document: &Value, pointer: &str) -> (Option<String>, Option<i64>) {
    let id = common::id_at(document, pointer);
    if let Some(id) = &id {
        assert!(!id.is_empty(), "an id is never empty");
    }
    (id, common::time_at(document, pointer))
}

/// A pack's document and events from bytes taken as verified (batch splitting, JSON
/// pointers, handshakes, answers), without a signature check.
pub fn extract_unverified(
    pack: &Pack,
    headers: &[(&[u8], &[u8])],
    body: &[u8],
) -> Result<Delivery, Rejection> {
    let headers = header_map(headers);
    let ctx = RequestContext::post(&headers);
    let metadata = pack.parse_metadata(&ctx).unwrap_or_default();
    let delivery = pack.extract(&ctx, &metadata, body, None)?;
    if let Delivery::Events { events, .. } = &delivery {
        // Only a batch may verify with no events (LINE's verify request: `"events": []`).
        assert!(
            !events.is_empty() || pack.batched(),
            "an extracted delivery of an unbatched pack carries an event"
        );
        assert!(
            events.iter().all(|e| !e.event_id.is_empty()),
            "every event has an id"
        );
    }
    Ok(delivery)
}
