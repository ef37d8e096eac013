//! Sans-I/O provider packs: one engine, a declarative pack per provider.
//!
//! A [`pack::Pack`] (compiled from `packs/<id>.json`, see [`pack`]) says how one provider signs
//! its webhooks; a handful of named code schemes ([`pack::Scheme`]) verify what data cannot
//! express. The binary drives a pack in the ingress order (ARCHITECTURE.md, "One request"):
//!
//! 0. configuration: [`pack::builtin`]`(id)`, [`pack::Pack::decode_secret`] per secret,
//!    [`pack::Pack::check_options`] (unknown / missing / malformed option → error naming the
//!    key) and [`pack::Pack::check_public_url`] at start-up;
//! 1. [`pack::Pack::accepts_method`] (405: POST, plus the methods of declared handshakes) and
//!    [`pack::Pack::accepts_content_type`] (415);
//! 2. [`pack::Pack::parse_metadata`] on a [`pack::RequestContext`] — method, headers, raw
//!    query, the endpoint's `public_url` and options — before the body is read (400:
//!    missing / duplicated / malformed);
//! 3. the binary reads the body with a hard limit (413);
//! 4. [`pack::Pack::verify`] on the exact raw bytes against every trusted secret (401
//!    `invalid_signature`; constant time for shared secrets), then freshness of the signed
//!    timestamp (401 `stale_timestamp`);
//! 5. [`pack::Pack::extract`] parses the *verified* bytes into a [`pack::Delivery`]: a
//!    handshake [`pack::Answer`] (never stored), or one or more [`Envelope`]s (a batch: one per
//!    item, each with its own id, all or nothing) with an optional provider-required answer
//!    and, for [`pack::ReplayDefence::SignedToken`] packs, the signed one-time `replay_key`
//!    (400 `missing_event_id`).
//!
//! Packs perform no I/O and read no clock: `now` is an argument.
//! [`pack::Pack::sign_delivery`] produces what the provider would send (`hookgate send`, the
//! load generator, tests); [`pack::Pack::info`] and [`pack::render_providers_markdown`] describe
//! the packs (`hookgate providers list/show`, `docs/providers.md`).

use std::fmt;

use zeroize::Zeroizing;

pub use hookgate_core::Envelope;

mod common;
pub mod pack;

/// Decoded key material of one secret version. Never printed.
pub struct SecretMaterial {
    bytes: Zeroizing<Vec<u8>>,
    /// An Ed25519 public key beside a pack's shared secrets (Standard Webhooks `whpk_`): it
    /// verifies the pack's Ed25519 signature versions only, and is never used as an HMAC key.
    ed25519_public: bool,
}

impl SecretMaterial {
    pub fn new(bytes: Vec<u8>) -> Self {
        Self {
            bytes: Zeroizing::new(bytes),
            ed25519_public: false,
        }
    }
    /// A 32-byte Ed25519 public key configured beside shared secrets.
    pub(crate) fn ed25519_public(bytes: Vec<u8>) -> Self {
        Self {
            bytes: Zeroizing::new(bytes),
            ed25519_public: true,
        }
    }
    pub fn expose(&self) -> &[u8] {
        &self.bytes
    }
    /// Whether this is an Ed25519 public key (`whpk_`) rather than a shared secret.
    pub fn is_ed25519_public(&self) -> bool {
        self.ed25519_public
    }
}

impl fmt::Debug for SecretMaterial {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SecretMaterial(<redacted>)")
    }
}

/// A secret version the endpoint currently trusts (retired and expired ones are never passed).
#[derive(Debug, Clone, Copy)]
pub struct TrustedSecret<'a> {
    pub version: &'a str,
    pub key: &'a SecretMaterial,
}

/// Why a secret string could not be turned into key material. Never carries the secret.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SecretFormatError {
    #[error("secret is empty")]
    Empty,
    #[error("secret must be {expected}")]
    Malformed { expected: &'static str },
}

/// Reason codes for 400 responses; these are the `reason` strings of the JSON body.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BadRequestReason {
    MissingSignature,
    DuplicatedSignature,
    MalformedSignature,
    MissingTimestamp,
    MalformedTimestamp,
    MissingId,
    DuplicatedHeader,
    MissingBody,
    MissingEventId,
    UnparseableEnvelope,
}

