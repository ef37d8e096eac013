//! Versioned migrations, applied at start inside one `IMMEDIATE` transaction and recorded in
//! `schema_migrations(version, applied_at)`. Re-opening an up-to-date database is a no-op; a
//! database written by a newer build is refused rather than guessed at.

use std::time::{SystemTime, UNIX_EPOCH};

use rusqlite::{Connection, OptionalExtension, TransactionBehavior};

use super::error::from_sqlite;
use crate::StoreError;

/// `(version, sql)` in ascending order; a version, once released, never changes.
pub(super) const MIGRATIONS: &[(i64, &str)] = &[
    (1, include_str!("../../migrations/sqlite/0001_init.sql")),
    (
        2,
        include_str!("../../migrations/sqlite/0002_processing.sql"),
    ),
    (
        3,
        include_str!("../../migrations/sqlite/0003_lease_index.sql"),
    ),
];

/// The schema version this build writes.
pub(super) fn latest_version() -> i64 {
    MIGRATIONS.last().map_or(0, |(version, _)| *version)
}

/// Brings the database up to [`latest_version`]; returns the versions applied now.
pub(super) fn migrate(conn: &mut Connection) -> Result<Vec<i64>, StoreError> {
    let tx = conn
        .transaction_with_behavior(TransactionBehavior::Immediate)
        .map_err(from_sqlite)?;
    tx.execute_batch(
        "CREATE TABLE IF NOT EXISTS schema_migrations (
             version    INTEGER NOT NULL PRIMARY KEY,
             applied_at INTEGER NOT NULL
         ) STRICT;",
    )
    .map_err(from_sqlite)?;
    let current: i64 = tx
        .query_row("SELECT max(version) FROM schema_migrations", [], |r| {
            r.get::<_, Option<i64>>(0)
        })
        .optional()
        .map_err(from_sqlite)?
        .flatten()
        .unwrap_or(0);
    if current > latest_version() {
        return Err(StoreError::Config(format!(
            "database schema version {current} is newer than this build's {}",
            latest_version()
        )));
    }
    let now_ms = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX));
    let mut applied = Vec::new();
    for (version, sql) in MIGRATIONS.iter().filter(|(v, _)| *v > current) {
        tx.execute_batch(sql).map_err(from_sqlite)?;
        tx.execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES (?1, ?2)",
            (version, now_ms),
        )
        .map_err(from_sqlite)?;
        applied.push(*version);
    }
    tx.commit().map_err(from_sqlite)?;
    if !applied.is_empty() {
        tracing::info!(versions = ?applied, "sqlite schema migrated");
    }
    Ok(applied)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_strictly_ascending() {
        assert!(MIGRATIONS.windows(2).all(|w| w[0].0 < w[1].0));
        assert_eq!(MIGRATIONS[0].0, 1);
    }

    #[test]
    fn migrate_twice_applies_once() {
        let mut conn = Connection::open_in_memory().unwrap();
        assert_eq!(migrate(&mut conn).unwrap(), vec![1, 2, 3]);
        assert!(migrate(&mut conn).unwrap().is_empty());
        let n: i64 = conn
            .query_row("SELECT count(*) FROM schema_migrations", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, MIGRATIONS.len() as i64);
    }

    #[test]
    fn newer_database_is_refused() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        conn.execute("INSERT INTO schema_migrations VALUES (999, 0)", [])
            .unwrap();
        assert!(matches!(migrate(&mut conn), Err(StoreError::Config(_))));
    }
}
