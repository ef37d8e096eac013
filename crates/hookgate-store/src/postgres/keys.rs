//! Payload key rotation on PostgreSQL (the [`PayloadKeyStore`] impl): reads through the read
//! helper; a batch of re-sealed payloads is one set-based `UPDATE` in its own short
//! transaction, fenced like the SQLite statements (under READ COMMITTED a row locked by a
//! concurrent lease is re-checked after that lease commits, and then skipped).

use super::PostgresStore;
use crate::StoreError;
use crate::keys::{
    KeyVersionRows, PayloadKeyStore, ResealedPayload, SealedPayload, key_version_rows,
    sealed_payload,
};

/// Stored payloads only (`payload IS NOT NULL`: the partial index of version 9).
const KEY_ROWS: &str = "SELECT payload_key_version, count(*) FROM inbox \
     WHERE payload IS NOT NULL GROUP BY payload_key_version ORDER BY payload_key_version";

const SEALED_UNDER: &str = "SELECT inbox_id, provider, endpoint_id, provider_event_id, \
         payload_key_version, payload FROM inbox \
     WHERE payload IS NOT NULL AND payload_key_version = $1 AND inbox_id > $2 \
       AND (lease_until IS NULL OR lease_until <= $3) \
     ORDER BY inbox_id LIMIT $4";

/// The fence: still under the version it was read under, payload still stored, not leased.
/// Rows in `inbox_id` order, so concurrent instances lock in one order.
const RESEAL: &str = "UPDATE inbox AS i \
     SET payload = r.payload, payload_key_version = r.key_version, \
         payload_digest = r.digest \
     FROM (SELECT * FROM unnest($1::text[], $2::bigint[], $3::bigint[], $4::bytea[], \
                                $5::bytea[]) \
           AS u(inbox_id, from_version, key_version, payload, digest) \
           ORDER BY inbox_id) AS r \
     WHERE i.inbox_id = r.inbox_id AND i.payload_key_version = r.from_version \
       AND i.payload IS NOT NULL AND (i.lease_until IS NULL OR i.lease_until <= $6) \
     RETURNING i.inbox_id";

#[async_trait::async_trait]
impl PayloadKeyStore for PostgresStore {
    async fn payload_key_rows(&self) -> Result<Vec<KeyVersionRows>, StoreError> {
        let rows = self.query(KEY_ROWS, &[]).await?;
        rows.iter().map(key_version_rows).collect()
    }

    async fn sealed_under(
        &self,
        key_version: u32,
        after: Option<&str>,
        now_ms: i64,
        limit: u32,
    ) -> Result<Vec<SealedPayload>, StoreError> {
        let key_version = i64::from(key_version);
        let after = after.unwrap_or("");
        let limit = i64::from(limit);
        let rows = self
            .query(SEALED_UNDER, &[&key_version, &after, &now_ms, &limit])
            .await?;
        rows.iter().map(sealed_payload).collect()
    }

    async fn reseal(&self, rows: Vec<ResealedPayload>, now_ms: i64) -> Result<u64, StoreError> {
        if rows.is_empty() {
            return Ok(0);
        }
        let ids: Vec<&str> = rows.iter().map(|r| r.inbox_id.as_str()).collect();
        let from: Vec<i64> = rows.iter().map(|r| i64::from(r.from_version)).collect();
        let to: Vec<i64> = rows.iter().map(|r| i64::from(r.key_version)).collect();
        let payloads: Vec<&[u8]> = rows.iter().map(|r| r.payload.as_slice()).collect();
        let digests: Vec<&[u8]> = rows.iter().map(|r| r.payload_digest.as_slice()).collect();
        let written = self
            .query(RESEAL, &[&ids, &from, &to, &payloads, &digests, &now_ms])
            .await?;
        Ok(written.len() as u64)
    }
}
