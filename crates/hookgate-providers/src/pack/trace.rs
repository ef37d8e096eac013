//! The diagnostic mode of the engine (`hookgate providers test`): one captured request run
//! through the same steps as the ingress — method, content type, content encoding, signature
//! metadata, the signature against each secret version, freshness, extraction — with a
//! verdict per step. It never reports a secret, a signature or body bytes: header *names*,
//! formats, counts, secret *versions*, ages and the extracted id, type and object.

use std::borrow::Cow;

use serde::Serialize;

use super::{Delivery, Pack, RequestContext, Scheme, SignatureFormat, TokenSource};
use crate::{Rejection, TrustedSecret};

/// One step's verdict.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct TraceStep {
    /// `method`, `content_type`, `content_encoding`, `signature_metadata`, `signature`,
    /// `timestamp`, `extract`.
    pub step: &'static str,
    pub ok: bool,
    /// What was found, in words (no secret, signature or body bytes).
    pub detail: String,
    /// The answer's reason code when the step refused the request (`invalid_signature`, …).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

/// How one secret version fared.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct SecretVerdict {
    pub version: String,
    /// `matched`, `no_match`, or why it was not tried (`retired`, `expired`).
    pub verdict: String,
}

/// The whole diagnosis of one request.
#[derive(Debug, Clone, Serialize, PartialEq, Eq)]
pub struct Trace {
    pub provider: &'static str,
    /// The request verified and yielded events or a handshake answer.
    pub verified: bool,
    pub steps: Vec<TraceStep>,
    pub secrets: Vec<SecretVerdict>,
}

fn reason(rejection: Rejection) -> String {
    match rejection {
        Rejection::UnsupportedMediaType => "unsupported_media_type".to_owned(),
        Rejection::BadRequest(r) => r.as_str().to_owned(),
        Rejection::InvalidSignature => "invalid_signature".to_owned(),
        Rejection::StaleTimestamp => "stale_timestamp".to_owned(),
    }
}

impl Trace {
    fn pass(&mut self, step: &'static str, detail: String) {
        self.steps.push(TraceStep {
            step,
            ok: true,
            detail,
            reason: None,
        });
    }
    fn fail(&mut self, step: &'static str, detail: String, reason: impl Into<String>) -> Self {
        self.steps.push(TraceStep {
            step,
            ok: false,
            detail,
            reason: Some(reason.into()),
        });
        self.clone()
    }
}

