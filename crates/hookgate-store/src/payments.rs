//! The payments handler's business table, `payment_state`: what both backends share (the
//! statements and the row mapping). Each backend runs them in its own `payments.rs`; no other
//! module writes or reads a business table.

use crate::StoreError;
use crate::processing::{BusinessChange, PaymentState};
use crate::rows::Columns;
use crate::statements::Statement;

/// Stores the provider's current state of a payment object; a row is never overwritten by a
/// fetch made under an earlier lease (`fetch_seq`, a database sequence), and within one lease
/// (one worker's clock) by an earlier fetch. Wall clocks of different instances are never
/// compared. Parameters: object id, object type, status, amount, currency, refreshed at (ms),
/// last event id, fetch sequence (the row's lease number).
pub(crate) static UPSERT: Statement = Statement::new(
    "INSERT INTO payment_state (object_id, object_type, status, amount, currency, \
         refreshed_at, last_event_id, fetch_seq, write_count) \
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8, 1) \
     ON CONFLICT (object_id) DO UPDATE SET object_type = EXCLUDED.object_type, \
         status = EXCLUDED.status, amount = EXCLUDED.amount, \
         currency = EXCLUDED.currency, refreshed_at = EXCLUDED.refreshed_at, \
         last_event_id = EXCLUDED.last_event_id, fetch_seq = EXCLUDED.fetch_seq, \
         write_count = payment_state.write_count + 1 \
     WHERE (EXCLUDED.fetch_seq, EXCLUDED.refreshed_at) \
         >= (payment_state.fetch_seq, payment_state.refreshed_at)",
);

/// The values [`UPSERT`] binds for `change`, in its parameter order, the fetch sequence (the
/// last parameter) left to the caller: object id, object type, status, amount, currency,
/// refreshed at (ms), last event id.
#[allow(clippy::type_complexity)]
pub(crate) fn upsert_values(
    change: &BusinessChange,
) -> (&str, &str, &str, Option<i64>, Option<&str>, i64, &str) {
    let BusinessChange::UpsertPaymentState {
        object_id,
        object_type,
        status,
        amount,
        currency,
        refreshed_at_ms,
        last_event_id,
    } = change;
    (
        object_id,
        object_type,
        status,
        *amount,
        currency.as_deref(),
        *refreshed_at_ms,
        last_event_id,
    )
}

/// One row, read by [`payment_state`]. Parameter: object id.
pub(crate) static SELECT: Statement = Statement::new(
    "SELECT object_id, object_type, status, amount, currency, refreshed_at, last_event_id, \
         write_count, fetch_seq FROM payment_state WHERE object_id = $1",
);

pub(crate) fn payment_state(r: &impl Columns) -> Result<PaymentState, StoreError> {
    Ok(PaymentState {
        object_id: r.text(0)?,
        object_type: r.text(1)?,
        status: r.text(2)?,
        amount: r.opt_int(3)?,
        currency: r.opt_text(4)?,
        refreshed_at_ms: r.int(5)?,
        last_event_id: r.text(6)?,
        write_count: r.int(7)?,
        fetch_seq: r.int(8)?,
    })
}
