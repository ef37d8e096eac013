//! The [`ReconcileStore`] impl: scans on the read pool (no payload is read), and every write
//! a command of the single writer, so a batch of repairs and their finding rows is one
//! savepoint inside a group-commit transaction, committed or lost whole.

use rusqlite::{Connection, OptionalExtension};

use super::SqliteStore;
use super::jobs::bind;
use super::read::mapped;
use crate::reconcile::{
    COVER_WINDOWS, Checkpoint, EXTEND_WINDOW, INSERT_WINDOW, MAX_OPEN_WINDOWS, NoRetryWindow,
    OPEN_WINDOWS, SELECT_CHECKPOINT, SELECT_KEY, SQLITE_SAVE_CHECKPOINT, checkpoint_row,
    window_row,
};
use crate::reconcile::{
    FINISH_RUN, FindingAction, FindingBatch, FindingKind, FindingQuery, FindingRecord, FoundEvent,
    INSERT_FINDING, INSERT_RUN, MAX_RUN_ERROR, MarkerKey, MissingScan, NewFinding, NewRun,
    ORPHAN_STILL, REPAIR_MISSING, REPAIR_OVERDUE, REPAIR_STUCK, RUN_COLUMNS, ReceivedScan,
    RunRecord, RunState, SCAN_MISSING, SCAN_ORPHANS, SCAN_STUCK, StuckScan, TRIM_FINDINGS,
    WAITING_STILL, finding_record, found_event, list_sql, marker_key, outbox_id, run_record,
};
use crate::rejections::sqlite_text;
use crate::{ProcessingError, ReconcileStore, StoreError};

fn select_run(conn: &Connection, run_id: &str) -> rusqlite::Result<Option<RunRecord>> {
    conn.prepare_cached(&format!(
        "SELECT {RUN_COLUMNS} FROM reconcile_runs WHERE run_id = ?1"
    ))?
    .query_row([run_id], mapped(|r| run_record(r)))
    .optional()
}

/// The finding's repair, re-checked; `true` when it still held (and was repaired).
fn repair(conn: &Connection, f: &NewFinding, threshold: i64, now: i64) -> rusqlite::Result<bool> {
    let id = f.inbox_id.as_deref().unwrap_or_default();
    let destination = f.destination.as_deref().unwrap_or_default();
    let n = match f.kind {
        FindingKind::ReceivedOverdue => conn
            .prepare_cached(REPAIR_OVERDUE.sqlite())?
            .execute(rusqlite::params![id, threshold, now])?,
        FindingKind::MissingOutbox => {
            conn.prepare_cached(REPAIR_MISSING.sqlite())?
                .execute(rusqlite::params![
                    outbox_id(id, destination),
                    id,
                    destination,
                    now
                ])?
        }
        FindingKind::OutboxStuck => {
            conn.prepare_cached(REPAIR_STUCK.sqlite())?
                .execute(rusqlite::params![
                    outbox_id(id, destination),
                    threshold,
                    now
                ])?
        }
        FindingKind::SequenceWaiting => conn
            .prepare_cached(WAITING_STILL.sqlite())?
            .query_row([id], |_| Ok(()))
            .optional()?
            .map_or(0, |()| 1),
        FindingKind::OrphanMarker => conn
            .prepare_cached(ORPHAN_STILL.sqlite())?
            .query_row(
                rusqlite::params![f.provider, f.endpoint_id, f.provider_event_id, f.consumer],
                |_| Ok(()),
            )
            .optional()?
            .map_or(0, |()| 1),
    };
    Ok(n == 1)
}

fn insert_finding(
    conn: &Connection,
    run_id: &str,
    f: &NewFinding,
    action: FindingAction,
    now: i64,
) -> rusqlite::Result<()> {
    conn.prepare_cached(INSERT_FINDING.sqlite())?
        .execute(rusqlite::params![
            run_id,
            f.kind.as_str(),
            f.endpoint_id,
            f.provider,
            f.provider_event_id,
            f.inbox_id,
            f.destination,
            f.consumer,
            action.as_str(),
            now,
        ])?;
    Ok(())
}

fn events(
    conn: &Connection,
    sql: &str,
    params: &[&dyn rusqlite::ToSql],
) -> rusqlite::Result<Vec<FoundEvent>> {
    conn.prepare_cached(sql)?
        .query_map(params, mapped(|r| found_event(r)))?
        .collect()
}

fn bounded(error: Option<&str>) -> Option<String> {
    error.map(|e| e.chars().take(MAX_RUN_ERROR).collect())
}

#[async_trait::async_trait]
impl ReconcileStore for SqliteStore {
    async fn received_rows(&self, scan: &ReceivedScan<'_>) -> Result<Vec<FoundEvent>, StoreError> {
        let (endpoint, sql, threshold, since, limit) = (
            scan.endpoint_id.to_owned(),
            scan.rows.statement().sqlite(),
            scan.threshold_ms,
            scan.since_ms,
            i64::from(scan.limit),
        );
        self.read(move |conn| {
            events(
                conn,
                sql,
                rusqlite::params![endpoint, threshold, since, limit],
            )
        })
        .await
    }

