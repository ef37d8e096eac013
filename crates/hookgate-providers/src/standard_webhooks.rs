//! Standard Webhooks (`provider = "standard_webhooks"`) and Svix (`provider = "svix"`, also
//! Svix-based senders such as Clerk and Resend). One scheme; only the header names differ.
//!
//! - **Headers:** `webhook-id`, `webhook-timestamp`, `webhook-signature` (Standard Webhooks);
//!   `svix-id`, `svix-timestamp`, `svix-signature` for Svix, which also accepts the unbranded
//!   `webhook-*` names (per header, the `svix-*` one wins when both are present).
//!   `Content-Type: application/json`.
//! - **Signed bytes:** `<id>.<timestamp>.<body>`, id and timestamp exactly as sent.
//! - **Algorithm / encoding:** HMAC-SHA256, standard base64. The secret is `whsec_` + base64
//!   (prefix optional) and the key is the *decoded* bytes.
//! - **Several signatures:** the signature header is a space-separated list of
//!   `<version>,<signature>` entries (one per active secret during rotation); the request
//!   verifies if any `v1` entry matches any trusted secret. Other versions (`v1a` = Ed25519) are
//!   skipped. A `v1` value that is not base64 of 32 bytes (e.g. hex) answers 400
//!   `malformed_signature`; at most 16 entries and 4 KiB.
//! - **Timestamp / tolerance:** `*-timestamp` (unix seconds) is signed; default tolerance
//!   300 s in both directions, boundary accepted, checked only after the signature verified.
//! - **Logical event id:** the signed `*-id` header (`msg_…`); unchanged across automatic
//!   retries and manual resends, while the timestamp and signature change per attempt.
//! - **Envelope:** type = body `type`; object id = body `data.id` when present; created = body
//!   `timestamp` (RFC 3339, or Clerk's milliseconds) else `created_at`; no object version.

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::common::{
    self, Freshness, JSON, MAX_SIGNATURE_ENTRIES, bad, base64_tag, check_freshness,
    content_type_allowed, parse_unix_seconds, reject_duplicated, signed_header_any,
    signed_timestamp, verify_hmac_sha256,
};
use crate::{
    Adapter, BadRequestReason, Envelope, Extracted, IdLocation, Metadata, ProviderKind, Rejection,
    SecretFormatError, SecretMaterial, SignRequest, TrustedSecret, Verified,
};

const TOLERANCE: u64 = 300;

/// The scheme with one provider's header names, in lookup order.
pub(crate) struct StandardWebhooks {
    kind: ProviderKind,
    ids: &'static [&'static str],
    timestamps: &'static [&'static str],
    signatures: &'static [&'static str],
    /// Every name above, for duplicate detection.
    all: &'static [&'static str],
}

pub(crate) static STANDARD_WEBHOOKS: StandardWebhooks = StandardWebhooks {
    kind: ProviderKind::StandardWebhooks,
    ids: &["webhook-id"],
    timestamps: &["webhook-timestamp"],
    signatures: &["webhook-signature"],
    all: &["webhook-id", "webhook-timestamp", "webhook-signature"],
};

pub(crate) static SVIX: StandardWebhooks = StandardWebhooks {
    kind: ProviderKind::Svix,
    ids: &["svix-id", "webhook-id"],
    timestamps: &["svix-timestamp", "webhook-timestamp"],
    signatures: &["svix-signature", "webhook-signature"],
    all: &[
        "svix-id",
        "svix-timestamp",
        "svix-signature",
        "webhook-id",
        "webhook-timestamp",
        "webhook-signature",
    ],
};

/// Decodes the `v1` entries of a signature header; skips other versions.
fn parse_signature_list(value: &str) -> Result<Vec<Vec<u8>>, Rejection> {
    let malformed = bad(BadRequestReason::MalformedSignature);
    let mut signatures = Vec::new();
    for (count, entry) in value.split(' ').filter(|e| !e.is_empty()).enumerate() {
        if count >= MAX_SIGNATURE_ENTRIES {
            return Err(malformed);
        }
        let (version, signature) = entry.split_once(',').ok_or(malformed)?;
        if version == "v1" {
            signatures.push(base64_tag(signature)?);
        }
    }
    Ok(signatures)
}

