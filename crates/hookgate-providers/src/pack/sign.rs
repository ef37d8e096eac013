//! The provider's side: a delivery signed exactly as the provider would send it, for
//! `hookgate send`, the load generator and round-trip tests. Shared-secret schemes sign with
//! the configured secret; the public-key schemes need the private key ([`SigningKey`]).

use base64::Engine;
use serde_json::Value;

use super::engine::{TemplateInputs, first_header};
use super::primitives::{Signer, SigningKey, sha256_hex, split_key_id};
use super::query_signature::with_query_param;
use super::schemes::sorted_params;
use super::{
    EndpointOptions, IdRule, Location, Pack, Part, Scheme, SignTarget, SignatureFormat,
    SignedDelivery, TokenSource,
};
use crate::common::{self, json_at};
use crate::{IdLocation, SecretMaterial, SignRequest};

/// Sets `value` at a JSON pointer, creating the objects on the way (array elements must
/// exist).
fn set_pointer(doc: &mut Value, pointer: &str, value: Value) {
    let mut node = doc;
    let mut keys = pointer
        .split('/')
        .skip(1)
        .map(|k| k.replace("~1", "/").replace("~0", "~"))
        .peekable();
    while let Some(key) = keys.next() {
        if let Value::Array(items) = node {
            match key.parse::<usize>().ok().and_then(|i| items.get_mut(i)) {
                Some(item) => {
                    node = item;
                    continue;
                }
                None => return,
            }
        }
        if !node.is_object() {
            *node = Value::Object(serde_json::Map::new());
        }
        let Value::Object(map) = node else {
            return;
        };
        if keys.peek().is_none() {
            map.insert(key, value);
            return;
        }
        node = map
            .entry(key)
            .or_insert_with(|| Value::Object(serde_json::Map::new()));
    }
}

impl Pack {
    /// Where this provider puts its logical event id (`hookgate send --event-id`).
    pub fn id_location(&self) -> IdLocation {
        match &self.event_id {
            IdRule::Headers(names) if names.is_empty() => IdLocation::BodyDigest,
            IdRule::Headers(names) => IdLocation::Header(names[0]),
            IdRule::Json(pointers) => match pointers.first() {
                Some(pointer) => IdLocation::BodyPointer(pointer),
                None if matches!(self.id_fallback, super::IdFallback::Signature) => {
                    IdLocation::Signature
                }
                None => IdLocation::BodyDigest,
            },
            IdRule::Composed(parts) => IdLocation::BodyPointer(parts[0].0),
        }
    }

    /// The public key that verifies signatures of `key`, written as this pack's
    /// `secret_format` expects it (what an endpoint configures).
    pub fn public_key_text(&self, key: &SigningKey) -> Option<String> {
        if let Some(text) = self.ed25519_public_text(key) {
            return Some(text);
        }
        key.public_key_in(self.secret_format)
    }

    fn signature_value(&self, encoded: &str, timestamp: Option<&str>, ed25519: bool) -> String {
        match &self.format {
            SignatureFormat::Plain { prefix, .. } => format!("{}{encoded}", prefix.unwrap_or("")),
            SignatureFormat::KeyValue {
                pair_separator,
                kv_separator,
                signature_keys,
                timestamp_key,
                ..
            } => {
                let signature = format!("{}{kv_separator}{encoded}", signature_keys[0]);
                match (timestamp_key, timestamp) {
                    (Some(k), Some(t)) => {
                        format!("{k}{kv_separator}{t}{pair_separator}{signature}")
                    }
                    _ => signature,
                }
            }
            SignatureFormat::TimestampThenSignatures { separator } => {
                format!("{}{separator}{encoded}", timestamp.unwrap_or_default())
            }
            SignatureFormat::VersionedList {
                version_separator,
                versions,
                key_id_first,
                ed25519_versions,
                ..
            } => {
                let version = match ed25519_versions.first() {
                    Some(v) if ed25519 => v,
                    _ => &versions[0],
                };
                // The sender's first key (Worldpay numbers its keys from 1).
                let key_id = if *key_id_first { "1" } else { "" };
                let key_sep = if *key_id_first {
                    *version_separator
                } else {
                    ""
                };
                format!("{key_id}{key_sep}{version}{version_separator}{encoded}")
            }
        }
    }

