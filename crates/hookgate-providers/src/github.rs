//! GitHub (`provider = "github"`).
//!
//! - **Headers:** `X-Hub-Signature-256: sha256=<lower-case hex>`, `X-GitHub-Delivery` (GUID),
//!   `X-GitHub-Event` (event name). The legacy `X-Hub-Signature` (SHA-1) is never used: on its
//!   own it answers 400 `missing_signature`.
//! - **Content types:** `application/json`, or `application/x-www-form-urlencoded` with the JSON
//!   in a `payload` field (per hook configuration).
//! - **Signed bytes:** the raw body exactly as sent (for form deliveries: the encoded form, not
//!   the decoded `payload`).
//! - **Algorithm / encoding:** HMAC-SHA256, lower-case hex behind `sha256=`; the key is the hook
//!   secret string as UTF-8. Official verifiers compare the header string exactly, so upper-case
//!   hex or a missing prefix answers 400 `malformed_signature`.
//! - **Several signatures:** one per delivery. Rotation is done by the receiver trusting old
//!   and new secret at once; every trusted secret is tried.
//! - **Timestamp / tolerance:** none is signed. Replay protection is the delivery-id dedupe, so
//!   the idempotency record (the inbox row) must be kept long.
//! - **Logical event id:** `X-GitHub-Delivery`; a requested redelivery carries the same GUID.
//!   GitHub does not retry automatically. A delivery without it answers 400 `missing_event_id`.
//! - **Envelope:** type = `X-GitHub-Event`; object id = body `repository.full_name` (else
//!   `organization.login`), for grouping only; no object version and no created-at (order from
//!   `action` and object timestamps, or refetch).

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::common::{
    self, FORM, JSON, bad, content_type_allowed, hex_tag, info_header, reject_duplicated,
    signed_header, verify_hmac_sha256,
};
use crate::{
    Adapter, BadRequestReason, Envelope, Extracted, IdLocation, Metadata, ProviderKind, Rejection,
    SecretFormatError, SecretMaterial, SignRequest, TrustedSecret, Verified,
};

const SIGNATURE: &str = "x-hub-signature-256";
const DELIVERY: &str = "x-github-delivery";
const EVENT: &str = "x-github-event";

pub(crate) struct Github;

pub(crate) static GITHUB: Github = Github;

impl Adapter for Github {
    fn id(&self) -> &'static str {
        ProviderKind::Github.id()
    }

    fn default_tolerance_seconds(&self) -> Option<u64> {
        None
    }

    fn default_content_type(&self) -> &'static str {
        JSON
    }

    fn accepts_content_type(&self, content_type: Option<&HeaderValue>) -> bool {
        content_type_allowed(content_type, &[JSON, FORM])
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
        let hex = value
            .strip_prefix("sha256=")
            .ok_or(bad(MalformedSignature))?;
        Ok(Metadata {
            signatures: vec![hex_tag(hex)?],
            timestamp_text: None,
            timestamp: None,
            header_id: info_header(headers, &[DELIVERY])?,
            header_event_type: info_header(headers, &[EVENT])?,
            ..Metadata::default()
        })
    }

    fn verify(
        &self,
        metadata: &Metadata,
        body: &[u8],
        secrets: &[TrustedSecret<'_>],
        _now: i64,
        _tolerance_seconds: Option<u64>,
    ) -> Result<Verified, Rejection> {
        verify_hmac_sha256(secrets, &[body], &metadata.signatures)
    }

    fn extract(
        &self,
        metadata: &Metadata,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<Extracted, Rejection> {
        let event_id = metadata
            .header_id
            .clone()
            .ok_or(bad(BadRequestReason::MissingEventId))?;
        let json = if common::is_form(headers) {
            let payload = common::form_field(body, "payload")
                .ok_or(bad(BadRequestReason::UnparseableEnvelope))?;
            common::parse_json(&payload)?
        } else {
            common::parse_json(body)?
        };
        Ok(Extracted::Event(Envelope {
            event_id,
            event_type: metadata.header_event_type.clone(),
            object_id: common::str_at(&json, "/repository/full_name")
                .or_else(|| common::str_at(&json, "/organization/login")),
            object_version: None,
            created_at: None,
        }))
    }

    fn id_location(&self) -> IdLocation {
        IdLocation::Header(DELIVERY)
    }

    fn sign(
        &self,
        key: &SecretMaterial,
        request: &SignRequest<'_>,
    ) -> Vec<(HeaderName, HeaderValue)> {
        let tag = common::hmac_sha256(key.expose(), &[request.body]);
        let mut out = Vec::with_capacity(4);
        common::push_header(&mut out, "content-type", self.default_content_type());
        common::push_header(&mut out, DELIVERY, request.event_id);
        if let Some(event_type) = request.event_type {
            common::push_header(&mut out, EVENT, event_type);
        }
        common::push_header(
            &mut out,
            SIGNATURE,
            &format!("sha256={}", common::encode_lower_hex(&tag)),
        );
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn form_payload_is_decoded_for_the_envelope() {
        let map = headers(&[
            ("content-type", FORM),
            (DELIVERY, "d-1"),
            (EVENT, "push"),
            (SIGNATURE, &format!("sha256={}", "00".repeat(32))),
        ]);
        let md = GITHUB.parse_metadata(&map).unwrap();
        let body = b"payload=%7B%22repository%22%3A%7B%22full_name%22%3A%22o%2Fr%22%7D%7D";
        let Extracted::Event(env) = GITHUB.extract(&md, &map, body).unwrap() else {
            panic!("not an event");
        };
        assert_eq!(env.event_id, "d-1");
        assert_eq!(env.event_type.as_deref(), Some("push"));
        assert_eq!(env.object_id.as_deref(), Some("o/r"));
        assert_eq!(
            GITHUB.extract(&md, &map, b"other=1"),
            Err(Rejection::BadRequest(BadRequestReason::UnparseableEnvelope))
        );
    }

    #[test]
    fn duplicated_delivery_or_event_headers_are_refused() {
        let sig = format!("sha256={}", "00".repeat(32));
        for name in [DELIVERY, EVENT] {
            let map = headers(&[(SIGNATURE, &sig), (name, "a"), (name, "b")]);
            assert_eq!(
                GITHUB.parse_metadata(&map).unwrap_err(),
                Rejection::BadRequest(BadRequestReason::DuplicatedHeader)
            );
        }
        let map = headers(&[(SIGNATURE, &sig), (SIGNATURE, &sig)]);
        assert_eq!(
            GITHUB.parse_metadata(&map).unwrap_err(),
            Rejection::BadRequest(BadRequestReason::DuplicatedSignature)
        );
    }

    #[test]
    fn missing_delivery_id_is_missing_event_id() {
        let map = headers(&[(SIGNATURE, &format!("sha256={}", "00".repeat(32)))]);
        let md = GITHUB.parse_metadata(&map).unwrap();
        assert_eq!(
            GITHUB.extract(&md, &map, b"{}"),
            Err(Rejection::BadRequest(BadRequestReason::MissingEventId))
        );
    }
}
