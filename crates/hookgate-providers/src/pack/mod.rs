//! Providers as data: a **pack** declares how one provider signs its webhooks, and one engine
//! ([`PackAdapter`], an [`crate::Adapter`]) executes it in the ingress order of the crate root.
//!
//! # Schema (`packs/<id>.json`)
//!
//! Deserialised with `deny_unknown_fields` into [`PackSpec`], then [`PackSpec::compile`]d into a
//! [`PackAdapter`]; errors name the field path (`packs.linear.signature.encoding: unknown
//! encoding "hexx" (expected hex, base64, base64url)`).
//!
//! - `id` (the vector file's name), `display_name`, `evidence` (`docs` | `sdk` |
//!   `experimental`), `sources` (https URLs), `notes`.
//! - `scheme`: the code that executes the pack. `hmac` (HMAC over a template) is the only one
//!   so far; public-key and field-selecting schemes are further variants of [`Scheme`].
//! - `content_types` (accepted media types; an absent `Content-Type` is accepted, a different
//!   one answers 415) and `send_content_type` (what `sign` sends).
//! - `secret_format`: how a configured secret becomes the key — `utf8` (verbatim),
//!   `whsec_base64` (optional `whsec_` prefix, base64-decoded), `hex`, `base64`.
//! - `signature`: `headers` (lookup order), `algorithm` (`hmac-sha1` | `hmac-sha256` |
//!   `hmac-sha512`), `encoding` (`hex` lower case | `base64` | `base64url`), `signed` (the
//!   signed-bytes template: literal text and `{body}` — exactly once —, `{ts}` and `{id}` as
//!   sent, `{header:Name}`; parsed once at compile time), and `format`, one of
//!   - `{"plain": {"prefix": "sha256=", "prefix_optional": false, "repeated_header": false}}`:
//!     the value is one signature; with `repeated_header` every occurrence is a candidate;
//!   - `{"key_value": {"pair_separator": ",", "kv_separator": "=", "signature_keys": ["v1"],
//!     "timestamp_key": "t", "skip_undecodable": false}}`: Stripe-like lists, other keys ignored;
//!   - `{"versioned_list": {"separator": " ", "version_separator": ",", "versions": ["v1"]}}`:
//!     Standard Webhooks-like lists, other versions ignored.
//!
//!   The request verifies if any candidate matches any trusted secret (constant time).
//! - `timestamp` (only when signed): `from` (`header:Name`…, `signature:<timestamp_key>`, or
//!   `json:/pointer` read from the verified body), `format` (`unix_seconds` | `unix_millis` |
//!   `rfc3339`), `tolerance_seconds`, `window` (`past_only`: only stale ones are refused, as the
//!   provider's SDK does; `both`: a future timestamp beyond the tolerance is refused too). The
//!   boundary is accepted; freshness is checked only after the signature verified.
//! - `event_id`: `from` (alternatives: `header:Name`… or `json:/pointer`…; with `"compose":
//!   true` the signed JSON fields joined by `:`, `json:/p?` optional), `signed` (checked against
//!   the template), `retries_keep_id` (`yes` | `no` | `unknown`).
//! - `event_type` (`from`, `signed`), `object_id`, `object_version`, `created_at`: locations,
//!   the first present wins.
//! - `handshakes`: `when` (a location) `equals` a value → answer from `challenge` (a JSON
//!   location) as `echo_text`, `{"echo_json": {"field"}}` or `{"echo_with_digest":
//!   {"echo_field", "digest_field"}}` (hex HMAC of the challenge with the matched secret).
//!   Answered only after verification; never stored.
//! - `require_body` (empty body → 400 `missing_body`), `form_payload_field` (form deliveries
//!   carry the JSON in that field), `replay_defence` (`body_digest`: required exactly when
//!   neither the id nor a timestamp is signed), `redelivery_horizon_seconds`.
//!
//! Built-in packs are embedded from `packs/*.json`: [`builtin`], [`builtin_packs`].

use std::sync::OnceLock;

mod compile;
mod engine;
mod spec;