    /// The headers (and, where the signature lives in the body, the body) the provider would
    /// send. Public-key packs and URL-signing packs without `target.public_url` produce no
    /// signature (the delivery is then refused for what is missing).
    pub fn sign_delivery(
        &self,
        key: &SecretMaterial,
        request: &SignRequest<'_>,
        target: &SignTarget<'_>,
    ) -> SignedDelivery {
        self.sign_as(Signer::Shared(key), request, target)
    }

    /// Like [`Pack::sign_delivery`] for the public-key schemes, with the private key that
    /// belongs to the configured public key (see [`Pack::decode_signing_key`]).
    pub fn sign_with_private_key(
        &self,
        key: &SigningKey,
        request: &SignRequest<'_>,
        target: &SignTarget<'_>,
    ) -> SignedDelivery {
        self.sign_as(Signer::Private(key), request, target)
    }

    fn sign_as(
        &self,
        signer: Signer<'_>,
        request: &SignRequest<'_>,
        target: &SignTarget<'_>,
    ) -> SignedDelivery {
        let shared = match signer {
            Signer::Shared(key) => Some(key),
            Signer::Private(_) => None,
        };
        let options = target.options.unwrap_or(EndpointOptions::none());
        let timestamp = self
            .timestamp
            .as_ref()
            .map(|rule| Self::format_time(rule.format, request.timestamp));
        let type_header = first_header(&self.event_type);
        // `{signature:<key>}` items get a nonce derived from the event id
        let item_value = |key: &str| {
            sha256_hex(format!("{key}:{}", request.event_id).as_bytes())[..16].to_owned()
        };
        let header_values: Vec<String> = self
            .template
            .iter()
            .filter_map(|p| match p {
                Part::Header(h) if Some(*h) == type_header => {
                    Some(request.event_type.unwrap_or_default().to_owned())
                }
                Part::Header(_) => Some(request.event_id.to_owned()),
                Part::SignatureItem(key) => Some(item_value(key)),
                _ => None,
            })
            .collect();
        let items: Vec<(&str, String)> = self
            .template
            .iter()
            .filter_map(|p| match p {
                Part::SignatureItem(key) => Some((*key, item_value(key))),
                _ => None,
            })
            .collect();
        let mut body = request.body.to_vec();
        let mut url = target.public_url.map(str::to_owned);
        let mut nonce_value = None;
        let mut list_header = None;
        let signature = match self.scheme {
            Scheme::Hmac | Scheme::Ed25519 | Scheme::EcdsaP256 | Scheme::RsaSha256Certificate => {
                let body_digest = self.body_digest(request.body);
                let inputs = TemplateInputs {
                    body: request.body,
                    timestamp: timestamp.as_deref(),
                    id: Some(request.event_id),
                    header_values: &header_values,
                    url: target.public_url,
                    options,
                    body_digest: &body_digest,
                };
                let parts = self.signed_parts(&inputs).ok();
                match (signer, parts) {
                    // A `whpk_` public key never signs (nor verifies) an HMAC entry.
                    (Signer::Shared(key), _) if key.is_ed25519_public() => None,
                    (Signer::Shared(key), Some(parts)) if self.scheme == Scheme::Hmac => {
                        let key = match self.key_id_header {
                            Some(_) => split_key_id(key.expose()).map_or(&[][..], |(_, k)| k),
                            None => key.expose(),
                        };
                        let algorithm = self.endpoint_algorithm(options);
                        let tag = algorithm.mac(key, &parts);
                        Some(self.encoding.encode(&tag[..algorithm.tag_len()]))
                    }
                    (Signer::Private(key), Some(parts))
                        if key.fits(self.scheme)
                            || (!self.ed25519_versions().is_empty()
                                && matches!(key, SigningKey::Ed25519(_))) =>
                    {
                        key.sign(&parts.concat())
                            .map(|sig| self.encoding.encode(&sig))
                    }
                    _ => None,
                }
            }
            // Header, query and JSON body tokens are written below; form-field tokens are
            // placed by the sender.
            Scheme::SharedToken => shared.map(|key| {
                let token = String::from_utf8_lossy(key.expose()).into_owned();
                match self.token_form {
                    super::TokenForm::Plain => token,
                    super::TokenForm::Bearer => format!("Bearer {token}"),
                    super::TokenForm::Basic => format!(
                        "Basic {}",
                        base64::engine::general_purpose::STANDARD.encode(key.expose())
                    ),
                }
            }),
            Scheme::UrlNonceHmac => url.as_deref().zip(shared).map(|(url, key)| {
                let nonce = &sha256_hex(request.event_id.as_bytes())[..20];
                nonce_value = Some(nonce.to_owned());
                let form = if self.send_content_type.starts_with(common::FORM) {
                    request.body
                } else {
                    &[][..]
                };
                let signed = super::schemes::url_nonce_string(url, form, nonce);
                let tag = self.algorithm.mac(key.expose(), &[&signed]);
                self.encoding.encode(&tag[..self.algorithm.tag_len()])
            }),
            Scheme::CanonicalRequestHmac => {
                let millis = self.timestamp.as_ref().map_or(
                    request.timestamp.saturating_mul(1000),
                    |rule| {
                        timestamp
                            .as_deref()
                            .and_then(|t| self.parse_time(rule.format, t).ok())
                            .unwrap_or(request.timestamp.saturating_mul(1000))
                    },
                );
                url.as_deref().zip(shared).and_then(|(url, key)| {
                    let (name, value, signed) = self.sign_canonical_request(
                        url,
                        self.send_content_type,
                        millis,
                        request.body,
                    )?;
                    list_header = Some((name, value));
                    let tag = self.algorithm.mac(key.expose(), &[&signed]);
                    Some(self.encoding.encode(&tag[..self.algorithm.tag_len()]))
                })
            }
            Scheme::FormPayloadHmac => {
                if let Some(form) =
                    shared.and_then(|key| self.sign_form_payload(key.expose(), request.body))
                {
                    body = form;
                }
                None
            }
            Scheme::JwtHmac => shared.and_then(|key| {
                self.sign_jwt(
                    key,
                    target.public_url,
                    request.body,
                    request.timestamp,
                    request.event_id,
                )
            }),
            Scheme::UrlParamsHmac => url.as_mut().zip(shared).map(|(url, key)| {
                let params = if self.send_content_type.starts_with(common::FORM) {
                    sorted_params(request.body)
                } else {
                    let param = self.body_hash_param.unwrap_or("bodySHA256");
                    let joiner = if url.contains('?') { '&' } else { '?' };
                    url.push_str(&format!("{joiner}{param}={}", sha256_hex(request.body)));
                    Vec::new()
                };
                let tag = self.algorithm.mac(key.expose(), &[url.as_bytes(), &params]);
                self.encoding.encode(&tag[..self.algorithm.tag_len()])
            }),
            Scheme::FieldsHmac => {
                let has_objects = serde_json::from_slice::<Value>(request.body)
                    .ok()
                    .and_then(|doc| self.signed_objects(&doc).map(|o| !o.is_empty()))
                    .unwrap_or(false);
                match shared {
                    Some(key) if has_objects || self.batch.is_none() => {
                        body = self.sign_fields(key, request, timestamp.as_deref());
                        None
                    }
                    // No signed objects: the raw body is signed in the header.
                    Some(key) => {
                        let tag = self.algorithm.mac(key.expose(), &[request.body]);
                        Some(self.encoding.encode(&tag[..self.algorithm.tag_len()]))
                    }
                    None => None,
                }
            }
        };
        let mut headers = Vec::with_capacity(6);
        common::push_header(&mut headers, "content-type", self.send_content_type);
        if let IdRule::Headers(names) = &self.event_id {
            common::push_header(&mut headers, names[0], request.event_id);
        }
        if let (Some(rule), Some(text)) = (&self.timestamp, &timestamp)
            && let Some(name) = first_header(&rule.from)
        {
            common::push_header(&mut headers, name, text);
        }
        if let (Some(name), Some(event_type)) = (type_header, request.event_type) {
            common::push_header(&mut headers, name, event_type);
        }
        if let Some(name) = first_header(&self.created_at) {
            common::push_header(
                &mut headers,
                name,
                &common::format_rfc3339(request.timestamp),
            );
        }
        for (part, value) in self
            .template
            .iter()
            .filter(|p| matches!(p, Part::Header(_) | Part::SignatureItem(_)))
            .zip(&header_values)
        {
            if let Part::Header(part) = *part
                && Some(part) != type_header
                && !headers.iter().any(|(n, _)| n == part)
            {
                common::push_header(&mut headers, part, value);
            }
        }
        for (name, value) in self.required_headers {
            common::push_header(&mut headers, name, value);
        }
        if let Some((name, value)) = &list_header {
            common::push_header(&mut headers, name, value);
        }
        if let (Some(name), Some(nonce)) = (self.nonce_header, &nonce_value) {
            common::push_header(&mut headers, name, nonce);
        }
        if let (Some(name), Some(key)) = (self.key_id_header, shared)
            && let Some((key_id, _)) = split_key_id(key.expose())
        {
            common::push_header(&mut headers, name, &String::from_utf8_lossy(key_id));
        }
        let ed25519 = matches!(signer, Signer::Private(_)) && self.scheme == Scheme::Hmac;
        match (signature, self.token_source) {
            // A query-parameter signature or token travels on the URL the provider calls.
            (Some(encoded), TokenSource::Query(param)) => {
                let value = self.signature_value(&encoded, timestamp.as_deref(), ed25519);
                url = Some(with_query_param(url.as_deref(), param, &value));
            }
            // A token in a JSON body field is written into the body (Meraki's `sharedSecret`);
            // a body that already carries it, or is no JSON document, keeps its bytes.
            (Some(token), TokenSource::BodyJson(pointer)) => {
                if let Ok(mut doc) = serde_json::from_slice::<Value>(&body)
                    && doc.pointer(pointer).and_then(Value::as_str) != Some(token.as_str())
                {
                    set_pointer(&mut doc, pointer, Value::String(token));
                    body = doc.to_string().into_bytes();
                }
            }
            (Some(encoded), source) => {
                let signature_header = match source {
                    TokenSource::HeaderOption(option) => {
                        super::header_option::header(options, option)
                    }
                    _ => self.signature_header_names.first().map(|n| (*n).to_owned()),
                };
                if let Some(name) = signature_header {
                    let mut value = self.signature_value(&encoded, timestamp.as_deref(), ed25519);
                    if let SignatureFormat::KeyValue {
                        pair_separator,
                        kv_separator,
                        ..
                    } = &self.format
                    {
                        for (key, item) in &items {
                            value = format!("{key}{kv_separator}{item}{pair_separator}{value}");
                        }
                    }
                    if let (Ok(name), Ok(value)) = (
                        http::HeaderName::from_bytes(name.as_bytes()),
                        http::HeaderValue::from_str(&value),
                    ) {
                        headers.push((name, value));
                    }
                }
            }
            (None, _) => {}
        }
        SignedDelivery { headers, body, url }
    }

