//! Plain signature headers (optional prefix; repeated occurrences for `repeated_header`
//! packs): byte 0 picks the pack, the rest is one value per line.
#![no_main]

use hookgate_providers::pack::fuzzing;
use hookgate_providers_fuzz::{packs_with_format, pick};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Some((pack, rest)) = pick(packs_with_format("plain"), data) {
        let values: Vec<&[u8]> = rest.split(|&b| b == b'\n').collect();
        let _ = fuzzing::signature_header(pack, &values);
    }
});