pub use spec::{
    EchoJsonSpec, EchoWithDigestSpec, EventIdSpec, EventTypeSpec, HandshakeAnswerSpec,
    HandshakeSpec, KeyValueFormatSpec, PackSpec, PlainFormatSpec, SignatureFormatSpec,
    SignatureSpec, TimestampSpec, VersionedListFormatSpec,
};

/// A pack that failed to parse or validate: the field path and what is wrong. Never carries
/// secrets (packs hold none).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{path}: {message}")]
pub struct PackError {
    pub path: String,
    pub message: String,
}

impl PackError {
    pub(crate) fn new(path: String, message: String) -> Self {
        Self { path, message }
    }
}

/// The code scheme that executes a pack. Public-key and field-selecting schemes are further
/// variants when they are implemented.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// HMAC over a signed-bytes template.
    Hmac,
}

impl Scheme {
    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Hmac => "hmac",
        }
    }
}

/// Where a pack's facts come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Evidence {
    Docs,
    Sdk,
    Experimental,
}

impl Evidence {
    pub fn as_str(self) -> &'static str {
        match self {
            Evidence::Docs => "docs",
            Evidence::Sdk => "sdk",
            Evidence::Experimental => "experimental",
        }
    }
}

/// Whether the provider's retries and manual redeliveries keep the event id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RetriesKeepId {
    Yes,
    No,
    Unknown,
}