impl Pack {
    /// Runs one captured request through every step and reports each verdict. `untrusted`
    /// are the endpoint's secret versions not tried (version, why); `max_body_bytes` bounds
    /// the decoded body as in the ingress.
    #[allow(clippy::too_many_arguments)]
    pub fn trace(
        &self,
        ctx: &RequestContext<'_>,
        body: &[u8],
        secrets: &[TrustedSecret<'_>],
        untrusted: &[(&str, &str)],
        now: i64,
        tolerance_seconds: Option<u64>,
        max_body_bytes: usize,
    ) -> Trace {
        // An older signature generation (HubSpot v1/v2) is traced as its own pack.
        if let Ok(Some(version)) = self.signature_version(ctx) {
            return version.trace(
                ctx,
                body,
                secrets,
                untrusted,
                now,
                tolerance_seconds,
                max_body_bytes,
            );
        }
        let mut trace = Trace {
            provider: self.id,
            verified: false,
            steps: Vec::new(),
            secrets: untrusted
                .iter()
                .map(|(version, why)| SecretVerdict {
                    version: (*version).to_owned(),
                    verdict: (*why).to_owned(),
                })
                .collect(),
        };
        let methods: Vec<&str> = self.methods.iter().map(|m| m.as_str()).collect();
        if !self.accepts_method(ctx.method) {
            return trace.fail(
                "method",
                format!(
                    "{} is not accepted (expected {})",
                    ctx.method,
                    methods.join(", ")
                ),
                "method_not_allowed",
            );
        }
        trace.pass("method", format!("{} accepted", ctx.method));

        let content_type = ctx.headers.get(http::header::CONTENT_TYPE);
        let shown = content_type
            .and_then(crate::common::media_type)
            .unwrap_or_else(|| "none".to_owned());
        if !self.accepts_content_type(content_type) {
            return trace.fail(
                "content_type",
                format!(
                    "{shown} is not accepted (expected {})",
                    self.content_types.join(", ")
                ),
                "unsupported_media_type",
            );
        }
        trace.pass("content_type", format!("{shown} accepted"));

        let body: Cow<'_, [u8]> = match self.decode_body(ctx.headers, body, max_body_bytes) {
            Ok(decoded) => decoded,
            Err(e) => {
                let (detail, code) = match e {
                    super::BodyDecodeError::Unsupported => (
                        format!(
                            "Content-Encoding not accepted (the pack declares: {})",
                            if self.gzip { "gzip" } else { "none" }
                        ),
                        "unsupported_media_type",
                    ),
                    super::BodyDecodeError::TooLarge => (
                        format!("decoded body exceeds max_body_bytes ({max_body_bytes})"),
                        "payload_too_large",
                    ),
                    super::BodyDecodeError::Corrupt => {
                        ("gzip body does not decode".to_owned(), "undecodable_body")
                    }
                };
                return trace.fail("content_encoding", detail, code);
            }
        };
        if body.len() > max_body_bytes {
            return trace.fail(
                "content_encoding",
                format!("body exceeds max_body_bytes ({max_body_bytes})"),
                "payload_too_large",
            );
        }
        trace.pass(
            "content_encoding",
            match body {
                Cow::Borrowed(_) => format!("none; body {} bytes", body.len()),
                Cow::Owned(_) => format!("gzip; {} bytes once decoded", body.len()),
            },
        );

        let metadata = match self.parse_metadata(ctx) {
            Ok(m) => m,
            Err(e) => {
                return trace.fail(
                    "signature_metadata",
                    self.metadata_text(ctx, None),
                    reason(e),
                );
            }
        };
        trace.pass(
            "signature_metadata",
            self.metadata_text(ctx, Some(metadata.signatures.len())),
        );

        // Each secret alone: which one matched, or that none did.
        let mut matched = None;
        let mut signed_millis = None;
        for secret in secrets {
            match self.verify_signature(ctx, &metadata, &body, std::slice::from_ref(secret), now) {
                Ok((_, millis)) => {
                    trace.secrets.push(SecretVerdict {
                        version: secret.version.to_owned(),
                        verdict: "matched".to_owned(),
                    });
                    if matched.is_none() {
                        matched = Some(*secret);
                        signed_millis = millis;
                    }
                }
                Err(Rejection::InvalidSignature) => trace.secrets.push(SecretVerdict {
                    version: secret.version.to_owned(),
                    verdict: "no_match".to_owned(),
                }),
                Err(e) => {
                    return trace.fail(
                        "signature",
                        "the request cannot be verified with any secret".to_owned(),
                        reason(e),
                    );
                }
            }
        }
        let Some(secret) = matched else {
            let detail = if secrets.is_empty() {
                "no trusted secret version (the gateway answers 503)".to_owned()
            } else {
                format!(
                    "none of {} trusted secret version(s) matched",
                    secrets.len()
                )
            };
            return trace.fail("signature", detail, "invalid_signature");
        };
        trace.pass(
            "signature",
            format!("secret version {:?} matched", secret.version),
        );

        match (signed_millis, self.freshness_bounds(tolerance_seconds)) {
            (Some(millis), Some((past, future))) => {
                let age = now.saturating_mul(1000).saturating_sub(millis) / 1000;
                let detail = format!(
                    "signed {} (tolerance {past} s past, {future} s future)",
                    if age >= 0 {
                        format!("{age} s ago")
                    } else {
                        format!("{} s ahead", -age)
                    }
                );
                if let Err(e) = self.check_freshness(millis, now, tolerance_seconds) {
                    return trace.fail("timestamp", detail, reason(e));
                }
                trace.pass("timestamp", detail);
            }
            _ => trace.pass("timestamp", "the pack signs no timestamp".to_owned()),
        }

        match self.extract(ctx, &metadata, &body, Some(secret.key)) {
            Ok(Delivery::Handshake(answer)) => trace.pass(
                "extract",
                format!(
                    "handshake detected: answered {} and never stored",
                    answer.status
                ),
            ),
            Ok(Delivery::Events { events, .. }) if events.is_empty() => trace.pass(
                "extract",
                "a batch without events: answered accepted, nothing stored".to_owned(),
            ),
            Ok(Delivery::Events { events, .. }) => {
                let texts: Vec<String> = events
                    .iter()
                    .map(|e| {
                        // A `sig:` id is the signature itself.
                        let id = if e.event_id.starts_with("sig:") {
                            "sig:<the verified signature>"
                        } else {
                            &e.event_id
                        };
                        format!(
                            "id {id}, type {}, object {}",
                            e.event_type.as_deref().unwrap_or("none"),
                            e.object_id.as_deref().unwrap_or("none")
                        )
                    })
                    .collect();
                trace.pass(
                    "extract",
                    format!("{} event(s): {}", events.len(), texts.join("; ")),
                );
            }
            Err(e) => {
                return trace.fail(
                    "extract",
                    "the verified body yields no event".to_owned(),
                    reason(e),
                );
            }
        }
        trace.verified = true;
        trace
    }

