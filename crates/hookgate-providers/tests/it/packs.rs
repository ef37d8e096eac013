//! The proof of the pack engine, through the API the binary calls ([`Pack`] with a
//! [`RequestContext`]): every vector of every built-in pack, read from its files
//! (`testdata/vectors/<id>.json` and `<id>.generated.json`; the count equals the pack's
//! `vectors`, at least two valid, every tamper case present; valid → every event id of a batch
//! and the matched secret, handshakes → the provider's answer, invalid → the rejection), tamper
//! tests for every pack (one byte, one space, the id, the timestamp where signed, a retired
//! secret), sign → verify round trips for every shared-secret pack, options and `public_url`
//! checks, and a table of bad packs with the exact compile errors.
//!
//! The differential test against the six hand-written adapters that this file used to hold
//! was the proof that their packs give the same verdicts; the adapters are gone, and their
//! vectors, tamper variants and round trips run here through the packs.

use std::collections::BTreeMap;

use base64::Engine;
use hookgate_providers::pack::{
    self, Answer, Delivery, EndpointOptions, OptionError, Pack, PackSpec, PublicUrlError,
    RequestContext, Scheme, SignTarget,
};
use hookgate_providers::{
    BadRequestReason, IdLocation, Rejection, SecretMaterial, SignRequest, TrustedSecret, Verified,
};
use hookgate_testkit::vectors::TamperCase;
use http::header::CONTENT_TYPE;
use http::{HeaderMap, HeaderName, HeaderValue, Method};
use serde_json::Value;

use crate::expectations::{
    ANSWERS, BODY_DIGEST_IDS, COMPOSED_IDS, EARLIER_REJECTIONS, SIGNATURE_IDS,
};

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
    event_ids: Option<Vec<String>>,
    url: Option<String>,
    config: Value,
    tamper_case: Option<TamperCase>,
}

fn load(provider: &str) -> Vec<Case> {
    hookgate_testkit::vectors::load(provider)
        .into_iter()
        .map(|v| {
            let mut headers = HeaderMap::new();
            for (name, value) in &v.headers {
                headers.append(
                    HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    HeaderValue::from_str(value).unwrap(),
                );
            }
            Case {
                provider: provider.to_owned(),
                secrets: v.secrets.clone(),
                now: v.now,
                headers,
                valid: v.valid,
                reason: v.reason.clone(),
                matched_secret_index: v.matched_secret_index,
                event_ids: v.event_ids.clone(),
                url: v.url.clone(),
                config: Value::Object(v.config.clone().into_iter().collect()),
                tamper_case: v.tamper_case(),
                body: v.body,
                name: v.name,
            }
        })
        .collect()
}

type Outcome = Result<(Verified, Result<Delivery, Rejection>), Rejection>;

/// What the endpoint configuration gives the pack: `public_url` and checked options.
struct Endpoint {
    public_url: Option<String>,
    raw_query: Option<String>,
    options: EndpointOptions,
}

impl Endpoint {
    /// The vector's URL as `public_url` and its `config` (minus test data) as options.
    fn of(pack: &Pack, case: &Case) -> Self {
        let mut options = BTreeMap::new();
        if let Value::Object(config) = &case.config {
            for (k, v) in config {
                if k != "expected_response" {
                    options.insert(k.clone(), v.as_str().unwrap().to_owned());
                }
            }
        }
        Endpoint {
            public_url: case.url.clone(),
            raw_query: None,
            options: pack
                .check_options(&options)
                .expect("vector options are valid"),
        }
    }

    /// The same endpoint registered without a query, the request carrying it instead.
    fn query_on_request(&self) -> Option<Self> {
        let (base, query) = self.public_url.as_deref()?.split_once('?')?;
        Some(Endpoint {
            public_url: Some(base.to_owned()),
            raw_query: Some(query.to_owned()),
            options: self.options.clone(),
        })
    }
}

/// The ingress order, every secret in `secrets` trusted in order.
fn run(
    pack: &Pack,
    endpoint: &Endpoint,
    headers: &HeaderMap,
    body: &[u8],
    secrets: &[&str],
    now: i64,
) -> Outcome {
    let keys: Vec<SecretMaterial> = secrets
        .iter()
        .map(|s| pack.decode_secret(s).expect("secret decodes"))
        .collect();
    let ctx = RequestContext {
        method: &Method::POST,
        headers,
        raw_query: endpoint.raw_query.as_deref(),
        public_url: endpoint.public_url.as_deref(),
        options: &endpoint.options,
    };
    assert!(pack.accepts_method(ctx.method));
    if !pack.accepts_content_type(headers.get(CONTENT_TYPE))
        || !pack.accepts_content_encoding(headers)
    {
        return Err(Rejection::UnsupportedMediaType);
    }
    let metadata = pack.parse_metadata(&ctx)?;
    // A coded body (a pack's content_encoding) is verified decoded, as the ingress does.
    let body = &*pack
        .decode_body(headers, body, 1 << 20)
        .map_err(|_| Rejection::BadRequest(BadRequestReason::UnparseableEnvelope))?;
    let trusted: Vec<TrustedSecret<'_>> = keys
        .iter()
        .map(|key| TrustedSecret { version: "v", key })
        .collect();
    let verified = pack.verify(
        &ctx,
        &metadata,
        body,
        &trusted,
        now,
        pack.default_tolerance_seconds(),
    )?;
    let key = &keys[verified.matched_secret_index];
    let delivery = pack.extract(&ctx, &metadata, body, Some(key));
    Ok((verified, delivery))
}

fn run_case(pack: &Pack, case: &Case, headers: &HeaderMap, body: &[u8]) -> Outcome {
    let secrets: Vec<&str> = case.secrets.iter().map(String::as_str).collect();
    run(
        pack,
        &Endpoint::of(pack, case),
        headers,
        body,
        &secrets,
        case.now,
    )
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
        | "unsupported_scheme"
        | "url_mismatch"
        | "body_hash_mismatch" => Rejection::InvalidSignature,
        "stale_timestamp" | "future_timestamp" => Rejection::StaleTimestamp,
        "missing_signature_header" => Rejection::BadRequest(MissingSignature),
        "missing_timestamp_header" | "missing_timestamp" => Rejection::BadRequest(MissingTimestamp),
        "missing_id_header" => Rejection::BadRequest(MissingId),
        "missing_body" => Rejection::BadRequest(MissingBody),
        "malformed_signature_header" => Rejection::BadRequest(MalformedSignature),
        other => panic!("{}: unmapped reason {other}", case.name),
    }
}

fn pack(id: &str) -> &'static Pack {
    pack::builtin(id).unwrap_or_else(|| panic!("no built-in pack {id}"))
}

