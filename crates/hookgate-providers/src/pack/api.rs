//! What the binary passes to a pack and what it gets back: the request context (method,
//! headers, raw query, the endpoint's `public_url` and validated `options`), the outcome of a
//! verified delivery (a handshake answer, or events with an optional provider-required
//! answer), what `sign` produces, and the listing of a pack for `providers list/show`.

use std::collections::BTreeMap;

use http::{HeaderMap, Method};
use serde::Serialize;

use super::{OptionFormat, Pack};
use crate::Envelope;

/// A pack's per-endpoint options after [`Pack::check_options`]: only declared keys, every
/// required one present, every value well formed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EndpointOptions(BTreeMap<String, String>);

impl EndpointOptions {
    /// No options (packs that declare none, tests).
    pub fn none() -> &'static EndpointOptions {
        static NONE: EndpointOptions = EndpointOptions(BTreeMap::new());
        &NONE
    }
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(String::as_str)
    }
}

/// Why an endpoint's `options` do not fit its pack; names the key, never echoes a value.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OptionError {
    #[error("options.{key}: unknown option for provider {provider} (known: {known})")]
    Unknown {
        provider: &'static str,
        key: String,
        known: String,
    },
    #[error("options.{key}: required by provider {provider}")]
    Missing { provider: &'static str, key: String },
    #[error("options.{key}: {expected}")]
    Malformed { key: String, expected: &'static str },
}

/// Why a `public_url` cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PublicUrlError {
    #[error("public_url is required by provider {0} (it signs the URL)")]
    Missing(&'static str),
    #[error("public_url must be an absolute http:// or https:// URL with a host")]
    Malformed,
}

/// Checks that `url` is an absolute `http://` or `https://` URL with a host; it is then used
/// byte for byte.
pub fn check_public_url(url: &str) -> Result<(), PublicUrlError> {
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"))
        .ok_or(PublicUrlError::Malformed)?;
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    let printable = url.bytes().all(|b| b.is_ascii_graphic());
    if host.is_empty() || host.starts_with(':') || !printable || url.contains('#') {
        return Err(PublicUrlError::Malformed);
    }
    Ok(())
}

/// One request as a pack sees it.
#[derive(Debug, Clone, Copy)]
pub struct RequestContext<'a> {
    pub method: &'a Method,
    pub headers: &'a HeaderMap,
    /// The request's raw query string (without `?`), if it had one.
    pub raw_query: Option<&'a str>,
    /// The endpoint's `public_url` as configured (checked by [`check_public_url`]).
    pub public_url: Option<&'a str>,
    pub options: &'a EndpointOptions,
}

impl<'a> RequestContext<'a> {
    /// A POST with these headers and nothing else (no query, URL or options).
    pub fn post(headers: &'a HeaderMap) -> Self {
        RequestContext {
            method: &Method::POST,
            headers,
            raw_query: None,
            public_url: None,
            options: EndpointOptions::none(),
        }
    }

    /// The URL the provider signed: `public_url` byte for byte, except that a query string on
    /// the request replaces `public_url`'s (providers append parameters).
    pub fn signed_url(&self) -> Option<String> {
        let url = self.public_url?;
        Some(match self.raw_query {
            Some(query) => {
                let base = url.split_once('?').map_or(url, |(base, _)| base);
                format!("{base}?{query}")
            }
            None => url.to_owned(),
        })
    }
}

/// A response the provider requires: status, content type (none for an empty body), body,
/// and the response headers a handshake answers with (RingCentral's `Validation-Token`;
/// `X-Content-Type-Options: nosniff` on echoed text).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    pub status: u16,
    pub content_type: Option<&'static str>,
    pub body: Vec<u8>,
    pub headers: Vec<(&'static str, String)>,
}

/// What a verified request turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Delivery {
    /// A provider handshake: answer it exactly; nothing is stored.
    Handshake(Answer),
    /// One or more logical events (a batch: one per item, in body order), all to be committed
    /// together or not at all.
    Events {
        events: Vec<Envelope>,
        /// The provider's required answer once all are committed; `None` = hookgate's own
        /// `200 {"status":"accepted",…}`.
        answer: Option<Answer>,
        /// A signed one-time value ([`super::ReplayDefence::SignedToken`]): a request that
        /// reuses it is a duplicate of the row it first created.
        replay_key: Option<String>,
    },
}

/// Where `sign` places what the provider signs beyond the body.
#[derive(Debug, Clone, Copy, Default)]
pub struct SignTarget<'a> {
    /// The endpoint URL the delivery goes to (URL-signing packs).
    pub public_url: Option<&'a str>,
    pub options: Option<&'a EndpointOptions>,
}

/// A delivery as the provider would send it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SignedDelivery {
    pub headers: Vec<(http::HeaderName, http::HeaderValue)>,
    /// The body to send: the input body, or a rewrite of it where the signature lives in the
    /// body (Adyen items, Mailgun's signature object).
    pub body: Vec<u8>,
    /// The URL to post to, when the pack signs it (a non-form body adds its hash parameter).
    pub url: Option<String>,
}

