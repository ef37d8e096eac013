//! Extraction from the *verified* bytes: the JSON document (form bodies become an object of
//! their fields, or the JSON of a payload field), handshakes (answered, never stored), the
//! events — one per batch item, each with its own id — and the provider-required answer.

use http::HeaderMap;
use serde_json::Value;

use super::engine::scalar_text;
use super::{
    Answer, AnswerRule, Delivery, HandshakeAnswer, IdRule, Location, Pack, RequestContext,
};
use crate::common::{self, JSON, bad, info_header, json_at};
use crate::{BadRequestReason, Envelope, Metadata, Rejection, SecretMaterial};

const TEXT: &str = "text/plain";

/// A form body as a JSON object of its fields (the first value of a repeated name wins).
pub(crate) fn form_object(body: &[u8]) -> Value {
    let mut object = serde_json::Map::new();
    for pair in body.split(|&b| b == b'&').filter(|p| !p.is_empty()) {
        let (name, value) = match pair.iter().position(|&b| b == b'=') {
            Some(eq) => (&pair[..eq], &pair[eq + 1..]),
            None => (pair, &pair[pair.len()..]),
        };
        let name = String::from_utf8_lossy(&common::form_decode(name)).into_owned();
        let value = String::from_utf8_lossy(&common::form_decode(value)).into_owned();
        object.entry(name).or_insert(Value::String(value));
    }
    Value::Object(object)
}

impl Pack {
    /// The JSON document of a body (form deliveries: the JSON of the payload field, or an
    /// object of the form's fields).
    pub(crate) fn document(&self, headers: &HeaderMap, body: &[u8]) -> Result<Value, Rejection> {
        match self.form_payload_field {
            Some(field) if common::is_form(headers) => {
                let payload = common::form_field(body, field).ok_or({
                    // No JSON at all: when the id lives in it, the delivery simply has none.
                    if matches!(self.event_id, IdRule::Headers(_)) {
                        bad(BadRequestReason::UnparseableEnvelope)
                    } else {
                        bad(BadRequestReason::MissingEventId)
                    }
                })?;
                common::parse_json(&payload)
            }
            None if common::is_form(headers) => Ok(form_object(body)),
            _ => common::parse_json(body),
        }
    }