/// The handshake answer the provider expects for a valid handshake vector.
fn expected_handshake(case: &Case) -> Answer {
    let body_json: Value = serde_json::from_slice(&case.body).unwrap_or(Value::Null);
    let json = |v: Value| Answer {
        status: 200,
        content_type: Some("application/json"),
        body: v.to_string().into_bytes(),
        headers: Vec::new(),
    };
    if let Some(expected) = case.config.get("expected_response") {
        json(expected.clone())
    } else if body_json["type"] == "url_verification" {
        json(serde_json::json!({"challenge": body_json["challenge"]}))
    } else if case.provider == "discord" {
        json(serde_json::json!({"type": 1}))
    } else {
        Answer {
            status: 200,
            content_type: Some("text/plain"),
            body: body_json["challenge"]
                .as_str()
                .unwrap_or("?")
                .as_bytes()
                .to_vec(),
            headers: Vec::new(),
        }
    }
}

fn same_answer(got: &Answer, want: &Answer) -> bool {
    got.status == want.status
        && got.content_type == want.content_type
        && (got.body == want.body
            || serde_json::from_slice::<Value>(&got.body).ok()
                == serde_json::from_slice::<Value>(&want.body).ok())
}

fn expected_ids(case: &Case) -> Option<Vec<String>> {
    if let Some(ids) = &case.event_ids {
        return Some(ids.clone());
    }
    if let Some((_, id)) = COMPOSED_IDS.iter().find(|(n, _)| *n == case.name) {
        return Some(vec![(*id).to_owned()]);
    }
    if BODY_DIGEST_IDS.iter().any(|p| case.name.starts_with(p)) {
        use sha2::Digest;
        let hex: String = sha2::Sha256::digest(&case.body)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        return Some(vec![format!("sha256:{hex}")]);
    }
    if SIGNATURE_IDS.contains(&case.name.as_str()) {
        let pack = pack(&case.provider);
        let metadata = pack
            .parse_metadata(&RequestContext::post(&case.headers))
            .unwrap();
        let hex: String = metadata.signatures[0]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        return Some(vec![format!("sig:{hex}")]);
    }
    None
}

fn check_outcome(case: &Case, outcome: Outcome) -> Result<(), String> {
    if !case.valid {
        let want = expected_rejection(case);
        return match outcome {
            Err(got) if got == want => Ok(()),
            other => Err(format!("got {:?}, want {want:?}", other.map(|_| ()))),
        };
    }
    let (verified, delivery) = outcome.map_err(|r| format!("rejected with {r:?}"))?;
    if Some(verified.matched_secret_index) != case.matched_secret_index {
        return Err(format!("matched secret {}", verified.matched_secret_index));
    }
    match delivery {
        Ok(Delivery::Handshake(answer)) => {
            let want = expected_handshake(case);
            if same_answer(&answer, &want) {
                Ok(())
            } else {
                Err(format!("handshake {answer:?}, want {want:?}"))
            }
        }
        Ok(Delivery::Events { events, answer, .. }) => {
            let got: Vec<String> = events.into_iter().map(|e| e.event_id).collect();
            let want = expected_ids(case);
            if want.as_ref() != Some(&got) {
                return Err(format!("event ids {got:?}, want {want:?}"));
            }
            let want_answer = ANSWERS
                .iter()
                .find(|(n, ..)| *n == case.name || *n == case.provider)
                .map(|(_, status, content_type, body)| Answer {
                    status: *status,
                    content_type: *content_type,
                    body: body.as_bytes().to_vec(),
                    headers: Vec::new(),
                });
            if answer == want_answer {
                Ok(())
            } else {
                Err(format!("answer {answer:?}, want {want_answer:?}"))
            }
        }
        // Verified, but the provider gave no logical id (docs vectors without delivery
        // headers, slash commands, a non-JSON SDK body): 400, nothing stored.
        Err(Rejection::BadRequest(
            BadRequestReason::MissingEventId | BadRequestReason::UnparseableEnvelope,
        )) if expected_ids(case).is_none() => Ok(()),
        Err(r) => Err(format!("extract refused with {r:?}")),
    }
}

fn check(case: &Case) -> Result<(), String> {
    let pack = pack(&case.provider);
    check_outcome(case, run_case(pack, case, &case.headers, &case.body))?;
    // a query on the request replaces public_url's: the same verdict
    let endpoint = Endpoint::of(pack, case);
    if let Some(moved) = endpoint.query_on_request() {
        let secrets: Vec<&str> = case.secrets.iter().map(String::as_str).collect();
        let outcome = run(pack, &moved, &case.headers, &case.body, &secrets, case.now);
        check_outcome(case, outcome).map_err(|e| format!("query on the request: {e}"))?;
    }
    Ok(())
}

