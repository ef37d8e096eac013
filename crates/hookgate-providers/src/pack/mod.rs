//! Providers as data: a **pack** declares how one provider signs its webhooks, and one engine
//! ([`Pack`]) executes it in the ingress order of the crate root.
//!
//! Code map: `spec` (the JSON form), `syntax` + `compile` + `signature_rules` (validation
//! into [`Pack`]), `engine` (metadata, verification, freshness), `schemes` (the URL- and
//! field-signing schemes), `primitives` (HMAC, Ed25519, ECDSA P-256, RSA, shared tokens,
//! secret formats), `extract` (events, batches, handshakes, answers), `sign` (the provider's
//! side), `api` (request context, options, outcomes), `docs` (listing), `page` (`providers
//! show` and `docs/providers.md`), `provider_page` (`docs/providers/<id>.md`), `citations`
//! (the `citations` and the evidence rule).
//!
//! # Schema (`packs/<id>.json`)
//!
//! Deserialised with `deny_unknown_fields` into [`PackSpec`], then [`PackSpec::compile`]d into a
//! [`Pack`]; errors name the field path (`packs.linear.signature.encoding: unknown
//! encoding "hexx" (expected hex, base64, base64url, base64_hex, text)`).
//!
//! - `id` (the vector file's name), `display_name`, `evidence` (`docs` | `sdk` |
//!   `experimental`), `sources` (https URLs), `notes`, `vectors` (how many known-answer
//!   vectors the pack ships; a test compares it with `testdata/vectors`).
//! - `citations`: per fact (`signature`, `secret_format`, `timestamp`, `event_id`,
//!   `handshake`, `redelivery_horizon`, `content_types`) an https URL of the provider's docs or
//!   `sdk:<registry>/<package>@<version>:<path>`, a file of an official SDK package. `docs` and
//!   `sdk` packs cite every fact they declare (an id location, a timestamp, a handshake and a
//!   horizon only when they have one), `sdk` packs at least one in an SDK file; otherwise the pack is
//!   `experimental`. A key for a fact the pack lacks is refused.
//! - `scheme`, the code that executes the pack ([`Scheme`]): `hmac`, `ed25519`, `ecdsa_p256`,
//!   `rsa_sha256_certificate` (the four sign a template), `shared_token`, `url_params_hmac`,
//!   `fields_hmac`, `jwt_hmac`, `url_nonce_hmac`, `form_payload_hmac`,
//!   `canonical_request_hmac`.
//! - `content_types` (accepted media types; an absent `Content-Type` is accepted, a different
//!   one answers 415) and `send_content_type` (what `sign` sends); `content_encoding`
//!   (`["gzip"]`: such a body is decoded within the body limit, counted after decoding, before
//!   verification; any other `Content-Encoding` answers 415).
//! - `secret_format`: how a configured secret becomes the key — `utf8` (verbatim),
//!   `whsec_base64` (optional `whsec_` prefix, base64-decoded), `hex`, `base64`, and for the
//!   public-key schemes `ed25519_public_hex`, `ed25519_public_base64`, `p256_spki_der_base64`,
//!   `x509_pem` (a pinned certificate; the request never chooses it); `whsec_base64_or_utf8`
//!   (a `whsec_` secret base64-decoded, any other its UTF-8 bytes); `key_id_and_secret`
//!   (`<key id>:<secret>`, with `signature.key_id_header` naming the key a request uses: only
//!   secrets with that key id are tried); `utf8_nfkd` (the secret's Unicode NFKD form as UTF-8:
//!   EasyPost).
//! - `signature`: `headers` (lookup order), `algorithm` (HMAC schemes: `hmac-sha1` |
//!   `hmac-sha256` | `hmac-sha512`), `encoding` (`hex` lower case | `base64` | `base64url` |
//!   `text` for shared tokens and JWTs), `signed` (template schemes: literal text and `{body}` or
//!   `{body_crc32}` or `{body_sha256}` — exactly once —, `{ts}` and `{id}` as sent, `{header:Name}`, `{url}` —
//!   the endpoint's `public_url`, its query replaced by the request's —, `{option:name}`,
//!   `{signature:key}` (an item of a `key_value` header);
//!   parsed once at compile time), and `format`, one of
//!   - `{"plain": {"prefix": "sha256=", "prefix_optional": false, "repeated_header": false,
//!     "each_header": false}}`: the value is one signature; with `repeated_header` every
//!     occurrence is a candidate, with `each_header` every listed header present is one (one
//!     header per active key);
//!   - `{"timestamp_then_signatures": {"separator": ","}}`: `<ts>,<sig>[,<sig>…]`, the
//!     timestamp read as `signature:timestamp`;
//!   - `{"key_value": {"pair_separator": ",", "kv_separator": "=", "signature_keys": ["v1"],
//!     "timestamp_key": "t", "skip_undecodable": false}}`: Stripe-like lists, other keys ignored;
//!   - `{"versioned_list": {"separator": " ", "version_separator": ",", "versions": ["v1"],
//!     "key_id_first": false}}`: Standard Webhooks-like lists, other versions ignored; with
//!     `key_id_first` each entry is `<key id><sep><version><sep><signature>` (Worldpay's
//!     `1/SHA256/…`), every listed version's entry a candidate whatever its key id.
//!   - `signature.query_param` instead of `headers` (the `hmac` scheme): the signature is a
//!     query parameter of the URL the provider calls (PandaDoc), read from the request's
//!     query, else from `public_url`'s; `sign` appends it to the URL.
//!
//!   `required_headers` (`{"Name": "value"}`, any scheme): headers the provider's verifier
//!   requires with exactly that value (Box's signature version and algorithm), else
//!   `invalid_signature`. `url_params_hmac` adds `algorithm_header` (a header whose `algorithm=` item selects the
//!   HMAC) and `body_hash_param` (the query parameter binding a non-form body); `fields_hmac`
//!   adds `fields` (pointers inside the signed object), `field_separator`, `field_signature`
//!   and, without a batch, `object` (candidate pointers of the signed object, `""` = the
//!   document); `jwt_hmac` adds `jwt`: `algorithms` (`HS256` | `HS384` | `HS512`; any other
//!   `alg` is malformed), `issuer` or `issuer_is_key_id` (`iss` names the key of a
//!   `key_id_and_secret` secret; LiveKit), `subject_is_url` (`sub` = the signed URL), `url_hash` and
//!   `body_hash` (`{"claim", "encoding": "hex" | "base64" | "base64url"}`: the SHA-256 of the
//!   URL / body; `body_hash` is required), `required_claims`, `leeway_seconds` (on `exp` and
//!   `nbf`; an expired or not-yet-valid token answers `stale_timestamp`).
//!   `form_payload_hmac` (`pack/form_payload.rs`, Braintree) has no `headers`: it adds
//!   `signature_field` (the form field holding `key_id|hex` pairs joined by `&`) and
//!   `payload_field` (the form field whose decoded text is signed, keyed with the digest of
//!   the private key of a `key_id_and_secret` secret). `canonical_request_hmac`
//!   (`pack/canonical_request.rs`, Contentful) adds `signed_headers_header` (the header
//!   listing the signed headers) and needs a `header:` timestamp; it signs method, path,
//!   the listed headers and the body, and needs `public_url`. The request verifies
//!   if any candidate matches any trusted secret (constant time for shared secrets).
//! - `timestamp` (only when signed): `from` (`header:Name`…, `signature:<timestamp_key>`, or
//!   `json:/pointer` read from the verified body — for `fields_hmac`, one of its fields),
//!   `format` (`unix_seconds` | `unix_millis` | `rfc3339` | `iso8601_utc`, which reads a
//!   date-time without an offset as UTC), `tolerance_seconds` (how old a
//!   timestamp may be; an endpoint may override it) and `max_future_seconds` (optional, at
//!   most the tolerance: a smaller future bound the provider documents). A timestamp further
//!   ahead than the tolerance — or `max_future_seconds` — is refused too, for every pack: this
//!   deliberately departs from SDKs that accept any future timestamp (Stripe's), since a
//!   request signed for the future stays replayable until then. The boundary is accepted;
//!   freshness is checked only after the signature verified.
//! - `event_id`: `from` (alternatives: `header:Name`… or `json:/pointer`…; with `"compose":
//!   true` the JSON fields joined by `:`, `json:/p?` optional), `signed` (checked against what
//!   the scheme covers), `retries_keep_id` (`yes` | `no` | `unknown`), `fallback`
//!   (`signature`: without an id, `sig:` + the verified signature in hex; with an empty `from`
//!   the signature is the only identity, for providers that send none).
//! - `event_type` (`from`, `signed`), `object_id`, `object_version`, `created_at`,
//!   `api_version` (the API version stamp an endpoint's `api_versions` pin checks): locations,
//!   the first present wins (for a batch: inside each item).
//! - `batch`: `items` (pointer of the array, `""` = the body) and `item` (pointer inside each
//!   element): one event per item, all or nothing.
//! - `handshakes` (`handshake.rs`): `method` (`POST` default, `GET`, `HEAD`, `OPTIONS`), `when`
//!   (a location) `equals` a value (without `equals`: is present), `also_present` → answer
//!   from `challenge` (a JSON, query or header location) as `echo_text` (with `nosniff`),
//!   `{"echo_json": {"field"}}`, `{"echo_with_digest": {"echo_field", "digest_field"}}` (hex
//!   HMAC of the challenge with the matched secret), `{"digest": {"field", "prefix",
//!   "encoding"}}`, `{"echo_header": {"header"}}` or `{"constant": {"status", "content_type",
//!   "body"}}`; never stored. Verified first, unless it has a `token` (`{"query", "option"}`: a
//!   GET whose query parameter equals that endpoint option, in constant time; Meta's) or is
//!   `"unsigned": true` (its answer is the proof, or says nothing; recognised by its head
//!   only; a `HEAD` with a constant answer needs no `when`). Unverified rules bound what they
//!   echo with `challenge_format` (`{"max_length", "chars": "alphanumeric" | "token" |
//!   "text"}`).
//! - `answers`: the provider-required answer to accepted events, first rule whose
//!   `when_present` location is present (or without one) wins: `status` (2xx),
//!   `content_type`, `body`, `body_option` (an option that replaces the body).
//! - `options`: `name`, `required`, `format` (`text` | `json`), `description` — checked by
//!   [`Pack::check_options`] when the configuration loads.
//! - `require_body` (empty body → 400 `missing_body`), `form_payload_field` (form deliveries
//!   carry the JSON in that field; otherwise a form body reads as an object of its fields),
//!   `replay_defence` (`body_digest`: required exactly when neither the id nor a timestamp is
//!   signed; `signed_token` with `replay_key`, the signed one-time value whose reuse is a
//!   duplicate), `redelivery_horizon_seconds`.
//! - `reconcile`: `api` (`stripe_events`) and `horizon_seconds`
//!   (how far back it lists): whether and how provider reconciliation asks the provider's API
//!   what it sent ([`ReconcileApi`]).
//!
//! Built-in packs are embedded from `packs/*.json` (every file there, sorted by id; `build.rs`
//! lists them): [`builtin`], [`builtin_packs`].

