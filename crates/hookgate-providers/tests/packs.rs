//! The proof of the pack engine: every vector of every built-in pack's provider through the
//! engine (with a count per provider), the six hand-written adapters against their packs on
//! every vector and tampered variant, tamper tests and sign → verify round trips for every
//! pack, and a table of bad packs with the exact compile errors.

use std::path::PathBuf;

use base64::Engine;
use hookgate_providers::pack::{self, PackAdapter, PackSpec};
use hookgate_providers::{
    Adapter, BadRequestReason, Extracted, ProviderKind, Rejection, SecretMaterial, SignRequest,
    TrustedSecret, Verified,
};
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

/// Provider → vectors its file holds (all of them must run).
const COUNTS: &[(&str, usize)] = &[
    ("stripe", 15),
    ("github", 13),
    ("standard_webhooks", 18),
    ("svix", 16),
    ("shopify", 9),
    ("slack", 15),
    ("bitbucket", 7),
    ("intercom", 7),
    ("lemonsqueezy", 6),
    ("linear", 10),
    ("mollie", 8),
    ("paddle", 14),
    ("razorpay", 8),
    ("sentry", 8),
    ("twitch", 10),
    ("zoom", 8),
];

/// Valid vectors whose provider has no event id: the id the pack composes from signed fields.
const COMPOSED_IDS: &[(&str, &str)] = &[
    (
        "lemonsqueezy/shared/valid_basic",
        "order_created:orders:53535",
    ),
    (
        "lemonsqueezy/shared/valid_previous_secret_configured",
        "order_created:orders:53535",
    ),
    (
        "zoom/shared/valid_event",
        "meeting.started:1767225598088:80000010213",
    ),
    (
        "zoom/shared/valid_previous_secret_configured",
        "meeting.started:1767225598088:80000010213",
    ),
];

/// Invalid vectors refused earlier than their reason code says, and why.
const EARLIER_REJECTIONS: &[(&str, Rejection)] = &[
    // a classic Mollie webhook is a form post: not a content type next-gen webhooks use
    (
        "mollie/shared/invalid_classic_unsigned_webhook",
        Rejection::UnsupportedMediaType,
    ),
];

struct Case {
    name: String,
    provider: String,
    secrets: Vec<String>,
    now: i64,
    headers: HeaderMap,
    body: Vec<u8>,
    valid: bool,
    reason: String,
    matched_secret_index: Option<usize>,
    event_id: Option<String>,
    config: Value,
}

fn load(provider: &str) -> Vec<Case> {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../testdata/vectors")
        .join(format!("{provider}.json"));
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()));
    let doc: Value = serde_json::from_str(&text).expect("vector file is JSON");
    assert_eq!(doc["provider"], provider);
    doc["vectors"]
        .as_array()
        .expect("vectors")
        .iter()
        .map(|v| {
            let name = v["name"].as_str().unwrap().to_owned();
            let mut headers = HeaderMap::new();
            for (header, value) in v["headers"].as_object().unwrap() {
                let header = HeaderName::from_bytes(header.as_bytes()).unwrap();
                let values: Vec<&str> = match value {
                    Value::String(s) => vec![s],
                    Value::Array(items) => items.iter().map(|i| i.as_str().unwrap()).collect(),
                    other => panic!("{name}: header value {other}"),
                };
                for value in values {
                    headers.append(header.clone(), HeaderValue::from_str(value).unwrap());
                }
            }
            let body = match (v.get("body"), v.get("body_b64")) {
                (Some(Value::String(t)), None) => t.clone().into_bytes(),
                (None, Some(Value::String(b))) => {
                    base64::engine::general_purpose::STANDARD.decode(b).unwrap()
                }
                _ => panic!("{name}: body"),
            };
            Case {
                provider: provider.to_owned(),
                secrets: v["secrets"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|s| s.as_str().unwrap().to_owned())
                    .collect(),
                now: v["now"].as_i64().unwrap(),
                headers,
                body,
                valid: v["expect"] == "valid",
                reason: v["reason"].as_str().unwrap_or_default().to_owned(),
                matched_secret_index: v["matched_secret_index"].as_u64().map(|i| i as usize),
                event_id: v["event_id"].as_str().map(str::to_owned),
                config: v.get("config").cloned().unwrap_or(Value::Null),
                name,
            }
        })
        .collect()
}