#[test]
fn every_vector_of_every_pack_gets_its_verdict() {
    let mut failures = Vec::new();
    let mut total = 0;
    for pack in pack::builtin_packs() {
        let provider = pack.id();
        let cases = load(provider);
        assert_eq!(
            cases.len(),
            pack.vectors() as usize,
            "{provider}: the pack's `vectors` is the number of vectors in its files"
        );
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
    let declared: u32 = pack::builtin_packs().iter().map(Pack::vectors).sum();
    assert_eq!(total, declared as usize);
}

/// Every pack ships at least two valid vectors and each tamper case its scheme has, each one
/// refused (the verdicts themselves are checked above).
#[test]
fn every_pack_ships_two_valid_vectors_and_every_tamper_case() {
    let mut missing = Vec::new();
    for pack in pack::builtin_packs() {
        let cases = load(pack.id());
        let valid = cases.iter().filter(|c| c.valid).count();
        if valid < 2 {
            missing.push(format!(
                "{}: {valid} valid vector(s), want at least 2",
                pack.id()
            ));
        }
        let required = TamperCase::required(
            pack.timestamp_signed(),
            pack.scheme() == Scheme::SharedToken,
        );
        for case in required {
            if !cases.iter().any(|c| c.tamper_case == Some(case)) {
                missing.push(format!(
                    "{}: no {case:?} vector (reason {:?})",
                    pack.id(),
                    case.reason()
                ));
            }
        }
    }
    assert!(
        missing.is_empty(),
        "{} missing:\n{}",
        missing.len(),
        missing.join("\n")
    );
}

/// A byte of a signed field's value, for packs that sign fields rather than bytes.
const SIGNED_FIELD_NEEDLES: &[(&str, &str)] = &[
    ("adyen", "AUTHORISATION"),
    ("mailgun", "762702ea"),
    // the signed bt_payload field (the form's other fields are not signed)
    ("braintree", "CiAgICAgICAgICAgIDxub3RpZmljYXRpb24"),
];

/// The variants every pack must refuse.
fn tampered(case: &Case) -> Vec<(String, HeaderMap, Vec<u8>, Vec<String>)> {
    let pack = pack(&case.provider);
    let mut out = Vec::new();
    let plain = |what: &str, headers: HeaderMap, body: Vec<u8>| {
        (what.to_owned(), headers, body, case.secrets.clone())
    };
    let body_text = String::from_utf8_lossy(&case.body).into_owned();
    let needle = SIGNED_FIELD_NEEDLES
        .iter()
        .find(|(p, n)| *p == case.provider && body_text.contains(n))
        .map(|(_, n)| *n);
    // a signature in a query parameter rides on the vector's URL; a header_option pack's
    // token header comes from the endpoint's options
    let endpoint = Endpoint::of(pack, case);
    let metadata = pack
        .parse_metadata(&RequestContext {
            public_url: case.url.as_deref(),
            options: &endpoint.options,
            ..RequestContext::post(&case.headers)
        })
        .unwrap();
    let header_signed_fields =
        pack.scheme() == Scheme::FieldsHmac && !metadata.signatures.is_empty();
    let token_headers = pack.signature_headers_for(&endpoint.options);
    if pack.scheme() == Scheme::SharedToken && token_headers.is_empty() {
        // A token in a JSON body field (Meraki): change the field's value by one byte, and
        // by one space.
        let secret = &case.secrets[case.matched_secret_index.unwrap_or(0)];
        let quoted = serde_json::to_string(secret).unwrap();
        assert_eq!(
            body_text.matches(&quoted).count(),
            1,
            "{}: the body token occurs once",
            case.name
        );
        for (what, changed) in [
            (
                "body token byte",
                format!("{}x", &secret[..secret.len() - 1]),
            ),
            ("body token space", format!("{secret} ")),
        ] {
            let body = body_text.replacen(&quoted, &serde_json::to_string(&changed).unwrap(), 1);
            out.push(plain(what, case.headers.clone(), body.into_bytes()));
        }
    } else if pack.scheme() == Scheme::SharedToken {
        // Nothing but the token is authenticated: change it by one byte, and by one space.
        // the pack's token header, or the one the endpoint names (`header_option`)
        let name = http::HeaderName::from_bytes(token_headers[0].as_bytes()).unwrap();
        let token = case.headers[&name].to_str().unwrap();
        for (what, changed) in [
            ("token byte", format!("{}x", &token[..token.len() - 1])),
            ("token space", format!("{token} ")),
        ] {
            let mut headers = case.headers.clone();
            headers.insert(name.clone(), HeaderValue::from_str(&changed).unwrap());
            out.push(plain(what, headers, case.body.clone()));
        }
    } else if let (Some(needle), false) = (needle, header_signed_fields) {
        let changed = format!("{}{}", &needle[..needle.len() - 1], "0");
        out.push(plain(
            "signed field byte",
            case.headers.clone(),
            body_text.replacen(needle, &changed, 1).into_bytes(),
        ));
        out.push(plain(
            "signed field space",
            case.headers.clone(),
            body_text
                .replacen(needle, &format!("{needle} "), 1)
                .into_bytes(),
        ));
    } else {
        let mut flipped = case.body.clone();
        let mid = flipped.len() / 2;
        flipped[mid] ^= 0x01;
        out.push(plain("flipped byte", case.headers.clone(), flipped));
        let mut spaced = case.body.clone();
        spaced.insert(1, b' ');
        out.push(plain("added space", case.headers.clone(), spaced));
    }
    let retired: Vec<String> = case
        .secrets
        .iter()
        .enumerate()
        .filter(|(i, _)| Some(*i) != case.matched_secret_index)
        .map(|(_, s)| s.clone())
        .collect();
    // A request signed once per active key (Box's primary and secondary headers) still
    // verifies with the other key when one is retired: keep only the first signature header
    // present, so that the retired secret is the only one that could have matched it.
    let mut retired_headers = case.headers.clone();
    let present: Vec<&str> = pack
        .info()
        .signature_headers
        .into_iter()
        .filter(|n| case.headers.contains_key(*n))
        .collect();
    for name in present.iter().skip(1) {
        retired_headers.remove(*name);
    }
    out.push((
        "retired secret".into(),
        retired_headers,
        case.body.clone(),
        retired,
    ));
    if pack.id_signed()
        && let IdLocation::Header(name) = pack.id_location()
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
    } else if pack.scheme() == Scheme::FieldsHmac && pack.timestamp_signed() {
        // the timestamp is a signed field of the body
        let doc: Value = pack_document(&case.body);
        let text = doc
            .pointer("/signature/timestamp")
            .or_else(|| doc.pointer("/timestamp"))
            .and_then(Value::as_str)
            .unwrap()
            .to_owned();
        out.push(plain(
            "changed timestamp",
            case.headers.clone(),
            body_text
                .replacen(&text, &bump_digits(&text), 1)
                .into_bytes(),
        ));
    }
    out
}

