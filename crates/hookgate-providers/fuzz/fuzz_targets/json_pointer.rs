//! JSON-pointer extraction: the first line is a pointer, the rest a document.
#![no_main]

use hookgate_providers::pack::fuzzing;
use hookgate_providers_fuzz::line;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let (pointer, document) = line(data);
    let (Ok(pointer), Ok(document)) = (
        std::str::from_utf8(pointer),
        serde_json::from_slice::<serde_json::Value>(document),
    ) else {
        return;
    };
    let _ = fuzzing::json_pointer(&document, pointer);
});
