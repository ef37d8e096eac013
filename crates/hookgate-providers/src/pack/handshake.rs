//! Handshakes: the requests a provider sends to set an endpoint up or to re-check it, answered
//! exactly as the provider documents and never stored.
//!
//! A rule (`handshakes[i]`) matches on its method and a discriminator — `when` equals a value,
//! or, without `equals`, is present — and answers from its `challenge` (a JSON, query or header
//! location). Three kinds, by what proves the request:
//!
//! - **verified** (the default): the request verifies like an event first (Slack, Zoom,
//!   Twitch, Front; a GET carrying the pack's token header, Okta and Adobe Acrobat Sign);
//! - **token** (`token`): an unsigned GET whose query parameter equals an endpoint option in
//!   constant time (Meta's `hub.verify_token`, Oura's `verification_token`);
//! - **unsigned** (`"unsigned": true`): answered without any proof, because the answer is
//!   itself the proof the provider checks (X's CRC and LinkedIn's challenge: an HMAC of the
//!   challenge with the secret) or reveals nothing (Dropbox's and Nylas' echo, Trello's
//!   `HEAD`). Its discriminator lives in the head (query or header), never in the body.
//!
//! What an unsigned rule (or any header answer) echoes or digests is bounded by its
//! `challenge_format` (length and character class, checked before answering), so that the
//! gateway reflects no markup and, for digest answers, signs nothing that could pass for a
//! JSON document: a pack with an unsigned digest answer also refuses events whose body is not
//! a JSON object or array (a bare number would otherwise be a body whose signature the
//! handshake reveals).

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::Value;

use super::spec::{ChallengeFormatSpec, HandshakeAnswerSpec, HandshakeSpec};
use super::syntax::{Paths, keep, location, locations, non_empty, pick, status};
use super::{Answer, Location, Pack, PackError, RequestContext, primitives};
use crate::common::{self, JSON, bad, info_header, json_at};
use crate::{BadRequestReason, Rejection, SecretMaterial};

const TEXT: &str = "text/plain";

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
    /// `{"<field>": prefix + HMAC(secret, challenge)}` in hex or base64.
    Digest {
        field: &'static str,
        prefix: &'static str,
        base64: bool,
    },
    /// 200, the challenge in the response header `header`, no body.
    EchoHeader {
        header: &'static str,
    },
    Constant {
        status: u16,
        content_type: Option<&'static str>,
        body: &'static str,
    },
}

impl HandshakeAnswer {
    fn digests(self) -> bool {
        matches!(self, Self::Digest { .. } | Self::EchoWithDigest { .. })
    }
}

/// The characters an echoed or digested challenge may hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ChallengeChars {
    /// `A-Z a-z 0-9`.
    Alphanumeric,
    /// Alphanumerics and `- . _ ~ + / =` (UUIDs, URL-safe random strings, either base64
    /// alphabet).
    Token,
    /// Printable ASCII and spaces, without `< > & " ' \` and backquote.
    Text,
}

impl ChallengeChars {
    fn allows(self, b: u8) -> bool {
        b.is_ascii_alphanumeric()
            || match self {
                Self::Alphanumeric => false,
                Self::Token => matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/' | b'='),
                Self::Text => {
                    (0x20..0x7f).contains(&b)
                        && !matches!(b, b'<' | b'>' | b'&' | b'"' | b'\'' | b'\\' | b'`')
                }
            }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ChallengeFormat {
    pub(crate) max_length: usize,
    pub(crate) chars: ChallengeChars,
}

/// The longest challenge a `challenge_format` may allow.
const MAX_CHALLENGE: usize = 1024;

#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct HandshakeRule {
    pub(crate) method: http::Method,
    /// `None`: every request of `method` (an unsigned constant answer: Trello's `HEAD`).
    pub(crate) when: Option<Location>,
    /// `None`: `when` only has to be present and not empty.
    pub(crate) equals: Option<&'static str>,
    pub(crate) also_present: Vec<Location>,
    pub(crate) challenge: Option<Location>,
    pub(crate) answer: HandshakeAnswer,
    /// `(query parameter, option)`: an unsigned GET proven by a token (see `HandshakeTokenSpec`).
    pub(crate) token: Option<(&'static str, &'static str)>,
    /// Answered without verification (see the module documentation).
    pub(crate) unsigned: bool,
    pub(crate) challenge_format: Option<ChallengeFormat>,
}

impl HandshakeRule {
    /// Answered before, or instead of, the pack's verification.
    pub(crate) fn unverified(&self) -> bool {
        self.unsigned || self.token.is_some()
    }

