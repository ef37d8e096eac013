//! The two bounds a review found missing or off by one: every pack's freshness has a future
//! bound (its tolerance, or a smaller one the provider documents) — hookgate deliberately
//! departs from SDKs that accept any future timestamp (Stripe's) — and a signature header
//! holds at most 16 items in every list format (Stripe's accepted 17).

use crate::support::{Outcome, body, header_map, receive, sign, signer};
use hookgate_providers::pack::{self, Delivery, Pack, PackSpec};
use hookgate_providers::{BadRequestReason, Rejection};
use http::{HeaderMap, HeaderName, HeaderValue};

const T: i64 = 1_767_225_600;
const TEN_YEARS: i64 = 10 * 365 * 86_400;
const MALFORMED: Rejection = Rejection::BadRequest(BadRequestReason::MalformedSignature);

fn verdict(outcome: Outcome) -> Result<(), Rejection> {
    match outcome {
        Ok((_, Ok(Delivery::Events { .. }))) => Ok(()),
        Ok((_, Ok(Delivery::Handshake(_)))) => panic!("not a handshake"),
        Ok((_, Err(e))) | Err(e) => Err(e),
    }
}

/// The verdict on a delivery signed at `signed_at` by a clock reading `now`.
fn at(pack: &Pack, signed_at: i64, now: i64) -> Result<(), Rejection> {
    let signer = signer(pack, &[7; 32], 1);
    let body = body(pack.id(), "bounds", signed_at);
    let signed = sign(pack, &signer, &body, signed_at);
    let trusted = [signer.trusted_text.as_str()];
    verdict(receive(
        pack,
        &header_map(&signed),
        signed.url.as_deref(),
        &signed.body,
        &trusted,
        now,
    ))
}

#[test]
fn every_pack_refuses_timestamps_further_ahead_than_its_tolerance() {
    let stale = Err(Rejection::StaleTimestamp);
    let mut checked = Vec::new();
    for pack in pack::builtin_packs()
        .iter()
        .filter(|p| p.timestamp_signed())
    {
        let tolerance = pack.default_tolerance_seconds().unwrap() as i64;
        let id = pack.id();
        assert_eq!(at(pack, T, T), Ok(()), "{id}: fresh");
        // the past bound, unchanged
        assert_eq!(at(pack, T, T + tolerance), Ok(()), "{id}: old at the bound");
        assert_eq!(at(pack, T, T + tolerance + 1), stale, "{id}: too old");
        // the future bound: the same tolerance (clock behind the signer), or the smaller
        // bound a pack declares from its provider's verifier (Box: none at all)
        let future = pack
            .info()
            .max_future_seconds
            .map_or(tolerance, |f| f as i64);
        assert!(future <= tolerance, "{id}");
        assert_eq!(at(pack, T, T - future), Ok(()), "{id}: ahead at the bound");
        assert_eq!(at(pack, T, T - future - 1), stale, "{id}: too far ahead");
        assert_eq!(at(pack, T + TEN_YEARS, T), stale, "{id}: ten years ahead");
        checked.push(id);
    }
    // the 12 packs of the first engine issue sign a timestamp, and later ones add to them
    assert!(checked.len() >= 12, "{checked:?}");
    // Stripe's SDKs accept any future timestamp; hookgate refuses past 300 s both ways.
    let stripe = pack::builtin("stripe").unwrap();
    assert_eq!(at(stripe, T + 300, T), Ok(()));
    assert_eq!(at(stripe, T + 301, T), stale);
}

#[test]
fn a_documented_smaller_future_bound_applies_and_caps_nothing_in_the_past() {
    let linear = include_str!("../../packs/linear.json").replacen(
        r#""tolerance_seconds": 60}"#,
        r#""tolerance_seconds": 60, "max_future_seconds": 10}"#,
        1,
    );
    assert!(linear.contains("max_future_seconds"));
    let pack = PackSpec::from_json("packs.linear", &linear)
        .and_then(|spec| spec.compile())
        .unwrap();
    let stale = Err(Rejection::StaleTimestamp);
    assert_eq!(at(&pack, T + 10, T), Ok(()));
    assert_eq!(at(&pack, T + 11, T), stale);
    assert_eq!(at(&pack, T - 60, T), Ok(()));
    assert_eq!(at(&pack, T - 61, T), stale);
}

