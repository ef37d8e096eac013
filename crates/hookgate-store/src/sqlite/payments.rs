//! The payments handler's table on SQLite (statements and mapping in `crate::payments`).

use rusqlite::{Connection, OptionalExtension};

use super::read::mapped;
use crate::payments::{SELECT, UPSERT, payment_state, upsert_values};
use crate::processing::{BusinessChange, PaymentState};

/// Applies one handler's business change inside the processing transaction.
/// `fetch_seq` is the number of the lease the change was fetched under.
pub(super) fn apply(
    tx: &Connection,
    change: &BusinessChange,
    fetch_seq: i64,
) -> rusqlite::Result<()> {
    let (object_id, object_type, status, amount, currency, refreshed_at_ms, last_event_id) =
        upsert_values(change);
    tx.prepare_cached(UPSERT.sqlite())?
        .execute(rusqlite::params![
            object_id,
            object_type,
            status,
            amount,
            currency,
            refreshed_at_ms,
            last_event_id,
            fetch_seq
        ])?;
    Ok(())
}

pub(super) fn read(conn: &Connection, object_id: &str) -> rusqlite::Result<Option<PaymentState>> {
    conn.prepare_cached(SELECT.sqlite())?
        .query_row([object_id], mapped(|r| payment_state(r)))
        .optional()
}
