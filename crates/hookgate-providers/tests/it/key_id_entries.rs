//! `versioned_list` with `key_id_first` (Worldpay's `Event-Signature: 1/SHA256/<hex>,2/SHA256/<hex>`):
//! every entry of a listed hash function is a candidate whatever its key id, so a rotation
//! verifies with either secret; other hash functions are skipped; an entry without its key id
//! or hash function is malformed.

use hmac::{Hmac, Mac};
use hookgate_providers::pack;
use hookgate_providers::{BadRequestReason, Rejection, TrustedSecret};
use http::{HeaderMap, HeaderValue};
use sha2::Sha256;

const BODY: &[u8] = br#"{"eventId":"e1","eventDetails":{"type":"authorized"}}"#;

fn hex_mac(secret: &str) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(BODY);
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn verify(header: &str, secrets: &[&str]) -> Result<usize, Rejection> {
    let pack = pack::builtin("worldpay").unwrap();
    let mut headers = HeaderMap::new();
    headers.insert("event-signature", HeaderValue::from_str(header).unwrap());
    let ctx = pack::RequestContext::post(&headers);
    let metadata = pack.parse_metadata(&ctx)?;
    let keys: Vec<_> = secrets
        .iter()
        .map(|s| pack.decode_secret(s).unwrap())
        .collect();
    let trusted: Vec<TrustedSecret<'_>> = keys
        .iter()
        .map(|key| TrustedSecret { version: "v", key })
        .collect();
    pack.verify(&ctx, &metadata, BODY, &trusted, 1_767_225_600, None)
        .map(|v| v.matched_secret_index)
}

#[test]
fn every_sha256_entry_is_a_candidate_whatever_its_key_id() {
    let (old, new) = ("wp-secret-old", "wp-secret-new");
    let both = format!("2/SHA256/{},1/SHA256/{}", hex_mac(new), hex_mac(old));
    // during a rotation either secret alone verifies the same header
    assert_eq!(verify(&both, &[new]), Ok(0));
    assert_eq!(verify(&both, &[old]), Ok(0));
    assert_eq!(verify(&both, &["another", old]), Ok(1));
    assert_eq!(
        verify(&both, &["another"]),
        Err(Rejection::InvalidSignature)
    );
    // an entry of another hash function is skipped, not refused
    let other = format!("3/SHA512/{},1/SHA256/{}", "ab".repeat(64), hex_mac(old));
    assert_eq!(verify(&other, &[old]), Ok(0));
    let only_other = format!("3/SHA512/{}", hex_mac(old));
    assert_eq!(
        verify(&only_other, &[old]),
        Err(Rejection::InvalidSignature)
    );
    // an entry without its key id, or without the hash function, is malformed
    for bad in [
        format!("SHA256/{}", "zz".repeat(32)),
        format!("/SHA256/{}", hex_mac(old)),
        hex_mac(old),
    ] {
        assert_eq!(
            verify(&bad, &[old]),
            Err(Rejection::BadRequest(BadRequestReason::MalformedSignature)),
            "{bad}"
        );
    }
}