use std::sync::OnceLock;

mod accessors;
mod api;
mod body_json;
mod canonical_request;
mod citations;
mod compile;
mod docs;
mod docs_terms;
mod ed25519_versions;
mod engine;
mod extract;
mod form_payload;
#[cfg(feature = "fuzzing")]
pub mod fuzzing;
mod generic;
mod handshake;
mod header_option;
mod jwt;
mod key_value;
mod keyed_hash;
mod page;
mod primitives;
mod provider_page;
mod query_signature;
mod reconcile;
mod schemes;
mod sign;
mod signature_rules;
mod signature_versions;
mod spec;
mod syntax;
mod trace;
mod user;

pub(crate) use handshake::{HandshakeAnswer, HandshakeRule};

pub use api::{
    Answer, Delivery, EndpointOptions, OptionError, PackInfo, PublicUrlError, RequestContext,
    SignTarget, SignedDelivery, check_public_url,
};
pub use generic::BodyDecodeError;
pub use page::render_providers_markdown;
pub use primitives::SigningKey;
pub use provider_page::render_provider_pages;
pub use reconcile::{ReconcileApi, ReconcileRule, ReconcileSpec};
pub use trace::{SecretVerdict, Trace, TraceStep};
pub use user::{UserPackSource, compile_user_pack};

