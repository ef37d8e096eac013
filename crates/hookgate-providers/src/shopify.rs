//! Shopify (`provider = "shopify"`).
//!
//! - **Headers:** `X-Shopify-Hmac-Sha256` (signature), `X-Shopify-Webhook-Id`,
//!   `X-Shopify-Topic`, `X-Shopify-Triggered-At`, …; "Events" deliveries use the same names
//!   without the `X-` prefix (`shopify-hmac-sha256`, `shopify-webhook-id`, `shopify-topic`, …),
//!   which are accepted too (the `X-Shopify-*` one wins when both are present).
//!   `Content-Type: application/json`.
//! - **Signed bytes:** the raw body. An empty body answers 400 `missing_body` before any HMAC
//!   (as the official library does).
//! - **Algorithm / encoding:** HMAC-SHA256, standard base64; the key is the app's client secret
//!   string as UTF-8. A value that is not base64 of 32 bytes (e.g. hex) answers 400
//!   `malformed_signature`.
//! - **Several signatures:** one per delivery; after a client-secret rotation Shopify may sign
//!   with the old secret for up to an hour, so trust both meanwhile (every trusted secret is
//!   tried).
//! - **Timestamp / tolerance:** nothing is signed; replay protection is the webhook-id dedupe.
//! - **Logical event id:** `X-Shopify-Webhook-Id`, which the official library names the
//!   idempotency key and retries keep (one id per subscription; the older "ignore duplicates"
//!   page names `X-Shopify-Event-Id` instead). Missing → 400 `missing_event_id`.
//! - **Envelope:** type = `X-Shopify-Topic`; object id = body `admin_graphql_api_id`, else body
//!   `id`, else `shopify-resource-id`; created = `X-Shopify-Triggered-At` (RFC 3339); no
//!   authoritative version (compare `updated_at` or refetch).

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::common::{
    self, JSON, bad, base64_tag, content_type_allowed, info_header, reject_duplicated,
    signed_header_any, verify_hmac_sha256,
};
use crate::{
    Adapter, BadRequestReason, Envelope, Extracted, IdLocation, Metadata, ProviderKind, Rejection,
    SecretFormatError, SecretMaterial, SignRequest, TrustedSecret, Verified,
};

const SIGNATURES: &[&str] = &["x-shopify-hmac-sha256", "shopify-hmac-sha256"];
const WEBHOOK_IDS: &[&str] = &["x-shopify-webhook-id", "shopify-webhook-id"];
const TOPICS: &[&str] = &["x-shopify-topic", "shopify-topic"];
const TRIGGERED_AT: &[&str] = &["x-shopify-triggered-at", "shopify-triggered-at"];
const RESOURCE_ID: &[&str] = &["shopify-resource-id"];

pub(crate) struct Shopify;

pub(crate) static SHOPIFY: Shopify = Shopify;

impl Adapter for Shopify {
    fn id(&self) -> &'static str {
        ProviderKind::Shopify.id()
    }

    fn default_tolerance_seconds(&self) -> Option<u64> {
        None
    }

    fn default_content_type(&self) -> &'static str {
        JSON
    }

    fn accepts_content_type(&self, content_type: Option<&HeaderValue>) -> bool {
        content_type_allowed(content_type, &[JSON])
    }

    fn decode_secret(&self, secret: &str) -> Result<SecretMaterial, SecretFormatError> {
        common::utf8_secret(secret)
    }

    fn signature_headers(&self) -> &'static [&'static str] {
        SIGNATURES
    }

    fn parse_metadata(&self, headers: &HeaderMap) -> Result<Metadata, Rejection> {
        use BadRequestReason::*;
        reject_duplicated(headers, SIGNATURES)?;
        let value = signed_header_any(headers, SIGNATURES, MalformedSignature)?
            .ok_or(bad(MissingSignature))?;
        Ok(Metadata {
            signatures: vec![base64_tag(value)?],
            timestamp_text: None,
            timestamp: None,
            header_id: info_header(headers, WEBHOOK_IDS)?,
            header_event_type: info_header(headers, TOPICS)?,
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
        if body.is_empty() {
            return Err(bad(BadRequestReason::MissingBody));
        }
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
        let json = common::parse_json(body)?;
        let object_id = match common::str_at(&json, "/admin_graphql_api_id") {
            Some(id) => Some(id),
            None => match common::id_at(&json, "/id") {
                Some(id) => Some(id),
                None => info_header(headers, RESOURCE_ID)?,
            },
        };
        let created_at = info_header(headers, TRIGGERED_AT)?
            .as_deref()
            .and_then(common::parse_rfc3339);
        Ok(Extracted::Event(Envelope {
            event_id,
            event_type: metadata.header_event_type.clone(),
            object_id,
            object_version: None,
            created_at,
        }))
    }

    fn id_location(&self) -> IdLocation {
        IdLocation::Header(WEBHOOK_IDS[0])
    }

    fn sign(
        &self,
        key: &SecretMaterial,
        request: &SignRequest<'_>,
    ) -> Vec<(HeaderName, HeaderValue)> {
        let tag = common::hmac_sha256(key.expose(), &[request.body]);
        let mut out = Vec::with_capacity(5);
        common::push_header(&mut out, "content-type", self.default_content_type());
        common::push_header(&mut out, WEBHOOK_IDS[0], request.event_id);
        if let Some(topic) = request.event_type {
            common::push_header(&mut out, TOPICS[0], topic);
        }
        common::push_header(
            &mut out,
            TRIGGERED_AT[0],
            &common::format_rfc3339(request.timestamp),
        );
        common::push_header(&mut out, SIGNATURES[0], &common::encode_base64(&tag));
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
    fn envelope_from_events_style_headers() {
        let sig = common::encode_base64(&[0u8; 32]);
        let map = headers(&[
            ("shopify-hmac-sha256", &sig),
            ("shopify-webhook-id", "w-1"),
            ("shopify-topic", "orders/create"),
            ("shopify-triggered-at", "2026-01-01T00:00:00.123Z"),
            ("shopify-resource-id", "gid://shopify/Order/1"),
        ]);
        let md = SHOPIFY.parse_metadata(&map).unwrap();
        let Extracted::Event(env) = SHOPIFY.extract(&md, &map, b"{}").unwrap() else {
            panic!("not an event");
        };
        assert_eq!(env.event_id, "w-1");
        assert_eq!(env.event_type.as_deref(), Some("orders/create"));
        assert_eq!(env.object_id.as_deref(), Some("gid://shopify/Order/1"));
        assert_eq!(env.created_at, Some(1_767_225_600));
        let Extracted::Event(env) = SHOPIFY.extract(&md, &map, br#"{"id":5}"#).unwrap() else {
            panic!("not an event");
        };
        assert_eq!(env.object_id.as_deref(), Some("5"));
    }

    #[test]
    fn both_signature_spellings_count_as_one_header_each() {
        let sig = common::encode_base64(&[0u8; 32]);
        let map = headers(&[("shopify-hmac-sha256", &sig), ("shopify-hmac-sha256", &sig)]);
        assert_eq!(
            SHOPIFY.parse_metadata(&map).unwrap_err(),
            bad(BadRequestReason::DuplicatedSignature)
        );
        let md = SHOPIFY
            .parse_metadata(&headers(&[("x-shopify-hmac-sha256", &sig)]))
            .unwrap();
        assert_eq!(
            SHOPIFY.extract(&md, &HeaderMap::new(), b"{}"),
            Err(bad(BadRequestReason::MissingEventId))
        );
    }
}
