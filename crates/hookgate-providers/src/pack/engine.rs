//! Execution of a compiled pack up to verification, in the ingress order of the crate root:
//! content type → metadata from headers and query → the scheme's verification over the exact
//! raw body against every trusted secret → freshness. Extraction is in `extract`, the
//! provider's side (`sign`) in `sign`, the URL- and field-signing schemes in `schemes`.

use http::{HeaderMap, HeaderValue};
use serde_json::Value;
use subtle::{Choice, ConstantTimeEq};

use super::primitives::{self, PublicKey};
use super::{
    Algorithm, IdRule, Location, Pack, Part, RequestContext, Scheme, SignatureFormat, TimeFormat,
};
use crate::common::{
    self, MAX_HEADER_VALUE_LEN, MAX_SIGNATURE_ENTRIES, bad, content_type_allowed, info_header,
    json_at, reject_duplicated, signed_header, signed_header_any,
};
use crate::{
    BadRequestReason, Metadata, Rejection, SecretFormatError, SecretMaterial, TrustedSecret,
    Verified,
};

/// Values of the signed-bytes template that are not in the headers.
pub(crate) struct TemplateInputs<'a> {
    pub(crate) body: &'a [u8],
    pub(crate) timestamp: Option<&'a str>,
    pub(crate) id: Option<&'a str>,
    pub(crate) header_values: &'a [String],
    pub(crate) url: Option<&'a str>,
    pub(crate) options: &'a super::EndpointOptions,
    pub(crate) crc32: &'a str,
}

impl Pack {
    /// Whether the request's content type (the header value, if any) is one this provider
    /// sends (else 415). An absent `Content-Type` is accepted.
    pub fn accepts_content_type(&self, content_type: Option<&HeaderValue>) -> bool {
        content_type_allowed(content_type, self.content_types)
    }

    /// Turns a configured secret string into key material, in the provider's own format.
    pub fn decode_secret(&self, secret: &str) -> Result<SecretMaterial, SecretFormatError> {
        primitives::decode_secret(self.secret_format, secret)
    }

    /// Default freshness window in seconds, `None` when the scheme signs no timestamp.
    pub fn default_tolerance_seconds(&self) -> Option<u64> {
        self.timestamp.as_ref().map(|t| t.tolerance_seconds)
    }

