//! The engine pieces task F's packs added, beyond their vector files: Meta's token handshake
//! (an unsigned GET proven by a query token equal to an endpoint option), and the compile
//! errors of the new keys, each naming the key.

use std::collections::BTreeMap;

use hookgate_providers::pack::{self, Delivery, PackSpec, RequestContext};
use hookgate_providers::{BadRequestReason, Rejection, SecretMaterial, TrustedSecret};
use http::{HeaderMap, Method};
use serde_json::{Value, json};

fn options(pack: &pack::Pack, token: Option<&str>) -> pack::EndpointOptions {
    let mut values = BTreeMap::new();
    if let Some(t) = token {
        values.insert("verify_token".to_owned(), t.to_owned());
    }
    pack.check_options(&values).unwrap()
}

/// The ingress order for a request to `pack` with one trusted secret.
fn run(
    pack: &pack::Pack,
    method: &Method,
    query: &str,
    token: Option<&str>,
) -> Result<Delivery, Rejection> {
    let headers = HeaderMap::new();
    let opts = options(pack, token);
    let ctx = RequestContext {
        method,
        headers: &headers,
        raw_query: Some(query),
        public_url: None,
        options: &opts,
    };
    assert!(pack.accepts_method(method));
    let metadata = pack.parse_metadata(&ctx)?;
    let key = SecretMaterial::new(b"app-secret".to_vec());
    let trusted = [TrustedSecret {
        version: "v1",
        key: &key,
    }];
    pack.verify(&ctx, &metadata, b"", &trusted, 1_767_225_600, None)?;
    pack.extract(&ctx, &metadata, b"", Some(&key))
}

#[test]
fn meta_verification_requests_are_answered_only_with_the_option_token() {
    for id in ["meta", "facebook", "whatsapp"] {
        let pack = pack::builtin(id).unwrap();
        let q = "hub.mode=subscribe&hub.challenge=1158201444&hub.verify_token=tok%2D1";
        match run(pack, &Method::GET, q, Some("tok-1")) {
            Ok(Delivery::Handshake(answer)) => {
                assert_eq!(answer.status, 200, "{id}");
                assert_eq!(answer.content_type, Some("text/plain"), "{id}");
                assert_eq!(answer.body, b"1158201444", "{id}");
            }
            other => panic!("{id}: {other:?}"),
        }
        assert_eq!(
            run(pack, &Method::GET, q, Some("tok-2")).unwrap_err(),
            Rejection::InvalidSignature,
            "{id}: another token"
        );
        assert_eq!(
            run(pack, &Method::GET, q, None).unwrap_err(),
            Rejection::InvalidSignature,
            "{id}: no token configured proves nothing"
        );
        let no_token = "hub.mode=subscribe&hub.challenge=1";
        assert_eq!(
            run(pack, &Method::GET, no_token, Some("tok-1")).unwrap_err(),
            Rejection::InvalidSignature,
            "{id}: a request without the token"
        );
        // Not a verification request: it needs a signature like any other.
        assert_eq!(
            run(
                pack,
                &Method::GET,
                "hub.challenge=1&hub.verify_token=tok-1",
                Some("tok-1")
            )
            .unwrap_err(),
            Rejection::BadRequest(BadRequestReason::MissingSignature),
            "{id}"
        );
        assert_eq!(
            run(pack, &Method::POST, q, Some("tok-1")).unwrap_err(),
            Rejection::BadRequest(BadRequestReason::MissingSignature),
            "{id}: a POST is never a token handshake"
        );
    }
}

/// A change to the sample pack's JSON.
type Patch = Box<dyn Fn(&mut Value)>;

