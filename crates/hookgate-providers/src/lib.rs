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
//!
//! Transitional: [`ProviderKind`] and the [`Adapter`] trait are the interface the binary used
//! before packs; they now map onto the built-in packs of the six original providers and go
//! away once the binary calls [`pack::Pack`] directly.

use std::fmt;

use http::{HeaderMap, HeaderName, HeaderValue};
use zeroize::Zeroizing;

pub use hookgate_core::Envelope;

mod common;
mod compat;
pub mod pack;

/// Transitional: the six providers the binary knew before packs, each now a built-in pack.
/// The binary switches to [`pack::builtin`] ids; then this goes away.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ProviderKind {
    Stripe,
    Github,
    StandardWebhooks,
    Svix,
    Shopify,
    Slack,
}

impl ProviderKind {
    pub const ALL: &'static [ProviderKind] = &[
        ProviderKind::Stripe,
        ProviderKind::Github,
        ProviderKind::StandardWebhooks,
        ProviderKind::Svix,
        ProviderKind::Shopify,
        ProviderKind::Slack,
    ];

    pub fn id(self) -> &'static str {
        match self {
            ProviderKind::Stripe => "stripe",
            ProviderKind::Github => "github",
            ProviderKind::StandardWebhooks => "standard_webhooks",
            ProviderKind::Svix => "svix",
            ProviderKind::Shopify => "shopify",
            ProviderKind::Slack => "slack",
        }
    }

    pub fn from_id(id: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|p| p.id() == id)
    }

    /// The built-in pack of this provider.
    pub fn pack(self) -> &'static pack::Pack {
        pack::builtin(self.id()).expect("every ProviderKind has a built-in pack")
    }

    /// The pack of this provider behind the transitional [`Adapter`] interface.
    pub fn adapter(self) -> &'static dyn Adapter {
        self.pack()
    }
}

/// Decoded key material of one secret version. Never printed.
pub struct SecretMaterial(Zeroizing<Vec<u8>>);

impl SecretMaterial {
    pub fn new(bytes: Vec<u8>) -> Self {
        Self(Zeroizing::new(bytes))
    }
    pub fn expose(&self) -> &[u8] {
        &self.0
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

/// Why an adapter refused a request. Maps 1:1 onto rows of the response table
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
    /// Index into the trusted secrets passed to [`Adapter::verify`] of the first that matched.
    pub matched_secret_index: usize,
}

/// What the verified body turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Extracted {
    /// A logical event to commit.
    Event(Envelope),
    /// A provider handshake: answer 200 with this body; nothing is stored.
    Handshake {
        content_type: &'static str,
        body: Vec<u8>,
    },
}

/// Where a provider puts its logical event id; `hookgate send` uses it to place `--event-id`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdLocation {
    /// A header (name in lower case).
    Header(&'static str),
    /// A JSON pointer into the body.
    BodyPointer(&'static str),
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

/// Transitional: the per-provider interface the binary used before packs (implemented by
/// [`pack::Pack`] for requests without query, URL or options). New code calls [`pack::Pack`].
pub trait Adapter: Send + Sync + 'static {
    /// The provider id used in configuration (the vector file's name).
    fn id(&self) -> &'static str;

    /// Default freshness window in seconds, `None` when the scheme signs no timestamp.
    fn default_tolerance_seconds(&self) -> Option<u64>;

    /// Content type sent by `sign`.
    fn default_content_type(&self) -> &'static str;

    /// Whether the request's content type (the header value, if any) is one this provider sends.
    fn accepts_content_type(&self, content_type: Option<&HeaderValue>) -> bool;

    /// Turns a configured secret string into key material, in the provider's own format.
    fn decode_secret(&self, secret: &str) -> Result<SecretMaterial, SecretFormatError>;

    /// Names of the headers that carry signature metadata; the binary refuses a request where
    /// any of them occurs more than once (400 `duplicated_signature`).
    fn signature_headers(&self) -> &'static [&'static str];

    /// Parses signature metadata from headers only. Does not look at the body.
    fn parse_metadata(&self, headers: &HeaderMap) -> Result<Metadata, Rejection>;

    /// Verifies the exact raw body: signature against every trusted secret in constant time
    /// (401 `invalid_signature`), then the signed timestamp against `tolerance_seconds`
    /// around `now` (401 `stale_timestamp`), in that order. For a scheme that signs a
    /// timestamp, `None` means [`Adapter::default_tolerance_seconds`] (freshness is never
    /// skipped); schemes without a signed timestamp ignore it.
    fn verify(
        &self,
        metadata: &Metadata,
        body: &[u8],
        secrets: &[TrustedSecret<'_>],
        now: i64,
        tolerance_seconds: Option<u64>,
    ) -> Result<Verified, Rejection>;

    /// Parses the *verified* body: the envelope, or a handshake answer.
    fn extract(
        &self,
        metadata: &Metadata,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<Extracted, Rejection>;

    /// Like [`Adapter::extract`], with the key of the secret that verified the request, for
    /// handshakes whose answer proves the secret (Zoom's `encryptedToken`). Adapters without
    /// such a handshake need not override it.
    fn extract_with_key(
        &self,
        metadata: &Metadata,
        headers: &HeaderMap,
        body: &[u8],
        key: &SecretMaterial,
    ) -> Result<Extracted, Rejection> {
        let _ = key;
        self.extract(metadata, headers, body)
    }

    /// Where this provider puts its logical event id.
    fn id_location(&self) -> IdLocation;

    /// Headers (signature, id, timestamp, type) the provider would send with `body`.
    fn sign(
        &self,
        key: &SecretMaterial,
        request: &SignRequest<'_>,
    ) -> Vec<(HeaderName, HeaderValue)>;
}
