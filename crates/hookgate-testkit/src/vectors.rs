//! The provider vector files (`testdata/vectors/`, schema in its FORMAT.md), decoded once for
//! every test that runs them: the engine's table tests in `hookgate-providers` and the HTTP
//! tests of the binary.
//!
//! A provider's vectors are `<id>.json` (required) plus, when present, `<id>.generated.json`:
//! the tamper cases `scripts/vectors/` derived or signed for a provider whose own file lacks
//! them. A missing folder or file panics: these tests never skip.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use base64::Engine;
use serde_json::Value;

/// The repository's `testdata/vectors`, found from the crate under test (`cargo test` sets
/// `CARGO_MANIFEST_DIR` for the test process; every crate lives in `crates/<name>`): not from
/// where this crate was compiled, so a target/ reused from another checkout still reads the
/// vectors of the checkout being tested.
pub fn dir() -> PathBuf {
    let crate_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    let dir = crate_dir.join("../../testdata/vectors");
    assert!(
        dir.is_dir(),
        "provider vectors not found at {} (they live in the repository's testdata/vectors); \
         these tests must not be skipped",
        dir.display()
    );
    dir
}

/// The tamper cases every pack's vectors must include, recognised by their `reason` code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum TamperCase {
    /// `body_tampered`: one byte of what is signed changed (the body; a signed field for packs
    /// that sign fields; the token for shared-token packs).
    OneByte,
    /// `whitespace_changed`: whitespace added to what is signed.
    Whitespace,
    /// `wrong_secret`: signed with (or configured with) another secret.
    WrongSecret,
    /// `stale_timestamp` (packs that sign a timestamp).
    Stale,
    /// `future_timestamp` (packs that sign a timestamp).
    Future,
    /// `missing_signature_header`.
    MissingSignature,
    /// `malformed_signature_header` (not for shared tokens: every text is a token).
    MalformedSignature,
}

impl TamperCase {
    pub const ALL: &'static [TamperCase] = &[
        TamperCase::OneByte,
        TamperCase::Whitespace,
        TamperCase::WrongSecret,
        TamperCase::Stale,
        TamperCase::Future,
        TamperCase::MissingSignature,
        TamperCase::MalformedSignature,
    ];

    /// The `reason` code that marks a vector as this case.
    pub fn reason(self) -> &'static str {
        match self {
            TamperCase::OneByte => "body_tampered",
            TamperCase::Whitespace => "whitespace_changed",
            TamperCase::WrongSecret => "wrong_secret",
            TamperCase::Stale => "stale_timestamp",
            TamperCase::Future => "future_timestamp",
            TamperCase::MissingSignature => "missing_signature_header",
            TamperCase::MalformedSignature => "malformed_signature_header",
        }
    }

    pub fn of(reason: &str) -> Option<TamperCase> {
        Self::ALL.iter().copied().find(|c| c.reason() == reason)
    }

    /// The cases a pack must ship: all, less the timestamp ones when it signs none and the
    /// malformed signature for shared tokens.
    pub fn required(timestamp_signed: bool, shared_token: bool) -> Vec<TamperCase> {
        Self::ALL
            .iter()
            .copied()
            .filter(|c| timestamp_signed || !matches!(c, TamperCase::Stale | TamperCase::Future))
            .filter(|c| !shared_token || *c != TamperCase::MalformedSignature)
            .collect()
    }
}

/// One vector, decoded.
#[derive(Debug, Clone)]
pub struct Vector {
    pub name: String,
    pub provider: String,
    /// `shared`, `generated`, … (the file's `set`).
    pub set: String,
    pub secrets: Vec<String>,
    pub now: i64,
    pub method: String,
    pub url: Option<String>,
    /// `config` of the vector (options, and test data such as `expected_response`).
    pub config: BTreeMap<String, Value>,
    /// In order; a repeated header is several entries.
    pub headers: Vec<(String, String)>,
    pub body: Vec<u8>,
    pub valid: bool,
    pub reason: String,
    pub matched_secret_index: Option<usize>,
    /// The ids to dedupe on (one per element of a batch); `None` when the provider gives none.
    pub event_ids: Option<Vec<String>>,
    pub raw: Value,
}

impl Vector {
    /// The endpoint options the vector configures: its `config` minus test data.
    pub fn options(&self) -> BTreeMap<String, String> {
        self.config
            .iter()
            .filter(|(k, _)| k.as_str() != "expected_response")
            .map(|(k, v)| {
                let text = v
                    .as_str()
                    .unwrap_or_else(|| panic!("{}: option {k} is not a string", self.name));
                (k.clone(), text.to_owned())
            })
            .collect()
    }

    /// The handshake answer the vector expects, when it names one.
    pub fn expected_response(&self) -> Option<&Value> {
        self.config.get("expected_response")
    }

