//! The payments handler's table on PostgreSQL (statements and mapping in `crate::payments`).

use deadpool_postgres::Transaction;

use super::PostgresStore;
use super::tx::Failed;
use crate::StoreError;
use crate::payments::{SELECT, UPSERT, payment_state, upsert_values};
use crate::processing::{BusinessChange, PaymentState};

/// Applies one handler's business change inside the processing transaction.
/// `fetch_seq` is the number of the lease the change was fetched under.
pub(super) async fn apply(
    tx: &Transaction<'_>,
    change: &BusinessChange,
    fetch_seq: i64,
) -> Result<(), Failed> {
    let (object_id, object_type, status, amount, currency, refreshed_at_ms, last_event_id) =
        upsert_values(change);
    let stmt = tx.prepare_cached(UPSERT.postgres()).await?;
    tx.execute(
        &stmt,
        &[
            &object_id,
            &object_type,
            &status,
            &amount,
            &currency,
            &refreshed_at_ms,
            &last_event_id,
            &fetch_seq,
        ],
    )
    .await?;
    Ok(())
}

pub(super) async fn read(
    store: &PostgresStore,
    object_id: &str,
) -> Result<Option<PaymentState>, StoreError> {
    store
        .query(SELECT.postgres(), &[&object_id])
        .await?
        .first()
        .map(payment_state)
        .transpose()
}
