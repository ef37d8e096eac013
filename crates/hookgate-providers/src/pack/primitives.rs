//! The cryptographic primitives packs select: HMAC (SHA-1/256/512), Ed25519, ECDSA P-256 and
//! RSA PKCS#1 v1.5 SHA-256 verification (ring; the RSA key comes from a configured X.509
//! certificate parsed by webpki), a constant-time shared-token comparison, signature
//! encodings, and the decoding of configured secrets into key material per `secret_format`.

use base64::Engine;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig, STANDARD, URL_SAFE};
use hmac::{Hmac, Mac};
use ring::rand::SystemRandom;
use ring::signature::{
    ECDSA_P256_SHA256_ASN1, ECDSA_P256_SHA256_ASN1_SIGNING, ED25519, EcdsaKeyPair, Ed25519KeyPair,
    KeyPair, RSA_PKCS1_SHA256, RsaKeyPair, UnparsedPublicKey,
};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sha1::Sha1;
use sha2::{Digest, Sha256, Sha512};
use subtle::ConstantTimeEq;

use super::{Algorithm, Encoding, Scheme, SecretFormat};
use crate::common;
use crate::{SecretFormatError, SecretMaterial};

pub(crate) const MAX_TAG_LEN: usize = 64;

/// base64url, padding optional.
const BASE64URL_LENIENT: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::URL_SAFE,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// DER prefix of a P-256 SubjectPublicKeyInfo with an uncompressed point: SEQUENCE {
/// SEQUENCE { id-ecPublicKey, prime256v1 }, BIT STRING (0 unused bits, 0x04 …) }.
const P256_SPKI_PREFIX: &[u8] = &[
    0x30, 0x59, 0x30, 0x13, 0x06, 0x07, 0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01, 0x06, 0x08, 0x2a,
    0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07, 0x03, 0x42, 0x00,
];

impl Algorithm {
    pub(crate) fn tag_len(self) -> usize {
        match self {
            Algorithm::Sha1 | Algorithm::PlainSha1KeyLast => 20,
            Algorithm::Sha256 | Algorithm::PlainSha256 | Algorithm::PlainSha256KeyLast => 32,
            Algorithm::Sha512 => 64,
        }
    }

    /// HMAC (or keyed plain hash) of the concatenation of `parts`; the tag is the first
    /// `tag_len()` bytes.
    pub(crate) fn mac(self, key: &[u8], parts: &[&[u8]]) -> [u8; MAX_TAG_LEN] {
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
        if super::keyed_hash::plain_hash(self, key, parts, &mut out) {
            return out;
        }
        match self {
            Algorithm::Sha1 => run::<Hmac<Sha1>>(key, parts, &mut out),
            Algorithm::Sha256 => run::<Hmac<Sha256>>(key, parts, &mut out),
            Algorithm::Sha512 => run::<Hmac<Sha512>>(key, parts, &mut out),
            Algorithm::PlainSha256
            | Algorithm::PlainSha1KeyLast
            | Algorithm::PlainSha256KeyLast => {}
        }
        out
    }
}

impl Encoding {
    pub(crate) fn decode(self, text: &str) -> Option<Vec<u8>> {
        match self {
            Encoding::Hex => common::decode_lower_hex(text),
            // the sender writes upper case; its case is not confirmed everywhere, so either
            // case of the same digits is the same tag
            Encoding::HexUpper => decode_any_hex(text),
            Encoding::Base64 => STANDARD.decode(text).ok(),
            Encoding::Base64Url => BASE64URL_LENIENT.decode(text).ok(),
            Encoding::Base64Hex => STANDARD
                .decode(text)
                .ok()
                .and_then(|hex| common::decode_lower_hex(std::str::from_utf8(&hex).ok()?)),
            Encoding::Text => Some(text.as_bytes().to_vec()),
        }
    }

    pub(crate) fn encode(self, bytes: &[u8]) -> String {
        match self {
            Encoding::Hex => common::encode_lower_hex(bytes),
            Encoding::HexUpper => common::encode_lower_hex(bytes).to_ascii_uppercase(),
            Encoding::Base64 => STANDARD.encode(bytes),
            Encoding::Base64Url => URL_SAFE.encode(bytes),
            Encoding::Base64Hex => STANDARD.encode(common::encode_lower_hex(bytes)),
            Encoding::Text => String::from_utf8_lossy(bytes).into_owned(),
        }
    }
}

/// Whether `candidate` equals `secret`, in time independent of where they differ and of
/// their lengths (both are hashed to 32 bytes first).
pub(crate) fn token_matches(secret: &[u8], candidate: &[u8]) -> bool {
    let a = Sha256::digest(secret);
    let b = Sha256::digest(candidate);
    bool::from(a.as_slice().ct_eq(b.as_slice()))
}

/// The public-key verifications (`key` is the decoded secret of the matching format).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum PublicKey {
    Ed25519,
    EcdsaP256,
    RsaCertificate,
}

