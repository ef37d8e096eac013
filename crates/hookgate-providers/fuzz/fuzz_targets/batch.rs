//! Batch splitting (Adyen's notification items, SendGrid's event arrays) on bytes taken as
//! verified: byte 0 picks the pack, then `Name: value` header lines, an empty line, the body.
#![no_main]

use hookgate_providers::pack::fuzzing;
use hookgate_providers_fuzz::{batched_packs, headers_and_body, pick};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((pack, rest)) = pick(batched_packs(), data) {
        let (headers, body) = headers_and_body(rest);
        let _ = fuzzing::extract_unverified(pack, &headers, body);
    }
});