/// A JSON body, or a form body as an object of its fields.
fn pack_document(body: &[u8]) -> Value {
    serde_json::from_slice(body).unwrap_or_else(|_| {
        let mut object = serde_json::Map::new();
        for pair in std::str::from_utf8(body).unwrap().split('&') {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            object.insert(k.to_owned(), Value::from(v));
        }
        Value::Object(object)
    })
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
    let mut per_pack: BTreeMap<&str, usize> = BTreeMap::new();
    for pack in pack::builtin_packs() {
        let provider = pack.id();
        for case in load(provider).iter().filter(|c| c.valid) {
            let untouched = run_case(pack, case, &case.headers, &case.body);
            if untouched.is_err() {
                failures.push(format!("{}: untouched refused {untouched:?}", case.name));
            }
            for (what, headers, body, secrets) in tampered(case) {
                checked += 1;
                *per_pack.entry(provider).or_default() += 1;
                let secrets: Vec<&str> = secrets.iter().map(String::as_str).collect();
                let got = run(
                    pack,
                    &Endpoint::of(pack, case),
                    &headers,
                    &body,
                    &secrets,
                    case.now,
                );
                // a changed byte of a gzip body mostly breaks the coding itself
                let coded = case.headers.contains_key(http::header::CONTENT_ENCODING);
                let refused = match got.as_ref().err() {
                    Some(Rejection::InvalidSignature) => true,
                    Some(Rejection::BadRequest(BadRequestReason::UnparseableEnvelope)) => coded,
                    _ => false,
                };
                if !refused {
                    failures.push(format!("{}: {what}: {:?}", case.name, got.map(|_| ())));
                }
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(
        per_pack.len(),
        pack::builtin_packs().len(),
        "every pack is tampered with"
    );
    assert!(checked >= 300, "only {checked} tamper checks");
}

#[test]
fn a_shared_token_authenticates_the_sender_but_not_the_body() {
    let case = &load("gitlab")[0];
    let mut body = case.body.clone();
    body[10] ^= 0x01;
    let pack = pack("gitlab");
    let (verified, _) = run_case(pack, case, &case.headers, &body).expect("token only");
    assert_eq!(verified.matched_secret_index, 0);
    assert!(
        pack.info()
            .unauthenticated_headers
            .contains(&"x-gitlab-event")
    );
}

fn sample_body(id: &str, now: i64) -> String {
    let event_id = "evt_round_trip_1";
    let ms = now * 1000 - 2000;
    match id {
        "slack" => {
            format!(r#"{{"type":"event_callback","event_id":"{event_id}","event":{{"type":"x"}}}}"#)
        }
        "paddle" | "typeform" => format!(r#"{{"event_id":"{event_id}","event_type":"x"}}"#),
        "replicate" => format!(r#"{{"id":"{event_id}","status":"x"}}"#),
        "recurly" => format!(r#"{{"id":"{event_id}","object_type":"account","event_type":"x"}}"#),
        "pusher" => format!(r#"{{"time_ms":{ms},"events":[{{"name":"x","channel":"c1"}}]}}"#),
        "sanity" => r#"{"_id":"d1","_rev":"r1","_type":"x"}"#.into(),
        "retell" => r#"{"event":"x","call":{"call_id":"c1"}}"#.into(),
        "docusign" => {
            r#"{"event":"x","generatedDateTime":"2026-01-01T00:00:00Z","data":{"envelopeId":"e1"}}"#
                .into()
        }
        "telnyx" => r#"{"data":{"id":"e1","event_type":"x"}}"#.into(),
        "plivo" => "MessageUUID=m1&Status=x&Text=gr%C3%BC%C3%9F+1%2B1".into(),
        "meta" | "facebook" => r#"{"object":"x","entry":[{"id":"1","time":1767225598}]}"#.into(),
        "whatsapp" => r#"{"object":"whatsapp_business_account","entry":[{"id":"1","changes":[{"field":"x","value":{}}]}]}"#.into(),
        "onfido" => r#"{"payload":{"action":"x","object":{"id":"o1"}}}"#.into(),
        "webflow" => r#"{"triggerType":"x","payload":{"id":"p1"}}"#.into(),
        "square" => format!(r#"{{"event_id":"{event_id}","type":"x","data":{{"id":"o1"}}}}"#),
        "lemonsqueezy" => r#"{"meta":{"event_name":"x"},"data":{"type":"orders","id":"1"}}"#.into(),
        "zoom" => {
            r#"{"event":"x","event_ts":1767225598088,"payload":{"object":{"id":"7"}}}"#.into()
        }
        "linear" => format!(r#"{{"type":"x","webhookTimestamp":{ms}}}"#),
        "twilio" => "MessageSid=SM1&SmsStatus=x&Body=gr%C3%BC%C3%9F+1%2B1".into(),
        "adyen" => r#"{"live":"false","notificationItems":[
            {"NotificationRequestItem":{"pspReference":"P1","eventCode":"x","success":"true","merchantAccountCode":"M","merchantReference":"R:1","amount":{"value":1130,"currency":"EUR"}}},
            {"NotificationRequestItem":{"pspReference":"P2","eventCode":"x","success":"false","merchantAccountCode":"M","merchantReference":"R2","amount":{"value":5,"currency":"EUR"}}}]}"#.into(),
        "mailgun" => format!(r#"{{"event-data":{{"id":"{event_id}","event":"x"}}}}"#),
        id if HAND_WRITTEN_BODY.contains(&id) => format!(
            r#"{{"id":"{event_id}","type":"x","topic":"x","event":"x","subscription":{{"type":"x"}}}}"#
        ),
        // a newer pack: a body shaped like its first valid vector
        other => String::from_utf8(crate::support::body(other, "round trip", now)).unwrap(),
    }
}

/// Packs whose round-trip body is the generic one above (id, type and topic at the top).
const HAND_WRITTEN_BODY: &[&str] = &[
    "stripe",
    "github",
    "standard_webhooks",
    "svix",
    "shopify",
    "bitbucket",
    "intercom",
    "mollie",
    "razorpay",
    "sentry",
    "twitch",
    "gitlab",
    "slack",
    "paddle",
    "square",
    "lemonsqueezy",
    "zoom",
    "linear",
    "twilio",
    "adyen",
    "mailgun",
];

fn secret_text(pack: &Pack, n: u8) -> String {
    let plain = format!("round-trip-secret-{n}");
    if pack.decode_secret(&plain).is_err() {
        // whsec_ + base64, hex, or key id + secret: one of the shapes the pack takes
        return crate::support::shared_secret_text(pack, &[n; 24]);
    }
    match pack.id() {
        "standard_webhooks" | "svix" => format!(
            "whsec_{}",
            base64::engine::general_purpose::STANDARD.encode([n; 24])
        ),
        "adyen" => format!("{n:02X}").repeat(32),
        id if HAND_WRITTEN_BODY.contains(&id) => format!("round-trip-secret-{n}"),
        _ => crate::support::shared_secret_text(pack, &[n; 24]),
    }
}

#[test]
fn sign_then_verify_round_trips_for_every_shared_secret_pack() {
    let now = 1_767_225_600;
    let mut trips = 0;
    let url = "https://hooks.example.com/in/p?tenant=a%20b";
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
        // every required option set (a signed template may carry one: TikTok Shop's app key)
        let options = crate::support::options(pack);
        let target = SignTarget {
            public_url: Some(url),
            options: Some(&options),
        };
        for (signer, want_index) in [(&current, 0), (&previous, 1)] {
            let key = pack.decode_secret(signer).unwrap();
            let request = SignRequest {
                event_id: "evt_round_trip_1",
                event_type: Some("x"),
                timestamp: now - 2,
                body: body.as_bytes(),
            };
            let signed = pack.sign_delivery(&key, &request, &target);
            let mut headers = HeaderMap::new();
            for (name, value) in signed.headers {
                headers.append(name, value);
            }
            let endpoint = Endpoint {
                public_url: signed.url.clone().or(Some(url.to_owned())),
                raw_query: None,
                options: options.clone(),
            };
            let got = run(
                pack,
                &endpoint,
                &headers,
                &signed.body,
                &[&current, &previous],
                now,
            );
            let Ok((verified, Ok(Delivery::Events { events, .. }))) = got else {
                panic!("{}: round trip failed: {got:?}", pack.id());
            };
            assert_eq!(verified.matched_secret_index, want_index, "{}", pack.id());
            assert!(!events.is_empty() && events.iter().all(|e| !e.event_id.is_empty()));
            if matches!(pack.id_location(), IdLocation::Header(_)) {
                assert_eq!(events[0].event_id, "evt_round_trip_1", "{}", pack.id());
            }
            if pack.id() == "adyen" {
                let ids: Vec<&str> = events.iter().map(|e| e.event_id.as_str()).collect();
                assert_eq!(ids, ["P1:x:true", "P2:x:false"]);
            }
            if HAND_WRITTEN_BODY.contains(&pack.id()) {
                assert_eq!(events[0].event_type.as_deref(), Some("x"), "{}", pack.id());
            }
            let other = if want_index == 0 { &previous } else { &current };
            assert_eq!(
                run(
                    pack,
                    &endpoint,
                    &headers,
                    &signed.body,
                    &[other, &retired],
                    now
                )
                .unwrap_err(),
                Rejection::InvalidSignature,
                "{}",
                pack.id()
            );
            trips += 1;
        }
    }
    // every pack but the public-key ones (Discord, PayPal, SendGrid, …)
    let shared = pack::builtin_packs()
        .iter()
        .filter(|p| p.has_shared_secret())
        .count();
    assert_eq!(trips, 2 * shared);
}

/// `hookgate send` for a token in a JSON body field (Meraki's `sharedSecret`): the signing
/// side writes the token into the body, where the verifier reads it; another secret's
/// delivery, and the body without the field, are refused.
#[test]
fn a_body_field_token_is_written_into_the_json_body_and_verifies() {
    let pack = pack("meraki");
    let now = 1_767_225_600;
    let body = r#"{"version":"0.1","alertId":"0000000000000009","alertType":"Settings changed","occurredAt":"2025-12-31T23:59:50Z"}"#;
    let request = SignRequest {
        event_id: "0000000000000009",
        event_type: None,
        timestamp: now - 2,
        body: body.as_bytes(),
    };
    let endpoint = Endpoint {
        public_url: None,
        raw_query: None,
        options: Default::default(),
    };
    let sign = |secret: &str| {
        let key = pack.decode_secret(secret).unwrap();
        let signed = pack.sign_delivery(&key, &request, &SignTarget::default());
        let mut headers = HeaderMap::new();
        for (name, value) in signed.headers {
            headers.append(name, value);
        }
        (headers, signed.body)
    };
    let (headers, signed_body) = sign("shared-secret-1");
    let doc: Value = serde_json::from_slice(&signed_body).unwrap();
    assert_eq!(doc["sharedSecret"], "shared-secret-1");
    assert_eq!(doc["alertId"], "0000000000000009");
    assert!(
        !headers.keys().any(|n| n.as_str().contains("secret")),
        "the token travels only in the body"
    );
    let got = run(
        pack,
        &endpoint,
        &headers,
        &signed_body,
        &["shared-secret-1"],
        now,
    );
    let Ok((verified, Ok(Delivery::Events { events, .. }))) = got else {
        panic!("meraki round trip failed: {got:?}");
    };
    assert_eq!(verified.matched_secret_index, 0);
    assert_eq!(events[0].event_id, "0000000000000009");
    // a body that already carries the token keeps its bytes
    let (_, again) = {
        let key = pack.decode_secret("shared-secret-1").unwrap();
        let request = SignRequest {
            body: &signed_body,
            ..request
        };
        let signed = pack.sign_delivery(&key, &request, &SignTarget::default());
        (signed.headers, signed.body)
    };
    assert_eq!(again, signed_body);
    // signed with another secret, or with the field gone: refused
    let (other_headers, other_body) = sign("shared-secret-2");
    assert!(
        run(
            pack,
            &endpoint,
            &other_headers,
            &other_body,
            &["shared-secret-1"],
            now
        )
        .is_err()
    );
    assert!(
        run(
            pack,
            &endpoint,
            &headers,
            body.as_bytes(),
            &["shared-secret-1"],
            now
        )
        .is_err()
    );
}

#[test]
fn options_are_checked_against_the_pack_naming_the_key() {
    let paypal = pack("paypal");
    let options = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    };
    assert_eq!(
        paypal.check_options(&options(&[])).unwrap_err().to_string(),
        "options.webhook_id: required by provider paypal"
    );
    assert_eq!(
        paypal
            .check_options(&options(&[("webhook_id", "W1"), ("webhookid", "W1")]))
            .unwrap_err(),
        OptionError::Unknown {
            provider: "paypal",
            key: "webhookid".into(),
            known: "webhook_id".into()
        }
    );
    assert_eq!(
        paypal
            .check_options(&options(&[("webhook_id", " ")]))
            .unwrap_err()
            .to_string(),
        "options.webhook_id: must be a non-empty string"
    );
    // an option choosing the algorithm takes only the values the pack maps
    let cloudinary = pack("cloudinary");
    assert_eq!(
        cloudinary
            .check_options(&options(&[("signature_algorithm", "md5")]))
            .unwrap_err()
            .to_string(),
        "options.signature_algorithm: must be one of sha1, sha256"
    );
    assert!(
        cloudinary
            .check_options(&options(&[("signature_algorithm", "sha256")]))
            .is_ok()
    );
    assert!(cloudinary.check_options(&options(&[])).is_ok());
    let discord = pack("discord");
    assert_eq!(
        discord
            .check_options(&options(&[("interaction_response", "{type")]))
            .unwrap_err()
            .to_string(),
        "options.interaction_response: must be a JSON object"
    );
    assert_eq!(
        pack("stripe")
            .check_options(&options(&[("webhook_id", "x")]))
            .unwrap_err()
            .to_string(),
        "options.webhook_id: unknown option for provider stripe (known: none)"
    );
    // a configured interaction response replaces the deferred answer
    let case = load("discord")
        .into_iter()
        .find(|c| c.name == "discord/shared/valid_application_command")
        .unwrap();
    let endpoint = Endpoint {
        public_url: None,
        raw_query: None,
        options: discord
            .check_options(&options(&[(
                "interaction_response",
                r#"{"type":4,"data":{"content":"hi"}}"#,
            )]))
            .unwrap(),
    };
    let secrets: Vec<&str> = case.secrets.iter().map(String::as_str).collect();
    let (_, delivery) = run(
        discord,
        &endpoint,
        &case.headers,
        &case.body,
        &secrets,
        case.now,
    )
    .unwrap();
    let Ok(Delivery::Events {
        answer: Some(answer),
        ..
    }) = delivery
    else {
        panic!("{delivery:?}");
    };
    assert_eq!(answer.body, br#"{"type":4,"data":{"content":"hi"}}"#);
}

#[test]
fn public_url_is_required_where_the_url_is_signed() {
    assert_eq!(
        pack("twilio").check_public_url(None),
        Err(PublicUrlError::Missing("twilio"))
    );
    assert_eq!(
        pack("square").check_public_url(None),
        Err(PublicUrlError::Missing("square"))
    );
    assert_eq!(pack("stripe").check_public_url(None), Ok(()));
    for bad in [
        "hooks.example.com/x",
        "ftp://h/x",
        "https:///x",
        "https://h/x y",
        "https://h/#f",
    ] {
        assert_eq!(
            pack::check_public_url(bad),
            Err(PublicUrlError::Malformed),
            "{bad}"
        );
    }
    assert_eq!(pack::check_public_url("http://h:8080/x?a=1"), Ok(()));
    let empty = HeaderMap::new();
    let ctx = |q| RequestContext {
        raw_query: q,
        public_url: Some("https://h/x?a=1"),
        ..RequestContext::post(&empty)
    };
    let with = ctx(Some("b=2&bodySHA256=ff"));
    assert_eq!(
        with.signed_url().as_deref(),
        Some("https://h/x?b=2&bodySHA256=ff")
    );
    let without = ctx(None);
    assert_eq!(without.signed_url().as_deref(), Some("https://h/x?a=1"));
}

#[test]
fn a_mailgun_token_is_the_replay_key_and_a_batch_is_one_unit() {
    let case = &load("mailgun")[0];
    let (_, delivery) = run_case(pack("mailgun"), case, &case.headers, &case.body).unwrap();
    let Ok(Delivery::Events {
        replay_key, events, ..
    }) = delivery
    else {
        panic!("{delivery:?}");
    };
    assert_eq!(
        replay_key.as_deref(),
        Some("762702ea8e8218545e8e1d812678a4327c25d7a7367eedbe5e")
    );
    assert_eq!(events.len(), 1);
    assert_eq!(
        pack("mailgun").replay_defence(),
        Some(pack::ReplayDefence::SignedToken)
    );
    // SendGrid: three events of one request, each with its own id and type
    let case = load("sendgrid")
        .into_iter()
        .find(|c| c.name == "sendgrid/shared/valid_batch")
        .unwrap();
    let (_, delivery) = run_case(pack("sendgrid"), &case, &case.headers, &case.body).unwrap();
    let Ok(Delivery::Events {
        events,
        answer: None,
        ..
    }) = delivery
    else {
        panic!("{delivery:?}");
    };
    assert_eq!(events.len(), 3);
    assert!(events.iter().all(|e| e.event_type.is_some()));
}

#[test]
fn listing_and_generated_docs_cover_every_pack() {
    let markdown = pack::render_providers_markdown();
    let infos: Vec<pack::PackInfo> = pack::builtin_packs().iter().map(Pack::info).collect();
    assert!(infos.len() >= 24, "{} packs", infos.len());
    for info in &infos {
        assert!(
            markdown.contains(&format!("(`{}`)", info.id)),
            "{}",
            info.id
        );
        assert!(["docs", "sdk", "experimental"].contains(&info.evidence));
        assert!(!info.sources.is_empty());
        if info.evidence != "experimental" {
            assert!(info.citations.contains_key("signature"), "{}", info.id);
        }
    }
    let json = serde_json::to_value(&infos).unwrap();
    let ids: Vec<&str> = json
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["id"].as_str().unwrap())
        .collect();
    let mut sorted = ids.clone();
    sorted.sort_unstable();
    assert_eq!(ids, sorted, "listed by id");
    let stripe = json
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["id"] == "stripe");
    assert_eq!(
        stripe.unwrap()["citations"]["signature"],
        "sdk:pypi/stripe@16.1.0:stripe/_webhook.py"
    );
    assert_eq!(
        json.as_array()
            .unwrap()
            .iter()
            .map(|p| p["vectors"].as_u64().unwrap())
            .sum::<u64>(),
        infos
            .iter()
            .map(|i| hookgate_testkit::vectors::load(i.id).len() as u64)
            .sum::<u64>()
    );
    let github = pack("github").info();
    assert_eq!(
        github.unauthenticated_headers,
        ["x-github-delivery", "x-github-event"]
    );
    assert_eq!(github.type_signed, Some(false));
    assert_eq!(pack("paypal").info().options[0].name, "webhook_id");
    assert!(pack("discord").info().handshakes.len() == 2);
    assert_eq!(pack("discord").methods(), [Method::POST]);
    // deterministic
    assert_eq!(markdown, pack::render_providers_markdown());
}
const GOOD: &str = r#"{
  "id": "linear", "display_name": "Linear", "scheme": "hmac", "vectors": 10, "evidence": "sdk",
  "sources": ["https://linear.app/developers/webhooks"],
  "citations": {"signature": "sdk:npm/@linear/sdk@98.0.0:src/webhooks/client.ts",
    "secret_format": "https://linear.app/developers/webhooks",
    "timestamp": "https://linear.app/developers/webhooks",
    "event_id": "https://linear.app/developers/webhooks",
    "content_types": "https://linear.app/developers/webhooks"},
  "content_types": ["application/json"], "secret_format": "utf8",
  "signature": {"headers": ["Linear-Signature"], "format": {"plain": {}},
    "algorithm": "hmac-sha256", "encoding": "hex", "signed": "{body}"},
  "timestamp": {"from": ["json:/webhookTimestamp"], "format": "unix_millis",
    "tolerance_seconds": 60},
  "event_id": {"from": ["header:Linear-Delivery"], "signed": false, "retries_keep_id": "unknown"}
}"#;

fn compile(text: &str) -> Result<Pack, String> {
    PackSpec::from_json("packs.linear", text)
        .and_then(|spec| spec.compile())
        .map_err(|e| e.to_string())
}

#[test]
fn bad_packs_fail_with_the_field_named() {
    assert!(compile(GOOD).is_ok());
    let cases: &[(&str, &str, &str)] = &[
        (
            r#""format": {"plain": {}}"#,
            r#""format": {"versioned_list": {"separator": " ", "version_separator": ",", "versions": ["v1"], "ed25519_versions": ["v1a"]}}"#,
            r#"packs.linear.signature.format.versioned_list.ed25519_versions: needs the hmac scheme with secret_format "whsec_base64""#,
        ),
        (
            r#""format": {"plain": {}}"#,
            r#""format": {"versioned_list": {"separator": " ", "version_separator": ",", "versions": ["v1"], "ed25519_versions": ["v1"]}}"#,
            r#"packs.linear.signature.format.versioned_list.ed25519_versions: "v1" is empty or also an HMAC version"#,
        ),
        (
            r#""encoding": "hex""#,
            r#""encoding": "hexx""#,
            r#"packs.linear.signature.encoding: unknown encoding "hexx" (expected hex, hex_upper, base64, base64url, base64_hex, text)"#,
        ),
        (
            r#""algorithm": "hmac-sha256""#,
            r#""algorithm": "sha256""#,
            r#"packs.linear.signature.algorithm: unknown algorithm "sha256" (expected hmac-sha1, hmac-sha256, hmac-sha512, sha256-concat, sha1-concat-key-last, sha256-concat-key-last)"#,
        ),
        (
            r#""scheme": "hmac""#,
            r#""scheme": "ed2551""#,
            r#"packs.linear.scheme: unknown scheme "ed2551" (expected hmac, ed25519, ecdsa_p256, rsa_sha256_certificate, shared_token, url_params_hmac, fields_hmac, jwt_hmac, url_nonce_hmac, form_payload_hmac, canonical_request_hmac)"#,
        ),
        (
            r#""scheme": "hmac""#,
            r#""scheme": "ed25519""#,
            r#"packs.linear.secret_format: "utf8" does not fit the ed25519 scheme"#,
        ),
        (
            r#""signed": "{body}""#,
            r#""signed": "{body}|{option:webhook_id}""#,
            r#"packs.linear.signature.signed: {option:webhook_id} needs a required option "webhook_id" in options"#,
        ),
        (
            r#""encoding": "hex""#,
            r#""encoding": "text""#,
            r#"packs.linear.signature.encoding: "text" is the encoding of shared tokens and JWTs, and only theirs"#,
        ),
        (
            r#""evidence": "sdk""#,
            r#""evidence": "blog""#,
            r#"packs.linear.evidence: unknown evidence "blog" (expected docs, sdk, experimental)"#,
        ),
        (
            r#""secret_format": "utf8""#,
            r#""secret_format": "pem""#,
            r#"packs.linear.secret_format: unknown secret format "pem" (expected utf8, whsec_base64, hex, base64, ed25519_public_hex, p256_spki_der_base64, x509_pem, whsec_base64_or_utf8, ed25519_public_base64, key_id_and_secret, utf8_nfkd)"#,
        ),
        (
            r#""tolerance_seconds": 60"#,
            r#""tolerance_seconds": 60, "max_future_seconds": 61"#,
            "packs.linear.timestamp.max_future_seconds: 61 exceeds tolerance_seconds (60): the future bound is at most the tolerance",
        ),
        (
            r#""format": "unix_millis""#,
            r#""format": "ms""#,
            r#"packs.linear.timestamp.format: unknown timestamp format "ms" (expected unix_seconds, unix_millis, rfc3339, iso8601_utc)"#,
        ),
        (
            r#""signed": "{body}""#,
            r#""signed": "{ts}.{body}""#,
            "packs.linear.signature.signed: {ts} needs a timestamp taken from a header or the signature header",
        ),
        (
            r#""signed": "{body}""#,
            r#""signed": "{bdy}""#,
            "packs.linear.signature.signed: unknown placeholder {bdy} (expected body, body_crc32, body_sha256, body_json, ts, id, url, header:Name, option:name, signature:key)",
        ),
        (
            r#""signed": "{body}""#,
            r#""signed": "v0:{body}{body}""#,
            "packs.linear.signature.signed: the template must contain {body}, {body_crc32}, {body_sha256} or {body_json} exactly once",
        ),
        (
            r#""signed": false"#,
            r#""signed": true"#,
            "packs.linear.event_id.signed: declared true but the signature does not cover the id",
        ),
        (
            r#""header:Linear-Delivery""#,
            r#""cookie:delivery""#,
            r#"packs.linear.event_id.from[0]: unknown location kind "cookie" (expected header, json, signature, query)"#,
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
        (
            r#""scheme": "hmac""#,
            r#""scheme": "fields_hmac""#,
            "packs.linear.signature.signed: the fields_hmac scheme builds its own signed bytes",
        ),
        (
            r#""scheme": "hmac""#,
            r#""scheme": "url_params_hmac""#,
            "packs.linear.signature.signed: the url_params_hmac scheme builds its own signed bytes",
        ),
        (
            r#""secret_format": "utf8""#,
            r#""secret_format": "utf8", "answers": [{"status": 500}]"#,
            "packs.linear.answers[0].status: 500 is not a 2xx status",
        ),
        (
            r#""secret_format": "utf8""#,
            r#""secret_format": "utf8", "options": [{"name": "Webhook-Id", "format": "text", "description": "d"}]"#,
            r#"packs.linear.options[0].name: "Webhook-Id" is not lower_snake"#,
        ),
        (
            r#""secret_format": "utf8""#,
            r#""secret_format": "utf8", "answers": [{"status": 200, "body_option": "reply"}]"#,
            r#"packs.linear.answers[0].body_option: "reply" is not one of the pack's options"#,
        ),
        (
            r#""secret_format": "https://linear.app/developers/webhooks""#,
            r#""secret_format": "linear.app/developers""#,
            r#"packs.linear.citations.secret_format: "linear.app/developers" is neither an https:// URL nor an sdk:<registry>/<package>@<version>:<path> file"#,
        ),
        (
            r#""signature": "sdk:npm/@linear/sdk@98.0.0:src/webhooks/client.ts""#,
            r#""signature": "sdk:npm/@linear/sdk:src/webhooks/client.ts""#,
            r#"packs.linear.citations.signature: "sdk:npm/@linear/sdk:src/webhooks/client.ts" is not sdk:<registry>/<package>@<version>:<path> (e.g. sdk:npm/@octokit/webhooks-methods@5.1.0:src/node/verify.ts)"#,
        ),
        (
            r#""signature": "sdk:npm/@linear/sdk@98.0.0:src/webhooks/client.ts""#,
            r#""signature": "https://linear.app/developers/webhooks""#,
            r#"packs.linear.citations: evidence "sdk" needs at least one sdk:<registry>/<package>@<version>:<path> citation (otherwise the evidence is "docs")"#,
        ),
        (
            r#""timestamp": "https://linear.app/developers/webhooks","#,
            "",
            r#"packs.linear.citations: evidence "sdk" needs a citation of every fact; missing: timestamp (cite them, or mark the pack "experimental")"#,
        ),
        (
            r#""event_id": "https://linear.app/developers/webhooks","#,
            r#""event_id": "https://linear.app/developers/webhooks", "handshake": "https://linear.app/x","#,
            "packs.linear.citations.handshake: cites a fact the pack does not declare",
        ),
        (
            r#""retries_keep_id": "unknown""#,
            r#""retries_keep_id": "unknown", "fallback": "hash""#,
            r#"packs.linear.event_id.fallback: unknown fallback "hash" (expected signature, body_digest)"#,
        ),
        (
            r#""secret_format": "utf8""#,
            r#""secret_format": "utf8", "content_encoding": ["br"]"#,
            r#"packs.linear.content_encoding[0]: unknown content encoding "br" (expected gzip)"#,
        ),
        (
            r#""encoding": "hex""#,
            r#""encoding": "hex", "signed_headers_header": "x-list""#,
            "packs.linear.signature.signed_headers_header: only for canonical_request_hmac",
        ),
        (
            r#""encoding": "hex""#,
            r#""encoding": "hex", "payload_field": "p""#,
            "packs.linear.signature.payload_field: only for form_payload_hmac",
        ),
        (
            r#""scheme": "hmac""#,
            r#""scheme": "canonical_request_hmac""#,
            "packs.linear.signature.signed: the canonical_request_hmac scheme builds its own \
             signed bytes",
        ),
        (
            r#""scheme": "hmac""#,
            r#""scheme": "form_payload_hmac""#,
            "packs.linear.signature.signed: the form_payload_hmac scheme builds its own signed \
             bytes",
        ),
        (
            r#""encoding": "hex""#,
            r#""encoding": "hex", "token_form": "bearer""#,
            "packs.linear.signature.token_form: only for the shared_token scheme",
        ),
        (
            r#""encoding": "hex""#,
            r#""encoding": "hex", "query_param": "token""#,
            "packs.linear.signature.query_param: the signature is in headers or in a query \
             parameter, not both",
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
    "tolerance_seconds": 60},"#,
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
    let err = compile(&GOOD.replacen(
        r#""content_types": "https://linear.app/developers/webhooks""#,
        r#""content_types": "https://linear.app/developers/webhooks", "retries": "https://x.example""#,
        1,
    ))
    .unwrap_err();
    assert!(
        err.starts_with("packs.linear.citations.retries: unknown field `retries`, expected one of `signature`, `secret_format`, `timestamp`, `event_id`, `handshake`, `redelivery_horizon`, `content_types`"),
        "{err}"
    );
    // an experimental pack may leave facts uncited
    let experimental = GOOD
        .replacen(r#""evidence": "sdk""#, r#""evidence": "experimental""#, 1)
        .replacen(
            r#""timestamp": "https://linear.app/developers/webhooks","#,
            "",
            1,
        );
    assert!(compile(&experimental).is_ok());
    let docs_only = GOOD.replacen(r#""evidence": "sdk""#, r#""evidence": "docs""#, 1);
    assert!(compile(&docs_only).is_ok());
    let err = compile(&GOOD.replacen(r#""scheme": "hmac","#, "", 1)).unwrap_err();
    assert!(
        err.starts_with("packs.linear: missing field `scheme`"),
        "{err}"
    );
}

#[test]
fn every_builtin_pack_compiles_and_describes_itself() {
    for id in pack::builtin_packs().iter().map(Pack::id) {
        let pack = pack::compile_builtin(id)
            .expect("listed")
            .expect("compiles");
        assert_eq!(pack.id(), id);
        assert!(!pack.sources().is_empty() && !pack.display_name().is_empty());
        // a body digest exactly where nothing identifying is signed
        assert_eq!(
            pack.replay_defence() == Some(pack::ReplayDefence::BodyDigest),
            !pack.id_signed() && !pack.timestamp_signed(),
            "{id}"
        );
    }
    let unsigned: Vec<&str> = pack::builtin_packs()
        .iter()
        .filter(|p| p.replay_defence().is_some())
        .map(|p| p.id())
        .collect();
    for id in [
        "github",
        "shopify",
        "bitbucket",
        "razorpay",
        "sentry",
        "gitlab",
        "mailgun",
        "twilio",
    ] {
        assert!(unsigned.contains(&id), "{id}");
    }
}

#[test]
fn public_key_packs_sign_with_the_private_key() {
    use ring::signature::{ECDSA_P256_SHA256_ASN1_SIGNING, EcdsaKeyPair};
    let now = 1_767_225_600;
    let rng = ring::rand::SystemRandom::new();
    let p256 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_ASN1_SIGNING, &rng).unwrap();
    let cases = [
        (
            "discord",
            "07".repeat(32),
            r#"{"id":"i1","type":2,"token":"t","data":{"name":"x"}}"#,
            vec!["i1"],
        ),
        (
            "sendgrid",
            base64::engine::general_purpose::STANDARD.encode(p256.as_ref()),
            r#"[{"sg_event_id":"e1","event":"x"},{"sg_event_id":"e2","event":"y"}]"#,
            vec!["e1", "e2"],
        ),
    ];
    for (id, private, body, ids) in cases {
        let pack = pack(id);
        assert!(!pack.has_shared_secret());
        let key = pack.decode_signing_key(&private).unwrap();
        let public = key.public_key_text().unwrap();
        let request = SignRequest {
            event_id: "unused",
            event_type: None,
            timestamp: now - 2,
            body: body.as_bytes(),
        };
        let signed = pack.sign_with_private_key(&key, &request, &SignTarget::default());
        let mut headers = HeaderMap::new();
        for (name, value) in signed.headers {
            headers.append(name, value);
        }
        let endpoint = Endpoint {
            public_url: None,
            raw_query: None,
            options: EndpointOptions::default(),
        };
        let got = run(pack, &endpoint, &headers, body.as_bytes(), &[&public], now);
        let Ok((_, Ok(Delivery::Events { events, .. }))) = got else {
            panic!("{id}: {got:?}");
        };
        let got: Vec<&str> = events.iter().map(|e| e.event_id.as_str()).collect();
        assert_eq!(got, ids, "{id}");
        // a byte of the body changed: refused
        let mut tampered = body.as_bytes().to_vec();
        tampered[5] ^= 1;
        assert_eq!(
            run(pack, &endpoint, &headers, &tampered, &[&public], now).unwrap_err(),
            Rejection::InvalidSignature,
            "{id}"
        );
    }
    // a private key of the wrong kind or shape is refused, never echoed
    let err = pack("discord")
        .decode_signing_key("s3cr3t")
        .unwrap_err()
        .to_string();
    assert!(!err.contains("s3cr3t"), "{err}");
    assert!(pack("stripe").decode_signing_key("x").is_err());
}

/// The keys of the two code schemes that name their own parts are checked at load, the
/// error naming the key (starting from the built-in Braintree and Contentful packs).
#[test]
fn form_payload_and_canonical_request_keys_are_checked_naming_the_key() {
    let braintree = include_str!("../../packs/braintree.json");
    let contentful = include_str!("../../packs/contentful.json");
    let check = |base: &str, from: &str, to: &str, want: &str| {
        assert!(base.contains(from), "{from}");
        let got = PackSpec::from_json("packs.p", &base.replacen(from, to, 1))
            .and_then(|spec| spec.compile())
            .map(|_| ())
            .map_err(|e| e.to_string());
        assert_eq!(got, Err(want.to_owned()), "{to}");
    };
    check(
        braintree,
        r#""payload_field": "bt_payload","#,
        "",
        "packs.braintree.signature.payload_field: required by form_payload_hmac",
    );
    check(
        braintree,
        r#""bt_payload""#,
        r#""bt_signature""#,
        "packs.braintree.signature.payload_field: must differ from signature.signature_field",
    );
    check(
        braintree,
        r#""secret_format": "key_id_and_secret""#,
        r#""secret_format": "utf8""#,
        r#"packs.braintree.secret_format: form_payload_hmac needs "key_id_and_secret" and no key_id_header"#,
    );
    check(
        contentful,
        ",\n    \"signed_headers_header\": \"x-contentful-signed-headers\"",
        "",
        "packs.contentful.signature.signed_headers_header: required by canonical_request_hmac",
    );
}
