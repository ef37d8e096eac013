//! A signature or token in a query parameter (`signature.query_param`): PandaDoc's
//! `?signature=<hex HMAC of the body>` read from the request (else from `public_url`'s query),
//! a repeated or missing parameter refused, and the sender's side writing it on the URL — while
//! a shared token is only ever taken from the request itself, never from the configuration.

use hookgate_providers::pack::{self, Pack, PackSpec, RequestContext, SignTarget};
use hookgate_providers::{BadRequestReason, Rejection, SecretMaterial, SignRequest, TrustedSecret};
use http::HeaderMap;
use http::header::CONTENT_TYPE;

const NOW: i64 = 1_767_225_600;
const BODY: &[u8] = br#"[{"event":"document_state_changed","data":{"id":"doc_1"}}]"#;

fn verify(
    pack: &Pack,
    secret: &str,
    raw_query: Option<&str>,
    public_url: Option<&str>,
    body: &[u8],
) -> Result<(), Rejection> {
    let mut headers = HeaderMap::new();
    headers.insert(CONTENT_TYPE, "application/json".parse().unwrap());
    let options = pack.check_options(&Default::default()).unwrap();
    let ctx = RequestContext {
        raw_query,
        public_url,
        options: &options,
        ..RequestContext::post(&headers)
    };
    let metadata = pack.parse_metadata(&ctx)?;
    let key = pack.decode_secret(secret).unwrap();
    let trusted = [TrustedSecret {
        version: "v1",
        key: &key,
    }];
    pack.verify(&ctx, &metadata, body, &trusted, NOW, None)
        .map(|_| ())
}

fn signed_query(pack: &Pack, key: &SecretMaterial, public_url: Option<&str>) -> String {
    let request = SignRequest {
        event_id: "evt_1",
        event_type: None,
        timestamp: NOW - 2,
        body: BODY,
    };
    let target = SignTarget {
        public_url,
        options: None,
    };
    let signed = pack.sign_delivery(key, &request, &target);
    assert!(
        signed
            .headers
            .iter()
            .all(|(name, _)| name.as_str() == "content-type"),
        "{}: nothing but the content type travels in headers: {:?}",
        pack.id(),
        signed.headers
    );
    let url = signed.url.expect("the signature is placed on the URL");
    url.split_once('?').expect("a query").1.to_owned()
}

#[test]
fn pandadoc_signs_the_body_in_the_signature_query_parameter() {
    let pack = pack::builtin("pandadoc").unwrap();
    let secret = "pd-shared-key-1";
    let key = pack.decode_secret(secret).unwrap();
    let query = signed_query(pack, &key, None);
    assert!(query.starts_with("signature=") && query.len() == "signature=".len() + 64);
    // An endpoint without public_url, or with one that has its own query, is posted to
    // with the parameter appended.
    assert_eq!(
        signed_query(pack, &key, Some("https://h.example/in?team=a")),
        format!("team=a&{query}")
    );

    assert_eq!(verify(pack, secret, Some(&query), None, BODY), Ok(()));
    assert_eq!(
        verify(pack, "another-key", Some(&query), None, BODY),
        Err(Rejection::InvalidSignature)
    );
    let mut tampered = BODY.to_vec();
    tampered[3] ^= 1;
    assert_eq!(
        verify(pack, secret, Some(&query), None, &tampered),
        Err(Rejection::InvalidSignature)
    );
    // The request's query is the one the provider called; public_url's only stands in
    // when the request has none.
    let public = format!("https://h.example/in?{query}");
    assert_eq!(verify(pack, secret, None, Some(&public), BODY), Ok(()));
    let wrong = format!("signature={}", "0".repeat(64));
    assert_eq!(
        verify(pack, secret, Some(&wrong), Some(&public), BODY),
        Err(Rejection::InvalidSignature)
    );
    for (query, want) in [
        (String::new(), BadRequestReason::MissingSignature),
        ("signature=".to_owned(), BadRequestReason::MissingSignature),
        (
            format!("{query}&{query}"),
            BadRequestReason::DuplicatedSignature,
        ),
        (
            "signature=%21%21".to_owned(),
            BadRequestReason::MalformedSignature,
        ),
        (
            "signature=abcd".to_owned(),
            BadRequestReason::MalformedSignature,
        ),
    ] {
        assert_eq!(
            verify(pack, secret, Some(&query), None, BODY),
            Err(Rejection::BadRequest(want)),
            "{query:?}"
        );
    }
}

fn token_pack() -> Pack {
    let spec = r#"{
      "id": "query_token", "display_name": "Query token", "scheme": "shared_token",
      "vectors": 0, "evidence": "experimental", "sources": ["https://example.com/docs"],
      "content_types": ["application/json"], "secret_format": "utf8",
      "signature": {"query_param": "secret", "encoding": "text"},
      "event_id": {"from": [], "signed": false, "retries_keep_id": "unknown", "fallback": "body_digest"},
      "replay_defence": "body_digest"
    }"#;
    PackSpec::from_json("packs.query_token", spec)
        .and_then(|s| s.compile())
        .unwrap()
}

#[test]
fn a_query_token_is_written_percent_encoded_and_read_only_from_the_request() {
    let pack = token_pack();
    let secret = "tok+en/1=";
    let key = pack.decode_secret(secret).unwrap();
    let query = signed_query(&pack, &key, None);
    assert_eq!(query, "secret=tok%2Ben%2F1%3D");
    assert_eq!(verify(&pack, secret, Some(&query), None, BODY), Ok(()));
    assert_eq!(
        verify(&pack, "tok+en/2=", Some(&query), None, BODY),
        Err(Rejection::InvalidSignature)
    );
    // A credential in the configured public_url is never taken for the request's.
    let public = format!("https://h.example/in?{query}");
    assert_eq!(
        verify(&pack, secret, None, Some(&public), BODY),
        Err(Rejection::BadRequest(BadRequestReason::MissingSignature))
    );
}