pub use spec::{
    AnswerSpec, BatchSpec, ChallengeFormatSpec, CitationsSpec, ConstantAnswerSpec,
    DigestAnswerSpec, EchoHeaderSpec, EchoJsonSpec, EchoWithDigestSpec, EventIdSpec, EventTypeSpec,
    HandshakeAnswerSpec, HandshakeSpec, HandshakeTokenSpec, HashClaimSpec, JwtSpec,
    KeyValueFormatSpec, OptionSpec, PackSpec, PlainFormatSpec, SignatureFormatSpec, SignatureSpec,
    TimestampSpec, TimestampThenSignaturesFormatSpec, VersionedListFormatSpec,
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

/// The code scheme that executes a pack: each is small, named by what it does, and selected
/// by the pack's `scheme`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scheme {
    /// HMAC over a signed-bytes template.
    Hmac,
    /// Ed25519 over a signed-bytes template, verified with a configured public key.
    Ed25519,
    /// ECDSA P-256 / SHA-256 (DER signature) over a template, with a configured SPKI key.
    EcdsaP256,
    /// RSA PKCS#1 v1.5 / SHA-256 over a template, with the public key of a configured (pinned)
    /// certificate; never one fetched from a URL the request names.
    RsaSha256Certificate,
    /// A shared token in a header, compared in constant time (authenticates nothing else).
    SharedToken,
    /// HMAC over the endpoint URL followed by the sorted form parameters (name + value); a
    /// non-form body is bound by its hex SHA-256 in a signed query parameter.
    UrlParamsHmac,
    /// HMAC over selected fields of a signed object (each item of a batch, or an object
    /// embedded in the body), the signature read from the object itself; without such an
    /// object, HMAC over the raw body with the signature in a header.
    FieldsHmac,
    /// A compact JWS (HS256/384/512) in a header whose claims bind the URL and the body hash
    /// and bound its lifetime.
    JwtHmac,
    /// HMAC over the URL with its query sorted, the sorted form parameters and a nonce from a
    /// header (`<url>?<k=v&…>.<name><value>….<nonce>`: Plivo's V3).
    UrlNonceHmac,
    /// HMAC over the text of one form field, the signature `key_id|hex` pairs (joined by `&`)
    /// in another, keyed with the SHA-1 digest of the private key (Braintree's
    /// `bt_signature` / `bt_payload`): `pack/form_payload.rs`.
    FormPayloadHmac,
    /// HMAC over a canonical request — method, path, the headers the request lists as signed
    /// and the body (Contentful): `pack/canonical_request.rs`.
    CanonicalRequestHmac,
}