impl PublicKey {
    pub(crate) fn verify(self, key: &[u8], message: &[u8], signature: &[u8]) -> bool {
        match self {
            PublicKey::Ed25519 => UnparsedPublicKey::new(&ED25519, key)
                .verify(message, signature)
                .is_ok(),
            PublicKey::EcdsaP256 => UnparsedPublicKey::new(&ECDSA_P256_SHA256_ASN1, key)
                .verify(message, signature)
                .is_ok(),
            PublicKey::RsaCertificate => {
                let der = CertificateDer::from(key);
                webpki::EndEntityCert::try_from(&der).is_ok_and(|cert| {
                    cert.verify_signature(
                        webpki::ring::RSA_PKCS1_2048_8192_SHA256,
                        message,
                        signature,
                    )
                    .is_ok()
                })
            }
        }
    }
}

fn decode_any_hex(text: &str) -> Option<Vec<u8>> {
    common::decode_lower_hex(&text.to_ascii_lowercase())
}

/// Turns a configured secret string into key material, in the provider's own format.
pub(crate) fn decode_secret(
    format: SecretFormat,
    secret: &str,
) -> Result<SecretMaterial, SecretFormatError> {
    if secret.is_empty() {
        return Err(SecretFormatError::Empty);
    }
    let malformed = |expected| SecretFormatError::Malformed { expected };
    let bytes = match format {
        SecretFormat::Utf8 => return common::utf8_secret(secret),
        SecretFormat::WhsecBase64 => return common::whsec_base64_secret(secret),
        SecretFormat::Hex => decode_any_hex(secret)
            .filter(|b| !b.is_empty())
            .ok_or(malformed("hex"))?,
        SecretFormat::Base64 => STANDARD
            .decode(secret)
            .ok()
            .filter(|b| !b.is_empty())
            .ok_or(malformed("base64"))?,
        SecretFormat::WhsecBase64OrUtf8 if secret.starts_with("whsec_") => {
            return common::whsec_base64_secret(secret);
        }
        SecretFormat::WhsecBase64OrUtf8 => return common::utf8_secret(secret),
        SecretFormat::Utf8Nfkd => {
            use unicode_normalization::UnicodeNormalization;
            let normal = zeroize::Zeroizing::new(secret.nfkd().collect::<String>());
            return common::utf8_secret(&normal);
        }
        SecretFormat::KeyIdAndSecret => match secret.split_once(':') {
            Some((id, rest)) if !id.is_empty() && !rest.is_empty() => secret.as_bytes().to_vec(),
            _ => return Err(malformed("<key id>:<secret>")),
        },
        SecretFormat::Ed25519PublicBase64 => STANDARD
            .decode(secret.trim())
            .ok()
            .filter(|b| b.len() == 32)
            .ok_or(malformed("a 32-byte Ed25519 public key in base64"))?,
        SecretFormat::Ed25519PublicHex => decode_any_hex(secret)
            .filter(|b| b.len() == 32)
            .ok_or(malformed("a 32-byte Ed25519 public key in hex"))?,
        SecretFormat::P256SpkiDerBase64 => {
            let der = STANDARD
                .decode(secret.trim())
                .map_err(|_| malformed("a P-256 public key as base64 DER (SPKI)"))?;
            match der.strip_prefix(P256_SPKI_PREFIX) {
                Some(point) if point.len() == 65 && point[0] == 0x04 => point.to_vec(),
                _ => return Err(malformed("a P-256 public key as base64 DER (SPKI)")),
            }
        }
        SecretFormat::X509Pem => {
            let expected = "a PEM certificate with an RSA public key";
            let der = CertificateDer::from_pem_slice(secret.as_bytes())
                .map_err(|_| malformed(expected))?;
            if webpki::EndEntityCert::try_from(&der).is_err() {
                return Err(malformed(expected));
            }
            der.as_ref().to_vec()
        }
    };
    Ok(SecretMaterial::new(bytes))
}

/// A `key_id_and_secret` secret split into its key id and the secret bytes.
pub(crate) fn split_key_id(material: &[u8]) -> Option<(&[u8], &[u8])> {
    let colon = material.iter().position(|&b| b == b':')?;
    Some((&material[..colon], &material[colon + 1..]))
}

pub(crate) fn sha256_hex(bytes: &[u8]) -> String {
    common::encode_lower_hex(&Sha256::digest(bytes))
}

/// A private key for `sign` with the public-key schemes (tests, `hookgate send`). Never
/// printed.
pub enum SigningKey {
    Ed25519(Ed25519KeyPair),
    EcdsaP256(EcdsaKeyPair),
    Rsa(RsaKeyPair),
}

impl std::fmt::Debug for SigningKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SigningKey(<redacted>)")
    }
}

