//! Payload key rotation: which key versions stored payloads are sealed under, and re-sealing
//! those under a retired version with the active one (the `reseal` stage in the binary).
//!
//! Only stored payloads count: a row whose payload was purged pins no key. Re-sealing is
//! fenced twice: a row is read and written only while nobody holds a lease on it, and the
//! write applies only while the row is still under the version it was read under and its
//! payload is still stored (a purge in between wins). The store never sees a key: the caller
//! opens and seals (the AEAD's associated data is the row identity, which does not change).

use crate::StoreError;
use crate::rows::Columns;

/// How many stored payloads are sealed under one key version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct KeyVersionRows {
    pub version: u32,
    pub rows: u64,
}

/// A stored payload to re-seal: the row's identity (the associated data) and its ciphertext.
#[derive(Clone, PartialEq, Eq)]
pub struct SealedPayload {
    pub inbox_id: String,
    pub provider: String,
    pub endpoint_id: String,
    pub provider_event_id: String,
    pub key_version: u32,
    pub payload: Vec<u8>,
}

impl std::fmt::Debug for SealedPayload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealedPayload")
            .field("inbox_id", &self.inbox_id)
            .field("key_version", &self.key_version)
            .field("payload_bytes", &self.payload.len())
            .finish_non_exhaustive()
    }
}

/// A payload sealed again: written only if the row is still under `from_version`, its payload
/// still stored and not leased.
#[derive(Clone, PartialEq, Eq)]
pub struct ResealedPayload {
    pub inbox_id: String,
    pub from_version: u32,
    pub key_version: u32,
    pub payload: Vec<u8>,
    /// The keyed digest of the plaintext under the new key, so no stored value still
    /// depends on the retired one.
    pub payload_digest: Vec<u8>,
}

impl std::fmt::Debug for ResealedPayload {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ResealedPayload")
            .field("inbox_id", &self.inbox_id)
            .field("from_version", &self.from_version)
            .field("key_version", &self.key_version)
            .finish_non_exhaustive()
    }
}

/// What key rotation asks of the store.
#[async_trait::async_trait]
pub trait PayloadKeyStore: Send + Sync {
    /// Stored payloads per key version, by version; versions with none are absent.
    async fn payload_key_rows(&self) -> Result<Vec<KeyVersionRows>, StoreError>;

    /// Up to `limit` stored payloads sealed under `version`, in `inbox_id` order after
    /// `after`, of rows not leased at `now_ms` (a pass over them resumes from the last id).
    async fn sealed_under(
        &self,
        version: u32,
        after: Option<&str>,
        now_ms: i64,
        limit: u32,
    ) -> Result<Vec<SealedPayload>, StoreError>;

    /// Writes the re-sealed payloads (one short transaction; on SQLite through the writer,
    /// between acceptance batches). Returns how many were written; the others changed in
    /// between (leased, purged, or re-sealed by another instance) and are left as they are.
    async fn reseal(&self, rows: Vec<ResealedPayload>, now_ms: i64) -> Result<u64, StoreError>;
}

/// A row of the backends' key-count query: key version, stored payloads.
pub(crate) fn key_version_rows(r: &impl Columns) -> Result<KeyVersionRows, StoreError> {
    Ok(KeyVersionRows {
        version: key_version(r.int(0)?)?,
        rows: u64::try_from(r.int(1)?).unwrap_or(0),
    })
}

/// A row of the backends' `sealed_under` query: inbox id, provider, endpoint id, provider
/// event id, key version, sealed payload.
pub(crate) fn sealed_payload(r: &impl Columns) -> Result<SealedPayload, StoreError> {
    Ok(SealedPayload {
        inbox_id: r.text(0)?,
        provider: r.text(1)?,
        endpoint_id: r.text(2)?,
        provider_event_id: r.text(3)?,
        key_version: key_version(r.int(4)?)?,
        payload: r.blob(5)?,
    })
}

fn key_version(value: i64) -> Result<u32, StoreError> {
    u32::try_from(value)
        .map_err(|_| StoreError::Corrupt(format!("payload key version {value} out of range")))
}
