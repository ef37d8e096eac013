//! Ed25519 signature versions beside the HMAC ones of a versioned list: Standard Webhooks'
//! asymmetric `v1a` (`webhook-signature: v1,<hmac> v1a,<ed25519>`), over the same signed bytes
//! (`{id}.{timestamp}.{body}`). A pack opts in with `signature.format.versioned_list.
//! ed25519_versions`; its endpoints then take `whpk_<base64>` public keys as secret versions,
//! beside or instead of `whsec_` secrets, and `hookgate send` signs with a `whsk_<base64>`
//! secret key.
//!
//! Key formats (the specification says "base64 encoded, prefixed with `whsk_` for the secret
//! key, and `whpk_` for the public key"): a `whpk_` key is the 32-byte public key (a 44-byte
//! SubjectPublicKeyInfo DER of an Ed25519 key is also taken); a `whsk_` key is the 32-byte
//! seed, or the 64-byte seed followed by its public key (libsodium's layout; the public half
//! must belong to the seed).
//!
//! A public key verifies Ed25519 entries only and a shared secret HMAC entries only: a public
//! key is public, so used as an HMAC key it would let anyone forge `v1` signatures.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use http::HeaderMap;
use ring::signature::{Ed25519KeyPair, KeyPair};

use super::engine::verify_hmac;
use super::primitives::{PublicKey, SigningKey};
use super::{Pack, Scheme, SecretFormat, SignatureFormat};
use crate::common::{MAX_SIGNATURE_ENTRIES, bad, signed_header_any};
use crate::{
    BadRequestReason, Metadata, Rejection, SecretFormatError, SecretMaterial, TrustedSecret,
    Verified,
};

/// The prefix of a Standard Webhooks Ed25519 public key.
pub(crate) const PUBLIC_PREFIX: &str = "whpk_";
/// The prefix of a Standard Webhooks Ed25519 secret (signing) key.
pub(crate) const SECRET_PREFIX: &str = "whsk_";
/// DER SubjectPublicKeyInfo header of an Ed25519 key (RFC 8410); the 32-byte key follows.
const SPKI_PREFIX: [u8; 12] = [
    0x30, 0x2a, 0x30, 0x05, 0x06, 0x03, 0x2b, 0x65, 0x70, 0x03, 0x21, 0x00,
];
const SIGNATURE_LEN: usize = 64;

/// `ed25519_versions` sit beside HMAC entries keyed by `whsec_` secrets: any other scheme or
/// secret format is refused, naming the field.
pub(crate) fn check(
    paths: &super::syntax::Paths,
    scheme: Scheme,
    secret_format: SecretFormat,
    format: &SignatureFormat,
) -> Result<(), super::PackError> {
    match format {
        SignatureFormat::VersionedList {
            ed25519_versions, ..
        } if !ed25519_versions.is_empty()
            && (scheme != Scheme::Hmac || secret_format != SecretFormat::WhsecBase64) =>
        {
            Err(paths.err(
                "signature.format.versioned_list.ed25519_versions",
                "needs the hmac scheme with secret_format \"whsec_base64\"",
            ))
        }
        _ => Ok(()),
    }
}

impl Pack {
    /// The Ed25519 versions of this pack's versioned list; empty for every other pack.
    pub(crate) fn ed25519_versions(&self) -> &[&'static str] {
        match &self.format {
            SignatureFormat::VersionedList {
                ed25519_versions, ..
            } if self.scheme == Scheme::Hmac && self.secret_format == SecretFormat::WhsecBase64 => {
                ed25519_versions
            }
            _ => &[],
        }
    }

    /// A `whpk_` secret value of a pack with Ed25519 versions, decoded; `None` for any other
    /// value or pack (decoded as the pack's shared secret).
    pub(crate) fn decode_ed25519_public(
        &self,
        secret: &str,
    ) -> Option<Result<SecretMaterial, SecretFormatError>> {
        let encoded = secret.strip_prefix(PUBLIC_PREFIX)?;
        if self.ed25519_versions().is_empty() {
            return None;
        }
        let key = STANDARD
            .decode(encoded.trim())
            .ok()
            .and_then(|bytes| match bytes.len() {
                32 => Some(bytes),
                44 if bytes.starts_with(&SPKI_PREFIX) => Some(bytes[12..].to_vec()),
                _ => None,
            });
        Some(
            key.map(SecretMaterial::ed25519_public)
                .ok_or(SecretFormatError::Malformed {
                    expected: "whpk_ followed by a base64 Ed25519 public key (32 bytes)",
                }),
        )
    }

    /// A `whsk_` signing key of a pack with Ed25519 versions; `None` for any other text or
    /// pack.
    pub(crate) fn decode_ed25519_signing(
        &self,
        text: &str,
    ) -> Option<Result<SigningKey, SecretFormatError>> {
        let encoded = text.trim().strip_prefix(SECRET_PREFIX)?;
        if self.ed25519_versions().is_empty() {
            return None;
        }
        let pair = STANDARD
            .decode(encoded)
            .ok()
            .and_then(|bytes| match bytes.len() {
                32 => Ed25519KeyPair::from_seed_unchecked(&bytes).ok(),
                64 => Ed25519KeyPair::from_seed_and_public_key(&bytes[..32], &bytes[32..]).ok(),
                _ => None,
            });
        Some(pair.map(SigningKey::Ed25519).ok_or(SecretFormatError::Malformed {
            expected: "whsk_ followed by a base64 Ed25519 seed (32 bytes, or 64 with its public key)",
        }))
    }

