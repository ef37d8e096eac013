//! The [`ReconcileStore`] impl: scans through the one read helper (no payload is read), and
//! each write one short transaction of the shared retrying kind (`tx.rs`): a batch of repairs
//! and their finding rows commit together or not at all. A run lease takes its row `FOR
//! UPDATE SKIP LOCKED`, so two stages never run the same requested run.

use deadpool_postgres::Transaction;
use tokio_postgres::types::ToSql;

use super::PostgresStore;
use super::jobs::bind;
use super::tx::{Failed, RetryableWrite, with_transaction};
use crate::reconcile::{
    COVER_WINDOWS, Checkpoint, EXTEND_WINDOW, INSERT_WINDOW, MAX_OPEN_WINDOWS, NoRetryWindow,
    OPEN_WINDOWS, POSTGRES_SAVE_CHECKPOINT, SELECT_CHECKPOINT, SELECT_KEY, checkpoint_row,
    window_row,
};
use crate::reconcile::{
    FINISH_RUN, FindingAction, FindingBatch, FindingKind, FindingQuery, FindingRecord, FoundEvent,
    INSERT_FINDING, INSERT_RUN, MAX_RUN_ERROR, MarkerKey, MissingScan, NewFinding, NewRun,
    ORPHAN_STILL, REPAIR_MISSING, REPAIR_OVERDUE, REPAIR_STUCK, RUN_COLUMNS, ReceivedScan,
    RunRecord, RunState, SCAN_MISSING, SCAN_ORPHANS, SCAN_STUCK, StuckScan, TRIM_FINDINGS,
    WAITING_STILL, finding_record, found_event, list_sql, marker_key, outbox_id, run_record,
};
use crate::{ReconcileStore, StoreError};

enum Op<'a> {
    Record(&'a FindingBatch),
    Trim {
        before_ms: i64,
        limit: i64,
    },
    Create(&'a NewRun),
    Lease {
        owner: &'a str,
        now_ms: i64,
        lease_ms: i64,
    },
    Finish {
        run_id: &'a str,
        owner: &'a str,
        state: RunState,
        summary: Option<&'a str>,
        error: Option<&'a str>,
        now_ms: i64,
    },
}

/// The provider reconciliation's writes.
enum ProviderOp<'a> {
    SaveCheckpoint {
        endpoint_id: &'a str,
        provider: &'a str,
        checkpoint_at_ms: i64,
        now_ms: i64,
    },
    RecordWindow {
        endpoint_id: &'a str,
        started_at_ms: i64,
        ended_at_ms: i64,
    },
    CoverWindows {
        endpoint_id: &'a str,
        up_to: i64,
        now_ms: i64,
    },
}

impl RetryableWrite for ProviderOp<'_> {
    type Output = u64;
    const LABEL: &'static str = "provider reconcile";

    async fn run(&self, tx: &Transaction<'_>) -> Result<u64, Failed> {
        Ok(match self {
            ProviderOp::SaveCheckpoint {
                endpoint_id,
                provider,
                checkpoint_at_ms,
                now_ms,
            } => {
                let stmt = tx.prepare_cached(POSTGRES_SAVE_CHECKPOINT).await?;
                tx.execute(&stmt, &[endpoint_id, provider, checkpoint_at_ms, now_ms])
                    .await?
            }
            ProviderOp::RecordWindow {
                endpoint_id,
                started_at_ms,
                ended_at_ms,
            } => {
                let params: [&(dyn tokio_postgres::types::ToSql + Sync); 3] =
                    [endpoint_id, started_at_ms, ended_at_ms];
                let extend = tx.prepare_cached(EXTEND_WINDOW.postgres()).await?;
                match tx.execute(&extend, &params).await? {
                    0 => {
                        let insert = tx.prepare_cached(INSERT_WINDOW.postgres()).await?;
                        tx.execute(&insert, &params).await?
                    }
                    n => n,
                }
            }
            ProviderOp::CoverWindows {
                endpoint_id,
                up_to,
                now_ms,
            } => {
                let stmt = tx.prepare_cached(COVER_WINDOWS.postgres()).await?;
                tx.execute(&stmt, &[endpoint_id, up_to, now_ms]).await?
            }
        })
    }
}

enum Out {
    Recorded(Vec<bool>),
    Count(u64),
    Run(Option<RunRecord>),
    Unit,
}