/// Everything `providers list --json` prints about a pack (`providers show` prints it in
/// words, [`Pack::describe`]).
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct PackInfo {
    pub id: &'static str,
    pub display_name: &'static str,
    pub scheme: &'static str,
    /// `docs`, `sdk` or `experimental`.
    pub evidence: &'static str,
    pub sources: Vec<String>,
    /// Fact → its citation (docs URL or `sdk:<registry>/<package>@<version>:<path>`).
    pub citations: std::collections::BTreeMap<&'static str, String>,
    /// The known-answer vectors the pack ships (`testdata/vectors/<id>.json`).
    pub vectors: u32,
    /// `builtin`, or `user` for a pack from the configuration (`[[provider_packs]]`,
    /// `provider_packs_dir`).
    pub origin: &'static str,
    pub content_types: Vec<&'static str>,
    /// Accepted `Content-Encoding`s besides none (`gzip`).
    pub content_encodings: Vec<&'static str>,
    /// How a configured secret becomes the key (`utf8`, `whsec_base64`, `hex`, …).
    pub secret_format: &'static str,
    /// The same, in words: what to paste from the provider.
    pub secret: String,
    pub signature_headers: Vec<&'static str>,
    /// Where the signature is and how candidates are read, in words.
    pub signature: String,
    /// The template (`{ts}.{body}`) for template schemes, else what the scheme signs.
    pub signed_bytes: String,
    pub algorithm: String,
    pub encoding: &'static str,
    pub id_location: String,
    pub id_signed: bool,
    pub event_type_location: Option<String>,
    pub type_signed: Option<bool>,
    pub timestamp_signed: bool,
    pub timestamp_location: Option<String>,
    pub timestamp_format: Option<&'static str>,
    pub tolerance_seconds: Option<u64>,
    /// How far ahead of the receiver's clock a signed timestamp may be; beyond it 401
    /// `stale_timestamp` (the tolerance, unless the provider documents less).
    pub max_future_seconds: Option<u64>,
    /// `yes`, `no` or `unknown`.
    pub retries_keep_id: &'static str,
    pub replay_defence: Option<&'static str>,
    pub batch: bool,
    pub batch_items: Option<String>,
    pub handshakes: Vec<String>,
    /// The provider-required answers to accepted events (empty: hookgate's own 200).
    pub answers: Vec<String>,
    pub methods: Vec<String>,
    pub options: Vec<OptionInfo>,
    pub needs_public_url: bool,
    /// Whether `hookgate send` signs with the configured secret (shared-secret schemes).
    pub signs: bool,
    pub unauthenticated_headers: Vec<&'static str>,
    /// JSON pointers hookgate reads that the signature does not cover.
    pub unauthenticated_fields: Vec<&'static str>,
    pub redelivery_horizon_seconds: Option<u64>,
    pub notes: Option<String>,
    /// An `[[endpoints]]` block for this pack (TOML).
    pub configuration: String,
}

#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct OptionInfo {
    pub name: &'static str,
    pub required: bool,
    pub format: &'static str,
    pub description: &'static str,
}

impl Pack {
    /// Validates an endpoint's `options` against those the pack declares; call it when the
    /// configuration is loaded so a bad setting fails at start-up, naming the key.
    pub fn check_options(
        &self,
        options: &BTreeMap<String, String>,
    ) -> Result<EndpointOptions, OptionError> {
        for key in options.keys() {
            if !self.options.iter().any(|o| o.name == key) {
                let known: Vec<&str> = self.options.iter().map(|o| o.name).collect();
                return Err(OptionError::Unknown {
                    provider: self.id,
                    key: key.clone(),
                    known: if known.is_empty() {
                        "none".to_owned()
                    } else {
                        known.join(", ")
                    },
                });
            }
        }
        for rule in &self.options {
            match options.get(rule.name) {
                None if rule.required => {
                    return Err(OptionError::Missing {
                        provider: self.id,
                        key: rule.name.to_owned(),
                    });
                }
                None => {}
                Some(value) => {
                    if let Some(alg) = self.algorithm_option()
                        && alg.option == rule.name
                        && !alg.accepts(value)
                    {
                        return Err(OptionError::Malformed {
                            key: rule.name.to_owned(),
                            expected: alg.expected,
                        });
                    }
                    let ok = match rule.format {
                        OptionFormat::Text => !value.trim().is_empty(),
                        OptionFormat::Json => serde_json::from_str::<serde_json::Value>(value)
                            .is_ok_and(|v| v.is_object()),
                    };
                    if !ok {
                        return Err(OptionError::Malformed {
                            key: rule.name.to_owned(),
                            expected: match rule.format {
                                OptionFormat::Text => "must be a non-empty string",
                                OptionFormat::Json => "must be a JSON object",
                            },
                        });
                    }
                }
            }
        }
        let checked = EndpointOptions(options.clone());
        super::header_option::check(self.token_source, &checked)?;
        Ok(checked)
    }

    /// Checks an endpoint's `public_url` for this pack (required when the pack signs the URL).
    pub fn check_public_url(&self, url: Option<&str>) -> Result<(), PublicUrlError> {
        match url {
            Some(url) => check_public_url(url),
            None if self.needs_public_url() => Err(PublicUrlError::Missing(self.id)),
            None => Ok(()),
        }
    }

    /// The methods this pack answers: POST, plus those of its handshakes.
    pub fn methods(&self) -> &[Method] {
        &self.methods
    }

    pub fn accepts_method(&self, method: &Method) -> bool {
        self.methods.contains(method)
    }
}
