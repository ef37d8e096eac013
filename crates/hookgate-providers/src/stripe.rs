//! Stripe (`provider = "stripe"`).
//!
//! - **Headers:** `Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>…][,v0=<hex>]`.
//!   `Content-Type: application/json; charset=utf-8`.
//! - **Signed bytes:** the decimal `t` exactly as sent, `.`, the raw body.
//! - **Algorithm / encoding:** HMAC-SHA256, lower-case hex. The key is the endpoint signing
//!   secret string used verbatim as UTF-8, *including* its `whsec_` prefix (not base64-decoded).
//! - **Several signatures:** during a secret roll Stripe sends one `v1` per active secret; the
//!   request verifies if any `v1` matches any trusted secret. `v0` (test-mode placeholder) and
//!   unknown schemes are ignored, so a correct HMAC under `v0` does not pass; a header with no
//!   `v1` at all answers 401 `invalid_signature`. At most 16 items per header, 4 KiB.
//! - **Timestamp / tolerance:** `t` is signed; default tolerance 300 s, stale side only
//!   (`now - t > tolerance` is refused, future timestamps and the boundary are accepted), as the
//!   official SDKs do. Checked only after the signature verified.
//! - **Logical event id:** body `id` (`evt_…`); automatic retries and manual resends keep it
//!   (each attempt gets a fresh `t` and signature).
//! - **Envelope:** type = body `type`; created = body `created`; object id = `data.object.id`
//!   (thin events: `related_object.id`); no authoritative object version (order by refetching
//!   the object).

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::common::{
    self, Freshness, JSON, MAX_SIGNATURE_ENTRIES, bad, check_freshness, content_type_allowed,
    hex_tag, parse_unix_seconds, reject_duplicated, signed_header, signed_timestamp,
    verify_hmac_sha256,
};
use crate::{
    Adapter, BadRequestReason, Envelope, Extracted, IdLocation, Metadata, ProviderKind, Rejection,
    SecretFormatError, SecretMaterial, SignRequest, TrustedSecret, Verified,
};

const SIGNATURE: &str = "stripe-signature";
const TOLERANCE: u64 = 300;

pub(crate) struct Stripe;

pub(crate) static STRIPE: Stripe = Stripe;

