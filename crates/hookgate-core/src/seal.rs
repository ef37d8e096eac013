//! Payload sealing at rest: XChaCha20-Poly1305 with versioned keys.
//!
//! A sealed payload is `nonce (24 bytes) || ciphertext+tag`; the key version is stored in its
//! own column. The associated data is the row identity ([`RowIdentity`]), so a ciphertext
//! copied onto another row fails to open. The payload digest is a keyed MAC (HMAC-SHA256 under
//! a sub-key derived from the payload key), never a bare hash: a bare hash of a guessable
//! payload would leak it.

use std::collections::BTreeMap;
use std::fmt;

use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use hmac::{Hmac, Mac};
use rand::{CryptoRng, RngCore};
use sha2::Sha256;
use zeroize::Zeroizing;

use crate::envelope::RowIdentity;

const NONCE_LEN: usize = 24;
pub const KEY_LEN: usize = 32;

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum SealError {
    #[error("payload key version {0} is not configured")]
    UnknownKeyVersion(u32),
    #[error("active payload key version {0} is not among the configured keys")]
    ActiveKeyMissing(u32),
    #[error("no payload keys configured")]
    NoKeys,
    #[error("sealed payload is malformed or was not sealed for this row with this key")]
    OpenFailed,
}

struct VersionedKey {
    cipher: XChaCha20Poly1305,
    digest_key: Zeroizing<[u8; 32]>,
}

/// The configured payload keys; one is active for sealing, all open.
pub struct Keyring {
    active: u32,
    keys: BTreeMap<u32, VersionedKey>,
}

impl fmt::Debug for Keyring {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Keyring")
            .field("active", &self.active)
            .field("versions", &self.keys.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// A payload sealed under one key version.
#[derive(Clone, PartialEq, Eq)]
pub struct Sealed {
    pub key_version: u32,
    pub bytes: Vec<u8>,
}

impl fmt::Debug for Sealed {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Sealed(v{}, {} bytes)",
            self.key_version,
            self.bytes.len()
        )
    }
}

fn derive_digest_key(key: &[u8; KEY_LEN]) -> Zeroizing<[u8; 32]> {
    let mut mac = <Hmac<Sha256> as Mac>::new_from_slice(key).expect("any key length");
    mac.update(b"hookgate payload digest v1");
    Zeroizing::new(mac.finalize().into_bytes().into())
}

impl Keyring {
    pub fn new(
        active: u32,
        keys: impl IntoIterator<Item = (u32, Zeroizing<[u8; KEY_LEN]>)>,
    ) -> Result<Self, SealError> {
        let keys: BTreeMap<u32, VersionedKey> = keys
            .into_iter()
            .map(|(version, key)| {
                let cipher = XChaCha20Poly1305::new((&*key).into());
                (
                    version,
                    VersionedKey {
                        cipher,
                        digest_key: derive_digest_key(&key),
                    },
                )
            })
            .collect();
        if keys.is_empty() {
            return Err(SealError::NoKeys);
        }
        if !keys.contains_key(&active) {
            return Err(SealError::ActiveKeyMissing(active));
        }
        Ok(Self { active, keys })
    }

    pub fn active_version(&self) -> u32 {
        self.active
    }

    fn key(&self, version: u32) -> Result<&VersionedKey, SealError> {
        self.keys
            .get(&version)
            .ok_or(SealError::UnknownKeyVersion(version))
    }

    /// Seals under the active key with a fresh random nonce from `rng`.
    pub fn seal(
        &self,
        rng: &mut (impl RngCore + CryptoRng),
        identity: &RowIdentity<'_>,
        plaintext: &[u8],
    ) -> Sealed {
        let key = self
            .key(self.active)
            .expect("active key checked at construction");
        let mut nonce = [0u8; NONCE_LEN];
        rng.fill_bytes(&mut nonce);
        let aad = identity.associated_data();
        let ciphertext = key
            .cipher
            .encrypt(
                XNonce::from_slice(&nonce),
                Payload {
                    msg: plaintext,
                    aad: &aad,
                },
            )
            .expect("XChaCha20-Poly1305 encryption does not fail for in-memory payloads");
        let mut bytes = Vec::with_capacity(NONCE_LEN + ciphertext.len());
        bytes.extend_from_slice(&nonce);
        bytes.extend_from_slice(&ciphertext);
        Sealed {
            key_version: self.active,
            bytes,
        }
    }

