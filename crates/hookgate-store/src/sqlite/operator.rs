//! The operator API's page of events (a read) and its operations (commands of the single
//! writer, each one statement under the command's savepoint); see [`crate::operator`].

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OptionalExtension};

use super::SqliteStore;
use super::read::record;
use crate::operator::{
    EVENT_STATE, EventQuery, GlobDialect, INSERT_AUDIT, NewAudit, OperationResult, Param,
    REDELIVER, REPLAY_EVENT, Redelivery, classify, page_conditions,
};
use crate::{InboxRecord, OperatorStore, ProcessingError, StoreError, rows};

/// The inbox columns without the payload (a page never reads one).
static PAGE_COLUMNS: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    rows::inbox_select_list(|c| match c {
        "payload" => "NULL".to_owned(),
        c => c.to_owned(),
    })
});

fn sqlite_params(params: Vec<Param>) -> Vec<SqlValue> {
    params
        .into_iter()
        .map(|p| match p {
            Param::Text(s) => SqlValue::Text(s),
            Param::Int(n) => SqlValue::Integer(n),
        })
        .collect()
}

pub(super) fn page_events(
    conn: &Connection,
    query: &EventQuery,
) -> rusqlite::Result<Vec<InboxRecord>> {
    let (conditions, params) = page_conditions(query, GlobDialect::Glob, |n| format!("?{n}"));
    let sql = format!("SELECT {} FROM inbox{conditions}", *PAGE_COLUMNS);
    let mut stmt = conn.prepare_cached(&sql)?;
    let rows = stmt.query_map(rusqlite::params_from_iter(sqlite_params(params)), record)?;
    rows.collect()
}

fn event_state(conn: &Connection, inbox_id: &str) -> rusqlite::Result<Option<(String, bool)>> {
    let sql = EVENT_STATE.replace('$', "?");
    conn.prepare_cached(&sql)?
        .query_row([inbox_id], |r| Ok((r.get(0)?, r.get(1)?)))
        .optional()
}

#[async_trait::async_trait]
impl OperatorStore for SqliteStore {
    async fn record_audit(&self, entry: NewAudit) -> Result<(), StoreError> {
        self.write(move |tx| {
            tx.prepare_cached(&INSERT_AUDIT.replace('$', "?"))?
                .execute(rusqlite::params![
                    entry.audit_id,
                    entry.at_ms,
                    entry.actor,
                    entry.action,
                    entry.target,
                    entry.detail,
                    entry.result,
                    entry.filter,
                ])?;
            Ok(())
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }

    async fn replay_event(
        &self,
        inbox_id: &str,
        now_ms: i64,
    ) -> Result<OperationResult, StoreError> {
        let inbox_id = inbox_id.to_owned();
        self.write(move |tx| {
            let n = tx
                .prepare_cached(&REPLAY_EVENT.replace('$', "?"))?
                .execute(rusqlite::params![inbox_id, now_ms])?;
            if n == 1 {
                return Ok(OperationResult::Done);
            }
            Ok(classify(event_state(tx, &inbox_id)?, false))
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }

    async fn redeliver(&self, request: Redelivery<'_>) -> Result<OperationResult, StoreError> {
        let outbox_id = request.outbox_id.to_owned();
        let destination = request.destination.to_owned();
        let fresh_key = request.fresh_key.map(str::to_owned);
        let inbox_id = request.inbox_id.to_owned();
        let now_ms = request.now_ms;
        self.write(move |tx| {
            let n = tx
                .prepare_cached(&REDELIVER.replace('$', "?"))?
                .execute(rusqlite::params![
                    outbox_id,
                    destination,
                    now_ms,
                    fresh_key,
                    inbox_id
                ])?;
            if n == 1 {
                return Ok(OperationResult::Done);
            }
            Ok(classify(event_state(tx, &inbox_id)?, true))
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }
}