impl Scheme {
    pub const ALL: &'static [Scheme] = &[
        Scheme::Hmac,
        Scheme::Ed25519,
        Scheme::EcdsaP256,
        Scheme::RsaSha256Certificate,
        Scheme::SharedToken,
        Scheme::UrlParamsHmac,
        Scheme::FieldsHmac,
        Scheme::JwtHmac,
        Scheme::UrlNonceHmac,
        Scheme::FormPayloadHmac,
        Scheme::CanonicalRequestHmac,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Scheme::Hmac => "hmac",
            Scheme::Ed25519 => "ed25519",
            Scheme::EcdsaP256 => "ecdsa_p256",
            Scheme::RsaSha256Certificate => "rsa_sha256_certificate",
            Scheme::SharedToken => "shared_token",
            Scheme::UrlParamsHmac => "url_params_hmac",
            Scheme::FieldsHmac => "fields_hmac",
            Scheme::JwtHmac => "jwt_hmac",
            Scheme::UrlNonceHmac => "url_nonce_hmac",
            Scheme::FormPayloadHmac => "form_payload_hmac",
            Scheme::CanonicalRequestHmac => "canonical_request_hmac",
        }
    }

    /// Whether the configured secret both signs and verifies (so `sign` can produce
    /// deliveries from it).
    pub fn shared_secret(self) -> bool {
        !matches!(
            self,
            Scheme::Ed25519 | Scheme::EcdsaP256 | Scheme::RsaSha256Certificate
        )
    }

    /// Whether the signed bytes follow the pack's `signature.signed` template.
    pub(crate) fn uses_template(self) -> bool {
        matches!(
            self,
            Scheme::Hmac | Scheme::Ed25519 | Scheme::EcdsaP256 | Scheme::RsaSha256Certificate
        )
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

impl RetriesKeepId {
    pub fn as_str(self) -> &'static str {
        match self {
            RetriesKeepId::Yes => "yes",
            RetriesKeepId::No => "no",
            RetriesKeepId::Unknown => "unknown",
        }
    }
}