impl Adapter for Stripe {
    fn id(&self) -> &'static str {
        ProviderKind::Stripe.id()
    }

    fn default_tolerance_seconds(&self) -> Option<u64> {
        Some(TOLERANCE)
    }

    fn default_content_type(&self) -> &'static str {
        "application/json; charset=utf-8"
    }

    fn accepts_content_type(&self, content_type: Option<&HeaderValue>) -> bool {
        content_type_allowed(content_type, &[JSON])
    }

    fn decode_secret(&self, secret: &str) -> Result<SecretMaterial, SecretFormatError> {
        common::utf8_secret(secret)
    }

    fn signature_headers(&self) -> &'static [&'static str] {
        &[SIGNATURE]
    }

    fn parse_metadata(&self, headers: &HeaderMap) -> Result<Metadata, Rejection> {
        use BadRequestReason::*;
        reject_duplicated(headers, self.signature_headers())?;
        let value =
            signed_header(headers, SIGNATURE, MalformedSignature)?.ok_or(bad(MissingSignature))?;
        let mut timestamp_text = None;
        let mut signatures = Vec::new();
        for (count, item) in value.split(',').enumerate() {
            if count > MAX_SIGNATURE_ENTRIES {
                return Err(bad(MalformedSignature));
            }
            let (key, val) = item.split_once('=').ok_or(bad(MalformedSignature))?;
            match key {
                "t" if timestamp_text.is_some() => return Err(bad(MalformedSignature)),
                "t" => timestamp_text = Some(val),
                "v1" => signatures.push(hex_tag(val)?),
                _ => {} // v0 and schemes we do not implement are skipped
            }
        }
        let text = timestamp_text.ok_or(bad(MalformedSignature))?;
        let timestamp = parse_unix_seconds(text)?;
        Ok(Metadata {
            signatures,
            timestamp_text: Some(text.to_owned()),
            timestamp: Some(timestamp),
            header_id: None,
            header_event_type: None,
            ..Metadata::default()
        })
    }

    fn verify(
        &self,
        metadata: &Metadata,
        body: &[u8],
        secrets: &[TrustedSecret<'_>],
        now: i64,
        tolerance_seconds: Option<u64>,
    ) -> Result<Verified, Rejection> {
        let (text, timestamp) = signed_timestamp(metadata)?;
        let verified = verify_hmac_sha256(
            secrets,
            &[text.as_bytes(), b".", body],
            &metadata.signatures,
        )?;
        let tolerance = tolerance_seconds.unwrap_or(TOLERANCE);
        check_freshness(timestamp, now, tolerance, Freshness::PastOnly)?;
        Ok(verified)
    }

    fn extract(
        &self,
        _metadata: &Metadata,
        _headers: &HeaderMap,
        body: &[u8],
    ) -> Result<Extracted, Rejection> {
        let json = common::parse_json(body)?;
        let event_id = common::str_at(&json, "/id").ok_or(bad(BadRequestReason::MissingEventId))?;
        Ok(Extracted::Event(Envelope {
            event_id,
            event_type: common::str_at(&json, "/type"),
            object_id: common::str_at(&json, "/data/object/id")
                .or_else(|| common::str_at(&json, "/related_object/id")),
            object_version: None,
            created_at: common::time_at(&json, "/created"),
        }))
    }

    fn id_location(&self) -> IdLocation {
        IdLocation::BodyPointer("/id")
    }

    /// Signs the body as given (the event id is already inside it).
    fn sign(
        &self,
        key: &SecretMaterial,
        request: &SignRequest<'_>,
    ) -> Vec<(HeaderName, HeaderValue)> {
        let t = request.timestamp.to_string();
        let tag = common::hmac_sha256(key.expose(), &[t.as_bytes(), b".", request.body]);
        let mut out = Vec::with_capacity(2);
        common::push_header(&mut out, "content-type", self.default_content_type());
        common::push_header(
            &mut out,
            SIGNATURE,
            &format!("t={t},v1={}", common::encode_lower_hex(&tag)),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(value: &str) -> HeaderMap {
        let mut map = HeaderMap::new();
        map.insert(SIGNATURE, HeaderValue::from_str(value).unwrap());
        map
    }

    const MALFORMED: Rejection = Rejection::BadRequest(BadRequestReason::MalformedSignature);

    #[test]
    fn header_parsing() {
        let tag = "ab".repeat(32);
        let md = STRIPE
            .parse_metadata(&headers(&format!("t=12,v1={tag},v0={tag},v9=zz,v1={tag}")))
            .unwrap();
        assert_eq!(md.signatures.len(), 2);
        assert_eq!(md.timestamp, Some(12));
        assert_eq!(md.timestamp_text.as_deref(), Some("12"));
        // only v0: parses, but nothing can match
        let md = STRIPE
            .parse_metadata(&headers(&format!("t=12,v0={tag}")))
            .unwrap();
        assert!(md.signatures.is_empty());
        for bad_header in [
            format!("v1={tag}"),
            format!("t=1,t=2,v1={tag}"),
            format!("t=1,v1={}", tag.to_uppercase()),
            format!("t=1,v1={tag},junk"),
            "t=1,v1=ab".to_owned(),
        ] {
            assert_eq!(
                STRIPE.parse_metadata(&headers(&bad_header)).unwrap_err(),
                MALFORMED
            );
        }
        assert_eq!(
            STRIPE
                .parse_metadata(&headers(&format!("t=x1,v1={tag}")))
                .unwrap_err(),
            Rejection::BadRequest(BadRequestReason::MalformedTimestamp)
        );
        let many = format!("t=1{}", format!(",v1={tag}").repeat(MAX_SIGNATURE_ENTRIES));
        assert!(STRIPE.parse_metadata(&headers(&many)).is_ok());
        let too_many = format!(
            "t=1{}",
            format!(",v1={tag}").repeat(MAX_SIGNATURE_ENTRIES + 1)
        );
        assert_eq!(
            STRIPE.parse_metadata(&headers(&too_many)).unwrap_err(),
            MALFORMED
        );
        assert_eq!(
            STRIPE.parse_metadata(&HeaderMap::new()).unwrap_err(),
            Rejection::BadRequest(BadRequestReason::MissingSignature)
        );
        let mut dup = headers(&format!("t=1,v1={tag}"));
        dup.append(
            SIGNATURE,
            HeaderValue::from_str(&format!("t=1,v1={tag}")).unwrap(),
        );
        assert_eq!(
            STRIPE.parse_metadata(&dup).unwrap_err(),
            Rejection::BadRequest(BadRequestReason::DuplicatedSignature)
        );
    }

    #[test]
    fn envelope_fields() {
        let body = br#"{"id":"evt_1","type":"payment_intent.succeeded","created":1767225560,
            "data":{"object":{"id":"pi_1","object":"payment_intent"}}}"#;
        let got = STRIPE
            .extract(&Metadata::default(), &HeaderMap::new(), body)
            .unwrap();
        assert_eq!(
            got,
            Extracted::Event(Envelope {
                event_id: "evt_1".into(),
                event_type: Some("payment_intent.succeeded".into()),
                object_id: Some("pi_1".into()),
                object_version: None,
                created_at: Some(1_767_225_560),
            })
        );
        let no_id = STRIPE.extract(&Metadata::default(), &HeaderMap::new(), br#"{"type":"x"}"#);
        assert_eq!(
            no_id,
            Err(Rejection::BadRequest(BadRequestReason::MissingEventId))
        );
        let not_json = STRIPE.extract(&Metadata::default(), &HeaderMap::new(), b"id=evt_1");
        assert_eq!(
            not_json,
            Err(Rejection::BadRequest(BadRequestReason::UnparseableEnvelope))
        );
    }
}