/// A small valid pack; `patch` changes it before compiling.
fn compile_error(patch: impl Fn(&mut Value)) -> String {
    let mut spec = json!({
        "id": "sample", "display_name": "Sample", "scheme": "hmac", "vectors": 0,
        "evidence": "experimental", "sources": ["https://example.com/docs"],
        "content_types": ["application/json"], "secret_format": "utf8",
        "signature": {"headers": ["X-Sig"], "format": {"plain": {}}, "algorithm": "hmac-sha256",
                      "encoding": "hex", "signed": "{body}"},
        "event_id": {"from": ["json:/id"], "signed": true, "retries_keep_id": "yes"}
    });
    patch(&mut spec);
    match PackSpec::from_json("packs.sample", &spec.to_string()).and_then(|s| s.compile()) {
        Ok(_) => "compiled".to_owned(),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_new_keys_are_validated_naming_the_key() {
    let jwt =
        json!({"algorithms": ["HS256"], "body_hash": {"claim": "body", "encoding": "base64url"}});
    let cases: Vec<(Patch, &str)> = vec![
        (
            Box::new(|s| s["content_encoding"] = json!(["br"])),
            "packs.sample.content_encoding[0]: unknown content encoding \"br\" (expected gzip)",
        ),
        (
            Box::new(|s| s["signature"]["key_id_header"] = json!("X-Key")),
            "packs.sample.signature.key_id_header: goes with secret_format \"key_id_and_secret\", for the hmac scheme",
        ),
        (
            Box::new(|s| s["secret_format"] = json!("key_id_and_secret")),
            "packs.sample.signature.key_id_header: goes with secret_format \"key_id_and_secret\", for the hmac scheme",
        ),
        (
            Box::new({
                let jwt = jwt.clone();
                move |s| s["signature"]["jwt"] = jwt.clone()
            }),
            "packs.sample.signature.jwt: only for the jwt_hmac scheme",
        ),
        (
            Box::new(|s| {
                s["scheme"] = json!("jwt_hmac");
                s["signature"] = json!({"headers": ["X-Token"], "format": {"plain": {}}, "encoding": "text",
                    "jwt": {"algorithms": ["HS256"]}});
            }),
            "packs.sample.signature.jwt.body_hash: required: the token must bind the body",
        ),
        (
            Box::new(|s| {
                s["scheme"] = json!("jwt_hmac");
                s["signature"] = json!({"headers": ["X-Token"], "format": {"plain": {}}, "encoding": "text",
                    "jwt": {"algorithms": ["none"], "body_hash": {"claim": "b", "encoding": "hex"}}});
            }),
            "packs.sample.signature.jwt.algorithms[0]: unknown algorithm \"none\" (expected HS256, HS384, HS512)",
        ),
        (
            Box::new(|s| {
                s["signature"]["format"] =
                    json!({"plain": {"repeated_header": true, "each_header": true}})
            }),
            "packs.sample.signature.format.plain.each_header: either repeated_header or each_header",
        ),
        (
            Box::new(|s| {
                s["handshakes"] = json!([{"method": "POST", "when": "query:hub.mode", "equals": "subscribe",
                    "challenge": "query:hub.challenge", "answer": "echo_text",
                    "token": {"query": "hub.verify_token", "option": "verify_token"}}])
            }),
            "packs.sample.handshakes[0].token: a token handshake is a GET whose `when` is a query location",
        ),
        (
            Box::new(|s| {
                s["handshakes"] = json!([{"method": "GET", "when": "query:hub.mode", "equals": "subscribe",
                    "challenge": "query:hub.challenge", "answer": "echo_text",
                    "token": {"query": "hub.verify_token", "option": "verify_token"}}])
            }),
            "packs.sample.handshakes[0].token.option: \"verify_token\" is not declared in options",
        ),
        (
            Box::new(|s| s["signature"]["nonce_header"] = json!("X-Nonce")),
            "packs.sample.signature.nonce_header: only for url_nonce_hmac",
        ),
        (
            Box::new(|s| {
                s["event_id"] = json!({"from": [], "signed": true, "retries_keep_id": "no"})
            }),
            "packs.sample.event_id.from: must name at least one location (or none, with fallback \"signature\")",
        ),
    ];
    for (patch, want) in cases {
        assert_eq!(compile_error(patch), want);
    }
    // the valid forms compile
    assert_eq!(
        compile_error(
            |s| s["event_id"] = json!({"from": [], "signed": true, "retries_keep_id": "no", "fallback": "signature"})
        ),
        "compiled"
    );
    assert_eq!(
        compile_error(|s| s["content_encoding"] = json!(["gzip"])),
        "compiled"
    );
}