async fn repair(
    tx: &Transaction<'_>,
    f: &NewFinding,
    threshold: i64,
    now: i64,
) -> Result<bool, Failed> {
    let id = f.inbox_id.as_deref().unwrap_or_default();
    let destination = f.destination.as_deref().unwrap_or_default();
    let n = match f.kind {
        FindingKind::ReceivedOverdue => {
            let stmt = tx.prepare_cached(REPAIR_OVERDUE.postgres()).await?;
            tx.execute(&stmt, &[&id, &threshold, &now]).await?
        }
        FindingKind::MissingOutbox => {
            let stmt = tx.prepare_cached(REPAIR_MISSING.postgres()).await?;
            tx.execute(
                &stmt,
                &[&outbox_id(id, destination), &id, &destination, &now],
            )
            .await?
        }
        FindingKind::OutboxStuck => {
            let stmt = tx.prepare_cached(REPAIR_STUCK.postgres()).await?;
            tx.execute(&stmt, &[&outbox_id(id, destination), &threshold, &now])
                .await?
        }
        FindingKind::SequenceWaiting => {
            let stmt = tx.prepare_cached(WAITING_STILL.postgres()).await?;
            u64::from(tx.query_opt(&stmt, &[&id]).await?.is_some())
        }
        FindingKind::OrphanMarker => {
            let stmt = tx.prepare_cached(ORPHAN_STILL.postgres()).await?;
            let still = tx
                .query_opt(
                    &stmt,
                    &[
                        &f.provider,
                        &f.endpoint_id,
                        &f.provider_event_id,
                        &f.consumer,
                    ],
                )
                .await?;
            u64::from(still.is_some())
        }
    };
    Ok(n == 1)
}

async fn select_run(tx: &Transaction<'_>, run_id: &str) -> Result<Option<RunRecord>, Failed> {
    let stmt = tx
        .prepare_cached(&format!(
            "SELECT {RUN_COLUMNS} FROM reconcile_runs WHERE run_id = $1"
        ))
        .await?;
    match tx.query_opt(&stmt, &[&run_id]).await? {
        Some(row) => Ok(Some(
            run_record(&row).map_err(|e| Failed::Db(super::error::Failure::Fail(e)))?,
        )),
        None => Ok(None),
    }
}

impl RetryableWrite for Op<'_> {
    type Output = Out;
    const LABEL: &'static str = "reconcile";

    async fn run(&self, tx: &Transaction<'_>) -> Result<Out, Failed> {
        Ok(match self {
            Op::Record(batch) => {
                let insert = tx.prepare_cached(INSERT_FINDING.postgres()).await?;
                let mut recorded = Vec::with_capacity(batch.findings.len());
                for f in &batch.findings {
                    let action = if batch.repair {
                        if !repair(tx, f, batch.threshold_ms, batch.now_ms).await? {
                            recorded.push(false);
                            continue;
                        }
                        f.kind.repair_action()
                    } else {
                        FindingAction::DryRun
                    };
                    tx.execute(
                        &insert,
                        &[
                            &batch.run_id,
                            &f.kind.as_str(),
                            &f.endpoint_id,
                            &f.provider,
                            &f.provider_event_id,
                            &f.inbox_id,
                            &f.destination,
                            &f.consumer,
                            &action.as_str(),
                            &batch.now_ms,
                        ],
                    )
                    .await?;
                    recorded.push(true);
                }
                Out::Recorded(recorded)
            }
            Op::Trim { before_ms, limit } => {
                let stmt = tx.prepare_cached(TRIM_FINDINGS.postgres()).await?;
                Out::Count(tx.execute(&stmt, &[before_ms, limit]).await?)
            }
            Op::Create(run) => {
                let running = run.state == RunState::Running;
                let stmt = tx.prepare_cached(INSERT_RUN.postgres()).await?;
                tx.execute(
                    &stmt,
                    &[
                        &run.run_id,
                        &run.trigger.as_str(),
                        &run.endpoint_id,
                        &run.since_ms,
                        &i64::from(run.dry_run),
                        &run.state.as_str(),
                        &run.requested_by,
                        &run.now_ms,
                        &running.then_some(run.now_ms),
                        &run.owner,
                        &running.then_some(run.now_ms + run.lease_ms),
                    ],
                )
                .await?;
                Out::Unit
            }
            Op::Lease {
                owner,
                now_ms,
                lease_ms,
            } => {
                let stmt = tx
                    .prepare_cached(
                        "WITH next AS (SELECT run_id FROM reconcile_runs \
                             WHERE state IN ('pending', 'running') \
                               AND (lease_until IS NULL OR lease_until <= $1) \
                             ORDER BY created_at LIMIT 1 FOR UPDATE SKIP LOCKED) \
                         UPDATE reconcile_runs r SET state = 'running', lease_owner = $2, \
                             lease_until = $3, started_at = coalesce(r.started_at, $1) \
                         FROM next WHERE r.run_id = next.run_id RETURNING r.run_id",
                    )
                    .await?;
                let until = now_ms + lease_ms;
                match tx.query_opt(&stmt, &[now_ms, owner, &until]).await? {
                    Some(row) => Out::Run(select_run(tx, &row.get::<_, String>(0)).await?),
                    None => Out::Run(None),
                }
            }
            Op::Finish {
                run_id,
                owner,
                state,
                summary,
                error,
                now_ms,
            } => {
                let stmt = tx.prepare_cached(FINISH_RUN.postgres()).await?;
                let error: Option<String> = error.map(|e| e.chars().take(MAX_RUN_ERROR).collect());
                let n = tx
                    .execute(
                        &stmt,
                        &[run_id, owner, &state.as_str(), summary, &error, now_ms],
                    )
                    .await?;
                Out::Count(n)
            }
        })
    }
}