impl BadRequestReason {
    pub fn as_str(self) -> &'static str {
        match self {
            BadRequestReason::MissingSignature => "missing_signature",
            BadRequestReason::DuplicatedSignature => "duplicated_signature",
            BadRequestReason::MalformedSignature => "malformed_signature",
            BadRequestReason::MissingTimestamp => "missing_timestamp",
            BadRequestReason::MalformedTimestamp => "malformed_timestamp",
            BadRequestReason::MissingId => "missing_id",
            BadRequestReason::DuplicatedHeader => "duplicated_header",
            BadRequestReason::MissingBody => "missing_body",
            BadRequestReason::MissingEventId => "missing_event_id",
            BadRequestReason::UnparseableEnvelope => "unparseable_envelope",
        }
    }
}

/// Why a pack refused a request. Maps 1:1 onto rows of the response table
/// (`docs/receiving.md`).
/// Carries no input bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// 415 `unsupported_media_type`
    #[error("unsupported media type")]
    UnsupportedMediaType,
    /// 400 `bad_request` with a reason
    #[error("bad request: {}", .0.as_str())]
    BadRequest(BadRequestReason),
    /// 401 `invalid_signature`: no trusted secret version matched
    #[error("invalid signature")]
    InvalidSignature,
    /// 401 `stale_timestamp`: the signed timestamp is outside the tolerance (past or future)
    #[error("stale timestamp")]
    StaleTimestamp,
}

/// Signature metadata parsed from headers alone, before the body is read. Its `Debug` output
/// shows how many signatures there are, never their bytes.
#[derive(Clone, Default)]
pub struct Metadata {
    /// Candidate signatures, decoded to raw bytes, for the scheme version we implement.
    pub signatures: Vec<Vec<u8>>,
    /// Ed25519 candidates of a versioned list's Ed25519 versions (Standard Webhooks `v1a`),
    /// beside the HMAC ones in `signatures`.
    pub ed25519_signatures: Vec<Vec<u8>>,
    /// The signed timestamp as sent (its exact text is part of the signed bytes).
    pub timestamp_text: Option<String>,
    /// The signed timestamp, unix seconds.
    pub timestamp: Option<i64>,
    /// Message id from a header, where the scheme has one (signed for Standard Webhooks/Svix).
    pub header_id: Option<String>,
    /// Event type from a header, where the provider sends one (GitHub, Shopify).
    pub header_event_type: Option<String>,
    /// The signed timestamp in milliseconds (packs with millisecond timestamps keep the
    /// precision for freshness).
    pub timestamp_millis: Option<i64>,
    /// Values of the headers a pack's signed-bytes template names (`{header:Name}`), in
    /// template order.
    pub template_values: Vec<String>,
}

impl fmt::Debug for Metadata {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Metadata")
            .field(
                "signatures",
                &format_args!("<{} redacted>", self.signatures.len()),
            )
            .field(
                "ed25519_signatures",
                &format_args!("<{} redacted>", self.ed25519_signatures.len()),
            )
            .field("timestamp_text", &self.timestamp_text)
            .field("timestamp", &self.timestamp)
            .field("header_id", &self.header_id)
            .field("header_event_type", &self.header_event_type)
            .field("timestamp_millis", &self.timestamp_millis)
            .field("template_values", &self.template_values.len())
            .finish()
    }
}

/// The result of a successful verification.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verified {
    /// Index into the trusted secrets passed to [`pack::Pack::verify`] of the first that matched.
    pub matched_secret_index: usize,
}

/// Where a provider puts its logical event id; `hookgate send` uses it to place `--event-id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdLocation {
    /// A header (name in lower case).
    Header(&'static str),
    /// A JSON pointer into the body.
    BodyPointer(&'static str),
    /// Nowhere: the provider sends no id and the pack identifies a delivery by its verified
    /// signature (a different body is a different event).
    Signature,
    /// Nowhere: the id is the digest of the verified body (`event_id.fallback = "body_digest"`
    /// with no location), so distinct bodies are distinct events.
    BodyDigest,
}

/// What `sign` needs to produce a provider-identical delivery.
#[derive(Debug, Clone, Copy)]
pub struct SignRequest<'a> {
    pub event_id: &'a str,
    pub event_type: Option<&'a str>,
    /// Attempt timestamp, unix seconds (ignored by schemes that sign none).
    pub timestamp: i64,
    pub body: &'a [u8],
}