    fn needs_body(&self) -> bool {
        let json = |l: &Location| matches!(l, Location::Json { .. });
        self.when.as_ref().is_some_and(json)
            || self.challenge.as_ref().is_some_and(json)
            || self.also_present.iter().any(json)
    }
}

fn challenge_format(
    paths: &Paths,
    field: &str,
    spec: &ChallengeFormatSpec,
) -> Result<ChallengeFormat, PackError> {
    if spec.max_length == 0 || spec.max_length > MAX_CHALLENGE {
        return Err(paths.err(
            &format!("{field}.max_length"),
            format!("must be between 1 and {MAX_CHALLENGE}"),
        ));
    }
    let chars = pick(
        paths,
        &format!("{field}.chars"),
        "character class",
        &spec.chars,
        &[
            ("alphanumeric", ChallengeChars::Alphanumeric),
            ("token", ChallengeChars::Token),
            ("text", ChallengeChars::Text),
        ],
    )?;
    Ok(ChallengeFormat {
        max_length: spec.max_length,
        chars,
    })
}

fn answer(
    paths: &Paths,
    f: &dyn Fn(&str) -> String,
    spec: &HandshakeAnswerSpec,
) -> Result<HandshakeAnswer, PackError> {
    Ok(match spec {
        HandshakeAnswerSpec::EchoText => HandshakeAnswer::EchoText,
        HandshakeAnswerSpec::EchoJson(e) => HandshakeAnswer::EchoJson {
            field: non_empty(paths, &f("answer.echo_json.field"), &e.field)?,
        },
        HandshakeAnswerSpec::EchoWithDigest(e) => HandshakeAnswer::EchoWithDigest {
            echo_field: non_empty(
                paths,
                &f("answer.echo_with_digest.echo_field"),
                &e.echo_field,
            )?,
            digest_field: non_empty(
                paths,
                &f("answer.echo_with_digest.digest_field"),
                &e.digest_field,
            )?,
        },
        HandshakeAnswerSpec::Digest(d) => HandshakeAnswer::Digest {
            field: non_empty(paths, &f("answer.digest.field"), &d.field)?,
            prefix: keep(&d.prefix),
            base64: pick(
                paths,
                &f("answer.digest.encoding"),
                "encoding",
                &d.encoding,
                &[("hex", false), ("base64", true)],
            )?,
        },
        HandshakeAnswerSpec::EchoHeader(h) => HandshakeAnswer::EchoHeader {
            header: super::syntax::header_name(paths, &f("answer.echo_header.header"), &h.header)?,
        },
        HandshakeAnswerSpec::Constant(c) => HandshakeAnswer::Constant {
            status: status(paths, &f("answer.constant.status"), c.status)?,
            content_type: c.content_type.as_deref().map(keep),
            body: keep(&c.body),
        },
    })
}

pub(crate) fn handshake(
    paths: &Paths,
    i: usize,
    spec: &HandshakeSpec,
) -> Result<HandshakeRule, PackError> {
    let f = |n: &str| format!("handshakes[{i}].{n}");
    let method = match spec.method.as_deref().unwrap_or("POST") {
        "POST" => http::Method::POST,
        "GET" => http::Method::GET,
        "HEAD" => http::Method::HEAD,
        "OPTIONS" => http::Method::OPTIONS,
        other => {
            return Err(paths.err(
                &f("method"),
                format!("unknown method {other:?} (expected POST, GET, HEAD, OPTIONS)"),
            ));
        }
    };
    let answer = answer(paths, &f, &spec.answer)?;
    let constant = matches!(answer, HandshakeAnswer::Constant { .. });
    let unverified = spec.unsigned || spec.token.is_some();
    if spec.unsigned && spec.token.is_some() {
        return Err(paths.err(&f("unsigned"), "a token handshake is proven by its token"));
    }
    let when = match &spec.when {
        Some(text) => Some(location(paths, &f("when"), text)?),
        // Only an answer that says nothing may skip the discriminator, and never on POST,
        // where every event arrives.
        None if spec.unsigned && constant && method != http::Method::POST => None,
        None => return Err(paths.err(&f("when"), "required (the request's discriminator)")),
    };
    match when {
        Some(Location::SignatureParam(_) | Location::Json { optional: true, .. }) => {
            return Err(paths.err(&f("when"), "expected a header, query or json location"));
        }
        Some(Location::Json { .. }) if unverified => {
            return Err(paths.err(
                &f("when"),
                "an unverified handshake is recognised by its head (a header or query location)",
            ));
        }
        _ => {}
    }
    let challenge = match (&spec.challenge, constant) {
        (None, true) => None,
        (Some(_), true) => {
            return Err(paths.err(&f("challenge"), "a constant answer echoes no challenge"));
        }
        (None, false) => return Err(paths.err(&f("challenge"), "required for this answer")),
        (Some(text), false) => match location(paths, &f("challenge"), text)? {
            Location::Json { .. } if unverified => {
                return Err(paths.err(
                    &f("challenge"),
                    "an unverified handshake's challenge is a query or header location",
                ));
            }
            l @ (Location::Json {
                optional: false, ..
            }
            | Location::Query(_)
            | Location::Header(_)) => Some(l),
            _ => {
                return Err(paths.err(
                    &f("challenge"),
                    "the challenge is a json, query or header location",
                ));
            }
        },
    };
    let challenge_format = spec
        .challenge_format
        .as_ref()
        .map(|c| challenge_format(paths, &f("challenge_format"), c))
        .transpose()?;
    let echoes_header = matches!(answer, HandshakeAnswer::EchoHeader { .. });
    if challenge.is_some() && (spec.unsigned || echoes_header) && challenge_format.is_none() {
        return Err(paths.err(
            &f("challenge_format"),
            "required: an unsigned handshake or a header answer echoes only a bounded challenge",
        ));
    }
    if challenge.is_none() && challenge_format.is_some() {
        return Err(paths.err(&f("challenge_format"), "only with a challenge"));
    }
    if spec.unsigned
        && answer.digests()
        && challenge_format.is_some_and(|c| c.chars == ChallengeChars::Text)
    {
        return Err(paths.err(
            &f("challenge_format.chars"),
            "an unsigned digest answer signs only alphanumeric or token challenges",
        ));
    }
    let also_present = locations(paths, &f("also_present"), &spec.also_present)?;
    if unverified && !also_present.is_empty() {
        return Err(paths.err(&f("also_present"), "not for unverified handshakes"));
    }
    let token = match &spec.token {
        None => None,
        Some(t) => {
            if method != http::Method::GET || !matches!(when, Some(Location::Query(_))) {
                return Err(paths.err(
                    &f("token"),
                    "a token handshake is a GET whose `when` is a query location",
                ));
            }
            Some((
                non_empty(paths, &f("token.query"), &t.query)?,
                non_empty(paths, &f("token.option"), &t.option)?,
            ))
        }
    };
    Ok(HandshakeRule {
        method,
        when,
        equals: spec.equals.as_deref().map(keep),
        also_present,
        challenge,
        answer,
        token,
        unsigned: spec.unsigned,
        challenge_format,
    })
}

impl Pack {
    /// The query parameter `name`, as text.
    fn query_value(ctx: &RequestContext<'_>, name: &str) -> Option<String> {
        ctx.raw_query
            .and_then(|q| common::form_field(q.as_bytes(), name))
            .map(|v| String::from_utf8_lossy(&v).into_owned())
    }

