//! What the fuzz targets share: which packs each one drives and how an input's bytes become
//! a request. `scripts/fuzz-seeds.py` writes seeds in these encodings from testdata/vectors;
//! keep the pack lists here and there in the same order.

use hookgate_providers::pack::{self, Pack};

/// Packs whose signature header is one value (a `repeated_header` pack: every occurrence).
pub const PLAIN: &[&str] = &[
    "adyen",
    "bitbucket",
    "discord",
    "github",
    "gitlab",
    "lemonsqueezy",
    "linear",
    "mollie",
    "paypal",
    "razorpay",
    "sendgrid",
    "sentry",
    "shopify",
    "slack",
    "square",
    "twilio",
    "twitch",
    "zoom",
];
/// Packs whose signature header is a `key=value` list.
pub const KEY_VALUE: &[&str] = &["intercom", "paddle", "stripe"];
/// Packs whose signature header is a versioned list.
pub const VERSIONED_LIST: &[&str] = &["standard_webhooks", "svix"];
/// Packs that split one body into several events.
pub const BATCHED: &[&str] = &["adyen", "sendgrid"];

/// The pack the first byte selects from `ids`, and the rest of the input.
pub fn pick<'a>(ids: &[&str], data: &'a [u8]) -> Option<(&'static Pack, &'a [u8])> {
    let (first, rest) = data.split_first()?;
    let id = ids[usize::from(*first) % ids.len()];
    Some((pack::builtin(id).expect("a built-in pack"), rest))
}

/// The first line of `data` (without its `\n`) and what follows it.
pub fn line(data: &[u8]) -> (&[u8], &[u8]) {
    match data.iter().position(|&b| b == b'\n') {
        Some(end) => (&data[..end], &data[end + 1..]),
        None => (data, &[]),
    }
}

/// One header as raw name and value bytes.
pub type RawHeader<'a> = (&'a [u8], &'a [u8]);

/// `Name: value` lines up to an empty line, and the body after it.
pub fn headers_and_body(mut data: &[u8]) -> (Vec<RawHeader<'_>>, &[u8]) {
    let mut headers = Vec::new();
    while !data.is_empty() {
        let (current, rest) = line(data);
        data = rest;
        if current.is_empty() {
            break;
        }
        let split = current
            .windows(2)
            .position(|w| w == b": ")
            .map_or((current, &b""[..]), |at| {
                (&current[..at], &current[at + 2..])
            });
        headers.push(split);
    }
    (headers, data)
}
