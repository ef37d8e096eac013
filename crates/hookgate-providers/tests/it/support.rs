//! Shared by the bound and property tests: key sets for every pack (shared secrets in the
//! pack's own format; fixed key pairs for the public-key packs), an endpoint that satisfies
//! the pack's options and `public_url`, bodies that carry arbitrary text, and the ingress
//! order the binary runs.

#![allow(dead_code, unreachable_pub)]

use std::collections::BTreeMap;

use base64::Engine;
use hookgate_providers::pack::{
    Delivery, EndpointOptions, OptionFormat, Pack, RequestContext, Scheme, SignTarget,
    SignedDelivery, SigningKey,
};
use hookgate_providers::{Rejection, SecretMaterial, SignRequest, TrustedSecret, Verified};
use http::header::CONTENT_TYPE;
use http::{HeaderMap, Method};

pub const PUBLIC_URL: &str = "https://hooks.example.com/in/p?tenant=a";

/// One party that signs, and the key the endpoint trusts for it.
pub struct Signer {
    pub signing: Signing,
    /// The configured secret text (a public key for public-key packs).
    pub trusted_text: String,
}

pub enum Signing {
    Shared(SecretMaterial),
    Private(Box<SigningKey>),
}

/// A shared secret made of `bytes`, in the pack's secret format.
pub fn shared_secret_text(pack: &Pack, bytes: &[u8]) -> String {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let b64 = base64::engine::general_purpose::STANDARD.encode(bytes);
    [hex, format!("whsec_{b64}"), b64]
        .into_iter()
        .find(|text| pack.decode_secret(text).is_ok())
        .expect("one encoding fits every shared-secret format")
}