    /// The text at a head location (header or query); `None` elsewhere or when absent.
    fn head_value(
        ctx: &RequestContext<'_>,
        location: &Location,
    ) -> Result<Option<String>, Rejection> {
        Ok(match *location {
            Location::Header(name) => info_header(ctx.headers, &[name])?,
            Location::Query(name) => Self::query_value(ctx, name),
            _ => None,
        })
    }

    /// Whether the rule's discriminator matches (`json`: the verified document, when parsed).
    fn discriminated(
        rule: &HandshakeRule,
        ctx: &RequestContext<'_>,
        json: &Value,
    ) -> Result<bool, Rejection> {
        let Some(when) = &rule.when else {
            return Ok(true);
        };
        let value = match when {
            Location::Json { pointer, .. } => {
                json_at(json, pointer).and_then(super::engine::scalar_text)
            }
            head => Self::head_value(ctx, head)?,
        };
        Ok(match (rule.equals, value) {
            (Some(equals), Some(v)) => v == equals,
            (None, Some(v)) => !v.is_empty(),
            (_, None) => false,
        })
    }

    /// The unverified handshake this request is (a token or unsigned rule matching its method
    /// and head): it carries no signature, so metadata, verification and extraction take
    /// their own path.
    pub(crate) fn unsigned_handshake(&self, ctx: &RequestContext<'_>) -> Option<&HandshakeRule> {
        self.handshakes.iter().find(|rule| {
            rule.unverified()
                && rule.method == *ctx.method
                && Self::discriminated(rule, ctx, &Value::Null).unwrap_or(false)
        })
    }

