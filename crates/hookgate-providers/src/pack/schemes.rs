//! The two schemes whose signed bytes are not a template: `url_params_hmac` (the endpoint URL
//! followed by the sorted form parameters; a non-form body bound by its SHA-256 in a query
//! parameter) and `fields_hmac` (selected fields of each signed object — every batch item, or
//! an object embedded in the body — with the signature read from the object itself).

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use subtle::ConstantTimeEq;

use super::engine::{scalar_text, verify_hmac};
use super::primitives::sha256_hex;
use super::{Algorithm, Pack, RequestContext};
use crate::common::{self, bad, info_header, json_at};
use crate::{BadRequestReason, Metadata, Rejection, TrustedSecret, Verified};

/// The URL as the provider may have signed it: without its port, and with the scheme's
/// default port added when it has none (senders are inconsistent about the port; official
/// validators accept either).
pub(crate) fn url_variants(url: &str) -> Vec<String> {
    let Some((scheme, rest)) = url.split_once("://") else {
        return vec![url.to_owned()];
    };
    let end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(end);
    let host_end = authority.rfind(']').map_or(0, |i| i + 1);
    let (host, port) = match authority[host_end..].rfind(':') {
        Some(i) => authority.split_at(host_end + i),
        None => (authority, ""),
    };
    let default_port = if scheme.eq_ignore_ascii_case("https") {
        ":443"
    } else {
        ":80"
    };
    let without = format!("{scheme}://{host}{tail}");
    let with = if port.is_empty() {
        format!("{scheme}://{host}{default_port}{tail}")
    } else {
        url.to_owned()
    };
    vec![without, with]
}

/// Form parameters sorted by name, each distinct value of a name in sorted order, as
/// `name value name value …` concatenated.
pub(crate) fn sorted_params(body: &[u8]) -> Vec<u8> {
    let mut params: BTreeMap<Vec<u8>, BTreeSet<Vec<u8>>> = BTreeMap::new();
    for (name, value) in decoded_pairs(body) {
        params.entry(name).or_default().insert(value);
    }
    let mut out = Vec::with_capacity(body.len());
    for (name, values) in params {
        for value in values {
            out.extend_from_slice(&name);
            out.extend_from_slice(&value);
        }
    }
    out
}

/// The decoded value of query parameter `name` in `url`.
pub(crate) fn query_param(url: &str, name: &str) -> Option<Vec<u8>> {
    let query = url.split_once('?')?.1;
    common::form_field(query.as_bytes(), name)
}

impl Pack {
    /// The HMAC a request announces in the pack's algorithm header (`…,algorithm=HMAC_SHA256`),
    /// else the pack's own. An unknown announced algorithm verifies nothing.
    pub(crate) fn announced_algorithm(
        &self,
        ctx: &RequestContext<'_>,
    ) -> Result<Algorithm, Rejection> {
        let Some(header) = self.algorithm_header else {
            return Ok(self.algorithm);
        };
        let Some(value) = info_header(ctx.headers, &[header])? else {
            return Ok(self.algorithm);
        };
        let announced = value
            .split(',')
            .find_map(|item| item.trim().strip_prefix("algorithm="));
        match announced {
            None => Ok(self.algorithm),
            Some("HMAC_SHA1") => Ok(Algorithm::Sha1),
            Some("HMAC_SHA256") => Ok(Algorithm::Sha256),
            Some("HMAC_SHA512") => Ok(Algorithm::Sha512),
            Some(_) => Err(Rejection::InvalidSignature),
        }
    }

    /// The parameters part of the signed bytes: sorted form parameters, or nothing for a
    /// non-form body, which must then match the hash parameter of the signed URL.
    pub(crate) fn url_params_payload(
        &self,
        ctx: &RequestContext<'_>,
        url: &str,
        body: &[u8],
    ) -> Result<Vec<u8>, Rejection> {
        if common::is_form(ctx.headers) {
            return Ok(sorted_params(body));
        }
        if body.is_empty() {
            return Ok(Vec::new());
        }
        // Only the URL is signed: without the hash the body would be unauthenticated.
        let param = self.body_hash_param.unwrap_or("bodySHA256");
        let announced = query_param(url, param).ok_or(Rejection::InvalidSignature)?;
        let actual = sha256_hex(body);
        if bool::from(actual.as_bytes().ct_eq(announced.as_slice())) {
            Ok(Vec::new())
        } else {
            Err(Rejection::InvalidSignature)
        }
    }

