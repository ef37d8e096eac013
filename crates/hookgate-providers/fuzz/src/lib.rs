//! What the fuzz targets share: which packs each one drives and how an input's bytes become
//! a request. `scripts/fuzz-seeds.py` writes seeds in these encodings from testdata/vectors
//! (every vector file of every pack); both group the packs the same way, in id order.

use std::sync::OnceLock;

use hookgate_providers::pack::{self, Pack};

/// The built-in packs (in id order) whose signature header has this syntax (`plain`: one value,
/// or for a `repeated_header` pack every occurrence; `key_value`; `versioned_list`). Every pack
/// added to packs/ joins its group, and `scripts/fuzz-seeds.py` groups the same way. Computed
/// once per process.
pub fn packs_with_format(format: &str) -> &'static [&'static str] {
    static GROUPS: OnceLock<[Vec<&'static str>; 3]> = OnceLock::new();
    let groups = GROUPS.get_or_init(|| {
        ["plain", "key_value", "versioned_list"].map(|f| {
            pack::builtin_packs()
                .iter()
                .filter(|p| pack::fuzzing::signature_format(p) == Some(f))
                .map(Pack::id)
                .collect()
        })
    });
    match format {
        "plain" => &groups[0],
        "key_value" => &groups[1],
        "versioned_list" => &groups[2],
        other => panic!("unknown signature format {other}"),
    }
}

/// The built-in packs (in id order) that split one body into several events.
pub fn batched_packs() -> &'static [&'static str] {
    static BATCHED: OnceLock<Vec<&'static str>> = OnceLock::new();
    BATCHED.get_or_init(|| {
        pack::builtin_packs()
            .iter()
            .filter(|p| p.batched())
            .map(Pack::id)
            .collect()
    })
}

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
