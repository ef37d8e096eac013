//! Execution of a compiled pack: the [`Adapter`] implementation of [`PackAdapter`], in the
//! ingress order of the crate root (content type → header metadata → constant-time HMAC over
//! every trusted secret → freshness → envelope or handshake from the verified bytes), and
//! `sign`, the provider's side.

use base64::Engine;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD, URL_SAFE};
use hmac::{Hmac, Mac};
use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;
use sha1::Sha1;
use sha2::{Sha256, Sha512};
use subtle::{Choice, ConstantTimeEq};

use super::{
    Algorithm, Encoding, HandshakeAnswer, IdRule, Location, PackAdapter, Part, SecretFormat,
    SignatureFormat, TimeFormat, Window,
};
use crate::common::{
    self, JSON, MAX_HEADER_VALUE_LEN, MAX_SIGNATURE_ENTRIES, bad, content_type_allowed,
    info_header, reject_duplicated, signed_header, signed_header_any,
};
use crate::{
    Adapter, BadRequestReason, Envelope, Extracted, IdLocation, Metadata, Rejection,
    SecretFormatError, SecretMaterial, SignRequest, TrustedSecret, Verified,
};

const TEXT: &str = "text/plain";
const MAX_TAG_LEN: usize = 64;

/// base64url, padding optional.
const BASE64URL_LENIENT: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

impl Algorithm {
    fn tag_len(self) -> usize {
        match self {
            Algorithm::Sha1 => 20,
            Algorithm::Sha256 => 32,
            Algorithm::Sha512 => 64,
        }
    }

    /// HMAC of the concatenation of `parts`; the tag is the first `tag_len()` bytes.
    fn mac(self, key: &[u8], parts: &[&[u8]]) -> [u8; MAX_TAG_LEN] {
        fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], parts: &[&[u8]], out: &mut [u8]) {
            // HMAC accepts keys of every length; this cannot fail.
            let mut mac = <M as Mac>::new_from_slice(key).expect("HMAC takes any key length");
            for part in parts {
                mac.update(part);
            }
            let tag = mac.finalize().into_bytes();
            out[..tag.len()].copy_from_slice(&tag);
        }
        let mut out = [0u8; MAX_TAG_LEN];
        match self {
            Algorithm::Sha1 => run::<Hmac<Sha1>>(key, parts, &mut out),
            Algorithm::Sha256 => run::<Hmac<Sha256>>(key, parts, &mut out),
            Algorithm::Sha512 => run::<Hmac<Sha512>>(key, parts, &mut out),
        }
        out
    }
}

impl Encoding {
    fn decode(self, text: &str) -> Option<Vec<u8>> {
        match self {
            Encoding::Hex => common::decode_lower_hex(text),
            Encoding::Base64 => STANDARD.decode(text).ok(),
            Encoding::Base64Url => BASE64URL_LENIENT.decode(text).ok(),
        }
    }

    fn encode(self, bytes: &[u8]) -> String {
        match self {
            Encoding::Hex => common::encode_lower_hex(bytes),
            Encoding::Base64 => STANDARD.encode(bytes),
            Encoding::Base64Url => URL_SAFE.encode(bytes),
        }
    }
}

fn decode_any_hex(text: &str) -> Option<Vec<u8>> {
    common::decode_lower_hex(&text.to_ascii_lowercase())
}

impl PackAdapter {
    /// A signature candidate, else `malformed_signature`.
    fn tag(&self, text: &str) -> Result<Vec<u8>, Rejection> {
        self.encoding
            .decode(text)
            .filter(|tag| tag.len() == self.algorithm.tag_len())
            .ok_or(bad(BadRequestReason::MalformedSignature))
    }