impl PostgresStore {
    async fn provider_write(&self, op: ProviderOp<'_>) -> Result<u64, StoreError> {
        with_transaction(&self.pool, self.options.request_timeout, &op)
            .await
            .map_err(Failed::into_store_error)
    }

    async fn reconcile_write(&self, op: Op<'_>) -> Result<Out, StoreError> {
        with_transaction(&self.pool, self.options.request_timeout, &op)
            .await
            .map_err(Failed::into_store_error)
    }

    async fn found(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<FoundEvent>, StoreError> {
        let rows = self.query(sql, params).await?;
        rows.iter().map(found_event).collect()
    }
}

fn unexpected() -> StoreError {
    StoreError::Corrupt("unexpected reconcile write result".into())
}

#[async_trait::async_trait]
impl ReconcileStore for PostgresStore {
    async fn received_rows(&self, scan: &ReceivedScan<'_>) -> Result<Vec<FoundEvent>, StoreError> {
        let limit = i64::from(scan.limit);
        self.found(
            scan.rows.statement().postgres(),
            &[
                &scan.endpoint_id,
                &scan.threshold_ms,
                &scan.since_ms,
                &limit,
            ],
        )
        .await
    }

    async fn processed_without_delivery(
        &self,
        scan: &MissingScan<'_>,
    ) -> Result<Vec<FoundEvent>, StoreError> {
        let limit = i64::from(scan.limit);
        let (after_at, after_id) = scan.after.clone().unwrap_or((i64::MIN, String::new()));
        self.found(
            SCAN_MISSING.postgres(),
            &[
                &scan.endpoint_id,
                &scan.destination,
                &scan.since_ms,
                &after_at,
                &after_id,
                &limit,
            ],
        )
        .await
    }

    async fn stuck_deliveries(&self, scan: &StuckScan<'_>) -> Result<Vec<FoundEvent>, StoreError> {
        let limit = i64::from(scan.limit);
        self.found(
            SCAN_STUCK.postgres(),
            &[
                &scan.endpoint_id,
                &scan.destination,
                &scan.threshold_ms,
                &scan.now_ms,
                &scan.since_ms,
                &limit,
            ],
        )
        .await
    }

    async fn orphan_markers(
        &self,
        endpoint_id: &str,
        after: Option<&MarkerKey>,
        limit: u32,
    ) -> Result<Vec<MarkerKey>, StoreError> {
        let empty = String::new();
        let (provider, event, consumer) = match after {
            Some(k) => (&k.provider, &k.provider_event_id, &k.consumer),
            None => (&empty, &empty, &empty),
        };
        let limit = i64::from(limit);
        let rows = self
            .query(
                SCAN_ORPHANS.postgres(),
                &[&endpoint_id, provider, event, consumer, &limit],
            )
            .await?;
        rows.iter().map(marker_key).collect()
    }