    /// Whether an unverified handshake is proven: an unsigned one always is (its answer is
    /// the proof, or says nothing); a token one when the request's token equals the endpoint
    /// option the rule names, in constant time — an unset option proves nothing.
    pub(crate) fn handshake_token_matches(rule: &HandshakeRule, ctx: &RequestContext<'_>) -> bool {
        if rule.unsigned {
            return true;
        }
        let Some((query, option)) = rule.token else {
            return false;
        };
        let (Some(sent), Some(expected)) = (Self::query_value(ctx, query), ctx.options.get(option))
        else {
            return false;
        };
        primitives::token_matches(expected.as_bytes(), sent.as_bytes())
    }

    /// A verified handshake this request is. `json` is `None` before the body is parsed:
    /// then only rules that read nothing from the body are tried (a verified GET carries
    /// none).
    pub(crate) fn handshake(
        &self,
        ctx: &RequestContext<'_>,
        json: Option<&Value>,
        key: Option<&SecretMaterial>,
    ) -> Result<Option<Answer>, Rejection> {
        for rule in &self.handshakes {
            if rule.method != *ctx.method || rule.unverified() {
                continue;
            }
            let document = match json {
                Some(json) => json,
                None if rule.needs_body() => continue,
                None => &Value::Null,
            };
            if !Self::discriminated(rule, ctx, document)?
                || !rule
                    .also_present
                    .iter()
                    .all(|l| self.present(l, ctx, document))
            {
                continue;
            }
            return self.handshake_answer(rule, ctx, document, key).map(Some);
        }
        Ok(None)
    }

    /// Whether this pack's events must be JSON objects or arrays: it answers unsigned
    /// digests, whose challenge must never double as a signed body.
    pub(crate) fn documents_must_be_structured(&self) -> bool {
        self.handshakes
            .iter()
            .any(|h| h.unsigned && h.answer.digests())
    }

