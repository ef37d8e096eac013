//! Versioned migrations, applied at start inside one `IMMEDIATE` transaction and recorded in
//! `schema_migrations(version, applied_at)`. Re-opening an up-to-date database is a no-op; a
//! database written by a newer build is refused rather than guessed at.

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
    (
        4,
        include_str!("../../migrations/sqlite/0004_payload_table.sql"),
    ),
    (
        5,
        include_str!("../../migrations/sqlite/0005_replay_digests.sql"),
    ),
    (
        6,
        include_str!("../../migrations/sqlite/0006_stage_faults.sql"),
    ),
    (
        7,
        include_str!("../../migrations/sqlite/0007_retention.sql"),
    ),
    (
        8,
        include_str!("../../migrations/sqlite/0008_payload_key_index.sql"),
    ),
    (
        9,
        include_str!("../../migrations/sqlite/0009_operator_api.sql"),
    ),
    (
        10,
        include_str!("../../migrations/sqlite/0010_jobs_and_rejections.sql"),
    ),
    (
        11,
        include_str!("../../migrations/sqlite/0011_held_and_source.sql"),
    ),
    (
        12,
        include_str!("../../migrations/sqlite/0012_reconcile.sql"),
    ),
];

/// The schema version this build writes.
pub(super) fn latest_version() -> i64 {
    MIGRATIONS.last().map_or(0, |(version, _)| *version)
}

/// Brings the database up to [`latest_version`]; returns the versions applied now.
pub(super) fn migrate(conn: &mut Connection) -> Result<Vec<i64>, StoreError> {
    migrate_to(conn, latest_version())
}

/// Brings the database up to `target` (tests build older schemas with it, to test upgrades).
///
/// Foreign keys are off while migrations run (a migration that rebuilds a referenced table,
/// as 11 does the inbox, could not drop it otherwise; the pragma is a no-op inside a
/// transaction, so it is set around it), and `PRAGMA foreign_key_check` must come back empty
/// before the transaction commits. They are on again afterwards whatever happened.
fn migrate_to(conn: &mut Connection, target: i64) -> Result<Vec<i64>, StoreError> {
    let foreign_keys: i64 = conn
        .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
        .map_err(from_sqlite)?;
    conn.pragma_update(None, "foreign_keys", "OFF")
        .map_err(from_sqlite)?;
    let result = migrate_in_transaction(conn, target);
    conn.pragma_update(
        None,
        "foreign_keys",
        if foreign_keys == 1 { "ON" } else { "OFF" },
    )
    .map_err(from_sqlite)?;
    result
}