    async fn processed_without_delivery(
        &self,
        scan: &MissingScan<'_>,
    ) -> Result<Vec<FoundEvent>, StoreError> {
        let (endpoint, destination, since, limit) = (
            scan.endpoint_id.to_owned(),
            scan.destination.to_owned(),
            scan.since_ms,
            i64::from(scan.limit),
        );
        let (after_at, after_id) = scan.after.clone().unwrap_or((i64::MIN, String::new()));
        self.read(move |conn| {
            events(
                conn,
                SCAN_MISSING.sqlite(),
                rusqlite::params![endpoint, destination, since, after_at, after_id, limit],
            )
        })
        .await
    }

    async fn stuck_deliveries(&self, scan: &StuckScan<'_>) -> Result<Vec<FoundEvent>, StoreError> {
        let (endpoint, destination) = (scan.endpoint_id.to_owned(), scan.destination.to_owned());
        let (threshold, now, since, limit) = (
            scan.threshold_ms,
            scan.now_ms,
            scan.since_ms,
            i64::from(scan.limit),
        );
        self.read(move |conn| {
            events(
                conn,
                SCAN_STUCK.sqlite(),
                rusqlite::params![endpoint, destination, threshold, now, since, limit],
            )
        })
        .await
    }

    async fn orphan_markers(
        &self,
        endpoint_id: &str,
        after: Option<&MarkerKey>,
        limit: u32,
    ) -> Result<Vec<MarkerKey>, StoreError> {
        let endpoint = endpoint_id.to_owned();
        let after = after.cloned().unwrap_or(MarkerKey {
            provider: String::new(),
            endpoint_id: String::new(),
            provider_event_id: String::new(),
            consumer: String::new(),
        });
        self.read(move |conn| {
            conn.prepare_cached(SCAN_ORPHANS.sqlite())?
                .query_map(
                    rusqlite::params![
                        endpoint,
                        after.provider,
                        after.provider_event_id,
                        after.consumer,
                        i64::from(limit)
                    ],
                    mapped(|r| marker_key(r)),
                )?
                .collect()
        })
        .await
    }

