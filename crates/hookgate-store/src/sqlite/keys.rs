//! Payload key rotation on SQLite (the [`PayloadKeyStore`] impl): counts and batches are read
//! on the read pool; re-sealed payloads are written by one command through the writer thread,
//! inside its group-commit transaction between acceptance batches.

use rusqlite::Connection;

use super::SqliteStore;
use super::command::Failed;
use super::read::mapped;
use crate::StoreError;
use crate::keys::{
    KeyVersionRows, PayloadKeyStore, ResealedPayload, SealedPayload, key_version_rows,
    sealed_payload,
};
use crate::processing::ProcessingError;

/// Stored payloads only: a purged payload has no `inbox_payload` row.
const KEY_ROWS: &str = "SELECT i.payload_key_version, count(*) \
     FROM inbox i INDEXED BY inbox_payload_key JOIN inbox_payload p USING (inbox_id) \
     GROUP BY i.payload_key_version ORDER BY i.payload_key_version";

const SEALED_UNDER: &str = "SELECT i.inbox_id, i.provider, i.endpoint_id, \
         i.provider_event_id, i.payload_key_version, p.payload \
     FROM inbox i INDEXED BY inbox_payload_key JOIN inbox_payload p USING (inbox_id) \
     WHERE i.payload_key_version = ?1 AND i.inbox_id > ?2 \
       AND (i.lease_until IS NULL OR i.lease_until <= ?3) \
     ORDER BY i.inbox_id LIMIT ?4";

/// The fence: still under the version it was read under, payload still stored, not leased.
const RESEAL_INBOX: &str = "UPDATE inbox SET payload_key_version = ?2, payload_digest = ?3 \
     WHERE inbox_id = ?1 AND payload_key_version = ?4 \
       AND (lease_until IS NULL OR lease_until <= ?5) \
       AND EXISTS (SELECT 1 FROM inbox_payload WHERE inbox_id = ?1)";

const RESEAL_PAYLOAD: &str = "UPDATE inbox_payload SET payload = ?2 WHERE inbox_id = ?1";

fn reseal_rows(conn: &Connection, rows: &[ResealedPayload], now_ms: i64) -> rusqlite::Result<u64> {
    let mut written = 0;
    for row in rows {
        let n = conn
            .prepare_cached(RESEAL_INBOX)?
            .execute(rusqlite::params![
                row.inbox_id,
                row.key_version,
                row.payload_digest,
                row.from_version,
                now_ms,
            ])?;
        if n == 1 {
            conn.prepare_cached(RESEAL_PAYLOAD)?
                .execute(rusqlite::params![row.inbox_id, row.payload])?;
            written += 1;
        }
    }
    Ok(written)
}

#[async_trait::async_trait]
impl PayloadKeyStore for SqliteStore {
    async fn payload_key_rows(&self) -> Result<Vec<KeyVersionRows>, StoreError> {
        self.read(|conn| {
            let mut stmt = conn.prepare_cached(KEY_ROWS)?;
            stmt.query_map([], mapped(|r| key_version_rows(r)))?
                .collect()
        })
        .await
    }

    async fn sealed_under(
        &self,
        key_version: u32,
        after: Option<&str>,
        now_ms: i64,
        limit: u32,
    ) -> Result<Vec<SealedPayload>, StoreError> {
        let after = after.unwrap_or("").to_owned();
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(SEALED_UNDER)?;
            stmt.query_map(
                rusqlite::params![key_version, after, now_ms, limit],
                mapped(|r| sealed_payload(r)),
            )?
            .collect()
        })
        .await
    }

    async fn reseal(&self, rows: Vec<ResealedPayload>, now_ms: i64) -> Result<u64, StoreError> {
        if rows.is_empty() {
            return Ok(0);
        }
        self.write(move |conn| reseal_rows(conn, &rows, now_ms).map_err(Failed::Sql))
            .await
            .map_err(ProcessingError::into_store_error)
    }
}
