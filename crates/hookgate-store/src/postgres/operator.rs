//! The operator API's page of events and its operations on PostgreSQL (each operation one
//! statement in its own transaction; the upsert of a re-delivery locks the delivery row, and
//! a relay's lease skips locked rows); see [`crate::operator`].

use std::sync::LazyLock;

use tokio_postgres::types::ToSql;

use super::PostgresStore;
use crate::operator::{
    EVENT_STATE, EventQuery, GlobDialect, INSERT_AUDIT, NewAudit, OperationResult, Param,
    REDELIVER, REPLAY_EVENT, Redelivery, classify, page_conditions,
};
use crate::rows::{self, Columns, inbox_record};
use crate::{InboxRecord, OperatorStore, StoreError};

/// The inbox columns without the payload (a page never reads one, so TOAST is not touched).
static PAGE_COLUMNS: LazyLock<String> = LazyLock::new(|| {
    rows::inbox_select_list(|c| match c {
        "payload" => "NULL::bytea".to_owned(),
        c => c.to_owned(),
    })
});

enum Bound {
    Text(String),
    Int(i64),
}

fn bound(params: Vec<Param>) -> Vec<Bound> {
    params
        .into_iter()
        .map(|p| match p {
            Param::Text(s) => Bound::Text(s),
            Param::Int(n) => Bound::Int(n),
        })
        .collect()
}

fn refs(params: &[Bound]) -> Vec<&(dyn ToSql + Sync)> {
    params
        .iter()
        .map(|p| match p {
            Bound::Text(s) => s as &(dyn ToSql + Sync),
            Bound::Int(n) => n as &(dyn ToSql + Sync),
        })
        .collect()
}

impl PostgresStore {
    pub(super) async fn page(&self, query: &EventQuery) -> Result<Vec<InboxRecord>, StoreError> {
        let (conditions, params) = page_conditions(query, GlobDialect::Like, |n| format!("${n}"));
        let sql = format!("SELECT {} FROM inbox{conditions}", *PAGE_COLUMNS);
        let params = bound(params);
        self.query(&sql, &refs(&params))
            .await?
            .iter()
            .map(inbox_record)
            .collect()
    }

    async fn event_state(&self, inbox_id: &str) -> Result<Option<(String, bool)>, StoreError> {
        let rows = self.query(EVENT_STATE, &[&inbox_id]).await?;
        match rows.first() {
            None => Ok(None),
            Some(r) => {
                let purged: bool = r
                    .try_get(1)
                    .map_err(|e| StoreError::Corrupt(format!("column 1: {e}")))?;
                Ok(Some((r.text(0)?, purged)))
            }
        }
    }
}

#[async_trait::async_trait]
impl OperatorStore for PostgresStore {
    async fn record_audit(&self, entry: NewAudit) -> Result<(), StoreError> {
        self.query(
            INSERT_AUDIT,
            &[
                &entry.audit_id,
                &entry.at_ms,
                &entry.actor,
                &entry.action,
                &entry.target,
                &entry.detail,
                &entry.result,
                &entry.filter,
            ],
        )
        .await?;
        Ok(())
    }

    async fn replay_event(
        &self,
        inbox_id: &str,
        now_ms: i64,
    ) -> Result<OperationResult, StoreError> {
        let sql = format!("{REPLAY_EVENT} RETURNING inbox_id");
        let rows = self.query(&sql, &[&inbox_id, &now_ms]).await?;
        if !rows.is_empty() {
            return Ok(OperationResult::Done);
        }
        Ok(classify(self.event_state(inbox_id).await?, false))
    }

    async fn redeliver(&self, request: Redelivery<'_>) -> Result<OperationResult, StoreError> {
        let sql = format!("{REDELIVER} RETURNING outbox_id");
        let rows = self
            .query(
                &sql,
                &[
                    &request.outbox_id,
                    &request.destination,
                    &request.now_ms,
                    &request.fresh_key,
                    &request.inbox_id,
                ],
            )
            .await?;
        if !rows.is_empty() {
            return Ok(OperationResult::Done);
        }
        Ok(classify(self.event_state(request.inbox_id).await?, true))
    }
}
