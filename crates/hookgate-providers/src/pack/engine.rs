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
    /// The text of the template's body digest (`{body_crc32}`, `{body_sha256}`), if any.
    pub(crate) body_digest: &'a str,
}

impl Pack {
    /// Whether the request's content type (the header value, if any) is one this provider
    /// sends (else 415). An absent `Content-Type` is accepted.
    pub fn accepts_content_type(&self, content_type: Option<&HeaderValue>) -> bool {
        content_type_allowed(content_type, self.content_types)
    }

    /// Turns a configured secret string into key material, in the provider's own format.
    pub fn decode_secret(&self, secret: &str) -> Result<SecretMaterial, SecretFormatError> {
        if let Some(public) = self.decode_ed25519_public(secret) {
            return public;
        }
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
        if self.scheme == Scheme::SharedToken {
            return self.token_candidate(text);
        }
        let fits = |len: usize| match self.scheme {
            Scheme::Hmac
            | Scheme::FieldsHmac
            | Scheme::UrlNonceHmac
            | Scheme::FormPayloadHmac
            | Scheme::CanonicalRequestHmac => {
                len == self.algorithm.tag_len()
                    || self
                        .algorithm_option
                        .as_ref()
                        .is_some_and(|o| o.values.iter().any(|(_, a)| a.tag_len() == len))
            }
            Scheme::UrlParamsHmac => matches!(len, 20 | 32 | 64),
            Scheme::Ed25519 => len == 64,
            Scheme::EcdsaP256 => (8..=72).contains(&len),
            Scheme::RsaSha256Certificate => (1..=1024).contains(&len),
            Scheme::SharedToken => len > 0,
            Scheme::JwtHmac => (1..=8192).contains(&len),
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
                ..
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
                each_header: true,
                ..
            } => {
                let mut out = Vec::new();
                for name in self.signature_header_names {
                    if let Some(text) = signed_header(headers, name, MalformedSignature)? {
                        out.push(self.plain(text, *prefix, *prefix_optional)?);
                    }
                }
                if out.is_empty() {
                    return Err(bad(MissingSignature));
                }
                Ok((out, None))
            }
            SignatureFormat::Plain {
                prefix,
                prefix_optional,
                separator,
                ..
            } => {
                let text =
                    signed_header_any(headers, self.signature_header_names, MalformedSignature)?
                        .ok_or(bad(MissingSignature))?;
                let Some(separator) = separator else {
                    return Ok((vec![self.plain(text, *prefix, *prefix_optional)?], None));
                };
                let mut out = Vec::new();
                for (count, item) in text.split(separator).enumerate() {
                    if count >= MAX_SIGNATURE_ENTRIES {
                        return Err(bad(MalformedSignature));
                    }
                    out.push(self.plain(item.trim(), *prefix, *prefix_optional)?);
                }
                Ok((out, None))
            }
            SignatureFormat::KeyValue {
                pair_separator,
                kv_separator,
                signature_keys,
                timestamp_key,
                skip_undecodable,
                group_separator,
            } => {
                let text =
                    signed_header_any(headers, self.signature_header_names, MalformedSignature)?
                        .ok_or(bad(MissingSignature))?;
                let format = super::key_value::KeyValueFormat {
                    pair_separator,
                    kv_separator,
                    signature_keys,
                    timestamp_key: *timestamp_key,
                    skip_undecodable: *skip_undecodable,
                    group_separator: *group_separator,
                };
                self.parse_key_value(text, &format)
            }
            SignatureFormat::TimestampThenSignatures { separator } => {
                let text =
                    signed_header_any(headers, self.signature_header_names, MalformedSignature)?
                        .ok_or(bad(MissingSignature))?;
                let mut items = text.split(separator);
                let timestamp = items
                    .next()
                    .filter(|t| !t.is_empty())
                    .ok_or(bad(MalformedSignature))?;
                let mut out = Vec::new();
                for (count, item) in items.enumerate() {
                    if count >= MAX_SIGNATURE_ENTRIES {
                        return Err(bad(MalformedSignature));
                    }
                    out.push(self.tag(item.trim())?);
                }
                if out.is_empty() {
                    return Err(bad(MalformedSignature));
                }
                Ok((out, Some(timestamp.to_owned())))
            }
            SignatureFormat::VersionedList {
                separator,
                version_separator,
                versions,
                key_id_first,
                ..
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
                    let entry = match key_id_first {
                        // The key id names which secret signed; any trusted one may match.
                        true => match entry.trim().split_once(version_separator) {
                            Some((key_id, rest)) if !key_id.is_empty() => rest,
                            _ => return Err(bad(MalformedSignature)),
                        },
                        false => entry,
                    };
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

    pub(crate) fn plain(
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
            // A date-time without an offset is UTC.
            TimeFormat::Iso8601Utc => common::parse_rfc3339(text)
                .or_else(|| common::parse_rfc3339(&format!("{text}Z")))
                .and_then(|s| s.checked_mul(1000))
                .ok_or(malformed),
        }
    }

    pub(crate) fn format_time(format: TimeFormat, unix_seconds: i64) -> String {
        match format {
            TimeFormat::UnixSeconds => unix_seconds.to_string(),
            TimeFormat::UnixMillis => unix_seconds.saturating_mul(1000).to_string(),
            TimeFormat::Rfc3339 | TimeFormat::Iso8601Utc => common::format_rfc3339(unix_seconds),
        }
    }

    /// The text of the body digest the template signs instead of the body, if any.
    pub(crate) fn body_digest(&self, body: &[u8]) -> String {
        if self.template.contains(&Part::BodyCrc32) {
            crc32fast::hash(body).to_string()
        } else if self.template.contains(&Part::BodySha256) {
            super::primitives::sha256_hex(body)
        } else if self.template.contains(&Part::BodyJson) {
            super::body_json::json_string(body)
        } else {
            String::new()
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
                Part::BodyCrc32 | Part::BodySha256 | Part::BodyJson => {
                    Ok(inputs.body_digest.as_bytes())
                }
                Part::Timestamp => inputs
                    .timestamp
                    .map(str::as_bytes)
                    .ok_or(bad(BadRequestReason::MissingTimestamp)),
                Part::Id => inputs
                    .id
                    .map(str::as_bytes)
                    .ok_or(bad(BadRequestReason::MissingId)),
                Part::Header(_) | Part::SignatureItem(_) => header_values
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
        if let Some(version) = self.signature_version(ctx)? {
            return version.parse_metadata(ctx);
        }
        if self.unsigned_handshake(ctx).is_some() {
            // A token handshake carries no signature; `verify` checks its token.
            return Ok(Metadata::default());
        }
        let headers = ctx.headers;
        reject_duplicated(headers, self.duplicate_checked_headers)?;
        // fields_hmac packs read their signature from the body unless a header carries it.
        let in_body = (self.scheme == Scheme::FieldsHmac
            && !self
                .signature_header_names
                .iter()
                .any(|n| headers.contains_key(*n)))
            || self.token_in_body()
            || self.scheme == Scheme::FormPayloadHmac;
        let (signatures, param_timestamp) = if in_body {
            (Vec::new(), None)
        } else if let Some(tokens) = self.token_from_query(ctx)? {
            (tokens, None)
        } else if let Some(tokens) = self.token_from_option_header(ctx)? {
            (tokens, None)
        } else {
            self.parse_signatures(headers)?
        };
        for token in &signatures {
            self.check_jwt_shape(token)?;
        }
        let ed25519_signatures = if in_body {
            Vec::new()
        } else {
            self.ed25519_candidates(headers)?
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
        if let Some(name) = self.nonce_header {
            signed_header(headers, name, MalformedSignature)?
                .filter(|nonce| !nonce.is_empty())
                .ok_or(bad(MissingSignature))?;
        }
        if let Some(name) = self.key_id_header {
            signed_header(headers, name, MalformedSignature)?
                .filter(|id| !id.is_empty())
                .ok_or(bad(MissingSignature))?;
        }
        let template_values = self.template_values(headers)?;
        let header_event_type = match first_header(&self.event_type) {
            Some(name) => info_header(headers, &[name])?,
            None => None,
        };
        Ok(Metadata {
            signatures,
            ed25519_signatures,
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
        if let Some(version) = self.signature_version(ctx)? {
            return version.verify(ctx, metadata, body, secrets, now, tolerance_seconds);
        }
        let (verified, signed_millis) = self.verify_signature(ctx, metadata, body, secrets, now)?;
        if let Some(millis) = signed_millis {
            self.check_freshness(millis, now, tolerance_seconds)?;
        }
        Ok(verified)
    }

    /// The signature step of [`Pack::verify`]: which secret matched and, for packs that sign
    /// one, the signed timestamp in milliseconds (not yet checked for freshness). A JWT's own
    /// lifetime (`exp`/`nbf`) is checked here against `now`, since it lives in the token.
    pub(crate) fn verify_signature(
        &self,
        ctx: &RequestContext<'_>,
        metadata: &Metadata,
        body: &[u8],
        secrets: &[TrustedSecret<'_>],
        now: i64,
    ) -> Result<(Verified, Option<i64>), Rejection> {
        if let Some(rule) = self.unsigned_handshake(ctx) {
            return if Self::handshake_token_matches(rule, ctx) {
                Ok((
                    Verified {
                        matched_secret_index: 0,
                    },
                    None,
                ))
            } else {
                Err(Rejection::InvalidSignature)
            };
        }
        if self.require_body && body.is_empty() {
            return Err(bad(BadRequestReason::MissingBody));
        }
        super::body_json::check_signable(&self.template, body)?;
        // A scheme version or algorithm the provider's verifier insists on (not secret).
        if !self.required_headers.iter().all(|(name, value)| {
            matches!(info_header(ctx.headers, &[name]), Ok(Some(sent)) if sent == *value)
        }) {
            return Err(Rejection::InvalidSignature);
        }
        let mut field_timestamp = None;
        let verified = match self.scheme {
            Scheme::Hmac | Scheme::Ed25519 | Scheme::EcdsaP256 | Scheme::RsaSha256Certificate => {
                let url = ctx.signed_url();
                let body_digest = self.body_digest(body);
                let inputs = TemplateInputs {
                    body,
                    timestamp: metadata.timestamp_text.as_deref(),
                    id: metadata.header_id.as_deref(),
                    header_values: &metadata.template_values,
                    url: url.as_deref(),
                    options: ctx.options,
                    body_digest: &body_digest,
                };
                let parts = self.signed_parts(&inputs)?;
                match self.scheme {
                    Scheme::Hmac if self.key_id_header.is_some() => {
                        self.verify_keyed_hmac(ctx, secrets, &parts, &metadata.signatures)?
                    }
                    Scheme::Hmac if !self.ed25519_versions().is_empty() => {
                        self.verify_hmac_or_ed25519(secrets, &parts, metadata)?
                    }
                    Scheme::Hmac => verify_hmac(
                        self.endpoint_algorithm(ctx.options),
                        secrets,
                        &parts,
                        &metadata.signatures,
                    )?,
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
                self.verify_token(ctx.headers, &metadata.signatures, body, secrets)?
            }
            Scheme::UrlParamsHmac => self.verify_url_params(ctx, metadata, body, secrets)?,
            Scheme::JwtHmac => self.verify_jwt(ctx, &metadata.signatures, body, secrets, now)?,
            Scheme::UrlNonceHmac => self.verify_url_nonce(ctx, metadata, body, secrets)?,
            Scheme::FormPayloadHmac => self.verify_form_payload(body, secrets)?,
            Scheme::CanonicalRequestHmac => {
                self.verify_canonical_request(ctx, metadata, body, secrets)?
            }
            Scheme::FieldsHmac => {
                let (verified, timestamp) = self.verify_fields(ctx, metadata, body, secrets)?;
                field_timestamp = timestamp;
                verified
            }
        };
        let Some(rule) = &self.timestamp else {
            return Ok((verified, None));
        };
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
        Ok((verified, Some(millis)))
    }

    /// The freshness step of [`Pack::verify`]: the signed timestamp (ms) within the past
    /// tolerance and the future bound around `now` (s), boundaries accepted.
    pub(crate) fn check_freshness(
        &self,
        millis: i64,
        now: i64,
        tolerance_seconds: Option<u64>,
    ) -> Result<(), Rejection> {
        let Some((past, future)) = self.freshness_bounds(tolerance_seconds) else {
            return Ok(());
        };
        let age = i128::from(now) * 1000 - i128::from(millis);
        if age > i128::from(past) * 1000 || -age > i128::from(future) * 1000 {
            return Err(Rejection::StaleTimestamp);
        }
        Ok(())
    }

    /// The past and future bounds in seconds for an endpoint's tolerance (`None` = the pack's).
    pub(crate) fn freshness_bounds(&self, tolerance_seconds: Option<u64>) -> Option<(u64, u64)> {
        let rule = self.timestamp.as_ref()?;
        let past = tolerance_seconds.unwrap_or(rule.tolerance_seconds);
        let future = rule.max_future_seconds.map_or(past, |max| max.min(past));
        Some((past, future))
    }
}

impl Pack {
    /// `key_id_and_secret` secrets: only those whose key id is the one the request names are
    /// tried, each with its secret part; the index reported is the configured one.
    fn verify_keyed_hmac(
        &self,
        ctx: &RequestContext<'_>,
        secrets: &[TrustedSecret<'_>],
        parts: &[&[u8]],
        candidates: &[Vec<u8>],
    ) -> Result<Verified, Rejection> {
        let named = self
            .key_id_header
            .and_then(|name| ctx.headers.get(name))
            .map(HeaderValue::as_bytes)
            .ok_or(bad(BadRequestReason::MissingSignature))?;
        for (index, secret) in secrets.iter().enumerate() {
            let Some((key_id, key)) = primitives::split_key_id(secret.key.expose()) else {
                continue;
            };
            // Key ids are not secret; the secret part is compared in constant time.
            if key_id != named {
                continue;
            }
            let key = SecretMaterial::new(key.to_vec());
            let one = [TrustedSecret {
                version: secret.version,
                key: &key,
            }];
            if verify_hmac(self.algorithm, &one, parts, candidates).is_ok() {
                return Ok(Verified {
                    matched_secret_index: index,
                });
            }
        }
        Err(Rejection::InvalidSignature)
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