    /// Opens a payload sealed for `identity`; fails if it was sealed for another row.
    pub fn open(
        &self,
        identity: &RowIdentity<'_>,
        key_version: u32,
        sealed: &[u8],
    ) -> Result<Zeroizing<Vec<u8>>, SealError> {
        let key = self.key(key_version)?;
        if sealed.len() < NONCE_LEN {
            return Err(SealError::OpenFailed);
        }
        let (nonce, ciphertext) = sealed.split_at(NONCE_LEN);
        let aad = identity.associated_data();
        key.cipher
            .decrypt(
                XNonce::from_slice(nonce),
                Payload {
                    msg: ciphertext,
                    aad: &aad,
                },
            )
            .map(Zeroizing::new)
            .map_err(|_| SealError::OpenFailed)
    }

    /// Keyed digest of a payload under the active key version.
    pub fn digest(&self, plaintext: &[u8]) -> [u8; 32] {
        let key = self
            .key(self.active)
            .expect("active key checked at construction");
        let mut mac =
            <Hmac<Sha256> as Mac>::new_from_slice(&*key.digest_key).expect("any key length");
        mac.update(plaintext);
        mac.finalize().into_bytes().into()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::rngs::OsRng;

    fn ring() -> Keyring {
        Keyring::new(
            2,
            [
                (1, Zeroizing::new([1u8; 32])),
                (2, Zeroizing::new([2u8; 32])),
            ],
        )
        .unwrap()
    }

    const ID: RowIdentity<'static> = RowIdentity {
        provider: "stripe",
        endpoint_id: "main",
        provider_event_id: "evt_1",
    };

    #[test]
    fn seal_open_round_trip_and_no_plaintext() {
        let r = ring();
        let sealed = r.seal(&mut OsRng, &ID, b"{\"secret\":\"payload\"}");
        assert_eq!(sealed.key_version, 2);
        assert!(!sealed.bytes.windows(7).any(|w| w == b"payload"));
        let opened = r.open(&ID, 2, &sealed.bytes).unwrap();
        assert_eq!(&opened[..], b"{\"secret\":\"payload\"}");
    }

    #[test]
    fn other_row_or_tamper_or_wrong_version_fails() {
        let r = ring();
        let sealed = r.seal(&mut OsRng, &ID, b"body");
        let other = RowIdentity {
            provider_event_id: "evt_2",
            ..ID
        };
        assert_eq!(r.open(&other, 2, &sealed.bytes), Err(SealError::OpenFailed));
        assert_eq!(r.open(&ID, 1, &sealed.bytes), Err(SealError::OpenFailed));
        assert_eq!(
            r.open(&ID, 9, &sealed.bytes),
            Err(SealError::UnknownKeyVersion(9))
        );
        let mut tampered = sealed.bytes.clone();
        *tampered.last_mut().unwrap() ^= 1;
        assert_eq!(r.open(&ID, 2, &tampered), Err(SealError::OpenFailed));
        assert_eq!(r.open(&ID, 2, &[0u8; 3]), Err(SealError::OpenFailed));
    }

    #[test]
    fn old_key_still_opens_after_rotation() {
        let old = Keyring::new(1, [(1, Zeroizing::new([1u8; 32]))]).unwrap();
        let sealed = old.seal(&mut OsRng, &ID, b"body");
        assert_eq!(&ring().open(&ID, 1, &sealed.bytes).unwrap()[..], b"body");
    }

    #[test]
    fn digest_is_keyed() {
        let a = Keyring::new(1, [(1, Zeroizing::new([1u8; 32]))]).unwrap();
        let b = Keyring::new(1, [(1, Zeroizing::new([7u8; 32]))]).unwrap();
        assert_eq!(a.digest(b"x"), a.digest(b"x"));
        assert_ne!(a.digest(b"x"), b.digest(b"x"));
    }

    #[test]
    fn construction_errors() {
        assert_eq!(Keyring::new(1, []).unwrap_err(), SealError::NoKeys);
        assert_eq!(
            Keyring::new(3, [(1, Zeroizing::new([1u8; 32]))]).unwrap_err(),
            SealError::ActiveKeyMissing(3)
        );
    }
}
