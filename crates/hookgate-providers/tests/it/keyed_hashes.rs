//! The engine pieces the last shared vector files needed, beyond those files: keyed plain
//! hashes with an endpoint option choosing the digest (Cloudinary's `signature_algorithm`),
//! and `{body_json}` (Hygraph signs a JSON document wrapping the body as a string) — each
//! signed by the `send` path and verified back, and their compile errors naming the key.

use std::collections::BTreeMap;

use hookgate_providers::pack::{self, EndpointOptions, Pack, PackSpec, RequestContext, SignTarget};
use hookgate_providers::{Rejection, SecretMaterial, SignRequest, TrustedSecret};
use http::{HeaderMap, Method};
use serde_json::{Value, json};
use sha2::Digest;

const NOW: i64 = 1_767_225_600;

fn options(pack: &Pack, pairs: &[(&str, &str)]) -> EndpointOptions {
    let map: BTreeMap<String, String> = pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    pack.check_options(&map).unwrap()
}

/// Signs `body` as `hookgate send` does with `opts`, then verifies it with `verify_opts`.
fn sign(pack: &Pack, key: &SecretMaterial, body: &[u8], opts: &EndpointOptions) -> HeaderMap {
    let request = SignRequest {
        event_id: "evt_1",
        event_type: Some("upload"),
        timestamp: NOW - 5,
        body,
    };
    let target = SignTarget {
        public_url: None,
        options: Some(opts),
    };
    let signed = pack.sign_delivery(key, &request, &target);
    let mut headers = HeaderMap::new();
    for (name, value) in &signed.headers {
        headers.append(name.clone(), value.clone());
    }
    headers
}

fn verify(
    pack: &Pack,
    key: &SecretMaterial,
    headers: &HeaderMap,
    body: &[u8],
    opts: &EndpointOptions,
) -> Result<(), Rejection> {
    let ctx = RequestContext {
        method: &Method::POST,
        headers,
        raw_query: None,
        public_url: None,
        options: opts,
    };
    let metadata = pack.parse_metadata(&ctx)?;
    let trusted = [TrustedSecret { version: "v1", key }];
    pack.verify(&ctx, &metadata, body, &trusted, NOW, None)
        .map(|_| ())
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[test]
fn cloudinary_signs_and_verifies_with_the_digest_the_endpoint_chose() {
    let pack = pack::builtin("cloudinary").unwrap();
    let key = SecretMaterial::new(b"api-secret".to_vec());
    let body = br#"{"notification_type":"upload"}"#;
    let sha1 = options(pack, &[]);
    let sha256 = options(pack, &[("signature_algorithm", "sha256")]);
    for (opts, other, want) in [
        (
            &sha1,
            &sha256,
            hex(&sha1::Sha1::digest(
                b"{\"notification_type\":\"upload\"}1767225595api-secret",
            )),
        ),
        (
            &sha256,
            &sha1,
            hex(&sha2::Sha256::digest(
                b"{\"notification_type\":\"upload\"}1767225595api-secret",
            )),
        ),
    ] {
        let headers = sign(pack, &key, body, opts);
        // body, then the timestamp, then the secret: a keyed plain hash, computed here apart
        assert_eq!(headers["x-cld-signature"].to_str().unwrap(), want);
        assert_eq!(headers["x-cld-timestamp"], "1767225595");
        assert_eq!(verify(pack, &key, &headers, body, opts), Ok(()));
        // the other digest is a well-formed signature that does not match
        assert_eq!(
            verify(pack, &key, &headers, body, other),
            Err(Rejection::InvalidSignature)
        );
        let wrong = SecretMaterial::new(b"api-secreT".to_vec());
        assert_eq!(
            verify(pack, &wrong, &headers, body, opts),
            Err(Rejection::InvalidSignature)
        );
    }
}

#[test]
fn hygraph_signs_the_body_as_a_json_string() {
    let pack = pack::builtin("hygraph").unwrap();
    let key = SecretMaterial::new(b"hygraph-secret".to_vec());
    let none = options(pack, &[]);
    let body = "{\n  \"title\": \"Grüße \\\"aus\\\" Köln\"\n}\n".as_bytes();
    let headers = sign(pack, &key, body, &none);
    assert_eq!(verify(pack, &key, &headers, body, &none), Ok(()));
    // the signed document, rebuilt here with serde_json from the header's items
    let value = headers["gcms-signature"].to_str().unwrap().to_owned();
    let items: BTreeMap<&str, &str> = value
        .split(", ")
        .map(|kv| kv.split_once('=').unwrap())
        .collect();
    let document = format!(
        r#"{{"Body":{},"EnvironmentName":"{}","TimeStamp":{}}}"#,
        serde_json::to_string(std::str::from_utf8(body).unwrap()).unwrap(),
        items["env"],
        items["t"]
    );
    use base64::Engine;
    use hmac::Mac;
    let mut mac = hmac::Hmac::<sha2::Sha256>::new_from_slice(b"hygraph-secret").unwrap();
    mac.update(document.as_bytes());
    let want = base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes());
    assert_eq!(items["sign"], want);
    // env is signed
    let mut changed = headers.clone();
    changed.insert(
        "gcms-signature",
        value
            .replace(&format!("env={}", items["env"]), "env=staging")
            .parse()
            .unwrap(),
    );
    assert_eq!(
        verify(pack, &key, &changed, body, &none),
        Err(Rejection::InvalidSignature)
    );
    // a body that is not UTF-8 has no JSON string form: it never verifies
    let raw = b"{\"t\":\"\xff\"}";
    let headers = sign(pack, &key, raw, &none);
    assert_eq!(
        verify(pack, &key, &headers, raw, &none),
        Err(Rejection::InvalidSignature)
    );
}