    /// The signature header's candidates and, for `key_value` formats, its timestamp text.
    fn parse_signatures(
        &self,
        headers: &HeaderMap,
    ) -> Result<(Vec<Vec<u8>>, Option<String>), Rejection> {
        use BadRequestReason::*;
        match &self.format {
            SignatureFormat::Plain {
                prefix,
                prefix_optional,
                repeated_header: true,
            } => {
                let name = self
                    .signature_header_names
                    .iter()
                    .find(|n| headers.contains_key(**n))
                    .ok_or(bad(MissingSignature))?;
                let mut out = Vec::new();
                for (count, value) in headers.get_all(*name).iter().enumerate() {
                    if count >= MAX_SIGNATURE_ENTRIES || value.len() > MAX_HEADER_VALUE_LEN {
                        return Err(bad(MalformedSignature));
                    }
                    let text = value.to_str().map_err(|_| bad(MalformedSignature))?;
                    out.push(self.plain(text, *prefix, *prefix_optional)?);
                }
                Ok((out, None))
            }
            SignatureFormat::Plain {
                prefix,
                prefix_optional,
                ..
            } => {
                let text =
                    signed_header_any(headers, self.signature_header_names, MalformedSignature)?
                        .ok_or(bad(MissingSignature))?;
                Ok((vec![self.plain(text, *prefix, *prefix_optional)?], None))
            }
            SignatureFormat::KeyValue {
                pair_separator,
                kv_separator,
                signature_keys,
                timestamp_key,
                skip_undecodable,
            } => {
                let text =
                    signed_header_any(headers, self.signature_header_names, MalformedSignature)?
                        .ok_or(bad(MissingSignature))?;
                let mut timestamp = None;
                let mut out = Vec::new();
                for (count, item) in text.split(pair_separator).enumerate() {
                    if count > MAX_SIGNATURE_ENTRIES {
                        return Err(bad(MalformedSignature));
                    }
                    let (key, value) = item
                        .split_once(kv_separator)
                        .ok_or(bad(MalformedSignature))?;
                    if Some(key) == *timestamp_key {
                        if timestamp.replace(value).is_some() {
                            return Err(bad(MalformedSignature));
                        }
                    } else if signature_keys.contains(&key) {
                        match self.tag(value) {
                            Ok(tag) => out.push(tag),
                            Err(_) if *skip_undecodable => {}
                            Err(e) => return Err(e),
                        }
                    }
                }
                if timestamp_key.is_some() && timestamp.is_none() {
                    return Err(bad(MalformedSignature));
                }
                Ok((out, timestamp.map(str::to_owned)))
            }
            SignatureFormat::VersionedList {
                separator,
                version_separator,
                versions,
            } => {
                let text =
                    signed_header_any(headers, self.signature_header_names, MalformedSignature)?
                        .ok_or(bad(MissingSignature))?;
                let mut out = Vec::new();
                let entries = text.split(separator).filter(|e| !e.is_empty());
                for (count, entry) in entries.enumerate() {
                    if count >= MAX_SIGNATURE_ENTRIES {
                        return Err(bad(MalformedSignature));
                    }
                    let (version, value) = entry
                        .split_once(version_separator)
                        .ok_or(bad(MalformedSignature))?;
                    if versions.contains(&version) {
                        out.push(self.tag(value)?);
                    }
                }
                Ok((out, None))
            }
        }
    }

    fn plain(
        &self,
        text: &str,
        prefix: Option<&str>,
        prefix_optional: bool,
    ) -> Result<Vec<u8>, Rejection> {
        let bare = match prefix {
            None => text,
            Some(prefix) => match text.strip_prefix(prefix) {
                Some(bare) => bare,
                None if prefix_optional => text,
                None => return Err(bad(BadRequestReason::MalformedSignature)),
            },
        };
        self.tag(bare)
    }

    /// Milliseconds since the epoch of a timestamp's text.
    fn parse_time(&self, format: TimeFormat, text: &str) -> Result<i64, Rejection> {
        let malformed = bad(BadRequestReason::MalformedTimestamp);
        match format {
            TimeFormat::UnixSeconds => common::parse_unix_seconds(text)?
                .checked_mul(1000)
                .ok_or(malformed),
            TimeFormat::UnixMillis => common::parse_unix_seconds(text),
            TimeFormat::Rfc3339 => common::parse_rfc3339(text)
                .and_then(|s| s.checked_mul(1000))
                .ok_or(malformed),
        }
    }

