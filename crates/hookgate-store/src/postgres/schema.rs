//! Versioned migrations, applied at start inside one transaction that first takes a
//! transaction-scoped advisory lock, so several instances starting at once apply each
//! migration exactly once (the others wait, then find nothing to do). Recorded in
//! `schema_migrations(version, applied_at)` like the SQLite backend; a database written by a
//! newer build is refused rather than guessed at.

use super::error::{Failure, classify, describe, from_pg};
use crate::StoreError;

/// `(version, sql)` in ascending order; a version, once released, never changes.
pub(super) const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("../../migrations/postgres/0001_init.sql")),
    (
        2,
        include_str!("../../migrations/postgres/0002_processing.sql"),
    ),
    (
        3,
        include_str!("../../migrations/postgres/0003_lease_index.sql"),
    ),
    (
        4,
        include_str!("../../migrations/postgres/0004_due_at_acceptance.sql"),
    ),
    (
        5,
        include_str!("../../migrations/postgres/0005_hot_lease.sql"),
    ),
    (
        6,
        include_str!("../../migrations/postgres/0006_replay_digests.sql"),
    ),
    (
        7,
        include_str!("../../migrations/postgres/0007_stage_faults.sql"),
    ),
    (
        8,
        include_str!("../../migrations/postgres/0008_retention.sql"),
    ),
    (
        9,
        include_str!("../../migrations/postgres/0009_payload_key_index.sql"),
    ),
    (
        10,
        include_str!("../../migrations/postgres/0010_operator_api.sql"),
    ),
    (
        11,
        include_str!("../../migrations/postgres/0011_jobs_and_rejections.sql"),
    ),
    (
        12,
        include_str!("../../migrations/postgres/0012_held_and_source.sql"),
    ),
    (
        13,
        include_str!("../../migrations/postgres/0013_reconcile.sql"),
    ),
];

/// Advisory lock key of hookgate's migrations: the bytes of "hookgate" (database-wide).
const MIGRATION_LOCK: i64 = 0x686f_6f6b_6761_7465;

/// The schema version this build writes.
pub(super) fn latest_version() -> i64 {
    MIGRATIONS.last().map_or(0, |(version, _)| *version)
}

/// Brings the database (in `schema`, when given; it is created if missing) up to
/// [`latest_version`]; returns the versions applied now.
pub(super) async fn migrate(
    client: &mut deadpool_postgres::Client,
    schema: Option<&str>,
) -> Result<Vec<i64>, StoreError> {
    let tx = client.transaction().await.map_err(|e| from_pg(&e))?;
    tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])
        .await
        .map_err(|e| from_pg(&e))?;
    if let Some(schema) = schema {
        // `schema` was validated as a plain lower-case identifier.
        tx.batch_execute(&format!("CREATE SCHEMA IF NOT EXISTS {schema}"))
            .await
            .map_err(|e| from_pg(&e))?;
    }
    tx.batch_execute(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
             version    BIGINT NOT NULL PRIMARY KEY,
             applied_at BIGINT NOT NULL
         )",
    )
    .await
    .map_err(|e| from_pg(&e))?;
    let current: i64 = tx
        .query_one(
            "SELECT coalesce(max(version), 0) FROM schema_migrations",
            &[],
        )
        .await
        .map_err(|e| from_pg(&e))?
        .get(0);
    crate::migrations::check_not_newer(current, latest_version())?;
    let now_ms = crate::migrations::applied_at_ms();
    let mut applied = Vec::new();
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        tx.batch_execute(sql)
            .await
            .map_err(|e| match classify(&e) {
                Failure::Fail(err) => err,
                _ => StoreError::Config(format!("migration {version} failed: {}", describe(&e))),
            })?;
        tx.execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES ($1, $2)",
            &[version, &now_ms],
        )
        .await
        .map_err(|e| from_pg(&e))?;
        applied.push(*version);
    }
    tx.commit().await.map_err(|e| from_pg(&e))?;
    if !applied.is_empty() {
        tracing::info!(versions = ?applied, schema = schema.unwrap_or("(default)"), "postgres schema migrated");
    }
    Ok(applied)
}