type Outcome = Result<(Verified, Result<Extracted, Rejection>), Rejection>;

/// The ingress order, every secret in `secrets` trusted in order.
fn run(
    adapter: &dyn Adapter,
    headers: &HeaderMap,
    body: &[u8],
    secrets: &[&str],
    now: i64,
) -> Outcome {
    let keys: Vec<SecretMaterial> = secrets
        .iter()
        .map(|s| adapter.decode_secret(s).expect("secret decodes"))
        .collect();
    if !adapter.accepts_content_type(headers.get(CONTENT_TYPE)) {
        return Err(Rejection::UnsupportedMediaType);
    }
    let metadata = adapter.parse_metadata(headers)?;
    let trusted: Vec<TrustedSecret<'_>> = keys
        .iter()
        .map(|key| TrustedSecret { version: "v", key })
        .collect();
    let verified = adapter.verify(
        &metadata,
        body,
        &trusted,
        now,
        adapter.default_tolerance_seconds(),
    )?;
    let key = &keys[verified.matched_secret_index];
    let extracted = adapter.extract_with_key(&metadata, headers, body, key);
    Ok((verified, extracted))
}

fn run_case(adapter: &dyn Adapter, case: &Case, headers: &HeaderMap, body: &[u8]) -> Outcome {
    let secrets: Vec<&str> = case.secrets.iter().map(String::as_str).collect();
    run(adapter, headers, body, &secrets, case.now)
}

fn expected_rejection(case: &Case) -> Rejection {
    use BadRequestReason::*;
    if let Some((_, r)) = EARLIER_REJECTIONS.iter().find(|(n, _)| *n == case.name) {
        return *r;
    }
    match case.reason.as_str() {
        "signature_mismatch"
        | "body_tampered"
        | "whitespace_changed"
        | "wrong_secret"
        | "wrong_key_derivation"
        | "unsupported_scheme" => Rejection::InvalidSignature,
        "stale_timestamp" | "future_timestamp" => Rejection::StaleTimestamp,
        "missing_signature_header" => Rejection::BadRequest(MissingSignature),
        "missing_timestamp_header" | "missing_timestamp" => Rejection::BadRequest(MissingTimestamp),
        "missing_id_header" => Rejection::BadRequest(MissingId),
        "missing_body" => Rejection::BadRequest(MissingBody),
        "malformed_signature_header" => Rejection::BadRequest(MalformedSignature),
        other => panic!("{}: unmapped reason {other}", case.name),
    }
}

fn pack(id: &str) -> &'static PackAdapter {
    pack::builtin(id).unwrap_or_else(|| panic!("no built-in pack {id}"))
}

fn check(case: &Case) -> Result<(), String> {
    let adapter = pack(&case.provider);
    let outcome = run_case(adapter, case, &case.headers, &case.body);
    if !case.valid {
        let want = expected_rejection(case);
        return match outcome {
            Err(got) if got == want => Ok(()),
            other => Err(format!("got {other:?}, want {want:?}")),
        };
    }
    let (verified, extracted) = outcome.map_err(|r| format!("rejected with {r:?}"))?;
    if Some(verified.matched_secret_index) != case.matched_secret_index {
        return Err(format!("matched secret {}", verified.matched_secret_index));
    }
    let body_json: Value = serde_json::from_slice(&case.body).unwrap_or(Value::Null);
    match extracted {
        Ok(Extracted::Handshake { content_type, body }) => {
            let body = String::from_utf8(body).unwrap();
            let want = if let Some(expected) = case.config.get("expected_response") {
                (("application/json"), expected.to_string())
            } else if body_json["type"] == "url_verification" {
                (
                    "application/json",
                    serde_json::json!({"challenge": body_json["challenge"]}).to_string(),
                )
            } else {
                (
                    "text/plain",
                    body_json["challenge"].as_str().unwrap_or("?").to_owned(),
                )
            };
            let same = content_type == want.0
                && (body == want.1
                    || serde_json::from_str::<Value>(&body).ok()
                        == serde_json::from_str::<Value>(&want.1).ok());
            if same {
                Ok(())
            } else {
                Err(format!("handshake {content_type} {body}, want {want:?}"))
            }
        }
        Ok(Extracted::Event(envelope)) => {
            let want = case.event_id.clone().or_else(|| {
                COMPOSED_IDS
                    .iter()
                    .find(|(n, _)| *n == case.name)
                    .map(|(_, id)| (*id).to_owned())
            });
            match want {
                Some(want) if want == envelope.event_id => Ok(()),
                other => Err(format!("event id {:?}, want {other:?}", envelope.event_id)),
            }
        }
        // Verified, but the provider gave no logical id (docs vectors without delivery
        // headers, slash commands, a non-JSON SDK body): 400, nothing stored.
        Err(Rejection::BadRequest(
            BadRequestReason::MissingEventId | BadRequestReason::UnparseableEnvelope,
        )) if case.event_id.is_none() => Ok(()),
        Err(r) => Err(format!("extract refused with {r:?}")),
    }
}