/// `filler` is one more item that names a wrong signature (or, for Mollie, another
/// occurrence of the header).
fn with_items(
    headers: &HeaderMap,
    name: &str,
    separator: &str,
    filler: &str,
    n: usize,
) -> HeaderMap {
    let mut out = headers.clone();
    let name = HeaderName::from_bytes(name.as_bytes()).unwrap();
    if separator.is_empty() {
        for _ in 0..n {
            out.append(name.clone(), HeaderValue::from_str(filler).unwrap());
        }
    } else {
        let mut value = headers.get(&name).unwrap().to_str().unwrap().to_owned();
        for _ in 0..n {
            value.push_str(separator);
            value.push_str(filler);
        }
        out.insert(name, HeaderValue::from_str(&value).unwrap());
    }
    out
}

#[test]
fn a_signature_header_holds_at_most_sixteen_items_in_every_list_format() {
    let b64_zero = "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=";
    let cases: &[(&str, &str, &str, String, usize)] = &[
        // key=value lists: the timestamp item counts
        (
            "stripe",
            "stripe-signature",
            ",",
            format!("v1={}", "0".repeat(64)),
            2,
        ),
        (
            "paddle",
            "paddle-signature",
            ";",
            format!("h1={}", "0".repeat(64)),
            2,
        ),
        (
            "intercom",
            "x-hub-signature",
            ",",
            format!("sha1={}", "0".repeat(40)),
            1,
        ),
        // versioned lists
        (
            "standard_webhooks",
            "webhook-signature",
            " ",
            format!("v1,{b64_zero}"),
            1,
        ),
        ("svix", "svix-signature", " ", format!("v1,{b64_zero}"), 1),
        // a plain signature in a repeated header: each occurrence is an item
        (
            "mollie",
            "x-mollie-signature",
            "",
            format!("sha256={}", "0".repeat(64)),
            1,
        ),
    ];
    for (id, header, separator, filler, signed_items) in cases {
        let pack = pack::builtin(id).unwrap();
        let signer = signer(pack, &[9; 32], 1);
        let body = body(id, "items", T);
        let signed = sign(pack, &signer, &body, T);
        let headers = header_map(&signed);
        assert!(headers.contains_key(*header), "{id}: {header}");
        let trusted = [signer.trusted_text.as_str()];
        let run = |n: usize| {
            let headers = with_items(&headers, header, separator, filler, n - signed_items);
            verdict(receive(
                pack,
                &headers,
                signed.url.as_deref(),
                &signed.body,
                &trusted,
                T,
            ))
        };
        assert_eq!(run(*signed_items), Ok(()), "{id}: as signed");
        assert_eq!(run(16), Ok(()), "{id}: 16 items");
        assert_eq!(run(17), Err(MALFORMED), "{id}: 17 items");
    }
}

/// Signing never overflows on an absurd clock (the fuzzer's `@now` found a seconds-to-
/// milliseconds conversion that multiplied without bound): every pack signs a delivery at the
/// extremes of the clock without a panic.
#[test]
fn signing_at_extreme_clocks_does_not_overflow() {
    for pack in pack::builtin_packs() {
        let crate::support::Signing::Shared(key) = signer(pack, &[7; 32], 1).signing else {
            continue;
        };
        for timestamp in [i64::MAX / 100, i64::MAX, i64::MIN / 100, i64::MIN] {
            let request = hookgate_providers::SignRequest {
                event_id: "evt_extreme",
                event_type: Some("x"),
                timestamp,
                body: br#"{"id":"evt_extreme"}"#,
            };
            let target = pack::SignTarget {
                public_url: Some("https://hooks.example/in"),
                options: None,
            };
            let signed = std::panic::catch_unwind(|| {
                pack.sign_delivery(&key, &request, &target);
            });
            assert!(
                signed.is_ok(),
                "{}: signing at {timestamp} panicked",
                pack.id()
            );
        }
    }
}