fn migrate_in_transaction(conn: &mut Connection, target: i64) -> Result<Vec<i64>, StoreError> {
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
    crate::migrations::check_not_newer(current, latest_version())?;
    let now_ms = crate::migrations::applied_at_ms();
    let mut applied = Vec::new();
    for (version, sql) in MIGRATIONS
        .iter()
        .filter(|(v, _)| *v > current && *v <= target)
    {
        tx.execute_batch(sql).map_err(from_sqlite)?;
        tx.execute(
            "INSERT INTO schema_migrations (version, applied_at) VALUES (?1, ?2)",
            (version, now_ms),
        )
        .map_err(from_sqlite)?;
        applied.push(*version);
    }
    let dangling: i64 = tx
        .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
            r.get(0)
        })
        .map_err(from_sqlite)?;
    if dangling > 0 {
        return Err(StoreError::Config(format!(
            "migration left {dangling} rows referencing missing rows; nothing was committed"
        )));
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
        assert_eq!(
            migrate(&mut conn).unwrap(),
            vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12]
        );
        assert!(migrate(&mut conn).unwrap().is_empty());
        let n: i64 = conn
            .query_row("SELECT count(*) FROM schema_migrations", [], |r| r.get(0))
            .unwrap();
        assert_eq!(n, MIGRATIONS.len() as i64);
    }

    /// A database written at schema version 3 (payload as an `inbox` column) opens at version
    /// 4 with every payload intact, a purged one still purged, and every other column kept.
    #[tokio::test]
    async fn version_3_database_upgrades_with_payloads_intact() {
        use crate::{
            EventFilter, GroupCommitOptions, InboxStore, InspectStore, OutboxStore,
            ProcessingStore, SqliteStore,
        };
        use hookgate_core::{InboxStatus, Outcome};

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v3.db");
        let big: Vec<u8> = (0..10 * 1024u32).map(|i| (i % 253) as u8).collect();
        {
            let mut conn = super::super::open_write_connection(&path).unwrap();
            assert_eq!(migrate_to(&mut conn, 3).unwrap(), vec![1, 2, 3]);
            let insert = |id: &str, payload: Option<&[u8]>, status: &str, outcome: Option<&str>| {
                conn.execute(
                    "INSERT INTO inbox (inbox_id, provider, endpoint_id, provider_event_id, \
                         event_type, received_at, payload, payload_key_version, payload_digest, \
                         matched_secret_version, status, outcome, attempt_count, \
                         next_attempt_at, last_error, processed_at) \
                     VALUES (?1, 'stripe', 'ep', ?1, 'charge.succeeded', 1000, ?2, 7, x'0102', \
                         'v1', ?3, ?4, 2, ?5, 'transient: timeout', ?6)",
                    rusqlite::params![
                        id,
                        payload,
                        status,
                        outcome,
                        (status == "RECEIVED").then_some(1_000i64),
                        (status == "PROCESSED").then_some(2_000i64),
                    ],
                )
                .unwrap();
            };
            insert("received", Some(&big), "RECEIVED", None);
            insert(
                "processed",
                Some(b"sealed small"),
                "PROCESSED",
                Some("applied"),
            );
            insert("empty", Some(b""), "IGNORED", None);
            insert("purged", None, "PROCESSED", Some("stale"));
            conn.execute(
                "INSERT INTO outbox (outbox_id, inbox_id, destination, status, created_at) \
                 VALUES ('processed:d', 'processed', 'd', 'PENDING', 2000)",
                [],
            )
            .unwrap();
        }

        let store = SqliteStore::open(&path, GroupCommitOptions::default()).unwrap();
        async fn payload_of(store: &SqliteStore, id: &str) -> Option<Vec<u8>> {
            store.get_event(id).await.unwrap().expect(id).payload
        }
        assert!(payload_of(&store, "received").await.as_deref() == Some(big.as_slice()));
        assert_eq!(
            payload_of(&store, "processed").await.as_deref(),
            Some(&b"sealed small"[..])
        );
        assert_eq!(payload_of(&store, "empty").await.as_deref(), Some(&b""[..]));
        assert_eq!(
            payload_of(&store, "purged").await,
            None,
            "purged stays purged"
        );

        let rec = store.get_event("processed").await.unwrap().unwrap();
        assert_eq!(rec.status, InboxStatus::Processed);
        assert_eq!(rec.outcome, Some(Outcome::Applied));
        assert_eq!(rec.event_type.as_deref(), Some("charge.succeeded"));
        assert_eq!(rec.payload_key_version, 7);
        assert_eq!(rec.payload_digest, vec![1, 2]);
        assert_eq!(rec.matched_secret_version, "v1");
        assert_eq!(rec.attempt_count, 2);
        assert_eq!(rec.last_error.as_deref(), Some("transient: timeout"));
        assert_eq!(rec.processed_at_ms, Some(2_000));
        assert_eq!(
            store
                .list_events(&EventFilter::default())
                .await
                .unwrap()
                .len(),
            4
        );

        // The migrated rows work: the waiting one is leased with its payload, the delivery
        // lease carries its event's.
        let leased = store
            .lease(crate::LeaseRequest {
                owner: "w",
                now_ms: 5_000,
                lease_ms: 1_000,
                limit: 10,
                with_payload: true,
                endpoints: None,
            })
            .await
            .unwrap();
        assert_eq!(leased.len(), 1);
        assert_eq!(leased[0].inbox_id, "received");
        assert!(leased[0].payload.as_deref() == Some(big.as_slice()));
        let deliveries = store
            .lease_deliveries("d", "relay", 5_000, 1_000, 10)
            .await
            .unwrap();
        assert_eq!(deliveries.len(), 1);
        assert_eq!(
            deliveries[0].event.payload.as_deref(),
            Some(&b"sealed small"[..])
        );
        store.close().await;
        drop(store);

        let conn = Connection::open(&path).unwrap();
        let version: i64 = conn
            .query_row("SELECT max(version) FROM schema_migrations", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(version, latest_version());
        let inbox_has_payload: i64 = conn
            .query_row(
                "SELECT count(*) FROM pragma_table_info('inbox') WHERE name = 'payload'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(inbox_has_payload, 0, "the column is gone from inbox");
        let payload_rows: i64 = conn
            .query_row("SELECT count(*) FROM inbox_payload", [], |r| r.get(0))
            .unwrap();
        assert_eq!(payload_rows, 3, "no row for the purged payload");
        let check: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
        let orphans: i64 = conn
            .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(orphans, 0);
    }

    /// A database written at schema version 4 (the release before the replay digests), with
    /// rows in it, opens at version 5: every row intact and readable, the old keys still
    /// duplicates, and the replay defence working on new rows.
    #[tokio::test]
    async fn version_4_database_upgrades_with_rows_intact_and_replays_caught() {
        use crate::{
            Acceptance, GroupCommitOptions, InboxStore, InspectStore, NewInboxRow, ReplayDigest,
            SqliteStore,
        };
        use hookgate_core::{InboxStatus, Outcome};

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v4.db");
        {
            let mut conn = super::super::open_write_connection(&path).unwrap();
            assert_eq!(migrate_to(&mut conn, 4).unwrap(), vec![1, 2, 3, 4]);
            for (id, status, outcome) in [
                ("waiting", "RECEIVED", None),
                ("done", "PROCESSED", Some("applied")),
            ] {
                conn.execute(
                    "INSERT INTO inbox (inbox_id, provider, endpoint_id, provider_event_id, \
                         event_type, received_at, payload_key_version, payload_digest, \
                         matched_secret_version, status, outcome, next_attempt_at) \
                     VALUES (?1, 'github', 'ep', ?1, 'push', 1000, 3, x'0102', 'v1', ?2, ?3, \
                         1000)",
                    rusqlite::params![id, status, outcome],
                )
                .unwrap();
                conn.execute(
                    "INSERT INTO inbox_payload (inbox_id, payload) VALUES (?1, ?2)",
                    rusqlite::params![id, format!("sealed {id}").into_bytes()],
                )
                .unwrap();
            }
        }

        let store = SqliteStore::open(&path, GroupCommitOptions::default()).unwrap();
        for id in ["waiting", "done"] {
            let rec = store.get_event(id).await.unwrap().expect(id);
            assert_eq!(rec.payload, Some(format!("sealed {id}").into_bytes()));
            assert_eq!(rec.payload_key_version, 3);
            assert_eq!(rec.payload_digest, vec![1, 2]);
            assert_eq!(rec.event_type.as_deref(), Some("push"));
        }
        let done = store.get_event("done").await.unwrap().unwrap();
        assert_eq!(
            (done.status, done.outcome),
            (InboxStatus::Processed, Some(Outcome::Applied))
        );

        let new_row = |inbox_id: &str, event_id: &str| NewInboxRow {
            inbox_id: inbox_id.into(),
            provider: "github".into(),
            endpoint_id: "ep".into(),
            provider_event_id: event_id.into(),
            event_type: Some("push".into()),
            object_id: None,
            object_version: None,
            provider_created_at: None,
            received_at_ms: 5_000,
            payload: b"sealed".to_vec(),
            payload_key_version: 3,
            payload_digest: vec![0; 32],
            matched_secret_version: "v1".into(),
            status: InboxStatus::Received,
            source: hookgate_core::EventSource::Webhook,
            api_version: None,
            replay_digest: Some(ReplayDigest {
                digest: [4; 32],
                window_ms: 60_000,
            }),
        };
        assert_eq!(
            store.accept(new_row("again", "done")).await.unwrap(),
            Acceptance::Duplicate {
                inbox_id: "done".into()
            }
        );
        assert_eq!(
            store.accept(new_row("first", "d1")).await.unwrap(),
            Acceptance::Accepted {
                inbox_id: "first".into()
            }
        );
        assert_eq!(
            store.accept(new_row("replay", "d2")).await.unwrap(),
            Acceptance::ReplaySuspected {
                inbox_id: "first".into()
            }
        );
        assert_eq!(store.count_inbox().await.unwrap(), 3);
        store.close().await;
        drop(store);

        let conn = Connection::open(&path).unwrap();
        let version: i64 = conn
            .query_row("SELECT max(version) FROM schema_migrations", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(version, latest_version());
        let check: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
    }

    /// A database written at schema version 6 (the previous one, in the file format of its
    /// time: no auto-vacuum) opens at version 7: a stored payload is recorded as stored, a
    /// missing one as purged at its receipt, the file is switched to incremental auto-vacuum,
    /// and retention works on the migrated rows (and pins no key for the purged ones).
    #[tokio::test]
    async fn version_6_database_upgrades_to_7_with_payload_state_and_incremental_vacuum() {
        use crate::{GroupCommitOptions, InboxStore, InspectStore, RetentionStore, SqliteStore};

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v6.db");
        {
            let mut conn = super::super::open_write_connection(&path).unwrap();
            assert_eq!(migrate_to(&mut conn, 6).unwrap(), vec![1, 2, 3, 4, 5, 6]);
            // As older versions created files: without auto-vacuum.
            conn.execute_batch("PRAGMA auto_vacuum = NONE; VACUUM;")
                .unwrap();
            let auto_vacuum: i64 = conn
                .query_row("PRAGMA auto_vacuum", [], |r| r.get(0))
                .unwrap();
            assert_eq!(auto_vacuum, 0);
            for (id, payload) in [("kept", Some(&b"sealed kept"[..])), ("gone", None)] {
                conn.execute(
                    "INSERT INTO inbox (inbox_id, provider, endpoint_id, provider_event_id, \
                         received_at, payload_key_version, payload_digest, \
                         matched_secret_version, status, outcome) \
                     VALUES (?1, 'stripe', 'ep', ?1, 1000, 2, x'01', 'v1', 'PROCESSED', \
                         'applied')",
                    [id],
                )
                .unwrap();
                if let Some(p) = payload {
                    conn.execute(
                        "INSERT INTO inbox_payload (inbox_id, payload) VALUES (?1, ?2)",
                        rusqlite::params![id, p],
                    )
                    .unwrap();
                }
            }
        }

        let store = SqliteStore::open(&path, GroupCommitOptions::default()).unwrap();
        let kept = store.get_event("kept").await.unwrap().unwrap();
        assert!(kept.payload_stored());
        assert_eq!(kept.payload.as_deref(), Some(&b"sealed kept"[..]));
        let gone = store.get_event("gone").await.unwrap().unwrap();
        assert!(!gone.payload_stored());
        assert_eq!(
            gone.payload_purged_at_ms,
            Some(1000),
            "purged as of its receipt"
        );
        assert_eq!(store.oldest_stored_payload_ms().await.unwrap(), Some(1000));
        assert_eq!(
            store.purge_expired_payloads(2000, 5000, 10).await.unwrap(),
            1
        );
        assert!(
            !store
                .get_event("kept")
                .await
                .unwrap()
                .unwrap()
                .payload_stored()
        );
        assert_eq!(store.oldest_stored_payload_ms().await.unwrap(), None);
        store.close().await;
        drop(store);

        let conn = Connection::open(&path).unwrap();
        let version: i64 = conn
            .query_row("SELECT max(version) FROM schema_migrations", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(
            version,
            latest_version(),
            "upgraded through 7 to the latest"
        );
        let auto_vacuum: i64 = conn
            .query_row("PRAGMA auto_vacuum", [], |r| r.get(0))
            .unwrap();
        assert_eq!(auto_vacuum, 2, "INCREMENTAL after the one-time VACUUM");
        let check: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
    }

    #[test]
    fn newer_database_is_refused() {
        let mut conn = Connection::open_in_memory().unwrap();
        migrate(&mut conn).unwrap();
        conn.execute("INSERT INTO schema_migrations VALUES (999, 0)", [])
            .unwrap();
        assert!(matches!(migrate(&mut conn), Err(StoreError::Config(_))));
    }

    /// A database written at schema version 10 (the previous release) opens at version 11:
    /// the inbox is rebuilt (HELD allowed, `source` and `api_version` added) with every row,
    /// payload and delivery intact, foreign keys still enforced against the new table, and
    /// the connection's foreign keys on again after the migration.
    #[tokio::test]
    async fn version_10_database_upgrades_to_11_with_held_and_source() {
        use crate::{
            GroupCommitOptions, HeldEvent, InboxStore, InspectStore, LeaseRequest, ProcessingStore,
            ReleaseRequest, SqliteStore,
        };
        use hookgate_core::{EventSource, InboxStatus};

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("v10.db");
        {
            let mut conn = super::super::open_write_connection(&path).unwrap();
            assert_eq!(
                migrate_to(&mut conn, 10).unwrap(),
                vec![1, 2, 3, 4, 5, 6, 7, 8, 9, 10]
            );
            for (id, status, due) in [("done", "PROCESSED", None), ("todo", "RECEIVED", Some(5))] {
                conn.execute(
                    "INSERT INTO inbox (inbox_id, provider, endpoint_id, provider_event_id, \
                         event_type, received_at, payload_key_version, payload_digest, \
                         matched_secret_version, status, next_attempt_at, lease_seq) \
                     VALUES (?1, 'stripe', 'ep', ?1, 'charge.succeeded', 1000, 2, x'0102', \
                         'v1', ?2, ?3, 7)",
                    rusqlite::params![id, status, due],
                )
                .unwrap();
                conn.execute(
                    "INSERT INTO inbox_payload (inbox_id, payload) VALUES (?1, ?2)",
                    rusqlite::params![id, format!("sealed {id}").as_bytes()],
                )
                .unwrap();
            }
            conn.execute(
                "INSERT INTO outbox (outbox_id, inbox_id, destination, status, created_at, \
                     next_attempt_at) VALUES ('o1', 'done', 'sink', 'PENDING', 1000, 1000)",
                [],
            )
            .unwrap();
            let held = conn.execute(
                "UPDATE inbox SET status = 'HELD' WHERE inbox_id = 'done'",
                [],
            );
            assert!(held.is_err(), "version 10 refuses HELD");
        }

        let store = SqliteStore::open(&path, GroupCommitOptions::default()).unwrap();
        let done = store.get_event("done").await.unwrap().unwrap();
        assert_eq!(done.status, InboxStatus::Processed);
        assert_eq!(
            done.source,
            EventSource::Webhook,
            "old rows came by webhook"
        );
        assert_eq!(done.api_version, None);
        assert_eq!(done.payload.as_deref(), Some(&b"sealed done"[..]));
        assert_eq!(done.payload_digest, vec![1, 2]);
        assert_eq!(done.event_type.as_deref(), Some("charge.succeeded"));
        let deliveries = store.list_deliveries("done").await.unwrap();
        assert_eq!(deliveries.len(), 1, "the delivery survived the rebuild");
        assert_eq!(store.count_inbox().await.unwrap(), 2);

        // HELD now works end to end on the migrated rows: lease, hold, release.
        let leased = store
            .lease(LeaseRequest {
                owner: "w",
                now_ms: 10,
                lease_ms: 1000,
                limit: 10,
                with_payload: false,
                endpoints: None,
            })
            .await
            .unwrap();
        assert_eq!(leased.len(), 1);
        assert_eq!(leased[0].inbox_id, "todo");
        store
            .hold_event(HeldEvent {
                inbox_id: "todo".into(),
                owner: "w".into(),
                now_ms: 11,
                reason: "api version".into(),
            })
            .await
            .unwrap();
        let todo = store.get_event("todo").await.unwrap().unwrap();
        assert_eq!(todo.status, InboxStatus::Held);
        assert_eq!(todo.held_reason.as_deref(), Some("api version"));
        let released = store
            .release_held(ReleaseRequest {
                endpoint_id: Some("ep".into()),
                inbox_id: None,
                now_ms: 20,
            })
            .await
            .unwrap();
        assert_eq!(released, 1);
        let todo = store.get_event("todo").await.unwrap().unwrap();
        assert_eq!(todo.status, InboxStatus::Received);
        assert_eq!(todo.released_at_ms, Some(20));
        assert_eq!(todo.next_attempt_at_ms, Some(20));
        assert_eq!(todo.held_reason, None);
        store.close().await;
        drop(store);

        let mut conn = Connection::open(&path).unwrap();
        conn.pragma_update(None, "foreign_keys", "ON").unwrap();
        let version: i64 = conn
            .query_row("SELECT max(version) FROM schema_migrations", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(version, latest_version());
        let check: String = conn
            .query_row("PRAGMA integrity_check", [], |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
        let dangling: i64 = conn
            .query_row("SELECT count(*) FROM pragma_foreign_key_check", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(dangling, 0);
        // The outbox still references the (rebuilt) inbox: deleting a referenced row fails.
        assert!(
            conn.execute("DELETE FROM inbox WHERE inbox_id = 'done'", [])
                .is_err()
        );
        let indexes: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND tbl_name = 'inbox' \
                 AND sql IS NOT NULL",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(indexes, 8, "every index of version 10 is back");
        // A migration leaves the connection's foreign keys as it found them.
        assert!(migrate(&mut conn).unwrap().is_empty());
        let on: i64 = conn
            .query_row("PRAGMA foreign_keys", [], |r| r.get(0))
            .unwrap();
        assert_eq!(on, 1);
    }
}
