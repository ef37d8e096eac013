//! Slack (`provider = "slack"`): Events API, slash commands, interactivity.
//!
//! - **Headers:** `X-Slack-Signature: v0=<lower-case hex>`, `X-Slack-Request-Timestamp` (unix
//!   seconds); retries add `X-Slack-Retry-Num` / `X-Slack-Retry-Reason` (informational).
//! - **Content types:** `application/json` (Events API) and
//!   `application/x-www-form-urlencoded` (slash commands, interactive `payload=`).
//! - **Signed bytes:** `v0:<timestamp>:<raw body>`, timestamp exactly as sent.
//! - **Algorithm / encoding:** HMAC-SHA256, lower-case hex behind `v0=`; the key is the app's
//!   signing secret string as UTF-8.
//! - **Several signatures:** one per request; Slack has no dual-signing window, so a rotation is
//!   the receiver trusting old and new secret briefly (every trusted secret is tried).
//! - **Timestamp / tolerance:** signed; default 300 s in both directions (as the docs and the
//!   Python SDK), boundary accepted, checked only after the signature verified.
//! - **Logical event id:** body `event_id` (`Ev…`), unchanged on retries (which are re-signed
//!   with a fresh timestamp). Slash commands and interactive payloads carry none and answer 400
//!   `missing_event_id`.
//! - **Handshake:** a verified `{"type":"url_verification","challenge":…}` is answered with
//!   `{"challenge":…}` (`application/json`) and never stored.
//! - **Envelope:** type = `event.type` (else the top-level `type`); created = `event_time`; no
//!   object id or version.

use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use crate::common::{
    self, FORM, Freshness, JSON, bad, check_freshness, content_type_allowed, hex_tag,
    parse_unix_seconds, reject_duplicated, signed_header, signed_timestamp, verify_hmac_sha256,
};
use crate::{
    Adapter, BadRequestReason, Envelope, Extracted, IdLocation, Metadata, ProviderKind, Rejection,
    SecretFormatError, SecretMaterial, SignRequest, TrustedSecret, Verified,
};

const SIGNATURE: &str = "x-slack-signature";
const TIMESTAMP: &str = "x-slack-request-timestamp";
const TOLERANCE: u64 = 300;

pub(crate) struct Slack;

pub(crate) static SLACK: Slack = Slack;