    async fn record_findings(&self, batch: FindingBatch) -> Result<Vec<bool>, StoreError> {
        match self.reconcile_write(Op::Record(&batch)).await? {
            Out::Recorded(r) => Ok(r),
            _ => Err(unexpected()),
        }
    }

    async fn list_findings(&self, query: &FindingQuery) -> Result<Vec<FindingRecord>, StoreError> {
        let (sql, params) = list_sql(query);
        let rows = self.query(&sql, &bind(&params)).await?;
        rows.iter().map(finding_record).collect()
    }

    async fn trim_findings(&self, before_ms: i64, limit: u32) -> Result<u64, StoreError> {
        match self
            .reconcile_write(Op::Trim {
                before_ms,
                limit: i64::from(limit),
            })
            .await?
        {
            Out::Count(n) => Ok(n),
            _ => Err(unexpected()),
        }
    }

    async fn create_run(&self, run: NewRun) -> Result<(), StoreError> {
        self.reconcile_write(Op::Create(&run)).await.map(|_| ())
    }

    async fn get_run(&self, run_id: &str) -> Result<Option<RunRecord>, StoreError> {
        let sql = format!("SELECT {RUN_COLUMNS} FROM reconcile_runs WHERE run_id = $1");
        let rows = self.query(&sql, &[&run_id]).await?;
        rows.first().map(run_record).transpose()
    }

    async fn lease_run(
        &self,
        owner: &str,
        now_ms: i64,
        lease_ms: i64,
    ) -> Result<Option<RunRecord>, StoreError> {
        match self
            .reconcile_write(Op::Lease {
                owner,
                now_ms,
                lease_ms,
            })
            .await?
        {
            Out::Run(r) => Ok(r),
            _ => Err(unexpected()),
        }
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
        match self
            .reconcile_write(Op::Finish {
                run_id,
                owner,
                state,
                summary,
                error,
                now_ms,
            })
            .await?
        {
            Out::Count(n) => Ok(n == 1),
            _ => Err(unexpected()),
        }
    }

    async fn checkpoint(&self, endpoint_id: &str) -> Result<Option<Checkpoint>, StoreError> {
        let rows = self
            .query(SELECT_CHECKPOINT.postgres(), &[&endpoint_id])
            .await?;
        rows.first().map(checkpoint_row).transpose()
    }

    async fn save_checkpoint(
        &self,
        endpoint_id: &str,
        provider: &str,
        checkpoint_at_ms: i64,
        now_ms: i64,
    ) -> Result<(), StoreError> {
        self.provider_write(ProviderOp::SaveCheckpoint {
            endpoint_id,
            provider,
            checkpoint_at_ms,
            now_ms,
        })
        .await
        .map(|_| ())
    }

    async fn inbox_id_of(
        &self,
        provider: &str,
        endpoint_id: &str,
        provider_event_id: &str,
    ) -> Result<Option<String>, StoreError> {
        let rows = self
            .query(
                SELECT_KEY.postgres(),
                &[&provider, &endpoint_id, &provider_event_id],
            )
            .await?;
        Ok(rows.first().map(|r| r.get::<_, String>(0)))
    }

    async fn record_no_retry_window(
        &self,
        endpoint_id: &str,
        started_at_ms: i64,
        ended_at_ms: i64,
    ) -> Result<(), StoreError> {
        self.provider_write(ProviderOp::RecordWindow {
            endpoint_id,
            started_at_ms,
            ended_at_ms,
        })
        .await
        .map(|_| ())
    }

    async fn open_no_retry_windows(
        &self,
        endpoint_id: &str,
    ) -> Result<Vec<NoRetryWindow>, StoreError> {
        let rows = self
            .query(OPEN_WINDOWS.postgres(), &[&endpoint_id, &MAX_OPEN_WINDOWS])
            .await?;
        rows.iter().map(window_row).collect()
    }

    async fn cover_no_retry_windows(
        &self,
        endpoint_id: &str,
        up_to_window_id: i64,
        now_ms: i64,
    ) -> Result<u64, StoreError> {
        self.provider_write(ProviderOp::CoverWindows {
            endpoint_id,
            up_to: up_to_window_id,
            now_ms,
        })
        .await
    }
}
