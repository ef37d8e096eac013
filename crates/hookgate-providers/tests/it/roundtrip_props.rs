//! Property tests over every built-in pack: what a pack signs, the same pack verifies —
//! for random body text, random shared secrets and random rotation sets (the signer current,
//! previous, or retired) — and changing any byte the signature covers is always refused.
//! Public-key packs use fixed key sets (tests/it/keys). At most 64 cases per pack
//! (`PROPTEST_CASES` may lower it, never raise it past the CI budget by accident).

use crate::support::{Signer, body, header_map, receive, sign, signer};
use hookgate_providers::Rejection;
use hookgate_providers::pack::{self, Delivery, Pack, Scheme};
use http::{HeaderMap, HeaderValue};
use proptest::prelude::*;
use proptest::test_runner::{Config, TestCaseError, TestRunner};

const NOW: i64 = 1_767_225_600;

fn config() -> Config {
    let cases = std::env::var("PROPTEST_CASES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(64)
        .min(64);
    Config {
        cases,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Where the signer's key sits among what the endpoint trusts.
#[derive(Debug, Clone, Copy)]
enum Role {
    Current,
    Previous,
    /// Retired: no longer trusted (only the other keys are).
    Retired,
}

fn role() -> impl Strategy<Value = Role> {
    prop_oneof![
        Just(Role::Current),
        Just(Role::Previous),
        Just(Role::Retired)
    ]
}

/// The signer and two other keys: random shared secrets, or keys of the fixed set.
fn keys(pack: &Pack, secrets: &[Vec<u8>; 3]) -> [Signer; 3] {
    [1, 2, 3].map(|n| signer(pack, &secrets[usize::from(n - 1)], n))
}

fn distinct_secrets() -> impl Strategy<Value = [Vec<u8>; 3]> {
    [
        prop::collection::vec(any::<u8>(), 1..48),
        prop::collection::vec(any::<u8>(), 1..48),
        prop::collection::vec(any::<u8>(), 1..48),
    ]
    .prop_filter("three distinct secrets", |[a, b, c]| {
        a != b && b != c && a != c
    })
}

fn round_trip(
    pack: &Pack,
    text: &str,
    secrets: &[Vec<u8>; 3],
    role: Role,
) -> Result<(), TestCaseError> {
    let [own, other, third] = keys(pack, secrets);
    let signed = sign(pack, &own, &body(pack.id(), text, NOW - 1), NOW - 1);
    let headers = header_map(&signed);
    let (trusted, want) = match role {
        Role::Current => (vec![&own, &other], Some(0)),
        Role::Previous => (vec![&other, &own], Some(1)),
        Role::Retired => (vec![&other, &third], None),
    };
    let trusted: Vec<&str> = trusted.iter().map(|s| s.trusted_text.as_str()).collect();
    let got = receive(
        pack,
        &headers,
        signed.url.as_deref(),
        &signed.body,
        &trusted,
        NOW,
    );
    match (got, want) {
        (Ok((verified, Ok(Delivery::Events { events, .. }))), Some(index)) => {
            prop_assert_eq!(verified.matched_secret_index, index);
            prop_assert!(!events.is_empty());
            prop_assert!(events.iter().all(|e| !e.event_id.is_empty()));
        }
        (Err(Rejection::InvalidSignature), None) => {}
        (got, want) => {
            return Err(TestCaseError::fail(format!(
                "{}: signer {role:?}, expected {want:?}, got {got:?}",
                pack.id()
            )));
        }
    }
    Ok(())
}

#[test]
fn what_every_pack_signs_it_verifies_with_any_rotation_set() {
    for pack in pack::builtin_packs() {
        let mut runner = TestRunner::new(config());
        let strategy = (any::<String>(), distinct_secrets(), role());
        runner
            .run(&strategy, |(text, secrets, role)| {
                round_trip(pack, &text, &secrets, role)
            })
            .unwrap_or_else(|e| panic!("{}: {e}", pack.id()));
    }
}

/// A place the signature covers: a byte of the body, or of a signed header's value.
#[derive(Debug, Clone)]
enum Spot {
    Body(usize),
    Header(String, usize),
}

/// Every byte the pack's signature covers in this delivery, as sent. The body counts byte
/// for byte where the scheme signs it whole (templates, PayPal's CRC-32), and Mailgun's
/// signature object (its token, timestamp and signature) where that scheme signs only it;
/// the URL and other fields schemes sign decoded parameters and selected fields, which
/// `tamper_once` changes through the signed text instead. A shared token covers only itself
/// (Meraki's in the body).
fn signed_spots(pack: &Pack, headers: &HeaderMap, body: &[u8]) -> Vec<Spot> {
    let mut spots = Vec::new();
    let whole_body = matches!(
        pack.scheme(),
        Scheme::Hmac
            | Scheme::Ed25519
            | Scheme::EcdsaP256
            | Scheme::RsaSha256Certificate
            | Scheme::CanonicalRequestHmac
    );
    if whole_body {
        spots.extend((0..body.len()).map(Spot::Body));
    }
    if pack.id() == "mailgun" {
        let text = String::from_utf8_lossy(body);
        let start = text.find(r#""signature":{"#).expect("the signature object");
        let end = start + text[start..].find('}').expect("its end");
        spots.extend((start..=end).map(Spot::Body));
    }
    if pack.scheme() == Scheme::FormPayloadHmac {
        // the signed payload field's value, except the bytes of a %XX escape (whose hex digits
        // decode the same in either case)
        let key = b"bt_payload=";
        let start = body
            .windows(key.len())
            .position(|w| w == key)
            .expect("the payload field")
            + key.len();
        let end = body[start..]
            .iter()
            .position(|&b| b == b'&')
            .map_or(body.len(), |e| start + e);
        let mut i = start;
        while i < end {
            if body[i] == b'%' {
                i += 3;
            } else {
                spots.push(Spot::Body(i));
                i += 1;
            }
        }
    }
    if pack.id() == "meraki" {
        // the token is the body's sharedSecret string: every byte between its quotes
        let text = String::from_utf8_lossy(body);
        let key = r#""sharedSecret":""#;
        let start = text.find(key).expect("the token field") + key.len();
        let mut end = start;
        let bytes = text.as_bytes();
        while end < bytes.len() && !(bytes[end] == b'"' && bytes[end - 1] != b'\\') {
            end += 1;
        }
        spots.extend((start..end).map(Spot::Body));
    }
    let mut names: Vec<String> = pack
        .info()
        .signature_headers
        .iter()
        .chain(pack.signature_headers())
        .map(|n| n.to_ascii_lowercase())
        // a token header the endpoint names (`header_option`)
        .chain(pack.signature_headers_for(&crate::support::options(pack)))
        .collect();
    names.sort();
    names.dedup();
    for name in names {
        if let Some(value) = headers.get(name.as_str()) {
            let unsigned = key_id_bytes(pack, value.as_bytes());
            spots.extend(
                (0..value.len())
                    .filter(|i| !unsigned.contains(i))
                    .map(|i| Spot::Header(name.clone(), i)),
            );
        }
    }
    spots
}

/// The positions of the key ids that lead Worldpay's `<key id>/SHA256/<sig>` entries: a
/// rotation hint the provider does not sign (every SHA256 entry is tried whatever its key
/// id), so changing one is not tampering with signed bytes.
fn key_id_bytes(pack: &Pack, value: &[u8]) -> Vec<usize> {
    if pack.id() != "worldpay" {
        return Vec::new();
    }
    let mut positions = Vec::new();
    let mut entry_start = 0;
    for entry in value.split(|b| *b == b',') {
        let key_id_len = entry.iter().position(|b| *b == b'/').unwrap_or(0);
        positions.extend(entry_start..entry_start + key_id_len);
        entry_start += entry.len() + 1;
    }
    positions
}

/// `text` with the character at `at` (or past its end) replaced by another.
fn changed(text: &str, at: usize) -> String {
    let mut other = text.to_owned();
    let replacement = if other.chars().nth(at) == Some('q') {
        "z"
    } else {
        "q"
    };
    match other.char_indices().nth(at) {
        Some((i, c)) => other.replace_range(i..i + c.len_utf8(), replacement),
        None => other.push_str(replacement),
    }
    other
}

fn tamper_once(
    pack: &Pack,
    text: &str,
    secret: &[u8],
    pick: prop::sample::Index,
    xor: u8,
) -> Result<(), TestCaseError> {
    let own = signer(pack, secret, 1);
    let trusted = [own.trusted_text.as_str()];
    let signed = sign(pack, &own, &body(pack.id(), text, NOW - 1), NOW - 1);
    let headers = header_map(&signed);
    let spots = signed_spots(pack, &headers, &signed.body);
    let mut body = signed.body.clone();
    let mut tampered = headers.clone();
    let through_fields = matches!(pack.id(), "adyen" | "twilio");
    let described = if through_fields && (spots.is_empty() || pick.index(2) == 0) {
        // a signed field (Adyen's merchantReference) or parameter (Twilio's Body) changed
        let other = changed(text, pick.index(text.chars().count() + 1));
        body = if pack.id() == "adyen" {
            // the item signatures live in the body: keep them
            let quoted = |t: &str| serde_json::to_string(t).unwrap();
            String::from_utf8(signed.body.clone())
                .unwrap()
                .replacen(&quoted(text), &quoted(&other), 1)
                .into_bytes()
        } else {
            crate::support::body(pack.id(), &other, NOW - 1)
        };
        prop_assert_ne!(&body, &signed.body);
        format!("signed text {text:?} -> {other:?}")
    } else {
        prop_assert!(!spots.is_empty(), "{}: nothing signed found", pack.id());
        let spot = &spots[pick.index(spots.len())];
        match spot {
            Spot::Body(i) => body[*i] ^= xor,
            Spot::Header(name, i) => {
                let mut value = headers.get(name.as_str()).unwrap().as_bytes().to_vec();
                value[*i] ^= xor;
                let Ok(value) = HeaderValue::from_bytes(&value) else {
                    // hyper refuses such a header before any pack sees it
                    return Ok(());
                };
                tampered.insert(
                    http::HeaderName::from_bytes(name.as_bytes()).unwrap(),
                    value,
                );
            }
        }
        format!("{spot:?} ^ {xor:#04x}")
    };
    match receive(pack, &tampered, signed.url.as_deref(), &body, &trusted, NOW) {
        Err(_) => Ok(()),
        Ok(accepted) => Err(TestCaseError::fail(format!(
            "{}: {described} still verifies: {accepted:?}",
            pack.id()
        ))),
    }
}

#[test]
fn changing_any_signed_byte_is_always_refused() {
    for pack in pack::builtin_packs() {
        let mut runner = TestRunner::new(config());
        let strategy = (
            "[a-zA-Z0-9 ]{1,24}",
            prop::collection::vec(any::<u8>(), 1..48),
            any::<prop::sample::Index>(),
            1u8..=255,
        );
        runner
            .run(&strategy, |(text, secret, pick, xor)| {
                tamper_once(pack, &text, &secret, pick, xor)
            })
            .unwrap_or_else(|e| panic!("{}: {e}", pack.id()));
    }
}
