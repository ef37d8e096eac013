//! `application/x-www-form-urlencoded` decoding: the whole input as a form body (fields as an
//! object, the sorted parameters Twilio signs, a field lookup) and as one encoded value.
#![no_main]

use hookgate_providers::pack::fuzzing;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let decoded = fuzzing::form_decode(data);
    let object = fuzzing::form_object(data);
    let params = fuzzing::sorted_params(data);
    // names and values lose only their separators and escapes
    assert!(params.len() <= data.len());
    if let Some(fields) = object.as_object() {
        for name in fields.keys().take(4) {
            let _ = fuzzing::form_field(data, name);
        }
    }
    let _ = decoded;
});