impl Adapter for Slack {
    fn id(&self) -> &'static str {
        ProviderKind::Slack.id()
    }

    fn default_tolerance_seconds(&self) -> Option<u64> {
        Some(TOLERANCE)
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
        &[SIGNATURE, TIMESTAMP]
    }

    fn parse_metadata(&self, headers: &HeaderMap) -> Result<Metadata, Rejection> {
        use BadRequestReason::*;
        reject_duplicated(headers, self.signature_headers())?;
        let signature =
            signed_header(headers, SIGNATURE, MalformedSignature)?.ok_or(bad(MissingSignature))?;
        let timestamp_text =
            signed_header(headers, TIMESTAMP, MalformedTimestamp)?.ok_or(bad(MissingTimestamp))?;
        let hex = signature
            .strip_prefix("v0=")
            .ok_or(bad(MalformedSignature))?;
        let signatures = vec![hex_tag(hex)?];
        let timestamp = parse_unix_seconds(timestamp_text)?;
        Ok(Metadata {
            signatures,
            timestamp_text: Some(timestamp_text.to_owned()),
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
        let parts: [&[u8]; 4] = [b"v0:", text.as_bytes(), b":", body];
        let verified = verify_hmac_sha256(secrets, &parts, &metadata.signatures)?;
        let tolerance = tolerance_seconds.unwrap_or(TOLERANCE);
        check_freshness(timestamp, now, tolerance, Freshness::BothDirections)?;
        Ok(verified)
    }

    fn extract(
        &self,
        _metadata: &Metadata,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<Extracted, Rejection> {
        let json = if common::is_form(headers) {
            // Slash commands carry no event id at all; interactive payloads are JSON in a
            // `payload` field and carry none either, but are read in case one appears.
            let payload =
                common::form_field(body, "payload").ok_or(bad(BadRequestReason::MissingEventId))?;
            common::parse_json(&payload)?
        } else {
            common::parse_json(body)?
        };
        if json.get("type").and_then(Value::as_str) == Some("url_verification") {
            let challenge = json
                .get("challenge")
                .and_then(Value::as_str)
                .ok_or(bad(BadRequestReason::UnparseableEnvelope))?;
            let answer = serde_json::json!({ "challenge": challenge });
            return Ok(Extracted::Handshake {
                content_type: JSON,
                body: answer.to_string().into_bytes(),
            });
        }
        let event_id =
            common::str_at(&json, "/event_id").ok_or(bad(BadRequestReason::MissingEventId))?;
        Ok(Extracted::Event(Envelope {
            event_id,
            event_type: common::str_at(&json, "/event/type")
                .or_else(|| common::str_at(&json, "/type")),
            object_id: None,
            object_version: None,
            created_at: common::time_at(&json, "/event_time"),
        }))
    }

    fn id_location(&self) -> IdLocation {
        IdLocation::BodyPointer("/event_id")
    }

    /// Signs the body as given (the event id is already inside it).
    fn sign(
        &self,
        key: &SecretMaterial,
        request: &SignRequest<'_>,
    ) -> Vec<(HeaderName, HeaderValue)> {
        let t = request.timestamp.to_string();
        let tag = common::hmac_sha256(key.expose(), &[b"v0:", t.as_bytes(), b":", request.body]);
        let mut out = Vec::with_capacity(3);
        common::push_header(&mut out, "content-type", self.default_content_type());
        common::push_header(&mut out, TIMESTAMP, &t);
        common::push_header(
            &mut out,
            SIGNATURE,
            &format!("v0={}", common::encode_lower_hex(&tag)),
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
    fn url_verification_is_a_handshake() {
        let body = br#"{"token":"t","challenge":"abc\"def","type":"url_verification"}"#;
        let got = SLACK
            .extract(&Metadata::default(), &HeaderMap::new(), body)
            .unwrap();
        let Extracted::Handshake { content_type, body } = got else {
            panic!("not a handshake")
        };
        assert_eq!(content_type, "application/json");
        let echoed: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(echoed, serde_json::json!({"challenge": "abc\"def"}));
    }

    #[test]
    fn event_callback_envelope() {
        let body = br#"{"type":"event_callback","event_id":"Ev1","event_time":1767225590,
            "event":{"type":"message"}}"#;
        let got = SLACK
            .extract(&Metadata::default(), &HeaderMap::new(), body)
            .unwrap();
        assert_eq!(
            got,
            Extracted::Event(Envelope {
                event_id: "Ev1".into(),
                event_type: Some("message".into()),
                object_id: None,
                object_version: None,
                created_at: Some(1_767_225_590),
            })
        );
    }

    #[test]
    fn form_bodies() {
        let form = headers(&[("content-type", FORM)]);
        let md = Metadata::default();
        assert_eq!(
            SLACK.extract(&md, &form, b"command=%2Fweather&text=94070"),
            Err(bad(BadRequestReason::MissingEventId))
        );
        assert_eq!(
            SLACK.extract(
                &md,
                &form,
                b"payload=%7B%22type%22%3A%22block_actions%22%7D"
            ),
            Err(bad(BadRequestReason::MissingEventId))
        );
    }

    #[test]
    fn header_errors() {
        use BadRequestReason::*;
        let sig = format!("v0={}", "00".repeat(32));
        let cases: [(&[(&'static str, &str)], BadRequestReason); 6] = [
            (&[(TIMESTAMP, "1")], MissingSignature),
            (&[(SIGNATURE, &sig)], MissingTimestamp),
            (
                &[(SIGNATURE, &sig), (TIMESTAMP, "soon")],
                MalformedTimestamp,
            ),
            (
                &[(SIGNATURE, "v1=00"), (TIMESTAMP, "1")],
                MalformedSignature,
            ),
            (
                &[(SIGNATURE, &sig), (TIMESTAMP, "1"), (TIMESTAMP, "1")],
                DuplicatedSignature,
            ),
            (
                &[(SIGNATURE, &sig), (SIGNATURE, &sig), (TIMESTAMP, "1")],
                DuplicatedSignature,
            ),
        ];
        for (pairs, reason) in cases {
            assert_eq!(
                SLACK.parse_metadata(&headers(pairs)).unwrap_err(),
                bad(reason)
            );
        }
    }
}