    fn format_time(format: TimeFormat, unix_seconds: i64) -> String {
        match format {
            TimeFormat::UnixSeconds => unix_seconds.to_string(),
            TimeFormat::UnixMillis => unix_seconds.saturating_mul(1000).to_string(),
            TimeFormat::Rfc3339 => common::format_rfc3339(unix_seconds),
        }
    }

    /// The signed bytes, as borrowed parts.
    fn signed_parts<'a>(
        &'a self,
        body: &'a [u8],
        timestamp: Option<&'a str>,
        id: Option<&'a str>,
        header_values: &'a [String],
    ) -> Result<Vec<&'a [u8]>, Rejection> {
        let mut header_values = header_values.iter();
        self.template
            .iter()
            .map(|part| match part {
                Part::Literal(bytes) => Ok(*bytes),
                Part::Body => Ok(body),
                Part::Timestamp => timestamp
                    .map(str::as_bytes)
                    .ok_or(bad(BadRequestReason::MissingTimestamp)),
                Part::Id => id
                    .map(str::as_bytes)
                    .ok_or(bad(BadRequestReason::MissingId)),
                Part::Header(_) => header_values
                    .next()
                    .map(|v| v.as_bytes())
                    .ok_or(bad(BadRequestReason::MissingSignature)),
            })
            .collect()
    }

    /// Tries every trusted secret in order against every candidate, in constant time per
    /// comparison; reports the first secret that matched.
    fn verify_signature(
        &self,
        secrets: &[TrustedSecret<'_>],
        parts: &[&[u8]],
        candidates: &[Vec<u8>],
    ) -> Result<Verified, Rejection> {
        let len = self.algorithm.tag_len();
        for (index, secret) in secrets.iter().enumerate() {
            let expected = self.algorithm.mac(secret.key.expose(), parts);
            let mut matched = Choice::from(0);
            for candidate in candidates {
                matched |= expected[..len].ct_eq(candidate.as_slice());
            }
            if bool::from(matched) {
                return Ok(Verified {
                    matched_secret_index: index,
                });
            }
        }
        Err(Rejection::InvalidSignature)
    }

    /// A timestamp read from the verified body (milliseconds), for packs that sign it there.
    fn body_timestamp(
        &self,
        format: TimeFormat,
        pointer: &str,
        body: &[u8],
    ) -> Result<i64, Rejection> {
        let json: Value =
            serde_json::from_slice(body).map_err(|_| bad(BadRequestReason::MissingTimestamp))?;
        match json.pointer(pointer) {
            None | Some(Value::Null) => Err(bad(BadRequestReason::MissingTimestamp)),
            Some(Value::Number(n)) => {
                let n = n
                    .as_i64()
                    .ok_or(bad(BadRequestReason::MalformedTimestamp))?;
                self.parse_time(format, &n.to_string())
            }
            Some(Value::String(s)) => self.parse_time(format, s),
            Some(_) => Err(bad(BadRequestReason::MalformedTimestamp)),
        }
    }

    /// The JSON document of the verified body (form deliveries: its payload field).
    fn document(&self, headers: &HeaderMap, body: &[u8]) -> Result<Value, Rejection> {
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
                Location::SignatureParam(_) => None,
            };
            if found.is_some() {
                return Ok(found);
            }
        }
        Ok(None)
    }

    fn event_id(&self, metadata: &Metadata, json: &Value) -> Result<String, Rejection> {
        let missing = bad(BadRequestReason::MissingEventId);
        match &self.event_id {
            IdRule::Headers(_) => metadata.header_id.clone().ok_or(missing),
            IdRule::Json(pointers) => pointers
                .iter()
                .find_map(|p| common::id_at(json, p))
                .ok_or(missing),
            IdRule::Composed(parts) => {
                let mut values = Vec::with_capacity(parts.len());
                for (pointer, optional) in parts {
                    match common::id_at(json, pointer) {
                        Some(value) => values.push(value),
                        None if *optional => {}
                        None => return Err(missing),
                    }
                }
                Ok(values.join(":"))
            }
        }
    }

    fn handshake(
        &self,
        headers: &HeaderMap,
        json: &Value,
        key: Option<&SecretMaterial>,
    ) -> Result<Option<Extracted>, Rejection> {
        for rule in &self.handshakes {
            let discriminator = match rule.when {
                Location::Header(name) => info_header(headers, &[name])?,
                Location::Json { pointer, .. } => common::str_at(json, pointer),
                Location::SignatureParam(_) => None,
            };
            if discriminator.as_deref() != Some(rule.equals) {
                continue;
            }
            let challenge = json
                .pointer(rule.challenge)
                .and_then(Value::as_str)
                .ok_or(bad(BadRequestReason::UnparseableEnvelope))?;
            let (content_type, body) = match rule.answer {
                HandshakeAnswer::EchoText => (TEXT, challenge.as_bytes().to_vec()),
                HandshakeAnswer::EchoJson { field } => {
                    let mut answer = serde_json::Map::new();
                    answer.insert(field.to_owned(), Value::from(challenge));
                    (JSON, Value::Object(answer).to_string().into_bytes())
                }
                HandshakeAnswer::EchoWithDigest {
                    echo_field,
                    digest_field,
                } => {
                    // The answer proves the secret; without the matched key there is none.
                    let key = key.ok_or(bad(BadRequestReason::UnparseableEnvelope))?;
                    let tag = self.algorithm.mac(key.expose(), &[challenge.as_bytes()]);
                    let digest = common::encode_lower_hex(&tag[..self.algorithm.tag_len()]);
                    let mut answer = serde_json::Map::new();
                    answer.insert(echo_field.to_owned(), Value::from(challenge));
                    answer.insert(digest_field.to_owned(), Value::from(digest));
                    (JSON, Value::Object(answer).to_string().into_bytes())
                }
            };
            return Ok(Some(Extracted::Handshake { content_type, body }));
        }
        Ok(None)
    }

    fn extract_inner(
        &self,
        metadata: &Metadata,
        headers: &HeaderMap,
        body: &[u8],
        key: Option<&SecretMaterial>,
    ) -> Result<Extracted, Rejection> {
        // An id header is known before the body is parsed; its absence is reported first.
        if matches!(self.event_id, IdRule::Headers(_)) && metadata.header_id.is_none() {
            return Err(bad(BadRequestReason::MissingEventId));
        }
        let json = self.document(headers, body)?;
        if let Some(handshake) = self.handshake(headers, &json, key)? {
            return Ok(handshake);
        }
        let event_id = self.event_id(metadata, &json)?;
        let object_version = self.object_version.iter().find_map(|l| match l {
            Location::Json { pointer, .. } => json.pointer(pointer).and_then(|v| {
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
                Location::Json { pointer, .. } => common::time_at(&json, pointer),
                Location::SignatureParam(_) => None,
            };
            if created_at.is_some() {
                break;
            }
        }
        Ok(Extracted::Event(Envelope {
            event_id,
            event_type: self.text_at(&self.event_type, headers, &json)?,
            object_id: self.text_at(&self.object_id, headers, &json)?,
            object_version,
            created_at,
        }))
    }

    fn first_header(locations: &[Location]) -> Option<&'static str> {
        locations.iter().find_map(|l| match l {
            Location::Header(h) => Some(*h),
            _ => None,
        })
    }
}

