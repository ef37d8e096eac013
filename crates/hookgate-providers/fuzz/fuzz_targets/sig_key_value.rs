//! `key=value` signature lists (Stripe, Paddle, Intercom): byte 0 picks the pack, the rest
//! is the header value (a second line is a second occurrence).
#![no_main]

use hookgate_providers::pack::fuzzing;
use hookgate_providers_fuzz::{packs_with_format, pick};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((pack, rest)) = pick(packs_with_format("key_value"), data) {
        let values: Vec<&[u8]> = rest.split(|&b| b == b'\n').collect();
        let _ = fuzzing::signature_header(pack, &values);
    }
});