    /// The tamper case this invalid vector is, by its reason code.
    pub fn tamper_case(&self) -> Option<TamperCase> {
        (!self.valid)
            .then(|| TamperCase::of(&self.reason))
            .flatten()
    }
}

/// One file's vectors.
#[derive(Debug, Clone)]
pub struct VectorFile {
    pub path: PathBuf,
    pub set: String,
    pub vectors: Vec<Vector>,
}

fn decode(path: &Path, provider: &str) -> VectorFile {
    let text = std::fs::read_to_string(path)
        .unwrap_or_else(|e| panic!("cannot read vector file {}: {e}", path.display()));
    let doc: Value = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    assert_eq!(doc["provider"], provider, "{}: provider", path.display());
    let set = doc["set"].as_str().unwrap_or("shared").to_owned();
    let vectors = doc["vectors"]
        .as_array()
        .unwrap_or_else(|| panic!("{}: no vectors array", path.display()))
        .iter()
        .map(|v| decode_vector(v, provider, &set))
        .collect();
    VectorFile {
        path: path.to_owned(),
        set,
        vectors,
    }
}

fn decode_vector(v: &Value, provider: &str, set: &str) -> Vector {
    let name = v["name"].as_str().expect("vector name").to_owned();
    let mut headers = Vec::new();
    for (k, value) in v["headers"]
        .as_object()
        .unwrap_or_else(|| panic!("{name}: headers"))
    {
        match value {
            Value::String(s) => headers.push((k.clone(), s.clone())),
            Value::Array(items) => {
                for i in items {
                    let s = i.as_str().unwrap_or_else(|| panic!("{name}: header {k}"));
                    headers.push((k.clone(), s.to_owned()));
                }
            }
            other => panic!("{name}: header {k} = {other}"),
        }
    }
    let body = match (v.get("body"), v.get("body_b64")) {
        (Some(Value::String(text)), None) => text.clone().into_bytes(),
        (None, Some(Value::String(b64))) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .unwrap_or_else(|e| panic!("{name}: body_b64: {e}")),
        _ => panic!("{name}: exactly one of body / body_b64"),
    };
    let valid = match v["expect"].as_str() {
        Some("valid") => true,
        Some("invalid") => false,
        other => panic!("{name}: bad expect {other:?}"),
    };
    let event_ids = match &v["event_id"] {
        Value::String(s) => Some(vec![s.clone()]),
        Value::Array(items) => Some(
            items
                .iter()
                .map(|i| i.as_str().expect("event id").to_owned())
                .collect(),
        ),
        _ => None,
    };
    let config = match v.get("config") {
        Some(Value::Object(map)) => map.iter().map(|(k, v)| (k.clone(), v.clone())).collect(),
        _ => BTreeMap::new(),
    };
    Vector {
        provider: provider.to_owned(),
        set: set.to_owned(),
        secrets: v["secrets"]
            .as_array()
            .unwrap_or_else(|| panic!("{name}: secrets"))
            .iter()
            .map(|s| s.as_str().expect("secret").to_owned())
            .collect(),
        now: v["now"].as_i64().unwrap_or_else(|| panic!("{name}: now")),
        method: v["method"].as_str().unwrap_or("POST").to_owned(),
        url: v.get("url").and_then(Value::as_str).map(str::to_owned),
        config,
        headers,
        body,
        valid,
        reason: v["reason"].as_str().unwrap_or_default().to_owned(),
        matched_secret_index: v["matched_secret_index"].as_u64().map(|i| i as usize),
        event_ids,
        raw: v.clone(),
        name,
    }
}

/// The files of `provider`: `<id>.json`, then `<id>.generated.json` when present.
pub fn files(provider: &str) -> Vec<VectorFile> {
    let dir = dir();
    let mut out = vec![decode(&dir.join(format!("{provider}.json")), provider)];
    let generated = dir.join(format!("{provider}.generated.json"));
    if generated.exists() {
        out.push(decode(&generated, provider));
    }
    out
}

/// Every vector of `provider`, in file order (names are unique across its files).
pub fn load(provider: &str) -> Vec<Vector> {
    let vectors: Vec<Vector> = files(provider)
        .into_iter()
        .flat_map(|f| f.vectors)
        .collect();
    let mut names: Vec<&str> = vectors.iter().map(|v| v.name.as_str()).collect();
    names.sort_unstable();
    let before = names.len();
    names.dedup();
    assert_eq!(before, names.len(), "{provider}: vector names repeat");
    vectors
}

/// The providers that have a vector file (`<id>.json`), sorted.
pub fn providers() -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir())
        .expect("testdata/vectors is readable")
        .filter_map(|e| {
            let name = e.ok()?.file_name().into_string().ok()?;
            let id = name.strip_suffix(".json")?;
            (!id.contains('.')).then(|| id.to_owned())
        })
        .collect();
    out.sort();
    out
}
