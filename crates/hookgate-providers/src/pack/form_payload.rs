//! `form_payload_hmac`: a form POST whose signed text is one field and whose signature is
//! another (Braintree: `bt_payload`, the base64 of an XML notification with line breaks, and
//! `bt_signature`, one or more `public_key|hex` pairs joined by `&`). The tag is the HMAC of
//! the decoded payload text keyed with the digest of the private key (SHA-1 for HMAC-SHA1);
//! the text followed by `\n` is accepted too, as the provider's SDKs do. Secrets are
//! `key_id_and_secret` (`<public key>:<private key>`): only the pairs naming a configured
//! public key are checked. The payload may hold only base64 characters and line breaks.
//!
//! Both field names are data (`signature.signature_field`, `signature.payload_field`),
//! checked at load; `sign_delivery` writes the form (`hookgate send`).

use sha1::{Digest, Sha1};
use subtle::ConstantTimeEq;

use super::{Algorithm, Pack, primitives};
use crate::common::{self, bad};
use crate::{BadRequestReason, Rejection, TrustedSecret, Verified};

/// A key id and the tag it announces.
type Pair = (Vec<u8>, Vec<u8>);

/// At most this many `key_id|hex` pairs in a signature field.
const MAX_PAIRS: usize = 16;

/// The two form fields of a `form_payload_hmac` pack.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct FormPayload {
    pub(crate) signature_field: &'static str,
    pub(crate) payload_field: &'static str,
}

impl FormPayload {
    /// What is signed, for the listing and the provider pages.
    pub(crate) fn signed_text(&self) -> String {
        format!(
            "the form-decoded text of the `{}` field (or that text followed by a line break), \
             keyed with the digest of the private key; the `{}` field holds `key_id|hex` pairs joined by `&`, and the pair of each \
             configured public key is checked",
            self.payload_field, self.signature_field
        )
    }

    /// Where the signature is, for the listing and the provider pages.
    pub(crate) fn signature_text(&self) -> String {
        format!(
            "form field {}: `key_id|hex` pairs joined by `&` (entries without `|` are \
             skipped); only the pairs naming a configured key id are checked",
            self.signature_field
        )
    }
}

/// The HMAC key: the digest of the private key, for the pack's algorithm.
fn derived_key(algorithm: Algorithm, private: &[u8]) -> Vec<u8> {
    match algorithm {
        // (the keyed plain hashes are refused for this scheme at load)
        Algorithm::Sha1 | Algorithm::PlainSha1KeyLast => Sha1::digest(private).to_vec(),
        Algorithm::Sha256 | Algorithm::PlainSha256 | Algorithm::PlainSha256KeyLast => {
            sha2::Sha256::digest(private).to_vec()
        }
        Algorithm::Sha512 => sha2::Sha512::digest(private).to_vec(),
    }
}

/// The one value of form field `name`; a repeated field is refused (which one is meant would
/// be a guess).
fn single_field(body: &[u8], name: &str) -> Result<Option<Vec<u8>>, Rejection> {
    let count = body
        .split(|&b| b == b'&')
        .filter(|pair| {
            let key = pair.split(|&b| b == b'=').next().unwrap_or(&[]);
            common::form_decode(key) == name.as_bytes()
        })
        .count();
    if count > 1 {
        return Err(bad(BadRequestReason::DuplicatedSignature));
    }
    Ok(common::form_field(body, name))
}

/// The `key_id|hex` pairs of a signature field with a tag of the algorithm's length (entries
/// without `|`, as the SDKs skip them, or with another tag, match nothing); a field with no
/// such pair is malformed.
fn parse_pairs(text: &[u8], tag_len: usize) -> Result<Vec<Pair>, Rejection> {
    let malformed = bad(BadRequestReason::MalformedSignature);
    let text = std::str::from_utf8(text).map_err(|_| malformed)?;
    let mut out = Vec::new();
    for (count, entry) in text.split('&').enumerate() {
        if count >= MAX_PAIRS {
            return Err(malformed);
        }
        let Some((key_id, hex)) = entry.split_once('|') else {
            continue;
        };
        if let Some(tag) = common::decode_lower_hex(hex.trim()).filter(|t| t.len() == tag_len)
            && !key_id.is_empty()
        {
            out.push((key_id.as_bytes().to_vec(), tag));
        }
    }
    if out.is_empty() {
        return Err(malformed);
    }
    Ok(out)
}

impl Pack {
    /// Checks the form fields' presence and shape before verification: `missing_signature`
    /// without the signature or the payload field, `malformed_signature` for a field that is
    /// not `key_id|hex` pairs.
    pub(crate) fn form_payload_parts(&self, body: &[u8]) -> Result<FormParts, Rejection> {
        let rule = self.form_payload.ok_or(Rejection::InvalidSignature)?;
        let missing = bad(BadRequestReason::MissingSignature);
        let signature = single_field(body, rule.signature_field)?
            .filter(|s| !s.is_empty())
            .ok_or(missing)?;
        let pairs = parse_pairs(&signature, self.algorithm.tag_len())?;
        let payload = single_field(body, rule.payload_field)?.ok_or(missing)?;
        Ok(FormParts { pairs, payload })
    }

