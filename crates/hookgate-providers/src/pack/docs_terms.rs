//! The words `providers list --json`, `providers show` and `docs/providers.md` use for a
//! pack's secret formats, encodings, algorithms and time formats (one place, so every page
//! names them alike).

use super::{Algorithm, Encoding, SecretFormat, TimeFormat};

impl SecretFormat {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            SecretFormat::Utf8 => "utf8",
            SecretFormat::WhsecBase64 => "whsec_base64",
            SecretFormat::Hex => "hex",
            SecretFormat::Base64 => "base64",
            SecretFormat::Ed25519PublicHex => "ed25519_public_hex",
            SecretFormat::P256SpkiDerBase64 => "p256_spki_der_base64",
            SecretFormat::X509Pem => "x509_pem",
            SecretFormat::WhsecBase64OrUtf8 => "whsec_base64_or_utf8",
            SecretFormat::Ed25519PublicBase64 => "ed25519_public_base64",
            SecretFormat::KeyIdAndSecret => "key_id_and_secret",
            SecretFormat::Utf8Nfkd => "utf8_nfkd",
        }
    }

    pub(super) fn description(self) -> &'static str {
        match self {
            SecretFormat::Utf8 => {
                "the secret string exactly as the provider shows it, used verbatim (its UTF-8 \
                 bytes; not decoded, any prefix included)"
            }
            SecretFormat::WhsecBase64 => {
                "`whsec_` followed by base64, as the provider shows it (the prefix is \
                 optional); the key is the decoded bytes"
            }
            SecretFormat::Hex => {
                "the HMAC key in hex, as the provider shows it; the key is the decoded bytes"
            }
            SecretFormat::Base64 => {
                "the key in base64, as the provider shows it; the key is the decoded bytes"
            }
            SecretFormat::Ed25519PublicHex => {
                "the provider's Ed25519 public key in hex (64 digits); it verifies only"
            }
            SecretFormat::P256SpkiDerBase64 => {
                "the provider's ECDSA P-256 verification key, base64 of its DER \
                 SubjectPublicKeyInfo; it verifies only"
            }
            SecretFormat::X509Pem => {
                "the provider's signing certificate in PEM (pinned: a certificate URL named by \
                 the request is never fetched); it verifies only"
            }
            SecretFormat::WhsecBase64OrUtf8 => {
                "the secret as the provider shows it: a `whsec_` secret is base64-decoded after \
                 the prefix, any other secret is used as its UTF-8 bytes"
            }
            SecretFormat::Ed25519PublicBase64 => {
                "the provider's Ed25519 public key in base64 (32 bytes); it verifies only"
            }
            SecretFormat::KeyIdAndSecret => {
                "`<key id>:<secret>`: the key id the request names, a colon, then the secret \
                 string used verbatim"
            }
            SecretFormat::Utf8Nfkd => {
                "the secret string as the provider shows it, Unicode NFKD-normalised, then its \
                 UTF-8 bytes (identical to `utf8` for ASCII secrets)"
            }
        }
    }
}

impl Encoding {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            Encoding::Hex => "hex",
            Encoding::HexUpper => "upper-case hex",
            Encoding::Base64 => "base64",
            Encoding::Base64Url => "base64url",
            Encoding::Base64Hex => "base64 of the lower-case hex",
            Encoding::Text => "text",
        }
    }
}

impl Algorithm {
    pub(super) fn hmac_text(self) -> &'static str {
        match self {
            Algorithm::Sha1 => "HMAC-SHA1",
            Algorithm::Sha256 => "HMAC-SHA256",
            Algorithm::Sha512 => "HMAC-SHA512",
            Algorithm::PlainSha256 => {
                "SHA-256 of the secret then the signed bytes (a keyed hash, not an HMAC)"
            }
            Algorithm::PlainSha1KeyLast => {
                "SHA-1 of the signed bytes then the secret (a keyed hash, not an HMAC)"
            }
            Algorithm::PlainSha256KeyLast => {
                "SHA-256 of the signed bytes then the secret (a keyed hash, not an HMAC)"
            }
        }
    }
}

impl TimeFormat {
    pub(super) fn as_str(self) -> &'static str {
        match self {
            TimeFormat::UnixSeconds => "unix seconds",
            TimeFormat::UnixMillis => "unix milliseconds",
            TimeFormat::Rfc3339 => "RFC 3339",
            TimeFormat::Iso8601Utc => "ISO 8601 (UTC without an offset)",
        }
    }
}