    /// The first present value of `locations`, as text.
    fn text_at(
        &self,
        locations: &[Location],
        headers: &HeaderMap,
        json: &Value,
    ) -> Result<Option<String>, Rejection> {
        for location in locations {
            let found = match location {
                Location::Header(name) => info_header(headers, &[name])?,
                Location::Json { pointer, .. } => common::id_at(json, pointer),
                Location::SignatureParam(_) | Location::Query(_) => None,
            };
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }

    fn event_id(&self, metadata: &Metadata, json: &Value) -> Option<String> {
        let found = match &self.event_id {
            IdRule::Headers(_) => metadata.header_id.clone(),
            IdRule::Json(pointers) => pointers.iter().find_map(|p| common::id_at(json, p)),
            IdRule::Composed(parts) => {
                let mut values = Vec::with_capacity(parts.len());
                for (pointer, optional) in parts {
                    match common::id_at(json, pointer) {
                        Some(value) => values.push(value),
                        None if *optional => {}
                        None => return self.fallback_id(metadata),
                    }
                }
                // All parts optional and none present: no id.
                (!values.is_empty()).then(|| values.join(":"))
            }
        };
        found.or_else(|| self.fallback_id(metadata))
    }

    /// `sig:` + the verified signature in hex, for packs that declare it.
    fn fallback_id(&self, metadata: &Metadata) -> Option<String> {
        let signature = metadata.signatures.first()?;
        self.id_fallback_signature
            .then(|| format!("sig:{}", common::encode_lower_hex(signature)))
    }

    fn present(&self, location: &Location, ctx: &RequestContext<'_>, json: &Value) -> bool {
        match location {
            Location::Header(name) => ctx.headers.contains_key(*name),
            Location::Json { pointer, .. } => json_at(json, pointer).is_some_and(|v| !v.is_null()),
            Location::Query(name) => ctx
                .raw_query
                .is_some_and(|q| common::form_field(q.as_bytes(), name).is_some()),
            Location::SignatureParam(_) => false,
        }
    }

    fn handshake(
        &self,
        ctx: &RequestContext<'_>,
        json: &Value,
        key: Option<&SecretMaterial>,
    ) -> Result<Option<Answer>, Rejection> {
        for rule in &self.handshakes {
            if rule.method != *ctx.method {
                continue;
            }
            let discriminator = match rule.when {
                Location::Header(name) => info_header(ctx.headers, &[name])?,
                Location::Json { pointer, .. } => json_at(json, pointer).and_then(scalar_text),
                Location::Query(name) => ctx
                    .raw_query
                    .and_then(|q| common::form_field(q.as_bytes(), name))
                    .map(|v| String::from_utf8_lossy(&v).into_owned()),
                Location::SignatureParam(_) => None,
            };
            if discriminator.as_deref() != Some(rule.equals)
                || !rule.also_present.iter().all(|l| self.present(l, ctx, json))
            {
                continue;
            }
            let challenge = match rule.challenge {
                Some(pointer) => Some(
                    json_at(json, pointer)
                        .and_then(Value::as_str)
                        .ok_or(bad(BadRequestReason::UnparseableEnvelope))?,
                ),
                None => None,
            };
            let challenge_text = challenge.unwrap_or_default();
            let answer = match rule.answer {
                HandshakeAnswer::EchoText => Answer {
                    status: 200,
                    content_type: Some(TEXT),
                    body: challenge_text.as_bytes().to_vec(),
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
                    // The answer proves the secret; without the matched key there is none.
                    let key = key.ok_or(bad(BadRequestReason::UnparseableEnvelope))?;
                    let tag = self
                        .algorithm
                        .mac(key.expose(), &[challenge_text.as_bytes()]);
                    let digest = common::encode_lower_hex(&tag[..self.algorithm.tag_len()]);
                    let mut answer = serde_json::Map::new();
                    answer.insert(echo_field.to_owned(), Value::from(challenge_text));
                    answer.insert(digest_field.to_owned(), Value::from(digest));
                    json_answer(Value::Object(answer))
                }
                HandshakeAnswer::Constant {
                    status,
                    content_type,
                    body,
                } => Answer {
                    status,
                    content_type,
                    body: body.as_bytes().to_vec(),
                },
            };
            return Ok(Some(answer));
        }
        Ok(None)
    }

    fn envelope(
        &self,
        metadata: &Metadata,
        headers: &HeaderMap,
        json: &Value,
    ) -> Result<Envelope, Rejection> {
        let event_id = self
            .event_id(metadata, json)
            .ok_or(bad(BadRequestReason::MissingEventId))?;
        let object_version = self.object_version.iter().find_map(|l| match l {
            Location::Json { pointer, .. } => json_at(json, pointer).and_then(|v| {
                v.as_i64()
                    .or_else(|| v.as_str().and_then(|s| s.parse().ok()))
            }),
            _ => None,
        });
        let mut created_at = None;
        for location in &self.created_at {
            created_at = match location {
                Location::Header(name) => info_header(headers, &[name])?
                    .as_deref()
                    .and_then(|t| common::parse_rfc3339(t).or_else(|| t.parse().ok())),
                Location::Json { pointer, .. } => common::time_at(json, pointer),
                Location::SignatureParam(_) | Location::Query(_) => None,
            };
            if created_at.is_some() {
                break;
            }
        }
        Ok(Envelope {
            event_id,
            event_type: self.text_at(&self.event_type, headers, json)?,
            object_id: self.text_at(&self.object_id, headers, json)?,
            object_version,
            created_at,
        })
    }

    fn answer(&self, ctx: &RequestContext<'_>, json: &Value) -> Option<Answer> {
        let rule: &AnswerRule = self.answers.iter().find(|a| {
            a.when_present
                .as_ref()
                .is_none_or(|l| self.present(l, ctx, json))
        })?;
        let body = rule
            .body_option
            .and_then(|name| ctx.options.get(name))
            .unwrap_or(rule.body);
        Some(Answer {
            status: rule.status,
            content_type: if body.is_empty() {
                None
            } else {
                rule.content_type
            },
            body: body.as_bytes().to_vec(),
        })
    }

    /// Parses the *verified* body: a handshake answer, or the events (one per batch item, in
    /// body order; one item without an id refuses the request whole) with the provider's
    /// required answer. `key` is the secret that verified the request (handshakes whose answer
    /// proves it).
    pub fn extract(
        &self,
        ctx: &RequestContext<'_>,
        metadata: &Metadata,
        body: &[u8],
        key: Option<&SecretMaterial>,
    ) -> Result<Delivery, Rejection> {
        // An id header is known before the body is parsed; its absence is reported first.
        if matches!(self.event_id, IdRule::Headers(_))
            && metadata.header_id.is_none()
            && !self.id_fallback_signature
        {
            return Err(bad(BadRequestReason::MissingEventId));
        }
        let json = self.document(ctx.headers, body)?;
        if let Some(answer) = self.handshake(ctx, &json, key)? {
            return Ok(Delivery::Handshake(answer));
        }
        let batch_items = self.batch.as_ref().and_then(|batch| {
            let items = json_at(&json, batch.items)?.as_array()?;
            Some(
                items
                    .iter()
                    .map(|e| batch.item.and_then(|p| json_at(e, p)).unwrap_or(e))
                    .collect::<Vec<_>>(),
            )
        });
        let events = match batch_items {
            Some(items) if items.is_empty() => {
                return Err(bad(BadRequestReason::MissingEventId));
            }
            Some(items) => items
                .into_iter()
                .map(|item| self.envelope(metadata, ctx.headers, item))
                .collect::<Result<Vec<_>, _>>()?,
            None => vec![self.envelope(metadata, ctx.headers, &json)?],
        };
        let replay_key = self.replay_key.iter().find_map(|l| match l {
            Location::Json { pointer, .. } => common::id_at(&json, pointer),
            _ => None,
        });
        Ok(Delivery::Events {
            events,
            answer: self.answer(ctx, &json),
            replay_key,
        })
    }
}

fn json_answer(value: Value) -> Answer {
    Answer {
        status: 200,
        content_type: Some(JSON),
        body: value.to_string().into_bytes(),
    }
}