    /// `form_payload_hmac`: the pair of each configured public key checked against the HMAC of
    /// the payload text (or the text and `\n`), keyed with the digest of its private key.
    pub(crate) fn verify_form_payload(
        &self,
        body: &[u8],
        secrets: &[TrustedSecret<'_>],
    ) -> Result<Verified, Rejection> {
        let parts = self.form_payload_parts(body)?;
        let allowed = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=' | b'\n');
        if parts.payload.is_empty() || !parts.payload.iter().all(allowed) {
            return Err(Rejection::InvalidSignature);
        }
        let len = self.algorithm.tag_len();
        for (index, secret) in secrets.iter().enumerate() {
            let Some((key_id, private)) = primitives::split_key_id(secret.key.expose()) else {
                continue;
            };
            let key = derived_key(self.algorithm, private);
            let plain = self.algorithm.mac(&key, &[&parts.payload]);
            let with_newline = self.algorithm.mac(&key, &[&parts.payload, b"\n"]);
            let mut matched = false;
            // Key ids are public; the tags are compared in constant time.
            for (_, tag) in parts.pairs.iter().filter(|(id, _)| id == key_id) {
                matched |= bool::from(tag.ct_eq(&plain[..len]))
                    | bool::from(tag.ct_eq(&with_newline[..len]));
            }
            if matched {
                return Ok(Verified {
                    matched_secret_index: index,
                });
            }
        }
        Err(Rejection::InvalidSignature)
    }

    /// The provider's side: `body` base64-encoded (lines of 60 characters, each ended by a
    /// line break) as the payload field and `key_id|hex` as the signature field, written as
    /// a form. `None` for a secret that is not `key_id:secret`.
    pub(crate) fn sign_form_payload(&self, key: &[u8], body: &[u8]) -> Option<Vec<u8>> {
        use base64::Engine;
        let rule = self.form_payload?;
        let (key_id, private) = primitives::split_key_id(key)?;
        let encoded = base64::engine::general_purpose::STANDARD.encode(body);
        let mut payload = String::with_capacity(encoded.len() + encoded.len() / 60 + 1);
        for chunk in encoded.as_bytes().chunks(60) {
            payload.push_str(std::str::from_utf8(chunk).ok()?);
            payload.push('\n');
        }
        let tag = self
            .algorithm
            .mac(&derived_key(self.algorithm, private), &[payload.as_bytes()]);
        let hex = common::encode_lower_hex(&tag[..self.algorithm.tag_len()]);
        let signature = format!("{}|{hex}", String::from_utf8_lossy(key_id));
        Some(
            format!(
                "{}={}&{}={}",
                form_encode(rule.signature_field),
                form_encode(&signature),
                form_encode(rule.payload_field),
                form_encode(&payload)
            )
            .into_bytes(),
        )
    }
}

/// A form field's parts.
pub(crate) struct FormParts {
    pairs: Vec<Pair>,
    payload: Vec<u8>,
}

/// `application/x-www-form-urlencoded` encoding of a value.
fn form_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'*') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pairs_need_a_key_id_a_bar_and_a_tag_of_the_right_length() {
        let tag = "ab".repeat(20);
        let pairs = parse_pairs(format!("k1|{tag}&k2|{tag}").as_bytes(), 20).unwrap();
        assert_eq!(pairs.len(), 2);
        assert_eq!(pairs[1].0, b"k2");
        // entries the SDKs skip are skipped while one pair is well formed
        let mixed = parse_pairs(format!("junk&k0|zz&k1|{tag}").as_bytes(), 20).unwrap();
        assert_eq!(mixed, vec![(b"k1".to_vec(), hex_tag(&tag))]);
        let malformed = Err(bad(BadRequestReason::MalformedSignature));
        assert_eq!(parse_pairs(format!("k1:{tag}").as_bytes(), 20), malformed);
        assert_eq!(parse_pairs(format!("|{tag}").as_bytes(), 20), malformed);
        assert_eq!(parse_pairs(b"k1|abcd", 20), malformed);
        assert_eq!(
            parse_pairs(format!("k|{}", "AB".repeat(20)).as_bytes(), 20),
            malformed
        );
        let many = vec![format!("k|{tag}"); MAX_PAIRS + 1].join("&");
        assert_eq!(parse_pairs(many.as_bytes(), 20), malformed);
    }

    fn hex_tag(hex: &str) -> Vec<u8> {
        common::decode_lower_hex(hex).unwrap()
    }

    #[test]
    fn a_repeated_field_is_refused_and_values_are_decoded() {
        assert_eq!(
            single_field(b"a=1&b=2&a=3", "a"),
            Err(bad(BadRequestReason::DuplicatedSignature))
        );
        assert_eq!(single_field(b"a=x%7Cy", "a"), Ok(Some(b"x|y".to_vec())));
        assert_eq!(single_field(b"b=1", "a"), Ok(None));
        assert_eq!(form_encode("a|b\n+"), "a%7Cb%0A%2B");
    }

    #[test]
    fn the_key_is_the_digest_of_the_private_key() {
        assert_eq!(
            common::encode_lower_hex(&derived_key(Algorithm::Sha1, b"abc")),
            "a9993e364706816aba3e25717850c26c9cd0d89d"
        );
    }
}