impl Adapter for PackAdapter {
    fn id(&self) -> &'static str {
        self.id
    }

    fn default_tolerance_seconds(&self) -> Option<u64> {
        self.timestamp.as_ref().map(|t| t.tolerance_seconds)
    }

    fn default_content_type(&self) -> &'static str {
        self.send_content_type
    }

    fn accepts_content_type(&self, content_type: Option<&HeaderValue>) -> bool {
        content_type_allowed(content_type, self.content_types)
    }

    fn decode_secret(&self, secret: &str) -> Result<SecretMaterial, SecretFormatError> {
        match self.secret_format {
            SecretFormat::Utf8 => common::utf8_secret(secret),
            SecretFormat::WhsecBase64 => common::whsec_base64_secret(secret),
            SecretFormat::Hex | SecretFormat::Base64 => {
                if secret.is_empty() {
                    return Err(SecretFormatError::Empty);
                }
                let (bytes, expected) = if self.secret_format == SecretFormat::Hex {
                    (decode_any_hex(secret), "hex")
                } else {
                    (STANDARD.decode(secret).ok(), "base64")
                };
                match bytes {
                    Some(bytes) if !bytes.is_empty() => Ok(SecretMaterial::new(bytes)),
                    _ => Err(SecretFormatError::Malformed { expected }),
                }
            }
        }
    }

    fn signature_headers(&self) -> &'static [&'static str] {
        self.duplicate_checked_headers
    }

    fn parse_metadata(&self, headers: &HeaderMap) -> Result<Metadata, Rejection> {
        use BadRequestReason::*;
        reject_duplicated(headers, self.duplicate_checked_headers)?;
        let (signatures, param_timestamp) = self.parse_signatures(headers)?;
        let header_id = match &self.event_id {
            IdRule::Headers(names) if self.id_signed => Some(
                signed_header_any(headers, names, MalformedSignature)?
                    .filter(|id| !id.is_empty())
                    .ok_or(bad(MissingId))?
                    .to_owned(),
            ),
            IdRule::Headers(names) => info_header(headers, names)?,
            _ => None,
        };
        let mut timestamp_text = param_timestamp;
        let mut timestamp_millis = None;
        if let Some(rule) = &self.timestamp {
            let names: Vec<&str> = rule
                .from
                .iter()
                .filter_map(|l| match l {
                    Location::Header(h) => Some(*h),
                    _ => None,
                })
                .collect();
            if !names.is_empty() {
                let text = signed_header_any(headers, &names, MalformedTimestamp)?
                    .ok_or(bad(MissingTimestamp))?;
                timestamp_text = Some(text.to_owned());
            }
            if let Some(text) = &timestamp_text {
                timestamp_millis = Some(self.parse_time(rule.format, text)?);
            }
        }
        let mut template_values = Vec::new();
        for part in &self.template {
            if let Part::Header(name) = part {
                let value = signed_header(headers, name, MalformedSignature)?
                    .ok_or(bad(MissingSignature))?;
                template_values.push(value.to_owned());
            }
        }
        let header_event_type = match Self::first_header(&self.event_type) {
            Some(name) => info_header(headers, &[name])?,
            None => None,
        };
        Ok(Metadata {
            signatures,
            timestamp_text,
            timestamp: timestamp_millis.map(|ms| ms.div_euclid(1000)),
            header_id,
            header_event_type,
            timestamp_millis,
            template_values,
        })
    }

    fn verify(
        &self,
        metadata: &Metadata,
        body: &[u8],
        secrets: &[TrustedSecret<'_>],
        now: i64,
        tolerance_seconds: Option<u64>,
    ) -> Result<Verified, Rejection> {
        if self.require_body && body.is_empty() {
            return Err(bad(BadRequestReason::MissingBody));
        }
        let parts = self.signed_parts(
            body,
            metadata.timestamp_text.as_deref(),
            metadata.header_id.as_deref(),
            &metadata.template_values,
        )?;
        let verified = self.verify_signature(secrets, &parts, &metadata.signatures)?;
        if let Some(rule) = &self.timestamp {
            let millis = match (rule.from.as_slice(), metadata.timestamp_millis) {
                ([Location::Json { pointer, .. }], _) => {
                    self.body_timestamp(rule.format, pointer, body)?
                }
                (_, Some(millis)) => millis,
                (_, None) => return Err(bad(BadRequestReason::MissingTimestamp)),
            };
            let tolerance = i128::from(tolerance_seconds.unwrap_or(rule.tolerance_seconds)) * 1000;
            let age = i128::from(now) * 1000 - i128::from(millis);
            if age > tolerance || (rule.window == Window::Both && -age > tolerance) {
                return Err(Rejection::StaleTimestamp);
            }
        }
        Ok(verified)
    }

    fn extract(
        &self,
        metadata: &Metadata,
        headers: &HeaderMap,
        body: &[u8],
    ) -> Result<Extracted, Rejection> {
        self.extract_inner(metadata, headers, body, None)
    }

    fn extract_with_key(
        &self,
        metadata: &Metadata,
        headers: &HeaderMap,
        body: &[u8],
        key: &SecretMaterial,
    ) -> Result<Extracted, Rejection> {
        self.extract_inner(metadata, headers, body, Some(key))
    }

    fn id_location(&self) -> IdLocation {
        match &self.event_id {
            IdRule::Headers(names) => IdLocation::Header(names[0]),
            IdRule::Json(pointers) => IdLocation::BodyPointer(pointers[0]),
            IdRule::Composed(parts) => IdLocation::BodyPointer(parts[0].0),
        }
    }

    fn sign(
        &self,
        key: &SecretMaterial,
        request: &SignRequest<'_>,
    ) -> Vec<(HeaderName, HeaderValue)> {
        let timestamp = self
            .timestamp
            .as_ref()
            .map(|rule| Self::format_time(rule.format, request.timestamp));
        let id_header = match &self.event_id {
            IdRule::Headers(names) => Some(names[0]),
            _ => None,
        };
        let type_header = Self::first_header(&self.event_type);
        let header_values: Vec<String> = self
            .template
            .iter()
            .filter_map(|p| match p {
                Part::Header(h) if Some(*h) == type_header => {
                    Some(request.event_type.unwrap_or_default().to_owned())
                }
                Part::Header(_) => Some(String::new()),
                _ => None,
            })
            .collect();
        let Ok(parts) = self.signed_parts(
            request.body,
            timestamp.as_deref(),
            Some(request.event_id),
            &header_values,
        ) else {
            return Vec::new();
        };
        let tag = self.algorithm.mac(key.expose(), &parts);
        let encoded = self.encoding.encode(&tag[..self.algorithm.tag_len()]);
        let value = match &self.format {
            SignatureFormat::Plain { prefix, .. } => format!("{}{encoded}", prefix.unwrap_or("")),
            SignatureFormat::KeyValue {
                pair_separator,
                kv_separator,
                signature_keys,
                timestamp_key,
                ..
            } => {
                let signature = format!("{}{kv_separator}{encoded}", signature_keys[0]);
                match (timestamp_key, &timestamp) {
                    (Some(k), Some(t)) => {
                        format!("{k}{kv_separator}{t}{pair_separator}{signature}")
                    }
                    _ => signature,
                }
            }
            SignatureFormat::VersionedList {
                version_separator,
                versions,
                ..
            } => format!("{}{version_separator}{encoded}", versions[0]),
        };
        let mut out = Vec::with_capacity(6);
        common::push_header(&mut out, "content-type", self.send_content_type);
        if let Some(name) = id_header {
            common::push_header(&mut out, name, request.event_id);
        }
        if let (Some(rule), Some(text)) = (&self.timestamp, &timestamp)
            && let Some(name) = Self::first_header(&rule.from)
        {
            common::push_header(&mut out, name, text);
        }
        if let (Some(name), Some(event_type)) = (type_header, request.event_type) {
            common::push_header(&mut out, name, event_type);
        }
        if let Some(name) = Self::first_header(&self.created_at) {
            common::push_header(&mut out, name, &common::format_rfc3339(request.timestamp));
        }
        for (part, value) in self
            .template
            .iter()
            .filter_map(|p| match p {
                Part::Header(h) => Some(*h),
                _ => None,
            })
            .zip(&header_values)
        {
            if Some(part) != type_header {
                common::push_header(&mut out, part, value);
            }
        }
        common::push_header(&mut out, self.signature_header_names[0], &value);
        out
    }
}