    /// Names of the headers whose repetition is refused (400 `duplicated_signature`).
    pub fn signature_headers(&self) -> &'static [&'static str] {
        self.duplicate_checked_headers
    }

    /// A signature candidate, else `malformed_signature`.
    pub(crate) fn tag(&self, text: &str) -> Result<Vec<u8>, Rejection> {
        let fits = |len: usize| match self.scheme {
            Scheme::Hmac | Scheme::FieldsHmac => len == self.algorithm.tag_len(),
            Scheme::UrlParamsHmac => matches!(len, 20 | 32 | 64),
            Scheme::Ed25519 => len == 64,
            Scheme::EcdsaP256 => (8..=72).contains(&len),
            Scheme::RsaSha256Certificate => (1..=1024).contains(&len),
            Scheme::SharedToken => len > 0,
        };
        self.encoding
            .decode(text)
            .filter(|tag| fits(tag.len()))
            .ok_or(bad(BadRequestReason::MalformedSignature))
    }

    /// The signature header's candidates and, for `key_value` formats, its timestamp text.
    pub(crate) fn parse_signatures(
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
                    if count >= MAX_SIGNATURE_ENTRIES {
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
    pub(crate) fn parse_time(&self, format: TimeFormat, text: &str) -> Result<i64, Rejection> {
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

    pub(crate) fn format_time(format: TimeFormat, unix_seconds: i64) -> String {
        match format {
            TimeFormat::UnixSeconds => unix_seconds.to_string(),
            TimeFormat::UnixMillis => unix_seconds.saturating_mul(1000).to_string(),
            TimeFormat::Rfc3339 => common::format_rfc3339(unix_seconds),
        }
    }

    /// The signed bytes, as borrowed parts.
    pub(crate) fn signed_parts<'a>(
        &'a self,
        inputs: &TemplateInputs<'a>,
    ) -> Result<Vec<&'a [u8]>, Rejection> {
        let mut header_values = inputs.header_values.iter();
        self.template
            .iter()
            .map(|part| match part {
                Part::Literal(bytes) => Ok(*bytes),
                Part::Body => Ok(inputs.body),
                Part::BodyCrc32 => Ok(inputs.crc32.as_bytes()),
                Part::Timestamp => inputs
                    .timestamp
                    .map(str::as_bytes)
                    .ok_or(bad(BadRequestReason::MissingTimestamp)),
                Part::Id => inputs
                    .id
                    .map(str::as_bytes)
                    .ok_or(bad(BadRequestReason::MissingId)),
                Part::Header(_) => header_values
                    .next()
                    .map(|v| v.as_bytes())
                    .ok_or(bad(BadRequestReason::MissingSignature)),
                // Configuration guarantees both (public_url / required options); without them
                // nothing can verify.
                Part::Url => inputs
                    .url
                    .map(str::as_bytes)
                    .ok_or(Rejection::InvalidSignature),
                Part::Option(name) => inputs
                    .options
                    .get(name)
                    .map(str::as_bytes)
                    .ok_or(Rejection::InvalidSignature),
            })
            .collect()
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
        match json_at(&json, pointer) {
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

    /// Parses signature metadata from the headers and raw query, before the body is read
    /// (400: missing / duplicated / malformed).
    pub fn parse_metadata(&self, ctx: &RequestContext<'_>) -> Result<Metadata, Rejection> {
        use BadRequestReason::*;
        let headers = ctx.headers;
        reject_duplicated(headers, self.duplicate_checked_headers)?;
        // fields_hmac packs read their signature from the body unless a header carries it.
        let in_body = self.scheme == Scheme::FieldsHmac
            && !self
                .signature_header_names
                .iter()
                .any(|n| headers.contains_key(*n));
        let (signatures, param_timestamp) = if in_body {
            (Vec::new(), None)
        } else {
            self.parse_signatures(headers)?
        };
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
            if !names.is_empty() && self.fields.is_none() {
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
        let header_event_type = match first_header(&self.event_type) {
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

    /// Verifies the exact raw body: the scheme's signature against every trusted secret
    /// (401 `invalid_signature`), then the signed timestamp against `tolerance_seconds`
    /// around `now` (401 `stale_timestamp`), in that order. For a pack that signs a timestamp,
    /// `None` means [`Pack::default_tolerance_seconds`] (freshness is never skipped).
    pub fn verify(
        &self,
        ctx: &RequestContext<'_>,
        metadata: &Metadata,
        body: &[u8],
        secrets: &[TrustedSecret<'_>],
        now: i64,
        tolerance_seconds: Option<u64>,
    ) -> Result<Verified, Rejection> {
        if self.require_body && body.is_empty() {
            return Err(bad(BadRequestReason::MissingBody));
        }
        let mut field_timestamp = None;
        let verified = match self.scheme {
            Scheme::Hmac | Scheme::Ed25519 | Scheme::EcdsaP256 | Scheme::RsaSha256Certificate => {
                let url = ctx.signed_url();
                let crc32 = if self.template.contains(&Part::BodyCrc32) {
                    crc32fast::hash(body).to_string()
                } else {
                    String::new()
                };
                let inputs = TemplateInputs {
                    body,
                    timestamp: metadata.timestamp_text.as_deref(),
                    id: metadata.header_id.as_deref(),
                    header_values: &metadata.template_values,
                    url: url.as_deref(),
                    options: ctx.options,
                    crc32: &crc32,
                };
                let parts = self.signed_parts(&inputs)?;
                match self.scheme {
                    Scheme::Hmac => {
                        verify_hmac(self.algorithm, secrets, &parts, &metadata.signatures)?
                    }
                    Scheme::Ed25519 => {
                        verify_public(PublicKey::Ed25519, secrets, &parts, metadata)?
                    }
                    Scheme::EcdsaP256 => {
                        verify_public(PublicKey::EcdsaP256, secrets, &parts, metadata)?
                    }
                    _ => verify_public(PublicKey::RsaCertificate, secrets, &parts, metadata)?,
                }
            }
            Scheme::SharedToken => {
                let mut found = None;
                for (index, secret) in secrets.iter().enumerate() {
                    let mut matched = false;
                    for candidate in &metadata.signatures {
                        matched |= primitives::token_matches(secret.key.expose(), candidate);
                    }
                    if matched {
                        found = Some(index);
                        break;
                    }
                }
                Verified {
                    matched_secret_index: found.ok_or(Rejection::InvalidSignature)?,
                }
            }
            Scheme::UrlParamsHmac => self.verify_url_params(ctx, metadata, body, secrets)?,
            Scheme::FieldsHmac => {
                let (verified, timestamp) = self.verify_fields(ctx, metadata, body, secrets)?;
                field_timestamp = timestamp;
                verified
            }
        };
        if let Some(rule) = &self.timestamp {
            let millis = match (
                &field_timestamp,
                rule.from.as_slice(),
                metadata.timestamp_millis,
            ) {
                (Some(text), _, _) => self.parse_time(rule.format, text)?,
                (None, [Location::Json { pointer, .. }], _) => {
                    self.body_timestamp(rule.format, pointer, body)?
                }
                (None, _, Some(millis)) => millis,
                (None, _, None) => return Err(bad(BadRequestReason::MissingTimestamp)),
            };
            let tolerance_seconds = tolerance_seconds.unwrap_or(rule.tolerance_seconds);
            let future_seconds = rule
                .max_future_seconds
                .map_or(tolerance_seconds, |max| max.min(tolerance_seconds));
            let age = i128::from(now) * 1000 - i128::from(millis);
            if age > i128::from(tolerance_seconds) * 1000
                || -age > i128::from(future_seconds) * 1000
            {
                return Err(Rejection::StaleTimestamp);
            }
        }
        Ok(verified)
    }
}

/// The first header among `locations`.
pub(crate) fn first_header(locations: &[Location]) -> Option<&'static str> {
    locations.iter().find_map(|l| match l {
        Location::Header(h) => Some(*h),
        _ => None,
    })
}

/// Tries every trusted secret in order against every candidate, in constant time per
/// comparison; reports the first secret that matched.
pub(crate) fn verify_hmac(
    algorithm: Algorithm,
    secrets: &[TrustedSecret<'_>],
    parts: &[&[u8]],
    candidates: &[Vec<u8>],
) -> Result<Verified, Rejection> {
    let len = algorithm.tag_len();
    for (index, secret) in secrets.iter().enumerate() {
        let expected = algorithm.mac(secret.key.expose(), parts);
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

/// Public keys are not secret: the first key that verifies any candidate wins.
fn verify_public(
    kind: PublicKey,
    keys: &[TrustedSecret<'_>],
    parts: &[&[u8]],
    metadata: &Metadata,
) -> Result<Verified, Rejection> {
    let message = parts.concat();
    keys.iter()
        .position(|key| {
            metadata
                .signatures
                .iter()
                .any(|sig| kind.verify(key.key.expose(), &message, sig))
        })
        .map(|matched_secret_index| Verified {
            matched_secret_index,
        })
        .ok_or(Rejection::InvalidSignature)
}

/// The JSON value at a pointer, as text (strings verbatim, numbers and booleans as written).
pub(crate) fn scalar_text(value: &Value) -> Option<String> {
    match value {
        Value::String(s) => Some(s.clone()),
        Value::Number(n) => Some(n.to_string()),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trusted<'k>(keys: &[&'k SecretMaterial]) -> Vec<TrustedSecret<'k>> {
        keys.iter()
            .map(|key| TrustedSecret { version: "v", key })
            .collect()
    }

    #[test]
    fn verify_tries_every_secret_and_reports_the_first_match() {
        let (a, b, c) = (
            SecretMaterial::new(b"a".to_vec()),
            SecretMaterial::new(b"b".to_vec()),
            SecretMaterial::new(b"c".to_vec()),
        );
        let alg = Algorithm::Sha256;
        let tag_b = alg.mac(b"b", &[b"x.", b"body"])[..32].to_vec();
        let other = vec![0u8; 32];
        // the signed parts are concatenated
        assert_eq!(tag_b.as_slice(), &alg.mac(b"b", &[b"x.body"])[..32]);
        let first = |i| {
            Ok(Verified {
                matched_secret_index: i,
            })
        };
        let parts: &[&[u8]] = &[b"x.body"];
        assert_eq!(
            verify_hmac(alg, &trusted(&[&a, &b, &c]), parts, &[other, tag_b.clone()]),
            first(1)
        );
        assert_eq!(
            verify_hmac(
                alg,
                &trusted(&[&b, &b]),
                parts,
                std::slice::from_ref(&tag_b)
            ),
            first(0)
        );
        let none = Err(Rejection::InvalidSignature);
        assert_eq!(
            verify_hmac(
                alg,
                &trusted(&[&a, &c]),
                parts,
                std::slice::from_ref(&tag_b)
            ),
            none
        );
        assert_eq!(verify_hmac(alg, &trusted(&[&b]), parts, &[]), none);
        assert_eq!(verify_hmac(alg, &[], parts, &[tag_b]), none);
    }
}