impl Adapter for StandardWebhooks {
    fn id(&self) -> &'static str {
        self.kind.id()
    }

    fn default_tolerance_seconds(&self) -> Option<u64> {
        Some(TOLERANCE)
    }

    fn default_content_type(&self) -> &'static str {
        JSON
    }

    fn accepts_content_type(&self, content_type: Option<&HeaderValue>) -> bool {
        content_type_allowed(content_type, &[JSON])
    }

    fn decode_secret(&self, secret: &str) -> Result<SecretMaterial, SecretFormatError> {
        common::whsec_base64_secret(secret)
    }

    fn signature_headers(&self) -> &'static [&'static str] {
        self.all
    }

    fn parse_metadata(&self, headers: &HeaderMap) -> Result<Metadata, Rejection> {
        use BadRequestReason::*;
        reject_duplicated(headers, self.all)?;
        let signature = signed_header_any(headers, self.signatures, MalformedSignature)?
            .ok_or(bad(MissingSignature))?;
        let id = signed_header_any(headers, self.ids, MalformedSignature)?
            .filter(|id| !id.is_empty())
            .ok_or(bad(MissingId))?;
        let timestamp_text = signed_header_any(headers, self.timestamps, MalformedTimestamp)?
            .ok_or(bad(MissingTimestamp))?;
        let timestamp = parse_unix_seconds(timestamp_text)?;
        Ok(Metadata {
            signatures: parse_signature_list(signature)?,
            timestamp_text: Some(timestamp_text.to_owned()),
            timestamp: Some(timestamp),
            header_id: Some(id.to_owned()),
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
        let id = metadata
            .header_id
            .as_deref()
            .ok_or(bad(BadRequestReason::MissingId))?;
        let (text, timestamp) = signed_timestamp(metadata)?;
        let parts: [&[u8]; 5] = [id.as_bytes(), b".", text.as_bytes(), b".", body];
        let verified = verify_hmac_sha256(secrets, &parts, &metadata.signatures)?;
        let tolerance = tolerance_seconds.unwrap_or(TOLERANCE);
        check_freshness(timestamp, now, tolerance, Freshness::BothDirections)?;
        Ok(verified)
    }

    fn extract(
        &self,
        metadata: &Metadata,
        _headers: &HeaderMap,
        body: &[u8],
    ) -> Result<Extracted, Rejection> {
        let event_id = metadata
            .header_id
            .clone()
            .ok_or(bad(BadRequestReason::MissingEventId))?;
        let json = common::parse_json(body)?;
        Ok(Extracted::Event(Envelope {
            event_id,
            event_type: common::str_at(&json, "/type"),
            object_id: common::id_at(&json, "/data/id"),
            object_version: None,
            created_at: common::time_at(&json, "/timestamp")
                .or_else(|| common::time_at(&json, "/created_at")),
        }))
    }

    fn id_location(&self) -> IdLocation {
        IdLocation::Header(self.ids[0])
    }

    fn sign(
        &self,
        key: &SecretMaterial,
        request: &SignRequest<'_>,
    ) -> Vec<(HeaderName, HeaderValue)> {
        let t = request.timestamp.to_string();
        let parts: [&[u8]; 5] = [
            request.event_id.as_bytes(),
            b".",
            t.as_bytes(),
            b".",
            request.body,
        ];
        let tag = common::hmac_sha256(key.expose(), &parts);
        let mut out = Vec::with_capacity(4);
        common::push_header(&mut out, "content-type", self.default_content_type());
        common::push_header(&mut out, self.ids[0], request.event_id);
        common::push_header(&mut out, self.timestamps[0], &t);
        common::push_header(
            &mut out,
            self.signatures[0],
            &format!("v1,{}", common::encode_base64(&tag)),
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

    fn tag() -> String {
        common::encode_base64(&[1u8; 32])
    }

    #[test]
    fn signature_list_parsing() {
        let t = tag();
        assert_eq!(
            parse_signature_list(&format!("v1,{t}  v1a,xyz v2,abc v1,{t}"))
                .unwrap()
                .len(),
            2
        );
        assert!(parse_signature_list("v1a,xyz").unwrap().is_empty());
        let malformed = Err(bad(BadRequestReason::MalformedSignature));
        assert_eq!(parse_signature_list(&t), malformed, "entry without version");
        assert_eq!(
            parse_signature_list(&format!("v1,{}", "ab".repeat(32))),
            malformed,
            "hex"
        );
        let max = vec![format!("v1,{t}"); MAX_SIGNATURE_ENTRIES].join(" ");
        assert_eq!(
            parse_signature_list(&max).unwrap().len(),
            MAX_SIGNATURE_ENTRIES
        );
        let over = vec![format!("v1a,{t}"); MAX_SIGNATURE_ENTRIES + 1].join(" ");
        assert_eq!(parse_signature_list(&over), malformed);
    }

    #[test]
    fn missing_headers_in_order() {
        use BadRequestReason::*;
        let sig = format!("v1,{}", tag());
        let cases: [(&[(&'static str, &str)], BadRequestReason); 3] = [
            (
                &[("webhook-id", "m"), ("webhook-timestamp", "1")],
                MissingSignature,
            ),
            (
                &[("webhook-signature", &sig), ("webhook-timestamp", "1")],
                MissingId,
            ),
            (
                &[("webhook-signature", &sig), ("webhook-id", "m")],
                MissingTimestamp,
            ),
        ];
        for (pairs, reason) in cases {
            assert_eq!(
                STANDARD_WEBHOOKS
                    .parse_metadata(&headers(pairs))
                    .unwrap_err(),
                Rejection::BadRequest(reason)
            );
        }
        let map = headers(&[
            ("webhook-signature", &sig),
            ("webhook-id", "m"),
            ("webhook-timestamp", "1.5"),
        ]);
        assert_eq!(
            STANDARD_WEBHOOKS.parse_metadata(&map).unwrap_err(),
            bad(MalformedTimestamp)
        );
    }

    #[test]
    fn svix_accepts_unbranded_names_and_prefers_its_own() {
        let sig = format!("v1,{}", tag());
        let map = headers(&[
            ("svix-id", "msg_svix"),
            ("webhook-id", "msg_web"),
            ("webhook-timestamp", "7"),
            ("webhook-signature", &sig),
        ]);
        let md = SVIX.parse_metadata(&map).unwrap();
        assert_eq!(md.header_id.as_deref(), Some("msg_svix"));
        assert_eq!(md.timestamp, Some(7));
        // the Standard Webhooks adapter does not read svix-* names
        let map = headers(&[
            ("svix-id", "m"),
            ("svix-timestamp", "7"),
            ("svix-signature", &sig),
        ]);
        assert_eq!(
            STANDARD_WEBHOOKS.parse_metadata(&map).unwrap_err(),
            bad(BadRequestReason::MissingSignature)
        );
        // duplicates of any of the six names are refused by svix
        let map = headers(&[
            ("svix-id", "m"),
            ("svix-timestamp", "7"),
            ("svix-signature", &sig),
            ("webhook-signature", &sig),
            ("webhook-signature", &sig),
        ]);
        assert_eq!(
            SVIX.parse_metadata(&map).unwrap_err(),
            bad(BadRequestReason::DuplicatedSignature)
        );
    }

    #[test]
    fn envelope_fields() {
        let md = Metadata {
            header_id: Some("msg_1".into()),
            ..Metadata::default()
        };
        let body = br#"{"type":"invoice.paid","timestamp":"2026-01-01T00:00:00.5Z","data":{"id":"inv_1"}}"#;
        let Extracted::Event(env) = SVIX.extract(&md, &HeaderMap::new(), body).unwrap() else {
            panic!("not an event");
        };
        assert_eq!(env.event_id, "msg_1");
        assert_eq!(env.event_type.as_deref(), Some("invoice.paid"));
        assert_eq!(env.object_id.as_deref(), Some("inv_1"));
        assert_eq!(env.created_at, Some(1_767_225_600));
        assert_eq!(
            SVIX.extract(&md, &HeaderMap::new(), b"not json"),
            Err(bad(BadRequestReason::UnparseableEnvelope))
        );
    }
}