    /// The answer to a matched handshake: its challenge echoed, digested or a constant.
    pub(crate) fn handshake_answer(
        &self,
        rule: &HandshakeRule,
        ctx: &RequestContext<'_>,
        json: &Value,
        key: Option<&SecretMaterial>,
    ) -> Result<Answer, Rejection> {
        let missing = bad(BadRequestReason::UnparseableEnvelope);
        let challenge_text = match &rule.challenge {
            Some(Location::Json { pointer, .. }) => json_at(json, pointer)
                .and_then(Value::as_str)
                .ok_or(missing)?
                .to_owned(),
            Some(head) => Self::head_value(ctx, head)?.ok_or(missing)?,
            None => String::new(),
        };
        if let Some(format) = rule.challenge_format
            && (challenge_text.is_empty()
                || challenge_text.len() > format.max_length
                || !challenge_text.bytes().all(|b| format.chars.allows(b)))
        {
            return Err(missing);
        }
        let challenge_text = challenge_text.as_str();
        let digest = |key: Option<&SecretMaterial>| {
            // The answer proves the secret; without the matched key there is none.
            let key = key.ok_or(bad(BadRequestReason::UnparseableEnvelope))?;
            let tag = self
                .algorithm
                .mac(key.expose(), &[challenge_text.as_bytes()]);
            Ok::<_, Rejection>(tag[..self.algorithm.tag_len()].to_vec())
        };
        let answer = match rule.answer {
            HandshakeAnswer::EchoText => Answer {
                status: 200,
                content_type: Some(TEXT),
                body: challenge_text.as_bytes().to_vec(),
                headers: vec![("x-content-type-options", "nosniff".to_owned())],
            },
            HandshakeAnswer::EchoJson { field } => {
                let mut answer = serde_json::Map::new();
                answer.insert(field.to_owned(), Value::from(challenge_text));
                json_answer(Value::Object(answer))
            }
            HandshakeAnswer::EchoWithDigest {
                echo_field,
                digest_field,
            } => {
                let digest = common::encode_lower_hex(&digest(key)?);
                let mut answer = serde_json::Map::new();
                answer.insert(echo_field.to_owned(), Value::from(challenge_text));
                answer.insert(digest_field.to_owned(), Value::from(digest));
                json_answer(Value::Object(answer))
            }
            HandshakeAnswer::Digest {
                field,
                prefix,
                base64,
            } => {
                let tag = digest(key)?;
                let encoded = if base64 {
                    STANDARD.encode(&tag)
                } else {
                    common::encode_lower_hex(&tag)
                };
                let mut answer = serde_json::Map::new();
                answer.insert(field.to_owned(), Value::from(format!("{prefix}{encoded}")));
                json_answer(Value::Object(answer))
            }
            HandshakeAnswer::EchoHeader { header } => Answer {
                status: 200,
                content_type: None,
                body: Vec::new(),
                headers: vec![(header, challenge_text.to_owned())],
            },
            HandshakeAnswer::Constant {
                status,
                content_type,
                body,
            } => Answer {
                status,
                content_type,
                body: body.as_bytes().to_vec(),
                headers: Vec::new(),
            },
        };
        Ok(answer)
    }
}

pub(crate) fn json_answer(value: Value) -> Answer {
    Answer {
        status: 200,
        content_type: Some(JSON),
        body: value.to_string().into_bytes(),
        headers: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::spec::PackSpec;

    /// A Dropbox-like pack with `handshake` as its one handshake: the compile error's path and
    /// message, or `None` when it compiles.
    fn refusal(handshake: serde_json::Value) -> Option<(String, String)> {
        let pack = json!({
            "id": "hs_test",
            "display_name": "T",
            "scheme": "hmac",
            "vectors": 0,
            "evidence": "experimental",
            "sources": ["https://example.com/docs"],
            "content_types": ["application/json"],
            "secret_format": "utf8",
            "signature": {"headers": ["X-Sig"], "format": {"plain": {}},
                          "algorithm": "hmac-sha256", "encoding": "hex", "signed": "{body}"},
            "event_id": {"from": [], "signed": true, "retries_keep_id": "unknown",
                         "fallback": "signature"},
            "handshakes": [handshake]
        });
        let spec = PackSpec::from_json("packs.hs_test", &pack.to_string()).unwrap();
        spec.compile().err().map(|e| (e.path, e.message))
    }

    fn refused_at(handshake: serde_json::Value, field: &str) {
        let (path, message) = refusal(handshake.clone())
            .unwrap_or_else(|| panic!("{handshake} compiled; expected a refusal at {field}"));
        assert_eq!(
            path,
            format!("packs.hs_test.handshakes[0].{field}"),
            "{message}"
        );
    }

    #[test]
    fn the_documented_forms_compile() {
        for ok in [
            json!({"method": "GET", "unsigned": true, "when": "query:challenge",
                   "challenge": "query:challenge",
                   "challenge_format": {"max_length": 64, "chars": "text"}, "answer": "echo_text"}),
            json!({"method": "HEAD", "unsigned": true, "answer": {"constant": {"status": 200}}}),
            json!({"method": "GET", "unsigned": true, "when": "query:crc",
                   "challenge": "query:crc", "challenge_format": {"max_length": 64, "chars": "token"},
                   "answer": {"digest": {"field": "t", "prefix": "sha256=", "encoding": "base64"}}}),
            json!({"when": "header:X-Challenge", "challenge": "header:X-Challenge",
                   "answer": {"echo_json": {"field": "challenge"}}}),
            json!({"when": "header:Validation-Token", "challenge": "header:Validation-Token",
                   "challenge_format": {"max_length": 64, "chars": "token"},
                   "answer": {"echo_header": {"header": "Validation-Token"}}}),
        ] {
            assert_eq!(refusal(ok.clone()), None, "{ok}");
        }
    }

    #[test]
    fn unsafe_unsigned_handshakes_are_refused_naming_the_key() {
        // Every POST would skip verification.
        refused_at(
            json!({"unsigned": true, "answer": {"constant": {"status": 200}}}),
            "when",
        );
        // Recognised from the (unverified) body.
        refused_at(
            json!({"method": "GET", "unsigned": true, "when": "json:/type", "equals": "x",
                   "answer": {"constant": {"status": 200}}}),
            "when",
        );
        refused_at(
            json!({"method": "GET", "unsigned": true, "when": "query:c", "challenge": "json:/c",
                   "challenge_format": {"max_length": 8, "chars": "token"}, "answer": "echo_text"}),
            "challenge",
        );
        // An unbounded echo, an unbounded header answer.
        refused_at(
            json!({"method": "GET", "unsigned": true, "when": "query:c", "challenge": "query:c",
                   "answer": "echo_text"}),
            "challenge_format",
        );
        refused_at(
            json!({"when": "header:V", "challenge": "header:V",
                   "answer": {"echo_header": {"header": "V"}}}),
            "challenge_format",
        );
        // A digest of text that could be a JSON document; bounds out of range.
        refused_at(
            json!({"method": "GET", "unsigned": true, "when": "query:c", "challenge": "query:c",
                   "challenge_format": {"max_length": 64, "chars": "text"},
                   "answer": {"digest": {"field": "t", "encoding": "hex"}}}),
            "challenge_format.chars",
        );
        refused_at(
            json!({"method": "GET", "unsigned": true, "when": "query:c", "challenge": "query:c",
                   "challenge_format": {"max_length": 0, "chars": "token"}, "answer": "echo_text"}),
            "challenge_format.max_length",
        );
        refused_at(
            json!({"method": "GET", "unsigned": true, "when": "query:c", "challenge": "query:c",
                   "challenge_format": {"max_length": 8, "chars": "emoji"}, "answer": "echo_text"}),
            "challenge_format.chars",
        );
        // Unsigned and token at once; an unknown method.
        refused_at(
            json!({"method": "GET", "unsigned": true, "when": "query:m", "equals": "s",
                   "challenge": "query:c", "challenge_format": {"max_length": 8, "chars": "token"},
                   "token": {"query": "t", "option": "o"}, "answer": "echo_text"}),
            "unsigned",
        );
        refused_at(
            json!({"method": "PUT", "when": "query:c", "answer": {"constant": {"status": 200}}}),
            "method",
        );
    }

    #[test]
    fn challenge_classes_admit_only_their_characters() {
        use super::ChallengeChars::*;
        let all = |class: super::ChallengeChars, text: &str| text.bytes().all(|b| class.allows(b));
        assert!(all(Alphanumeric, "abcXYZ019"));
        assert!(!all(Alphanumeric, "a-b"));
        assert!(all(Token, "890e4665-4dfe_4ab1.b689~ed55+3b/=="));
        assert!(!all(Token, "{\"a\":1}") && !all(Token, "a b"));
        assert!(all(
            Text,
            "Validation: Testing client application reachability"
        ));
        for markup in ["<", ">", "&", "\"", "'", "\\", "`", "\n", "\u{7f}"] {
            assert!(!all(Text, markup), "{markup:?}");
        }
    }
}