    async fn record_findings(&self, batch: FindingBatch) -> Result<Vec<bool>, StoreError> {
        self.write(move |conn| {
            let mut recorded = Vec::with_capacity(batch.findings.len());
            for f in &batch.findings {
                let action = if batch.repair {
                    if !repair(conn, f, batch.threshold_ms, batch.now_ms)? {
                        recorded.push(false);
                        continue;
                    }
                    f.kind.repair_action()
                } else {
                    FindingAction::DryRun
                };
                insert_finding(conn, &batch.run_id, f, action, batch.now_ms)?;
                recorded.push(true);
            }
            Ok(recorded)
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }

    async fn list_findings(&self, query: &FindingQuery) -> Result<Vec<FindingRecord>, StoreError> {
        let (sql, params) = list_sql(query);
        self.read(move |conn| {
            let mut stmt = conn.prepare_cached(&sqlite_text(&sql))?;
            let rows = stmt.query_map(bind(&params).as_slice(), mapped(|r| finding_record(r)))?;
            rows.collect()
        })
        .await
    }

    async fn trim_findings(&self, before_ms: i64, limit: u32) -> Result<u64, StoreError> {
        self.write(move |conn| {
            let n = conn
                .prepare_cached(TRIM_FINDINGS.sqlite())?
                .execute(rusqlite::params![before_ms, i64::from(limit)])?;
            Ok(n as u64)
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }

    async fn create_run(&self, run: NewRun) -> Result<(), StoreError> {
        self.write(move |conn| {
            let running = run.state == RunState::Running;
            conn.prepare_cached(INSERT_RUN.sqlite())?
                .execute(rusqlite::params![
                    run.run_id,
                    run.trigger.as_str(),
                    run.endpoint_id,
                    run.since_ms,
                    i64::from(run.dry_run),
                    run.state.as_str(),
                    run.requested_by,
                    run.now_ms,
                    running.then_some(run.now_ms),
                    run.owner,
                    running.then_some(run.now_ms + run.lease_ms),
                ])?;
            Ok(())
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }

    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        let run_id = run_id.to_owned();
        self.read(move |conn| select_run(conn, &run_id)).await
    }

    async fn lease_run(
        &self,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<Option<RunRecord>, StoreError> {
        const RUNNABLE: &str = "SELECT run_id FROM reconcile_runs \
             INDEXED BY reconcile_runs_runnable \
             WHERE state IN ('pending', 'running') AND (lease_until IS NULL OR lease_until <= ?1) \
             ORDER BY created_at LIMIT 1";
        // An idle stage polls: look on a read connection first, so that no run means no
        // command in the writer's queue.
        let runnable = self
            .read(move |conn| {
                conn.prepare_cached(RUNNABLE)?
                    .query_row([now_ms], |_| Ok(()))
                    .optional()
            })
            .await?;
        if runnable.is_none() {
            return Ok(None);
        }
        let owner = owner.to_owned();
        self.write(move |conn| {
            let Some(run_id) = conn
                .prepare_cached(RUNNABLE)?
                .query_row([now_ms], |r| r.get::<_, String>(0))
                .optional()?
            else {
                return Ok(None);
            };
            conn.prepare_cached(
                "UPDATE reconcile_runs SET state = 'running', lease_owner = ?2, \
                     lease_until = ?3, started_at = coalesce(started_at, ?4) \
                 WHERE run_id = ?1",
            )?
            .execute(rusqlite::params![run_id, owner, now_ms + lease_ms, now_ms])?;
            Ok(select_run(conn, &run_id)?)
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }

    async fn finish_run(
        &self,
        run_id: &str,
        owner: &str,
        state: RunState,
        summary: Option<&str>,
        error: Option<&str>,
        now_ms: i64,
    ) -> Result<bool, StoreError> {
        let (run_id, owner) = (run_id.to_owned(), owner.to_owned());
        let summary = summary.map(str::to_owned);
        let error = bounded(error);
        self.write(move |conn| {
            let n = conn
                .prepare_cached(FINISH_RUN.sqlite())?
                .execute(rusqlite::params![
                    run_id,
                    owner,
                    state.as_str(),
                    summary,
                    error,
                    now_ms
                ])?;
            Ok(n == 1)
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }

    async fn checkpoint(&self, endpoint_id: &str) -> Result<Option<Checkpoint>, StoreError> {
        let endpoint_id = endpoint_id.to_owned();
        self.read(move |conn| {
            conn.prepare_cached(SELECT_CHECKPOINT.sqlite())?
                .query_row([endpoint_id], mapped(|r| checkpoint_row(r)))
                .optional()
        })
        .await
    }

    async fn save_checkpoint(
        &self,
        endpoint_id: &str,
        provider: &str,
        checkpoint_at_ms: i64,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        let (endpoint_id, provider) = (endpoint_id.to_owned(), provider.to_owned());
        self.write(move |conn| {
            conn.prepare_cached(SQLITE_SAVE_CHECKPOINT)?
                .execute(rusqlite::params![
                    endpoint_id,
                    provider,
                    checkpoint_at_ms,
                    now_ms
                ])?;
            Ok(())
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }

    async fn inbox_id_of(
        &self,
        provider: &str,
        endpoint_id: &str,
        provider_event_id: &str,
    ) -> Result<Option<String>, StoreError> {
        let key = (
            provider.to_owned(),
            endpoint_id.to_owned(),
            provider_event_id.to_owned(),
        );
        self.read(move |conn| {
            conn.prepare_cached(SELECT_KEY.sqlite())?
                .query_row(rusqlite::params![key.0, key.1, key.2], |r| r.get(0))
                .optional()
        })
        .await
    }

    async fn record_no_retry_window(
        &self,
        endpoint_id: &str,
        started_at_ms: i64,
        ended_at_ms: i64,
    ) -> Result<(), StoreError> {
        let endpoint_id = endpoint_id.to_owned();
        self.write(move |conn| {
            let params = rusqlite::params![endpoint_id, started_at_ms, ended_at_ms];
            if conn
                .prepare_cached(EXTEND_WINDOW.sqlite())?
                .execute(params)?
                == 0
            {
                conn.prepare_cached(INSERT_WINDOW.sqlite())?
                    .execute(params)?;
            }
            Ok(())
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }

    async fn open_no_retry_windows(
        &self,
        endpoint_id: &str,
    ) -> Result<Vec<NoRetryWindow>, StoreError> {
        let endpoint_id = endpoint_id.to_owned();
        self.read(move |conn| {
            conn.prepare_cached(OPEN_WINDOWS.sqlite())?
                .query_map(
                    rusqlite::params![endpoint_id, MAX_OPEN_WINDOWS],
                    mapped(|r| window_row(r)),
                )?
                .collect()
        })
        .await
    }

    async fn cover_no_retry_windows(
        &self,
        endpoint_id: &str,
        up_to_window_id: i64,
        now_ms: i64,
    ) -> Result<u64, StoreError> {
        let endpoint_id = endpoint_id.to_owned();
        self.write(move |conn| {
            let n = conn
                .prepare_cached(COVER_WINDOWS.sqlite())?
                .execute(rusqlite::params![endpoint_id, up_to_window_id, now_ms])?;
            Ok(n as u64)
        })
        .await
        .map_err(ProcessingError::into_store_error)
    }
}