fn key_file(name: &str) -> String {
    let path = format!("{}/tests/it/keys/{name}", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// Key `n` (1..=3) of the fixed key set of a public-key pack.
pub fn fixed_signer(pack: &Pack, n: u8) -> Signer {
    let (private, public) = match pack.scheme() {
        Scheme::Ed25519 => {
            let private = format!("{n:02x}").repeat(32);
            let key = pack.decode_signing_key(&private).unwrap();
            (private, key.public_key_text().unwrap())
        }
        Scheme::EcdsaP256 => {
            let private = key_file(&format!("sendgrid-{n}.key.pem"));
            let key = pack.decode_signing_key(&private).unwrap();
            (private, key.public_key_text().unwrap())
        }
        Scheme::RsaSha256Certificate => (
            key_file(&format!("paypal-{n}.key.pem")),
            key_file(&format!("paypal-{n}.cert.pem")),
        ),
        _ => panic!("{} is not a public-key pack", pack.id()),
    };
    Signer {
        signing: Signing::Private(Box::new(pack.decode_signing_key(&private).unwrap())),
        trusted_text: public,
    }
}

/// A signer for `bytes` (shared-secret packs) or key `n` of the fixed set (public-key packs).
pub fn signer(pack: &Pack, bytes: &[u8], n: u8) -> Signer {
    if !pack.has_shared_secret() {
        return fixed_signer(pack, n);
    }
    let text = shared_secret_text(pack, bytes);
    Signer {
        signing: Signing::Shared(pack.decode_secret(&text).unwrap()),
        trusted_text: text,
    }
}

/// Every required option of the pack with a well-formed value.
pub fn options(pack: &Pack) -> EndpointOptions {
    let values: BTreeMap<String, String> = pack
        .options()
        .iter()
        .filter(|o| o.required)
        .map(|o| {
            let value = match o.format {
                OptionFormat::Text => "WH-TEST-1".to_owned(),
                OptionFormat::Json => "{}".to_owned(),
            };
            (o.name.to_owned(), value)
        })
        .collect();
    pack.check_options(&values).expect("required options fit")
}

/// A body of the shape the pack reads, carrying `text` in a field its signature covers.
pub fn body(pack_id: &str, text: &str, unix: i64) -> Vec<u8> {
    let note = serde_json::to_string(text).unwrap();
    let ms = unix * 1000;
    match pack_id {
        "slack" => format!(
            r#"{{"type":"event_callback","event_id":"evt_p1","note":{note},"event":{{"type":"x"}}}}"#
        ),
        "paddle" => format!(r#"{{"event_id":"evt_p1","event_type":"x","note":{note}}}"#),
        "square" => format!(
            r#"{{"event_id":"evt_p1","type":"x","note":{note},"data":{{"id":"o1"}}}}"#
        ),
        "lemonsqueezy" => format!(
            r#"{{"meta":{{"event_name":"x"}},"note":{note},"data":{{"type":"orders","id":"1"}}}}"#
        ),
        "zoom" => format!(
            r#"{{"event":"x","event_ts":1767225598088,"note":{note},"payload":{{"object":{{"id":"7"}}}}}}"#
        ),
        "linear" => format!(r#"{{"type":"x","webhookTimestamp":{ms},"note":{note}}}"#),
        "twilio" => {
            let encoded: String = text
                .bytes()
                .map(|b| format!("%{b:02X}"))
                .collect();
            format!("MessageSid=SM1&SmsStatus=x&Body={encoded}")
        }
        "adyen" => format!(
            r#"{{"live":"false","notificationItems":[
            {{"NotificationRequestItem":{{"pspReference":"P1","eventCode":"x","success":"true","merchantAccountCode":"M","merchantReference":{note},"amount":{{"value":1130,"currency":"EUR"}}}}}},
            {{"NotificationRequestItem":{{"pspReference":"P2","eventCode":"x","success":"false","merchantAccountCode":"M","merchantReference":"R2","amount":{{"value":5,"currency":"EUR"}}}}}}]}}"#
        ),
        "mailgun" => format!(r#"{{"event-data":{{"id":"evt_p1","event":"x","note":{note}}}}}"#),
        "sendgrid" => format!(
            r#"[{{"sg_event_id":"e1","event":"x","note":{note}}},{{"sg_event_id":"e2","event":"y"}}]"#
        ),
        "discord" => format!(r#"{{"id":"i1","type":2,"token":"t","note":{note},"data":{{"name":"x"}}}}"#),
        "stripe" | "github" | "standard_webhooks" | "svix" | "shopify" | "bitbucket"
        | "intercom" | "mollie" | "razorpay" | "sentry" | "twitch" | "gitlab" | "paypal" => {
            format!(
                r#"{{"id":"evt_p1","type":"x","topic":"x","event":"x","note":{note},"subscription":{{"type":"x"}}}}"#
            )
        }
        other => return body_like_a_vector(other, text),
    }
    .into_bytes()
}

/// A body shaped like the pack's first valid vector (so its id, type and batch are where the
/// pack reads them), carrying `text` in an added top-level field (JSON) or parameter (form).
fn body_like_a_vector(pack_id: &str, text: &str) -> Vec<u8> {
    let vector = hookgate_testkit::vectors::load(pack_id)
        .into_iter()
        .find(|v| v.valid)
        .unwrap_or_else(|| panic!("{pack_id}: no valid vector to shape bodies"));
    match serde_json::from_slice::<serde_json::Value>(&vector.body) {
        Ok(serde_json::Value::Object(mut object)) => {
            object.insert("hookgate_note".into(), text.into());
            serde_json::to_vec(&object).unwrap()
        }
        Ok(serde_json::Value::Array(mut items)) => {
            if let Some(serde_json::Value::Object(first)) = items.first_mut() {
                first.insert("hookgate_note".into(), text.into());
            }
            serde_json::to_vec(&items).unwrap()
        }
        _ => {
            let encoded: String = text.bytes().map(|b| format!("%{b:02X}")).collect();
            let mut body = vector.body.clone();
            body.extend_from_slice(format!("&hookgate_note={encoded}").as_bytes());
            body
        }
    }
}

/// What the provider would send for `body`, signed by `signer` at `unix`.
pub fn sign(pack: &Pack, signer: &Signer, body: &[u8], unix: i64) -> SignedDelivery {
    let options = options(pack);
    let request = SignRequest {
        event_id: "evt_p1",
        event_type: Some("x"),
        timestamp: unix,
        body,
    };
    let target = SignTarget {
        public_url: Some(PUBLIC_URL),
        options: Some(&options),
    };
    match &signer.signing {
        Signing::Shared(key) => pack.sign_delivery(key, &request, &target),
        Signing::Private(key) => pack.sign_with_private_key(key, &request, &target),
    }
}

pub fn header_map(signed: &SignedDelivery) -> HeaderMap {
    let mut headers = HeaderMap::new();
    for (name, value) in &signed.headers {
        headers.append(name.clone(), value.clone());
    }
    headers
}

pub type Outcome = Result<(Verified, Result<Delivery, Rejection>), Rejection>;

/// The ingress order (content type, metadata, verification, extraction), `trusted` in order.
pub fn receive(
    pack: &Pack,
    headers: &HeaderMap,
    url: Option<&str>,
    body: &[u8],
    trusted: &[&str],
    now: i64,
) -> Outcome {
    let keys: Vec<SecretMaterial> = trusted
        .iter()
        .map(|s| pack.decode_secret(s).expect("trusted secret decodes"))
        .collect();
    let options = options(pack);
    let ctx = RequestContext {
        method: &Method::POST,
        headers,
        raw_query: None,
        public_url: url.or(Some(PUBLIC_URL)),
        options: &options,
    };
    if !pack.accepts_content_type(headers.get(CONTENT_TYPE)) {
        return Err(Rejection::UnsupportedMediaType);
    }
    let metadata = pack.parse_metadata(&ctx)?;
    let secrets: Vec<TrustedSecret<'_>> = keys
        .iter()
        .map(|key| TrustedSecret { version: "v", key })
        .collect();
    let verified = pack.verify(&ctx, &metadata, body, &secrets, now, None)?;
    let key = &keys[verified.matched_secret_index];
    let delivery = pack.extract(&ctx, &metadata, body, Some(key));
    Ok((verified, delivery))
}