#[test]
fn every_vector_of_every_pack_gets_its_verdict() {
    let mut failures = Vec::new();
    let mut total = 0;
    for (provider, count) in COUNTS {
        let cases = load(provider);
        assert_eq!(cases.len(), *count, "{provider}: vectors run");
        assert!(cases.iter().any(|c| c.valid) && cases.iter().any(|c| !c.valid));
        for case in &cases {
            total += 1;
            if let Err(e) = check(case) {
                failures.push(format!("{}: {e}", case.name));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    assert_eq!(total, 172);
    assert_eq!(pack::builtin_packs().len(), COUNTS.len());
}

/// The variants every pack must refuse (and the untouched request it must accept).
fn tampered(case: &Case) -> Vec<(String, HeaderMap, Vec<u8>, Vec<String>)> {
    let adapter = pack(&case.provider);
    let mut out = Vec::new();
    let plain = |what: &str, headers: HeaderMap, body: Vec<u8>| {
        (what.to_owned(), headers, body, case.secrets.clone())
    };
    let mut flipped = case.body.clone();
    let mid = flipped.len() / 2;
    flipped[mid] ^= 0x01;
    out.push(plain("flipped byte", case.headers.clone(), flipped));
    let mut spaced = case.body.clone();
    spaced.insert(1, b' ');
    out.push(plain("added space", case.headers.clone(), spaced));
    let retired: Vec<String> = case
        .secrets
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != case.matched_secret_index)
        .map(|(_, s)| s.clone())
        .collect();
    out.push((
        "retired secret".into(),
        case.headers.clone(),
        case.body.clone(),
        retired,
    ));
    let metadata = adapter.parse_metadata(&case.headers).unwrap();
    if adapter.id_signed()
        && let hookgate_providers::IdLocation::Header(name) = adapter.id_location()
        && let Some(value) = metadata.header_id.as_deref()
    {
        // the signed id, in whichever of the pack's id headers the request used
        let mut headers = case.headers.clone();
        let present = [name, "webhook-id"]
            .into_iter()
            .find(|n| case.headers.get(*n).and_then(|v| v.to_str().ok()) == Some(value))
            .unwrap();
        headers.insert(
            present,
            HeaderValue::from_str(&format!("{value}x")).unwrap(),
        );
        out.push(plain("changed id", headers, case.body.clone()));
    }
    if let (Some(text), Some(_)) = (&metadata.timestamp_text, metadata.timestamp) {
        // move the timestamp by one unit wherever it is written
        let changed = bump_digits(text);
        let mut headers = HeaderMap::new();
        for (name, value) in &case.headers {
            let v = value.to_str().unwrap();
            let v = if v.contains(text.as_str()) {
                v.replacen(text.as_str(), &changed, 1)
            } else {
                v.to_owned()
            };
            headers.append(name.clone(), HeaderValue::from_str(&v).unwrap());
        }
        out.push(plain("changed timestamp", headers, case.body.clone()));
    }
    out
}

/// The same text with its last digit changed (a timestamp one unit later or earlier).
fn bump_digits(text: &str) -> String {
    let mut bytes = text.as_bytes().to_vec();
    let at = bytes.iter().rposition(u8::is_ascii_digit).unwrap();
    bytes[at] = if bytes[at] == b'9' {
        b'8'
    } else {
        bytes[at] + 1
    };
    String::from_utf8(bytes).unwrap()
}

#[test]
fn tampered_valid_vectors_are_refused_by_every_pack() {
    let mut failures = Vec::new();
    let mut checked = 0;
    for (provider, _) in COUNTS {
        for case in load(provider).iter().filter(|c| c.valid) {
            let adapter = pack(provider);
            let untouched = run_case(adapter, case, &case.headers, &case.body);
            if untouched.is_err() {
                failures.push(format!("{}: untouched refused {untouched:?}", case.name));
            }
            for (what, headers, body, secrets) in tampered(case) {
                checked += 1;
                let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
                let got = run(adapter, &headers, &body, &secrets, case.now);
                if got.as_ref().err() != Some(&Rejection::InvalidSignature) {
                    failures.push(format!("{}: {what}: {:?}", case.name, got.map(|_| ())));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert!(checked >= 200, "only {checked} tamper checks");
}

#[test]
fn builtin_packs_agree_with_the_hand_written_adapters() {
    let mut compared = 0;
    for kind in ProviderKind::ALL.iter().copied() {
        let hand = kind.adapter();
        let data = pack(kind.id());
        assert_eq!(hand.id(), data.id());
        assert_eq!(
            hand.default_tolerance_seconds(),
            data.default_tolerance_seconds()
        );
        assert_eq!(hand.id_location(), data.id_location(), "{kind:?}");
        for case in load(kind.id()) {
            let mut variants = vec![(
                "as sent".to_owned(),
                case.headers.clone(),
                case.body.clone(),
                case.secrets.clone(),
            )];
            if case.valid {
                variants.extend(tampered(&case));
            }
            for (what, headers, body, secrets) in variants {
                let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
                for now in [case.now, case.now + 301, case.now - 301] {
                    compared += 1;
                    let a = run(hand, &headers, &body, &secrets, now);
                    let b = run(data, &headers, &body, &secrets, now);
                    assert_eq!(a, b, "{}: {what} at {now}", case.name);
                }
            }
        }
    }
    assert!(compared > 600, "only {compared} comparisons");
}

fn sample_body(id: &str, now: i64) -> String {
    let event_id = "evt_round_trip_1";
    let ms = now * 1000 - 2000;
    match id {
        "slack" => {
            format!(r#"{{"type":"event_callback","event_id":"{event_id}","event":{{"type":"x"}}}}"#)
        }
        "paddle" => format!(r#"{{"event_id":"{event_id}","event_type":"x"}}"#),
        "lemonsqueezy" => r#"{"meta":{"event_name":"x"},"data":{"type":"orders","id":"1"}}"#.into(),
        "zoom" => {
            r#"{"event":"x","event_ts":1767225598088,"payload":{"object":{"id":"7"}}}"#.into()
        }
        "linear" => format!(r#"{{"type":"x","webhookTimestamp":{ms}}}"#),
        _ => format!(
            r#"{{"id":"{event_id}","type":"x","topic":"x","event":"x","subscription":{{"type":"x"}}}}"#
        ),
    }
}

fn secret_text(pack: &PackAdapter, n: u8) -> String {
    match pack.id() {
        "standard_webhooks" | "svix" => format!(
            "whsec_{}",
            base64::engine::general_purpose::STANDARD.encode([n; 24])
        ),
        _ => format!("round-trip-secret-{n}"),
    }
}

#[test]
fn sign_then_verify_round_trips_for_every_shared_secret_pack() {
    let now = 1_767_225_600;
    let mut trips = 0;
    for pack in pack::builtin_packs()
        .iter()
        .filter(|p| p.has_shared_secret())
    {
        let (current, previous, retired) = (
            secret_text(pack, 1),
            secret_text(pack, 2),
            secret_text(pack, 3),
        );
        let body = sample_body(pack.id(), now);
        for (signer, want_index) in [(&current, 0), (&previous, 1)] {
            let key = pack.decode_secret(signer).unwrap();
            let request = SignRequest {
                event_id: "evt_round_trip_1",
                event_type: Some("x"),
                timestamp: now - 2,
                body: body.as_bytes(),
            };
            let mut headers = HeaderMap::new();
            for (name, value) in pack.sign(&key, &request) {
                headers.append(name, value);
            }
            let got = run(pack, &headers, body.as_bytes(), &[&current, &previous], now);
            let Ok((verified, Ok(Extracted::Event(envelope)))) = got else {
                panic!("{}: round trip failed: {got:?}", pack.id());
            };
            assert_eq!(verified.matched_secret_index, want_index, "{}", pack.id());
            assert!(!envelope.event_id.is_empty());
            if matches!(
                pack.id_location(),
                hookgate_providers::IdLocation::Header(_)
            ) {
                assert_eq!(envelope.event_id, "evt_round_trip_1", "{}", pack.id());
            }
            assert_eq!(envelope.event_type.as_deref(), Some("x"), "{}", pack.id());
            let other = if want_index == 0 { &previous } else { &current };
            assert_eq!(
                run(pack, &headers, body.as_bytes(), &[other, &retired], now).unwrap_err(),
                Rejection::InvalidSignature,
                "{}",
                pack.id()
            );
            trips += 1;
        }
    }
    assert_eq!(trips, 2 * COUNTS.len());
}

const GOOD: &str = r#"{
  "id": "linear", "display_name": "Linear", "scheme": "hmac", "evidence": "sdk",
  "sources": ["https://linear.app/developers/webhooks"],
  "content_types": ["application/json"], "secret_format": "utf8",
  "signature": {"headers": ["Linear-Signature"], "format": {"plain": {}},
    "algorithm": "hmac-sha256", "encoding": "hex", "signed": "{body}"},
  "timestamp": {"from": ["json:/webhookTimestamp"], "format": "unix_millis",
    "tolerance_seconds": 60, "window": "both"},
  "event_id": {"from": ["header:Linear-Delivery"], "signed": false, "retries_keep_id": "unknown"}
}"#;

fn compile(text: &str) -> Result<PackAdapter, String> {
    PackSpec::from_json("packs.linear", text)
        .and_then(|spec| spec.compile())
        .map_err(|e| e.to_string())
}

#[test]
fn bad_packs_fail_with_the_field_named() {
    assert!(compile(GOOD).is_ok());
    let cases: &[(&str, &str, &str)] = &[
        (
            r#""encoding": "hex""#,
            r#""encoding": "hexx""#,
            r#"packs.linear.signature.encoding: unknown encoding "hexx" (expected hex, base64, base64url)"#,
        ),
        (
            r#""algorithm": "hmac-sha256""#,
            r#""algorithm": "sha256""#,
            r#"packs.linear.signature.algorithm: unknown algorithm "sha256" (expected hmac-sha1, hmac-sha256, hmac-sha512)"#,
        ),
        (
            r#""scheme": "hmac""#,
            r#""scheme": "ed25519""#,
            r#"packs.linear.scheme: unknown scheme "ed25519" (expected hmac)"#,
        ),
        (
            r#""evidence": "sdk""#,
            r#""evidence": "blog""#,
            r#"packs.linear.evidence: unknown evidence "blog" (expected docs, sdk, experimental)"#,
        ),
        (
            r#""secret_format": "utf8""#,
            r#""secret_format": "pem""#,
            r#"packs.linear.secret_format: unknown secret format "pem" (expected utf8, whsec_base64, hex, base64)"#,
        ),
        (
            r#""window": "both""#,
            r#""window": "future""#,
            r#"packs.linear.timestamp.window: unknown window "future" (expected past_only, both)"#,
        ),
        (
            r#""format": "unix_millis""#,
            r#""format": "ms""#,
            r#"packs.linear.timestamp.format: unknown timestamp format "ms" (expected unix_seconds, unix_millis, rfc3339)"#,
        ),
        (
            r#""signed": "{body}""#,
            r#""signed": "{ts}.{body}""#,
            "packs.linear.signature.signed: {ts} needs a timestamp taken from a header or the signature header",
        ),
        (
            r#""signed": "{body}""#,
            r#""signed": "{bdy}""#,
            "packs.linear.signature.signed: unknown placeholder {bdy} (expected body, ts, id, header:Name)",
        ),
        (
            r#""signed": "{body}""#,
            r#""signed": "v0:{body}{body}""#,
            "packs.linear.signature.signed: the template must contain {body} exactly once",
        ),
        (
            r#""signed": false"#,
            r#""signed": true"#,
            "packs.linear.event_id.signed: declared true but the signature does not cover the id",
        ),
        (
            r#""header:Linear-Delivery""#,
            r#""query:delivery""#,
            r#"packs.linear.event_id.from[0]: unknown location kind "query" (expected header, json, signature)"#,
        ),
        (
            r#""json:/webhookTimestamp""#,
            r#""json:webhookTimestamp""#,
            r#"packs.linear.timestamp.from[0]: JSON pointer "webhookTimestamp" must start with "/""#,
        ),
        (
            r#""application/json""#,
            r#""application/JSON; charset=utf-8""#,
            r#"packs.linear.content_types[0]: "application/JSON; charset=utf-8" is not a lower-case media type without parameters"#,
        ),
        (
            r#""https://linear.app/developers/webhooks""#,
            r#""linear.app""#,
            r#"packs.linear.sources[0]: "linear.app" is not an https:// URL"#,
        ),
        (
            r#""Linear-Signature""#,
            r#""Linear Signature""#,
            r#"packs.linear.signature.headers[0]: "Linear Signature" is not a valid header name"#,
        ),
    ];
    for (from, to, want) in cases {
        assert!(GOOD.contains(from), "{from}");
        let text = GOOD.replacen(from, to, 1);
        assert_eq!(compile(&text).err().as_deref(), Some(*want), "{to}");
    }
    // without the body timestamp, nothing identifying is signed: the replay defence is required
    let unsigned = GOOD.replace(
        r#""timestamp": {"from": ["json:/webhookTimestamp"], "format": "unix_millis",
    "tolerance_seconds": 60, "window": "both"},"#,
        "",
    );
    assert_eq!(
        compile(&unsigned).err().as_deref(),
        Some(
            r#"packs.linear.replay_defence: required: neither the id nor a timestamp is signed (use "body_digest")"#
        )
    );
    // unknown fields are refused by the deserialiser, at their path
    let err = compile(&GOOD.replacen(r#""encoding": "hex""#, r#""encoding": "hex", "hexx": 1"#, 1))
        .unwrap_err();
    assert!(
        err.starts_with("packs.linear.signature.hexx: unknown field `hexx`"),
        "{err}"
    );
    let err = compile(&GOOD.replacen(r#"{"plain": {}}"#, r#"{"plan": {}}"#, 1)).unwrap_err();
    assert!(
        err.starts_with("packs.linear.signature.format: unknown variant `plan`"),
        "{err}"
    );
    let err = compile(&GOOD.replacen(r#""scheme": "hmac","#, "", 1)).unwrap_err();
    assert!(
        err.starts_with("packs.linear: missing field `scheme`"),
        "{err}"
    );
}

#[test]
fn every_builtin_pack_compiles_and_describes_itself() {
    for (id, _) in COUNTS {
        let pack = pack::compile_builtin(id)
            .expect("listed")
            .expect("compiles");
        assert_eq!(pack.id(), *id);
        assert!(!pack.sources().is_empty() && !pack.display_name().is_empty());
        // replay defence exactly where nothing identifying is signed
        assert_eq!(
            pack.replay_defence().is_some(),
            !pack.id_signed() && !pack.timestamp_signed(),
            "{id}"
        );
    }
    let unsigned: Vec<&str> = pack::builtin_packs()
        .iter()
        .filter(|p| p.replay_defence().is_some())
        .map(|p| p.id())
        .collect();
    assert_eq!(
        unsigned,
        ["github", "shopify", "bitbucket", "razorpay", "sentry"]
    );
}