fn compile_error(patch: impl Fn(&mut Value)) -> String {
    let mut spec = json!({
        "id": "sample", "display_name": "Sample", "scheme": "hmac", "vectors": 0,
        "evidence": "experimental", "sources": ["https://example.com/docs"],
        "content_types": ["application/json"], "secret_format": "utf8",
        "options": [{"name": "alg", "format": "text", "description": "the digest"}],
        "signature": {"headers": ["X-Sig"], "format": {"plain": {}},
                      "algorithm": "sha1-concat-key-last", "encoding": "hex", "signed": "{body}"},
        "event_id": {"from": ["json:/id"], "signed": true, "retries_keep_id": "yes"}
    });
    patch(&mut spec);
    match PackSpec::from_json("packs.sample", &spec.to_string()).and_then(|s| s.compile()) {
        Ok(_) => "compiled".to_owned(),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_algorithm_option_and_body_json_are_validated_naming_the_key() {
    assert_eq!(compile_error(|_| {}), "compiled");
    let option = |values: Value| {
        move |s: &mut Value| {
            s["signature"]["algorithm_option"] = json!({"option": "alg", "values": values.clone()})
        }
    };
    assert_eq!(
        compile_error(option(json!({"sha256": "sha256-concat-key-last"}))),
        "compiled"
    );
    let err = compile_error(option(json!({"md5": "md5-concat"})));
    assert!(
        err.starts_with("packs.sample.signature.algorithm_option.values.md5: unknown algorithm"),
        "{err}"
    );
    let err = compile_error(|s| {
        s["signature"]["algorithm_option"] = json!({"option": "nope", "values": {"a": "hmac-sha1"}})
    });
    assert!(
        err.starts_with("packs.sample.signature.algorithm_option.option:"),
        "{err}"
    );
    let err = compile_error(|s| s["signature"]["signed"] = json!("{body}{body_json}"));
    assert!(err.starts_with("packs.sample.signature.signed:"), "{err}");
    assert_eq!(
        compile_error(|s| s["signature"]["signed"] = json!("{{\"B\":{body_json}}}")),
        "compiled"
    );
    let err = compile_error(|s| s["signature"]["signed"] = json!("{body}}"));
    assert!(err.contains("stray"), "{err}");
}

fn hubspot_headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
    let mut headers = HeaderMap::new();
    headers.insert("content-type", "application/json".parse().unwrap());
    for (name, value) in pairs {
        headers.insert(*name, value.parse().unwrap());
    }
    headers
}

#[test]
fn hubspot_verifies_the_generation_its_version_header_names_when_v3_is_absent() {
    let pack = pack::builtin("hubspot").unwrap();
    let key = SecretMaterial::new(b"client-secret".to_vec());
    let body = br#"[{"eventId":7,"subscriptionType":"contact.creation","objectId":1}]"#;
    let url = "https://hooks.example.com/hubspot";
    let opts = options(pack, &[]);
    let run = |headers: &HeaderMap| -> Result<(), Rejection> {
        let ctx = RequestContext {
            method: &Method::POST,
            headers,
            raw_query: None,
            public_url: Some(url),
            options: &opts,
        };
        let metadata = pack.parse_metadata(&ctx)?;
        let trusted = [TrustedSecret {
            version: "v1",
            key: &key,
        }];
        pack.verify(&ctx, &metadata, body, &trusted, NOW, None)?;
        match pack.extract(&ctx, &metadata, body, Some(&key))? {
            pack::Delivery::Events { events, .. } => {
                assert_eq!(events[0].event_id, "7");
                Ok(())
            }
            other => panic!("{other:?}"),
        }
    };
    let body_text = std::str::from_utf8(body).unwrap();
    let v1 = hex(&sha2::Sha256::digest(format!("client-secret{body_text}")));
    let v2 = hex(&sha2::Sha256::digest(format!(
        "client-secretPOST{url}{body_text}"
    )));
    let sig = "x-hubspot-signature";
    let version = "x-hubspot-signature-version";
    assert_eq!(
        run(&hubspot_headers(&[(sig, &v1), (version, "v1")])),
        Ok(())
    );
    // `hookgate providers test` traces the generation the request names
    let headers = hubspot_headers(&[(sig, &v2), (version, "v2")]);
    let ctx = RequestContext {
        method: &Method::POST,
        headers: &headers,
        raw_query: None,
        public_url: Some(url),
        options: &opts,
    };
    let trusted = [TrustedSecret {
        version: "v1",
        key: &key,
    }];
    let trace = pack.trace(&ctx, body, &trusted, &[], NOW, None, 1 << 20);
    assert!(trace.verified, "{trace:?}");
    assert_eq!(
        run(&hubspot_headers(&[(sig, &v2), (version, "v2")])),
        Ok(())
    );
    // each generation signs its own bytes
    assert_eq!(
        run(&hubspot_headers(&[(sig, &v1), (version, "v2")])),
        Err(Rejection::InvalidSignature)
    );
    // a version the pack does not list verifies nothing
    assert_eq!(
        run(&hubspot_headers(&[(sig, &v1), (version, "v4")])),
        Err(Rejection::InvalidSignature)
    );
    // v3 present: v3 alone decides, a correct v1 beside a wrong v3 does not pass
    let bad_v3 = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, [0u8; 32]);
    assert_eq!(
        run(&hubspot_headers(&[
            (sig, &v1),
            (version, "v1"),
            ("x-hubspot-signature-v3", &bad_v3),
            ("x-hubspot-request-timestamp", "1767225595000"),
        ])),
        Err(Rejection::InvalidSignature)
    );
}

#[test]
fn signature_versions_are_validated_naming_the_key() {
    let versions = |v1: Value| {
        move |s: &mut Value| {
            s["signature_versions"] =
                json!({"header": "X-Sig-Version", "versions": {"v1": v1.clone()}})
        }
    };
    let good = json!({"headers": ["X-Old"], "format": {"plain": {}},
                      "algorithm": "sha256-concat", "encoding": "hex", "signed": "{body}"});
    assert_eq!(compile_error(versions(good.clone())), "compiled");
    let mut bad = good.clone();
    bad["algorithm"] = json!("sha3");
    let err = compile_error(versions(bad));
    assert!(
        err.starts_with("packs.sample.signature_versions.versions.v1.signature.algorithm:"),
        "{err}"
    );
    let err = compile_error(|s| {
        s["signature_versions"] = json!({"header": "X-Sig-Version", "versions": {}})
    });
    assert!(
        err.starts_with("packs.sample.signature_versions.versions:"),
        "{err}"
    );
    let err = compile_error(|s| {
        s["signature_versions"] = json!({"header": "bad header", "versions": {"v1": good}})
    });
    assert!(
        err.starts_with("packs.sample.signature_versions.header:"),
        "{err}"
    );
}