impl SigningKey {
    /// Parses a private key for `scheme`: Ed25519 = the 32-byte seed in hex; ECDSA P-256 and
    /// RSA = PKCS#8, as PEM or base64 DER.
    pub(crate) fn decode(scheme: Scheme, text: &str) -> Result<Self, SecretFormatError> {
        let pkcs8 = || -> Option<Vec<u8>> {
            match PrivateKeyDer::from_pem_slice(text.as_bytes()) {
                Ok(PrivateKeyDer::Pkcs8(der)) => Some(der.secret_pkcs8_der().to_vec()),
                Ok(_) => None,
                Err(_) => STANDARD.decode(text.trim()).ok(),
            }
        };
        let malformed = |expected| SecretFormatError::Malformed { expected };
        match scheme {
            Scheme::Ed25519 => decode_any_hex(text.trim())
                .filter(|seed| seed.len() == 32)
                .and_then(|seed| Ed25519KeyPair::from_seed_unchecked(&seed).ok())
                .map(SigningKey::Ed25519)
                .ok_or(malformed("a 32-byte Ed25519 seed in hex")),
            Scheme::EcdsaP256 => pkcs8()
                .and_then(|der| {
                    EcdsaKeyPair::from_pkcs8(
                        &ECDSA_P256_SHA256_ASN1_SIGNING,
                        &der,
                        &SystemRandom::new(),
                    )
                    .ok()
                })
                .map(SigningKey::EcdsaP256)
                .ok_or(malformed("a P-256 private key (PKCS#8)")),
            Scheme::RsaSha256Certificate => pkcs8()
                .and_then(|der| RsaKeyPair::from_pkcs8(&der).ok())
                .map(SigningKey::Rsa)
                .ok_or(malformed("an RSA private key (PKCS#8)")),
            _ => Err(malformed(
                "a shared secret (this scheme has no private key)",
            )),
        }
    }

    pub(crate) fn fits(&self, scheme: Scheme) -> bool {
        matches!(
            (self, scheme),
            (SigningKey::Ed25519(_), Scheme::Ed25519)
                | (SigningKey::EcdsaP256(_), Scheme::EcdsaP256)
                | (SigningKey::Rsa(_), Scheme::RsaSha256Certificate)
        )
    }

    /// The public key as the pack's `secret_format` writes it (Ed25519 hex, P-256 SPKI
    /// base64); RSA keys are configured as a certificate, which this cannot make.
    pub fn public_key_text(&self) -> Option<String> {
        match self {
            SigningKey::Ed25519(pair) => Some(common::encode_lower_hex(pair.public_key().as_ref())),
            SigningKey::EcdsaP256(pair) => {
                let mut der = P256_SPKI_PREFIX.to_vec();
                der.extend_from_slice(pair.public_key().as_ref());
                Some(STANDARD.encode(der))
            }
            SigningKey::Rsa(_) => None,
        }
    }

    /// The public key in `format` (a base64 Ed25519 key where the pack takes one).
    pub(crate) fn public_key_in(&self, format: SecretFormat) -> Option<String> {
        match (self, format) {
            (SigningKey::Ed25519(pair), SecretFormat::Ed25519PublicBase64) => {
                Some(STANDARD.encode(pair.public_key().as_ref()))
            }
            _ => self.public_key_text(),
        }
    }

    pub(crate) fn sign(&self, message: &[u8]) -> Option<Vec<u8>> {
        let rng = SystemRandom::new();
        match self {
            SigningKey::Ed25519(pair) => Some(pair.sign(message).as_ref().to_vec()),
            SigningKey::EcdsaP256(pair) => {
                pair.sign(&rng, message).ok().map(|s| s.as_ref().to_vec())
            }
            SigningKey::Rsa(pair) => {
                let mut out = vec![0; pair.public().modulus_len()];
                pair.sign(&RSA_PKCS1_SHA256, &rng, message, &mut out)
                    .ok()
                    .map(|()| out)
            }
        }
    }
}

/// What signs a delivery.
#[derive(Clone, Copy)]
pub(crate) enum Signer<'a> {
    Shared(&'a SecretMaterial),
    Private(&'a SigningKey),
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn base64_hex_is_base64_of_the_lower_case_hex_text() {
        let tag = [0xab_u8, 0x01, 0xff];
        let text = Encoding::Base64Hex.encode(&tag);
        assert_eq!(text, STANDARD.encode("ab01ff"));
        assert_eq!(Encoding::Base64Hex.decode(&text), Some(tag.to_vec()));
        // upper-case hex, raw base64 of the tag and bare hex are not this encoding
        assert_eq!(Encoding::Base64Hex.decode(&STANDARD.encode("AB01FF")), None);
        assert_eq!(Encoding::Base64Hex.decode(&STANDARD.encode(tag)), None);
        assert_eq!(Encoding::Base64Hex.decode("ab01ff"), None);
    }

    #[test]
    fn hex_upper_writes_upper_case_and_reads_either_case() {
        let tag = [0xab_u8, 0x01, 0xff];
        assert_eq!(Encoding::HexUpper.encode(&tag), "AB01FF");
        assert_eq!(Encoding::HexUpper.decode("AB01FF"), Some(tag.to_vec()));
        assert_eq!(Encoding::HexUpper.decode("ab01ff"), Some(tag.to_vec()));
        assert_eq!(Encoding::HexUpper.decode("AB01F"), None);
        assert_eq!(Encoding::HexUpper.decode("AB01FG"), None);
        // plain `hex` stays strictly lower case
        assert_eq!(Encoding::Hex.decode("AB01FF"), None);
    }
}