    /// `fields_hmac`: writes each signed object's signature (and a missing timestamp or
    /// one-time token) into the body; a body without signed objects keeps its bytes and is
    /// signed in the header instead (by the caller's headers — see `sign_delivery`).
    fn sign_fields(
        &self,
        key: &SecretMaterial,
        request: &SignRequest<'_>,
        timestamp: Option<&str>,
    ) -> Vec<u8> {
        let Some(rule) = &self.fields else {
            return request.body.to_vec();
        };
        let Ok(mut doc) = serde_json::from_slice::<Value>(request.body) else {
            return request.body.to_vec();
        };
        let ts_pointer = match self.timestamp.as_ref().map(|t| t.from.as_slice()) {
            Some([Location::Json { pointer, .. }]) => Some(*pointer),
            _ => None,
        };
        let token = sha256_hex(request.event_id.as_bytes())[..50].to_owned();
        let mut objects: Vec<String> = Vec::new();
        if let Some(batch) = &self.batch {
            if let Some(items) = json_at(&doc, batch.items).and_then(Value::as_array) {
                for i in 0..items.len() {
                    objects.push(format!("{}/{i}{}", batch.items, batch.item.unwrap_or("")));
                }
            }
        } else if let Some(first) = rule.object.first() {
            if json_at(&doc, first).is_none() {
                set_pointer(&mut doc, first, Value::Object(serde_json::Map::new()));
            }
            objects.push((*first).to_owned());
        }
        let fill_missing = self.batch.is_none();
        for object in objects {
            for field in rule.fields.iter().filter(|_| fill_missing) {
                let at = format!("{object}{field}");
                if json_at(&doc, &at).is_none() {
                    let value = match (Some(*field) == ts_pointer, timestamp) {
                        (true, Some(ts)) => ts.to_owned(),
                        _ => token.clone(),
                    };
                    set_pointer(&mut doc, &at, Value::String(value));
                }
            }
            let Some(target) = json_at(&doc, &object) else {
                continue;
            };
            let signed = self.field_string(target);
            let tag = self.algorithm.mac(key.expose(), &[signed.as_bytes()]);
            let encoded = self.encoding.encode(&tag[..self.algorithm.tag_len()]);
            set_pointer(
                &mut doc,
                &format!("{object}{}", rule.signature),
                Value::String(encoded),
            );
        }
        doc.to_string().into_bytes()
    }
}