    pub(crate) fn verify_url_params(
        &self,
        ctx: &RequestContext<'_>,
        metadata: &Metadata,
        body: &[u8],
        secrets: &[TrustedSecret<'_>],
    ) -> Result<Verified, Rejection> {
        let url = ctx.signed_url().ok_or(Rejection::InvalidSignature)?;
        let algorithm = self.announced_algorithm(ctx)?;
        let params = self.url_params_payload(ctx, &url, body)?;
        let variants = url_variants(&url);
        let mut best: Option<usize> = None;
        for variant in &variants {
            if let Ok(v) = verify_hmac(
                algorithm,
                secrets,
                &[variant.as_bytes(), &params],
                &metadata.signatures,
            ) {
                best = Some(best.map_or(v.matched_secret_index, |b| b.min(v.matched_secret_index)));
            }
        }
        best.map(|matched_secret_index| Verified {
            matched_secret_index,
        })
        .ok_or(Rejection::InvalidSignature)
    }

    /// The signed objects of a `fields_hmac` body: every batch item, or the first present
    /// object pointer. `None` when the body has none.
    pub(crate) fn signed_objects<'v>(&self, doc: &'v Value) -> Option<Vec<&'v Value>> {
        let rule = self.fields.as_ref()?;
        if let Some(batch) = &self.batch {
            let items = json_at(doc, batch.items)?.as_array()?;
            return Some(
                items
                    .iter()
                    .map(|e| batch.item.and_then(|p| json_at(e, p)).unwrap_or(e))
                    .collect(),
            );
        }
        rule.object
            .iter()
            .find_map(|p| json_at(doc, p).filter(|v| v.is_object()))
            .map(|o| vec![o])
    }

    /// The signed string of one object: its fields (absent = empty) joined by the separator.
    pub(crate) fn field_string(&self, object: &Value) -> String {
        let Some(rule) = &self.fields else {
            return String::new();
        };
        rule.fields
            .iter()
            .map(|p| json_at(object, p).and_then(scalar_text).unwrap_or_default())
            .collect::<Vec<_>>()
            .join(rule.separator)
    }

    /// Verifies every signed object (a batch with one bad item is refused whole); returns the
    /// secret that verified the first object and, for packs whose timestamp is a signed
    /// field, its text. With a signature header instead, the raw body is what is signed.
    pub(crate) fn verify_fields(
        &self,
        ctx: &RequestContext<'_>,
        metadata: &Metadata,
        body: &[u8],
        secrets: &[TrustedSecret<'_>],
    ) -> Result<(Verified, Option<String>), Rejection> {
        if !metadata.signatures.is_empty() {
            return Ok((
                verify_hmac(self.algorithm, secrets, &[body], &metadata.signatures)?,
                None,
            ));
        }
        let missing = bad(BadRequestReason::MissingSignature);
        let rule = self.fields.as_ref().ok_or(missing)?;
        let doc = self.document(ctx.headers, body).map_err(|_| missing)?;
        let objects = self.signed_objects(&doc).ok_or(missing)?;
        if objects.is_empty() {
            return Err(missing);
        }
        let mut first = None;
        for object in &objects {
            let text = json_at(object, rule.signature)
                .and_then(Value::as_str)
                .ok_or(missing)?;
            let tag = self.tag(text)?;
            let signed = self.field_string(object);
            let verified = verify_hmac(
                self.algorithm,
                secrets,
                &[signed.as_bytes()],
                std::slice::from_ref(&tag),
            )?;
            first.get_or_insert(verified);
        }
        let timestamp = match self.timestamp.as_ref().map(|t| t.from.as_slice()) {
            Some([super::Location::Json { pointer, .. }]) => Some(
                json_at(objects[0], pointer)
                    .and_then(scalar_text)
                    .ok_or(bad(BadRequestReason::MissingTimestamp))?,
            ),
            _ => None,
        };
        Ok((first.ok_or(missing)?, timestamp))
    }
}