    /// Where the signature metadata was looked for and what was found: names and counts.
    fn metadata_text(&self, ctx: &RequestContext<'_>, candidates: Option<usize>) -> String {
        let present: Vec<&str> = self
            .signature_header_names
            .iter()
            .copied()
            .filter(|n| ctx.headers.contains_key(*n))
            .collect();
        let format = match &self.format {
            SignatureFormat::Plain { .. } => "plain",
            SignatureFormat::KeyValue { .. } => "key_value",
            SignatureFormat::VersionedList { .. } => "versioned_list",
            SignatureFormat::TimestampThenSignatures { .. } => "timestamp_then_signatures",
        };
        let mut text = match self.token_source {
            TokenSource::Query(name) if self.scheme == Scheme::SharedToken => {
                format!("token in query parameter {name}")
            }
            TokenSource::Query(name) => format!("signature in query parameter {name}"),
            TokenSource::BodyJson(p) => format!("token read from the body at {p}"),
            TokenSource::BodyForm(f) => format!("token read from form field {f}"),
            TokenSource::HeaderOption(option) => {
                match super::header_option::header(ctx.options, option) {
                    Some(name) => format!(
                        "token in header {name} (named by option {option}); {}",
                        if ctx.headers.contains_key(name.as_str()) {
                            "present"
                        } else {
                            "absent"
                        }
                    ),
                    None => format!("token header not configured (option {option})"),
                }
            }
            TokenSource::Header if self.scheme == Scheme::FieldsHmac && present.is_empty() => {
                "signature read from the signed objects in the body".to_owned()
            }
            TokenSource::Header if self.scheme == Scheme::FormPayloadHmac => {
                "signature pairs read from a form field of the body at verification (none \
                 from headers)"
                    .to_owned()
            }
            TokenSource::Header => format!(
                "expected header {} ({format}); present: {}",
                self.signature_header_names.join(" or "),
                if present.is_empty() {
                    "none".to_owned()
                } else {
                    present.join(", ")
                }
            ),
        };
        if let Some(n) = candidates {
            text.push_str(&format!("; {n} candidate(s) for this scheme"));
        }
        if let Some(rule) = &self.timestamp {
            let names: Vec<&str> = super::syntax::header_names(&rule.from);
            if !names.is_empty() {
                let found = names.iter().any(|n| ctx.headers.contains_key(*n));
                text.push_str(&format!(
                    "; timestamp header {} {}",
                    names.join(" or "),
                    if found { "present" } else { "absent" }
                ));
            }
        }
        text
    }
}