/// How replays of a captured request under a fresh unsigned id are recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayDefence {
    /// A keyed digest of the verified body, remembered for the idempotency window.
    BodyDigest,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SecretFormat {
    Utf8,
    WhsecBase64,
    Hex,
    Base64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Algorithm {
    Sha1,
    Sha256,
    Sha512,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    Hex,
    Base64,
    Base64Url,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimeFormat {
    UnixSeconds,
    UnixMillis,
    Rfc3339,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Window {
    PastOnly,
    Both,
}

/// Where a value lives in a request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Location {
    /// A header, lower case.
    Header(&'static str),
    /// A JSON pointer into the (verified) body; `optional` only in composed ids.
    Json {
        pointer: &'static str,
        optional: bool,
    },
    /// An item of a `key_value` signature header.
    SignatureParam(&'static str),
}

/// One piece of the signed bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    Literal(&'static [u8]),
    Body,
    Timestamp,
    Id,
    Header(&'static str),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SignatureFormat {
    Plain {
        prefix: Option<&'static str>,
        prefix_optional: bool,
        repeated_header: bool,
    },
    KeyValue {
        pair_separator: &'static str,
        kv_separator: &'static str,
        signature_keys: Vec<&'static str>,
        timestamp_key: Option<&'static str>,
        skip_undecodable: bool,
    },
    VersionedList {
        separator: &'static str,
        version_separator: &'static str,
        versions: Vec<&'static str>,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TimestampRule {
    pub(crate) from: Vec<Location>,
    pub(crate) format: TimeFormat,
    pub(crate) tolerance_seconds: u64,
    pub(crate) window: Window,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IdRule {
    Headers(Vec<&'static str>),
    Json(Vec<&'static str>),
    /// JSON pointers, `true` = optional part.
    Composed(Vec<(&'static str, bool)>),
}

// The names follow the schema's `answer` values.
#[allow(clippy::enum_variant_names)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HandshakeAnswer {
    EchoText,
    EchoJson {
        field: &'static str,
    },
    EchoWithDigest {
        echo_field: &'static str,
        digest_field: &'static str,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HandshakeRule {
    pub(crate) when: Location,
    pub(crate) equals: &'static str,
    pub(crate) challenge: &'static str,
    pub(crate) answer: HandshakeAnswer,
}

/// A compiled pack: the [`crate::Adapter`] for one provider.
#[derive(Debug)]
pub struct PackAdapter {
    id: &'static str,
    display_name: &'static str,
    scheme: Scheme,
    evidence: Evidence,
    sources: Vec<String>,
    content_types: &'static [&'static str],
    send_content_type: &'static str,
    secret_format: SecretFormat,
    signature_header_names: &'static [&'static str],
    format: SignatureFormat,
    algorithm: Algorithm,
    encoding: Encoding,
    template: Vec<Part>,
    timestamp: Option<TimestampRule>,
    event_id: IdRule,
    id_signed: bool,
    retries_keep_id: RetriesKeepId,
    event_type: Vec<Location>,
    object_id: Vec<Location>,
    object_version: Vec<Location>,
    created_at: Vec<Location>,
    handshakes: Vec<HandshakeRule>,
    require_body: bool,
    form_payload_field: Option<&'static str>,
    replay_defence: Option<ReplayDefence>,
    redelivery_horizon_seconds: Option<u64>,
    /// Signed headers: a repetition answers `duplicated_signature`.
    duplicate_checked_headers: &'static [&'static str],
}

impl PackAdapter {
    pub fn display_name(&self) -> &'static str {
        self.display_name
    }
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }
    pub fn evidence(&self) -> Evidence {
        self.evidence
    }
    pub fn sources(&self) -> &[String] {
        &self.sources
    }
    /// Whether the signature covers the event id.
    pub fn id_signed(&self) -> bool {
        self.id_signed
    }
    /// Whether a timestamp is signed (and so freshness is checked).
    pub fn timestamp_signed(&self) -> bool {
        self.timestamp.is_some()
    }
    pub fn retries_keep_id(&self) -> RetriesKeepId {
        self.retries_keep_id
    }
    pub fn replay_defence(&self) -> Option<ReplayDefence> {
        self.replay_defence
    }
    pub fn redelivery_horizon_seconds(&self) -> Option<u64> {
        self.redelivery_horizon_seconds
    }
    /// Whether `sign` can produce deliveries (a shared secret signs and verifies).
    pub fn has_shared_secret(&self) -> bool {
        matches!(self.scheme, Scheme::Hmac)
    }
}

/// The built-in pack files, by id.
const BUILTIN_FILES: &[(&str, &str)] = &[
    ("stripe", include_str!("../../packs/stripe.json")),
    ("github", include_str!("../../packs/github.json")),
    (
        "standard_webhooks",
        include_str!("../../packs/standard_webhooks.json"),
    ),
    ("svix", include_str!("../../packs/svix.json")),
    ("shopify", include_str!("../../packs/shopify.json")),
    ("slack", include_str!("../../packs/slack.json")),
    ("bitbucket", include_str!("../../packs/bitbucket.json")),
    ("intercom", include_str!("../../packs/intercom.json")),
    (
        "lemonsqueezy",
        include_str!("../../packs/lemonsqueezy.json"),
    ),
    ("linear", include_str!("../../packs/linear.json")),
    ("mollie", include_str!("../../packs/mollie.json")),
    ("paddle", include_str!("../../packs/paddle.json")),
    ("razorpay", include_str!("../../packs/razorpay.json")),
    ("sentry", include_str!("../../packs/sentry.json")),
    ("twitch", include_str!("../../packs/twitch.json")),
    ("zoom", include_str!("../../packs/zoom.json")),
];

/// Parses and compiles one built-in pack file (tests compile every one of them).
pub fn compile_builtin(id: &str) -> Option<Result<PackAdapter, PackError>> {
    let (_, text) = BUILTIN_FILES.iter().find(|(file, _)| *file == id)?;
    let label = format!("packs.{id}");
    Some(PackSpec::from_json(&label, text).and_then(|spec| {
        if spec.id == id {
            spec.compile()
        } else {
            Err(PackError::new(
                format!("{label}.id"),
                format!("{:?} differs from the file name", spec.id),
            ))
        }
    }))
}

/// Every built-in pack, compiled once per process.
pub fn builtin_packs() -> &'static [PackAdapter] {
    static PACKS: OnceLock<Vec<PackAdapter>> = OnceLock::new();
    PACKS.get_or_init(|| {
        BUILTIN_FILES
            .iter()
            .map(|(id, _)| match compile_builtin(id) {
                Some(Ok(pack)) => pack,
                // The files are part of the build and every one is compiled by the tests.
                Some(Err(e)) => panic!("built-in pack does not compile: {e}"),
                None => unreachable!("listed above"),
            })
            .collect()
    })
}

/// The built-in pack with this id.
pub fn builtin(id: &str) -> Option<&'static PackAdapter> {
    builtin_packs().iter().find(|p| p.id == id)
}