/// The `name=value` pairs of a query or form body, form-decoded, in order (a pair without `=`
/// has an empty value).
fn decoded_pairs(raw: &[u8]) -> impl Iterator<Item = (Vec<u8>, Vec<u8>)> + '_ {
    raw.split(|&b| b == b'&')
        .filter(|p| !p.is_empty())
        .map(|pair| match pair.iter().position(|&b| b == b'=') {
            Some(eq) => (
                common::form_decode(&pair[..eq]),
                common::form_decode(&pair[eq + 1..]),
            ),
            None => (common::form_decode(pair), Vec::new()),
        })
}

/// Decoded `name=value` pairs of a query or form, names sorted, each name's values sorted
/// (repeats kept).
fn sorted_pairs(raw: &[u8]) -> BTreeMap<Vec<u8>, Vec<Vec<u8>>> {
    let mut pairs: BTreeMap<Vec<u8>, Vec<Vec<u8>>> = BTreeMap::new();
    for (name, value) in decoded_pairs(raw) {
        pairs.entry(name).or_default().push(value);
    }
    for values in pairs.values_mut() {
        values.sort();
    }
    pairs
}

/// The string `url_nonce_hmac` signs: the URL without its query; when it has a query or the
/// body form parameters, `?` and the query sorted as `k=v` joined by `&`; `.` between a query
/// and form parameters; the form parameters' names and values concatenated in sorted order;
/// then `.` and the nonce.
pub(crate) fn url_nonce_string(url: &str, form: &[u8], nonce: &str) -> Vec<u8> {
    let (base, query) = url.split_once('?').unwrap_or((url, ""));
    let base = base.split_once('#').map_or(base, |(b, _)| b);
    let query = sorted_pairs(query.as_bytes());
    let params = sorted_pairs(form);
    let mut out = base.as_bytes().to_vec();
    if !query.is_empty() || !params.is_empty() {
        out.push(b'?');
        let mut first = true;
        for (name, values) in &query {
            for value in values {
                if !first {
                    out.push(b'&');
                }
                first = false;
                out.extend_from_slice(name);
                out.push(b'=');
                out.extend_from_slice(value);
            }
        }
    }
    if !query.is_empty() && !params.is_empty() {
        out.push(b'.');
    }
    for (name, values) in &params {
        for value in values {
            out.extend_from_slice(name);
            out.extend_from_slice(value);
        }
    }
    out.push(b'.');
    out.extend_from_slice(nonce.as_bytes());
    out
}

impl Pack {
    /// `url_nonce_hmac`: the signed URL, the form parameters (a non-form body signs none) and
    /// the nonce header.
    pub(crate) fn verify_url_nonce(
        &self,
        ctx: &RequestContext<'_>,
        metadata: &Metadata,
        body: &[u8],
        secrets: &[TrustedSecret<'_>],
    ) -> Result<Verified, Rejection> {
        let url = ctx.signed_url().ok_or(Rejection::InvalidSignature)?;
        let nonce = self
            .nonce_header
            .and_then(|h| ctx.headers.get(h))
            .and_then(|v| v.to_str().ok())
            .ok_or(bad(BadRequestReason::MissingSignature))?;
        // Only form parameters are signed: any other body would be unauthenticated.
        if !body.is_empty() && !common::is_form(ctx.headers) {
            return Err(Rejection::InvalidSignature);
        }
        let signed = url_nonce_string(&url, body, nonce);
        verify_hmac(self.algorithm, secrets, &[&signed], &metadata.signatures)
    }
}

#[cfg(test)]
mod tests {
    use super::url_nonce_string;

    #[test]
    fn url_nonce_string_sorts_query_and_form_and_appends_the_nonce() {
        let s = |url, form: &str| {
            String::from_utf8(url_nonce_string(url, form.as_bytes(), "n1")).unwrap()
        };
        assert_eq!(s("https://h/p", ""), "https://h/p.n1");
        assert_eq!(s("https://h/p", "b=2&a=1&a=0"), "https://h/p?a0a1b2.n1");
        assert_eq!(s("https://h/p?z=1&y=a%20b", ""), "https://h/p?y=a b&z=1.n1");
        assert_eq!(s("https://h/p?z=1", "a=x+y"), "https://h/p?z=1.ax y.n1");
    }
}
