//! The read-only accessors of a compiled [`Pack`] (what listings, the binary and tests ask).

use super::{
    Evidence, IdRule, OptionRule, Pack, Part, ReplayDefence, RetriesKeepId, Scheme, SigningKey,
};

impl Pack {
    /// The provider id used in configuration (the vector file's name).
    pub fn id(&self) -> &'static str {
        self.id
    }
    /// The `Content-Type` that `sign` sends.
    pub fn send_content_type(&self) -> &'static str {
        self.send_content_type
    }
    pub fn vectors(&self) -> u32 {
        self.vectors
    }
    pub fn notes(&self) -> Option<&str> {
        self.notes.as_deref()
    }
    /// Whether the provider stamps an API version this pack reads (`api_version` locations):
    /// only then can an endpoint pin `api_versions`.
    pub fn reads_api_version(&self) -> bool {
        !self.api_version.is_empty()
    }
    /// The options this pack reads from an endpoint's `options`.
    pub fn options(&self) -> &[OptionRule] {
        &self.options
    }
    /// Whether the signed bytes include the endpoint URL (`public_url` is then required).
    pub fn needs_public_url(&self) -> bool {
        matches!(
            self.scheme,
            Scheme::UrlParamsHmac | Scheme::UrlNonceHmac | Scheme::CanonicalRequestHmac
        ) || self.template.contains(&Part::Url)
            || self
                .jwt
                .as_ref()
                .is_some_and(|j| j.subject_is_url || j.url_hash.is_some())
    }
    /// Whether one request may carry several events.
    pub fn batched(&self) -> bool {
        self.batch.is_some()
    }
    /// Whether the event id is composed of several signed fields (no single place holds it).
    pub fn id_composed(&self) -> bool {
        matches!(self.event_id, IdRule::Composed(_))
    }
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
    /// Fact (`signature`, `secret_format`, `timestamp`, `event_id`, `handshake`,
    /// `redelivery_horizon`, `content_types`) → its citation.
    pub fn citations(&self) -> &std::collections::BTreeMap<&'static str, String> {
        &self.citations
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
    /// Parses the private key of a public-key pack, for [`Pack::sign_with_private_key`].
    pub fn decode_signing_key(&self, text: &str) -> Result<SigningKey, crate::SecretFormatError> {
        if let Some(key) = self.decode_ed25519_signing(text) {
            return key;
        }
        SigningKey::decode(self.scheme, text)
    }
    /// Whether `sign` can produce deliveries (a shared secret signs and verifies).
    pub fn has_shared_secret(&self) -> bool {
        self.scheme.shared_secret()
    }
    /// Whether the pack comes from the configuration rather than the binary.
    pub fn user_defined(&self) -> bool {
        self.user_defined
    }
    /// The `Content-Encoding`s the pack accepts besides none (`gzip`).
    pub fn content_encodings(&self) -> &'static [&'static str] {
        if self.gzip { &["gzip"] } else { &[] }
    }
}