/// How replays of a captured request under a fresh unsigned id are recognised.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ReplayDefence {
    /// A keyed digest of the verified body, remembered for the idempotency window.
    BodyDigest,
    /// A signed one-time value ([`Delivery::Events`]`.replay_key`): a reuse answers
    /// `duplicate` of the row it first created (Mailgun's token).
    SignedToken,
}

impl ReplayDefence {
    pub fn as_str(self) -> &'static str {
        match self {
            ReplayDefence::BodyDigest => "body_digest",
            ReplayDefence::SignedToken => "signed_token",
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum SecretFormat {
    Utf8,
    WhsecBase64,
    Hex,
    Base64,
    Ed25519PublicHex,
    P256SpkiDerBase64,
    X509Pem,
    /// `whsec_` + base64 is decoded; any other secret is its UTF-8 bytes.
    WhsecBase64OrUtf8,
    Ed25519PublicBase64,
    /// `<key id>:<secret>`: the request names the key id (`signature.key_id_header`).
    KeyIdAndSecret,
    /// The secret's Unicode NFKD normal form, as UTF-8 (EasyPost).
    Utf8Nfkd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Algorithm {
    Sha1,
    Sha256,
    Sha512,
    /// Keyed plain hashes, not HMACs ([`keyed_hash`]): SHA-256(secret ‖ signed).
    PlainSha256,
    /// SHA-1(signed ‖ secret).
    PlainSha1KeyLast,
    /// SHA-256(signed ‖ secret).
    PlainSha256KeyLast,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Encoding {
    Hex,
    /// Hex written in upper case by the sender (Oura); read in any case like `Hex`.
    HexUpper,
    Base64,
    Base64Url,
    /// Base64 of the lower-case hex text of the tag (Solidgate).
    Base64Hex,
    /// The header text itself (shared tokens).
    Text,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TimeFormat {
    UnixSeconds,
    UnixMillis,
    Rfc3339,
    /// ISO 8601 date-time; without an offset it is UTC.
    Iso8601Utc,
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
    /// A parameter of the request's raw query string (percent-decoded).
    Query(&'static str),
}

/// One piece of the signed bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Part {
    Literal(&'static [u8]),
    Body,
    Timestamp,
    Id,
    Header(&'static str),
    /// The endpoint's `public_url` (its query replaced by the request's raw query, if any).
    Url,
    /// A per-endpoint option's value.
    Option(&'static str),
    /// The CRC-32 of the body as an unsigned decimal (PayPal).
    BodyCrc32,
    /// The lower-case hex SHA-256 of the body (Tebex).
    BodySha256,
    /// The body as a JSON string literal, quotes included (Hygraph).
    BodyJson,
    /// An item of the `key_value` signature header that is not the signature (NMI's nonce).
    SignatureItem(&'static str),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum SignatureFormat {
    Plain {
        prefix: Option<&'static str>,
        prefix_optional: bool,
        repeated_header: bool,
        each_header: bool,
        separator: Option<&'static str>,
    },
    KeyValue {
        pair_separator: &'static str,
        kv_separator: &'static str,
        signature_keys: Vec<&'static str>,
        timestamp_key: Option<&'static str>,
        skip_undecodable: bool,
        /// Whole `key=value` sets separated by this (one per secret: Persona's rotation).
        group_separator: Option<&'static str>,
    },
    /// `<ts><sep><sig>[<sep><sig>…]`.
    TimestampThenSignatures { separator: &'static str },
    VersionedList {
        /// Ed25519 versions beside the HMAC ones (`pack/ed25519_versions.rs`).
        ed25519_versions: Vec<&'static str>,
        separator: &'static str,
        version_separator: &'static str,
        versions: Vec<&'static str>,
        /// Entries are `<key id><sep><version><sep><signature>`.
        key_id_first: bool,
    },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct TimestampRule {
    pub(crate) from: Vec<Location>,
    pub(crate) format: TimeFormat,
    /// The past bound (the endpoint may override it), and the future bound unless
    /// `max_future_seconds` is smaller.
    pub(crate) tolerance_seconds: u64,
    /// A smaller future bound the provider documents; it caps an endpoint's override too.
    pub(crate) max_future_seconds: Option<u64>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum IdRule {
    Headers(Vec<&'static str>),
    Json(Vec<&'static str>),
    /// JSON pointers, `true` = optional part.
    Composed(Vec<(&'static str, bool)>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AnswerRule {
    pub(crate) when_present: Option<Location>,
    pub(crate) status: u16,
    pub(crate) content_type: Option<&'static str>,
    pub(crate) body: &'static str,
    pub(crate) body_option: Option<&'static str>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OptionFormat {
    Text,
    Json,
}

/// An option a pack reads from the endpoint's `options = { … }`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OptionRule {
    pub name: &'static str,
    pub required: bool,
    pub format: OptionFormat,
    pub description: &'static str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BatchRule {
    pub(crate) items: &'static str,
    pub(crate) item: Option<&'static str>,
}

/// What identifies an event when no location of `event_id.from` yields an id.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum IdFallback {
    None,
    /// `sig:` + the verified signature in hex.
    Signature,
    /// `sha256:` + the hex SHA-256 of the verified body.
    BodyDigest,
}

/// Where a `shared_token` pack reads its token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenSource {
    /// The signature headers (the default).
    Header,
    /// A query parameter of the request (percent-decoded).
    Query(&'static str),
    /// A string at a JSON pointer of the body.
    BodyJson(&'static str),
    /// A field of a form body.
    BodyForm(&'static str),
    /// The header named by this endpoint option (`signature.header_option`).
    HeaderOption(&'static str),
}

/// How a shared token is written where it is found.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum TokenForm {
    Plain,
    /// `Bearer <token>` (the scheme name in any case).
    Bearer,
    /// `Basic base64(user:password)`, compared decoded with the secret `user:password`.
    Basic,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct FieldsRule {
    pub(crate) fields: Vec<&'static str>,
    pub(crate) separator: &'static str,
    pub(crate) signature: &'static str,
    pub(crate) object: Vec<&'static str>,
}

/// A compiled pack: everything the engine needs to receive one provider's webhooks.
#[derive(Debug)]
pub struct Pack {
    id: &'static str,
    vectors: u32,
    notes: Option<String>,
    options: Vec<OptionRule>,
    batch: Option<BatchRule>,
    answers: Vec<AnswerRule>,
    replay_key: Vec<Location>,
    fields: Option<FieldsRule>,
    algorithm_header: Option<&'static str>,
    body_hash_param: Option<&'static str>,
    id_fallback: IdFallback,
    token_source: TokenSource,
    token_form: TokenForm,
    /// The pack declares `content_encoding = ["gzip"]`.
    gzip: bool,
    /// Defined in the configuration (`[[provider_packs]]`, `provider_packs_dir`).
    user_defined: bool,
    methods: Vec<http::Method>,
    display_name: &'static str,
    scheme: Scheme,
    evidence: Evidence,
    sources: Vec<String>,
    /// Fact → where it is confirmed (`citations` of the pack file).
    citations: std::collections::BTreeMap<&'static str, String>,
    content_types: &'static [&'static str],
    send_content_type: &'static str,
    secret_format: SecretFormat,
    signature_header_names: &'static [&'static str],
    format: SignatureFormat,
    algorithm: Algorithm,
    /// The endpoint option that picks another algorithm (Cloudinary's `signature_algorithm`).
    algorithm_option: Option<keyed_hash::AlgorithmOption>,
    /// Older signature generations chosen by a version header (HubSpot v1/v2).
    signature_versions: Option<Box<signature_versions::SignatureVersions>>,
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
    api_version: Vec<Location>,
    handshakes: Vec<HandshakeRule>,
    require_body: bool,
    form_payload_field: Option<&'static str>,
    replay_defence: Option<ReplayDefence>,
    redelivery_horizon_seconds: Option<u64>,
    /// How the provider's API is reconciled (`reconcile` in the pack).
    reconcile: Option<reconcile::ReconcileRule>,
    /// `jwt_hmac`: what the token must carry.
    jwt: Option<jwt::JwtRule>,
    /// `url_nonce_hmac`: the header carrying the signed nonce.
    nonce_header: Option<&'static str>,
    /// `form_payload_hmac`: the form fields carrying the signature pairs and the signed text.
    form_payload: Option<form_payload::FormPayload>,
    /// `canonical_request_hmac`: the header listing the signed headers.
    signed_headers_header: Option<&'static str>,
    /// The header naming which configured key signed (`key_id_and_secret` secrets).
    key_id_header: Option<&'static str>,
    /// Signed headers: a repetition answers `duplicated_signature`.
    duplicate_checked_headers: &'static [&'static str],
    /// `signature.required_headers`: (lower-case name, exact value).
    required_headers: &'static [(&'static str, &'static str)],
}

/// The built-in pack files, by id: every `packs/*.json`, sorted (generated by `build.rs`).
const BUILTIN_FILES: &[(&str, &str)] = include!(concat!(env!("OUT_DIR"), "/builtin_packs.rs"));

/// Parses and compiles one built-in pack file (tests compile every one of them).
pub fn compile_builtin(id: &str) -> Option<Result<Pack, PackError>> {
    let (_, text) = BUILTIN_FILES.iter().find(|(file, _)| *file == id)?;
    let label = format!("packs.{id}");
    Some(PackSpec::from_json(&label, text).and_then(|spec| {
        if spec.id == id {
            spec.compile_at(&label)
        } else {
            Err(PackError::new(
                format!("{label}.id"),
                format!("{:?} differs from the file name", spec.id),
            ))
        }
    }))
}

/// Every built-in pack, compiled once per process.
pub fn builtin_packs() -> &'static [Pack] {
    static PACKS: OnceLock<Vec<Pack>> = OnceLock::new();
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
pub fn builtin(id: &str) -> Option<&'static Pack> {
    builtin_packs().iter().find(|p| p.id == id)
}