    /// The Ed25519 entries of the signature header (after `parse_signatures` checked the
    /// header's shape and bounds): each must be a 64-byte signature in the pack's encoding.
    pub(crate) fn ed25519_candidates(
        &self,
        headers: &HeaderMap,
    ) -> Result<Vec<Vec<u8>>, Rejection> {
        let versions = self.ed25519_versions();
        let SignatureFormat::VersionedList {
            separator,
            version_separator,
            ..
        } = &self.format
        else {
            return Ok(Vec::new());
        };
        if versions.is_empty() {
            return Ok(Vec::new());
        }
        let malformed = || bad(BadRequestReason::MalformedSignature);
        let Some(text) = signed_header_any(
            headers,
            self.signature_header_names,
            BadRequestReason::MalformedSignature,
        )?
        else {
            return Ok(Vec::new());
        };
        let mut out = Vec::new();
        for entry in text
            .split(separator)
            .filter(|e| !e.is_empty())
            .take(MAX_SIGNATURE_ENTRIES)
        {
            let (version, value) = entry.split_once(version_separator).ok_or_else(malformed)?;
            if versions.contains(&version) {
                let sig = self
                    .encoding
                    .decode(value)
                    .filter(|sig| sig.len() == SIGNATURE_LEN)
                    .ok_or_else(malformed)?;
                out.push(sig);
            }
        }
        Ok(out)
    }

    /// Every trusted secret in order: a `whpk_` key against the Ed25519 candidates, a shared
    /// secret against the HMAC ones (in constant time); the first that verifies wins.
    pub(crate) fn verify_hmac_or_ed25519(
        &self,
        secrets: &[TrustedSecret<'_>],
        parts: &[&[u8]],
        metadata: &Metadata,
    ) -> Result<Verified, Rejection> {
        let message = parts.concat();
        for (index, secret) in secrets.iter().enumerate() {
            let matched = if secret.key.is_ed25519_public() {
                metadata
                    .ed25519_signatures
                    .iter()
                    .any(|sig| PublicKey::Ed25519.verify(secret.key.expose(), &message, sig))
            } else {
                verify_hmac(
                    self.algorithm,
                    std::slice::from_ref(secret),
                    parts,
                    &metadata.signatures,
                )
                .is_ok()
            };
            if matched {
                return Ok(Verified {
                    matched_secret_index: index,
                });
            }
        }
        Err(Rejection::InvalidSignature)
    }

    /// The Ed25519 public key of `key` as an endpoint of this pack configures it (`whpk_`).
    pub(crate) fn ed25519_public_text(&self, key: &SigningKey) -> Option<String> {
        match key {
            SigningKey::Ed25519(pair) if !self.ed25519_versions().is_empty() => Some(format!(
                "{PUBLIC_PREFIX}{}",
                STANDARD.encode(pair.public_key().as_ref())
            )),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn standard() -> &'static Pack {
        crate::pack::builtin("standard_webhooks").expect("built in")
    }

    #[test]
    fn keys_decode_in_every_documented_layout_and_nothing_else() {
        let pack = standard();
        let pair = Ed25519KeyPair::from_seed_unchecked(&[7u8; 32]).unwrap();
        let public = pair.public_key().as_ref().to_vec();
        let raw = format!("whpk_{}", STANDARD.encode(&public));
        let key = pack.decode_ed25519_public(&raw).unwrap().unwrap();
        assert!(key.is_ed25519_public());
        assert_eq!(key.expose(), public.as_slice());
        let spki = format!(
            "whpk_{}",
            STANDARD.encode([&SPKI_PREFIX[..], &public].concat())
        );
        assert_eq!(
            pack.decode_ed25519_public(&spki).unwrap().unwrap().expose(),
            public.as_slice()
        );
        for bad in ["whpk_", "whpk_AAAA", "whpk_not base64!"] {
            assert!(pack.decode_ed25519_public(bad).unwrap().is_err(), "{bad}");
        }
        assert!(pack.decode_ed25519_public("whsec_AAAA").is_none());

        let seed = format!("whsk_{}", STANDARD.encode([7u8; 32]));
        let full = format!(
            "whsk_{}",
            STANDARD.encode([&[7u8; 32][..], &public].concat())
        );
        for text in [&seed, &full] {
            let key = pack.decode_ed25519_signing(text).unwrap().unwrap();
            assert_eq!(pack.ed25519_public_text(&key).unwrap(), raw);
        }
        let wrong_half = format!("whsk_{}", STANDARD.encode([7u8; 64]));
        assert!(pack.decode_ed25519_signing(&wrong_half).unwrap().is_err());

        // A pack without Ed25519 versions takes no `whpk_` or `whsk_` key at all.
        let svix = crate::pack::builtin("svix").unwrap();
        assert!(svix.decode_ed25519_public(&raw).is_none());
        assert!(svix.decode_secret(&raw).is_err());
        assert!(svix.decode_ed25519_signing(&seed).is_none());
        assert!(svix.decode_signing_key(&seed).is_err());
    }
}
