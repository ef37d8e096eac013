//! Extraction from the *verified* bytes: the JSON document (form bodies become an object of
//! their fields, or the JSON of a payload field), handshakes (answered, never stored), the
//! events — one per batch item, each with its own id — and the provider-required answer.

use http::HeaderMap;
use serde_json::Value;

use super::primitives::sha256_hex;
use super::{Answer, AnswerRule, Delivery, IdFallback, IdRule, Location, Pack, RequestContext};
use crate::common::{self, bad, info_header, json_at};
use crate::{BadRequestReason, Envelope, Metadata, Rejection, SecretMaterial};

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

    fn event_id(&self, metadata: &Metadata, json: &Value, body: &[u8]) -> Option<String> {
        let found = match &self.event_id {
            IdRule::Headers(_) => metadata.header_id.clone(),
            IdRule::Json(pointers) => pointers.iter().find_map(|p| common::id_at(json, p)),
            IdRule::Composed(parts) => {
                let mut values = Vec::with_capacity(parts.len());
                for (pointer, optional) in parts {
                    match common::id_at(json, pointer) {
                        Some(value) => values.push(value),
                        None if *optional => {}
                        None => return self.fallback_id(metadata, body),
                    }
                }
                // All parts optional and none present: no id.
                (!values.is_empty()).then(|| values.join(":"))
            }
        };
        found.or_else(|| self.fallback_id(metadata, body))
    }

    /// `sig:` + the verified signature in hex, or `sha256:` + the hex SHA-256 of the
    /// verified body, for packs that declare it.
    fn fallback_id(&self, metadata: &Metadata, body: &[u8]) -> Option<String> {
        match self.id_fallback {
            IdFallback::None => None,
            IdFallback::Signature => metadata
                .signatures
                .first()
                .map(|signature| format!("sig:{}", common::encode_lower_hex(signature))),
            IdFallback::BodyDigest => Some(format!("sha256:{}", sha256_hex(body))),
        }
    }

    pub(crate) fn present(
        &self,
        location: &Location,
        ctx: &RequestContext<'_>,
        json: &Value,
    ) -> bool {
        match location {
            Location::Header(name) => ctx.headers.contains_key(*name),
            Location::Json { pointer, .. } => json_at(json, pointer).is_some_and(|v| !v.is_null()),
            Location::Query(name) => ctx
                .raw_query
                .is_some_and(|q| common::form_field(q.as_bytes(), name).is_some()),
            Location::SignatureParam(_) => false,
        }
    }

    pub(crate) fn envelope(
        &self,
        metadata: &Metadata,
        headers: &HeaderMap,
        json: &Value,
        body: &[u8],
    ) -> Result<Envelope, Rejection> {
        let event_id = self
            .event_id(metadata, json, body)
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
            api_version: self.text_at(&self.api_version, headers, json)?,
            // An endpoint's `sequence_pointer` reads it, not the pack.
            sequence: None,
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
            headers: Vec::new(),
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
        if let Some(version) = self.signature_version(ctx)? {
            return version.extract(ctx, metadata, body, key);
        }
        // An id header is known before the body is parsed; its absence is reported first.
        if matches!(self.event_id, IdRule::Headers(_))
            && metadata.header_id.is_none()
            && self.id_fallback == IdFallback::None
        {
            return Err(bad(BadRequestReason::MissingEventId));
        }
        if let Some(rule) = self.unsigned_handshake(ctx) {
            // Verified by its token in `verify`; there is no body to parse.
            return self
                .handshake_answer(rule, ctx, &Value::Null, key)
                .map(Delivery::Handshake);
        }
        // A verified handshake recognised by its head alone (a GET has no body to parse).
        if let Some(answer) = self.handshake(ctx, None, key)? {
            return Ok(Delivery::Handshake(answer));
        }
        let json = self.document(ctx.headers, body)?;
        if let Some(answer) = self.handshake(ctx, Some(&json), key)? {
            return Ok(Delivery::Handshake(answer));
        }
        if !(json.is_object() || json.is_array()) && self.documents_must_be_structured() {
            return Err(bad(BadRequestReason::UnparseableEnvelope));
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
        // A verified batch without items (LINE's verify request) is events: [] — answered
        // accepted, nothing stored. A batch item's fallback id digests the item, not the body.
        let events = match batch_items {
            Some(items) => items
                .into_iter()
                .map(|item| {
                    let item_bytes = item.to_string();
                    self.envelope(metadata, ctx.headers, item, item_bytes.as_bytes())
                })
                .collect::<Result<Vec<_>, _>>()?,
            None => vec![self.envelope(metadata, ctx.headers, &json, body)?],
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
