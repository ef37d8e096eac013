//! The SQLite backend: the conformance suite on a fresh database file per test, then what is
//! specific to SQLite (schema and migrations, the writer queue, disk full).

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use crate::conformance;
use crate::conformance::{StoreTestExt, accept_all, row};
use hookgate_core::{InboxStatus, Outcome};
use hookgate_store::{
    Acceptance, GroupCommitOptions, InboxStore, InspectStore, OutboxStore, ProcessingResult,
    SqliteStore, Store, StoreError,
};
use tempfile::TempDir;

async fn fresh_sqlite() -> (Arc<dyn Store>, TempDir) {
    fresh_with(GroupCommitOptions::default())
}

/// Contract tests are not about shedding: a loaded CI machine could make rows wait past the
/// default `max_queue_wait`, so these stores never shed (shedding has its own tests).
fn fresh_with(mut options: GroupCommitOptions) -> (Arc<dyn Store>, TempDir) {
    options.max_queue_wait = conformance::NEVER_SHED;
    let dir = tempfile::tempdir().expect("temp dir");
    let store = SqliteStore::open(&db_path(dir.path()), options).expect("open sqlite store");
    (Arc::new(store), dir)
}

/// What migration 9 (the operator API) added, taken away: a database as a version 8
/// gateway left it (older versions' tests undo this first, then their own).
const UNDO_VERSION_9: &str = "DROP INDEX inbox_received_page; DROP INDEX inbox_provider_event; \
     DROP INDEX inbox_object; \
     ALTER TABLE audit_log DROP COLUMN result; ALTER TABLE audit_log DROP COLUMN filter; \
     ALTER TABLE outbox DROP COLUMN idempotency_key;";

fn db_path(dir: &Path) -> PathBuf {
    dir.join("data").join("hookgate.db")
}

conformance_tests!(fresh_sqlite);

/// The measurement-only mode (one transaction per request) keeps the same contract.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn group_commit_disabled_keeps_the_contract() {
    let (store, _dir) = fresh_with(GroupCommitOptions {
        enabled: false,
        ..Default::default()
    });
    conformance::mixed_distinct_and_duplicates_n(store, 300).await;
}

/// Tiny batches and queue: many commits, interleaved duplicates, same result.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn small_batches_keep_the_contract() {
    let (store, _dir) = fresh_with(GroupCommitOptions {
        enabled: true,
        max_batch: 3,
        queue_capacity: 4096,
        ..Default::default()
    });
    conformance::mixed_distinct_and_duplicates_n(store, 600).await;
}

/// Concurrent requests share transactions (the point of group commit), and one
/// request per transaction when it is disabled.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_requests_share_commits() {
    let dir = tempfile::tempdir().unwrap();
    for enabled in [true, false] {
        let path = dir.path().join(format!("batching-{enabled}.db"));
        let options = GroupCommitOptions {
            enabled,
            max_queue_wait: conformance::NEVER_SHED,
            ..Default::default()
        };
        let store = Arc::new(SqliteStore::open(&path, options).unwrap());
        let shared: Arc<dyn Store> = Arc::clone(&store) as Arc<dyn Store>;
        let rows: Vec<_> = (0..400)
            .map(|i| row("ep-gc", &format!("evt_{i}")))
            .collect();
        let results = accept_all(&shared, rows, 400).await;
        assert!(results.iter().all(|(_, r)| r.is_ok()));
        let stats = store.commit_stats();
        eprintln!("group commit enabled={enabled}: {stats:?}");
        assert_eq!(stats.rows, 400);
        assert_eq!(stats.failed_transactions, 0);
        if enabled {
            assert!(stats.transactions < 400, "no batching happened: {stats:?}");
        } else {
            assert_eq!(stats.transactions, 400);
        }
        store.close().await;
    }
}

#[tokio::test]
async fn open_url_creates_parent_directories() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("a").join("b").join("h.db");
    let url = format!("sqlite://{}", path.display());
    let store = SqliteStore::open_url(&url, GroupCommitOptions::default()).unwrap();
    assert_eq!(store.path(), path);
    store.ping().await.unwrap();
    store.close().await;
    assert!(path.exists());
    assert!(matches!(
        SqliteStore::open_url("postgres://localhost/x", GroupCommitOptions::default()),
        Err(StoreError::Config(_))
    ));
}

/// The database, its WAL and its shared-memory index are created readable by their owner only,
/// whatever the process umask (this test process runs with the usual 022).
#[tokio::test]
async fn database_files_are_created_owner_only() {
    use std::os::unix::fs::PermissionsExt;
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(dir.path());
    let store = SqliteStore::open(&path, GroupCommitOptions::default()).unwrap();
    let shared: Arc<dyn Store> = Arc::new(store);
    let results = accept_all(&shared, vec![row("ep-perm", "evt_1")], 1).await;
    assert!(results.iter().all(|(_, r)| r.is_ok()));
    let mut seen = Vec::new();
    for suffix in ["", "-wal", "-shm"] {
        let file = PathBuf::from(format!("{}{suffix}", path.display()));
        let mode = std::fs::metadata(&file)
            .unwrap_or_else(|e| {
                panic!(
                    "{} should exist while the store is open: {e}",
                    file.display()
                )
            })
            .permissions()
            .mode()
            & 0o777;
        seen.push((suffix, mode));
    }
    shared.close().await;
    assert_eq!(seen, vec![("", 0o600), ("-wal", 0o600), ("-shm", 0o600)]);
}

/// Re-opening applies no migration twice and keeps the data (and the unique key).
#[tokio::test]
async fn reopen_is_idempotent() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(dir.path());
    let first = row("ep", "evt_1");
    for round in 0..3 {
        let store = SqliteStore::open(&path, GroupCommitOptions::default()).unwrap();
        let got = store.accept(first.clone()).await.unwrap();
        if round == 0 {
            assert_eq!(
                got,
                Acceptance::Accepted {
                    inbox_id: first.inbox_id.clone()
                }
            );
        } else {
            assert_eq!(
                got,
                Acceptance::Duplicate {
                    inbox_id: first.inbox_id.clone()
                }
            );
        }
        assert_eq!(store.count_inbox().await.unwrap(), 1);
        store.close().await;
    }
    let conn = rusqlite::Connection::open(&path).unwrap();
    let versions: Vec<i64> = conn
        .prepare("SELECT version FROM schema_migrations ORDER BY version")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(versions, SQLITE_VERSIONS);
    let applied_at: i64 = conn
        .query_row("SELECT applied_at FROM schema_migrations", [], |r| r.get(0))
        .unwrap();
    assert!(applied_at > 1_600_000_000_000, "applied_at is unix ms");
}

/// The newest SQLite schema version (migrations/sqlite): upgrade tests migrate to it.
const LATEST_SQLITE: i64 = 13;
/// Every version this build applies.
const SQLITE_VERSIONS: &[i64] = &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13];

fn columns(conn: &rusqlite::Connection, table: &str) -> Vec<String> {
    conn.prepare(&format!("PRAGMA table_info({table})"))
        .unwrap()
        .query_map([], |r| r.get::<_, String>(1))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap()
}

/// The four tables (inbox, processed_events, object_state, outbox; ARCHITECTURE.md) with
/// exactly their column names (the sealed payload in a table of its own), and the constraints that keep the status vocabulary and the unique keys
/// honest.
#[tokio::test]
async fn schema_has_the_design_tables_and_checks() {
    let (store, dir) = fresh_sqlite().await;
    store.close().await;
    let conn = rusqlite::Connection::open(db_path(dir.path())).unwrap();

    assert_eq!(
        columns(&conn, "inbox"),
        [
            "inbox_id",
            "provider",
            "endpoint_id",
            "provider_event_id",
            "event_type",
            "object_id",
            "object_version",
            "provider_created_at",
            "received_at",
            "payload_key_version",
            "payload_digest",
            "matched_secret_version",
            "status",
            "outcome",
            "attempt_count",
            "next_attempt_at",
            "lease_owner",
            "lease_until",
            "last_error",
            "processed_at",
            // The number of the row's latest lease (schema version 6): orders payment fetches.
            "lease_seq",
            // When the sealed payload was purged; NULL while stored (schema version 7).
            "payload_purged_at",
            // Where it came from, its API version stamp, why it is HELD and when an
            // operator released it (schema version 11).
            "source",
            "api_version",
            "held_reason",
            "released_at",
            // Its position in its object's sequence, and what it waits for (schema
            // version 13).
            "sequence_number",
            "sequence_waiting_for",
        ]
    );
    // The sealed payload lives beside the inbox (schema version 4, a payload reference
    // rather than a column), so status updates never rewrite it.
    assert_eq!(columns(&conn, "inbox_payload"), ["inbox_id", "payload"]);
    // What operators did to stored data (schema version 7; `events purge`), with each
    // request's result and filter (schema version 9, the operator API).
    assert_eq!(
        columns(&conn, "audit_log"),
        [
            "audit_id", "at", "actor", "action", "target", "detail", "result", "filter"
        ]
    );
    let auto_vacuum: i64 = conn
        .query_row("PRAGMA auto_vacuum", [], |r| r.get(0))
        .unwrap();
    assert_eq!(auto_vacuum, 2, "new files are INCREMENTAL from the start");
    assert_eq!(
        columns(&conn, "outbox"),
        [
            "outbox_id",
            "inbox_id",
            "destination",
            "status",
            "attempt_count",
            "next_attempt_at",
            "lease_owner",
            "lease_until",
            "last_error",
            "created_at",
            "delivered_at",
            // A re-delivery's fresh Idempotency-Key (schema version 9).
            "idempotency_key",
        ]
    );
    assert_eq!(
        columns(&conn, "processed_events"),
        ["provider", "endpoint_id", "provider_event_id", "consumer"]
    );
    assert_eq!(
        columns(&conn, "object_state"),
        [
            "provider",
            "endpoint_id",
            "object_id",
            "version",
            "updated_at"
        ]
    );
    let due_index: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'inbox_due'",
            [],
            |r| r.get(0),
        )
        .unwrap();
    assert_eq!(due_index, 1);

    let insert = |id: &str, event: &str, status: &str, outcome: Option<&str>| {
        conn.execute(
            "INSERT INTO inbox (inbox_id, provider, endpoint_id, provider_event_id, received_at, \
             payload_key_version, payload_digest, matched_secret_version, status, outcome) \
             VALUES (?1, 'p', 'e', ?2, 0, 1, x'00', 'v1', ?3, ?4)",
            rusqlite::params![id, event, status, outcome],
        )
    };
    for bad_status in ["BOGUS", "received", ""] {
        let err = insert("x1", "ev1", bad_status, None).unwrap_err();
        assert!(err.to_string().contains("CHECK"), "{bad_status}: {err}");
    }
    let err = insert("x1", "ev1", "PROCESSED", Some("maybe")).unwrap_err();
    assert!(err.to_string().contains("CHECK"), "{err}");
    for status in ["RECEIVED", "PROCESSED", "FAILED", "IGNORED"] {
        insert(&format!("ok-{status}"), status, status, None).unwrap();
    }
    insert("ok-applied", "ev-applied", "PROCESSED", Some("applied")).unwrap();
    insert("ok-stale", "ev-stale", "PROCESSED", Some("stale")).unwrap();
    let err = insert("x2", "RECEIVED", "RECEIVED", None).unwrap_err();
    assert!(err.to_string().contains("UNIQUE"), "{err}");

    // A payload belongs to an inbox row, one per row, and is never NULL (purged = no row).
    conn.pragma_update(None, "foreign_keys", "ON").unwrap();
    let payload = |id: &str, bytes: Option<&[u8]>| {
        conn.execute(
            "INSERT INTO inbox_payload (inbox_id, payload) VALUES (?1, ?2)",
            rusqlite::params![id, bytes],
        )
    };
    let err = payload("no-such-row", Some(b"x")).unwrap_err();
    assert!(err.to_string().contains("FOREIGN KEY"), "{err}");
    let err = payload("ok-RECEIVED", None).unwrap_err();
    assert!(err.to_string().contains("NOT NULL"), "{err}");
    payload("ok-RECEIVED", Some(b"x")).unwrap();
    let err = payload("ok-RECEIVED", Some(b"y")).unwrap_err();
    assert!(err.to_string().contains("UNIQUE"), "{err}");

    let outbox = |id: &str, inbox: &str, status: &str| {
        conn.execute(
            "INSERT INTO outbox (outbox_id, inbox_id, destination, status, created_at) VALUES (?1, ?2, 'd', ?3, 0)",
            [id, inbox, status],
        )
    };
    assert!(
        outbox("o1", "ok-RECEIVED", "SENT")
            .unwrap_err()
            .to_string()
            .contains("CHECK")
    );
    outbox("o1", "ok-RECEIVED", "PENDING").unwrap();
    assert!(
        outbox("o2", "ok-RECEIVED", "PENDING")
            .unwrap_err()
            .to_string()
            .contains("UNIQUE")
    );
    let pe = "INSERT INTO processed_events VALUES ('p', 'e', 'ev', 'c')";
    conn.execute(pe, []).unwrap();
    assert!(
        conn.execute(pe, [])
            .unwrap_err()
            .to_string()
            .contains("UNIQUE")
    );
}

/// Status updates leave the sealed payload's pages alone (schema version 4). Leasing and
/// completing an event with a 256 KiB payload (64 overflow pages) append only a few pages to
/// the WAL; when the payload was a column of `inbox`, each of these updates resized the
/// record and so rewrote all of it (141 WAL frames for the two, against 9 now).
#[tokio::test]
async fn status_updates_do_not_rewrite_the_payload() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(dir.path());
    let store = SqliteStore::open(&path, GroupCommitOptions::default()).unwrap();
    let mut r = row("ep-wal", "evt_1");
    r.payload = (0..256 * 1024u32).map(|i| (i % 251) as u8).collect();
    store.accept(r.clone()).await.unwrap();

    // Empty the WAL (nobody is reading), then count what the status updates write to it.
    let conn = rusqlite::Connection::open(&path).unwrap();
    let stored = |conn: &rusqlite::Connection| -> (i64, Vec<u8>) {
        conn.query_row(
            "SELECT rowid, payload FROM inbox_payload WHERE inbox_id = ?1",
            [&r.inbox_id],
            |x| Ok((x.get(0)?, x.get(1)?)),
        )
        .unwrap()
    };
    let before = stored(&conn);
    assert!(before.1 == r.payload, "stored as given");
    let busy: i64 = conn
        .query_row("PRAGMA wal_checkpoint(TRUNCATE)", [], |x| x.get(0))
        .unwrap();
    assert_eq!(busy, 0, "checkpoint blocked");
    let wal = path.with_file_name("hookgate.db-wal");
    assert_eq!(std::fs::metadata(&wal).unwrap().len(), 0, "WAL truncated");

    let t = conformance::now_ms() + 1_000;
    let leased = store.lease_due("w", t, 30_000, 10).await.unwrap();
    assert_eq!(leased.len(), 1);
    assert!(leased[0].payload.as_deref() == Some(r.payload.as_slice()));
    let outcome = store
        .complete(ProcessingResult {
            inbox_id: r.inbox_id.clone(),
            owner: "w".into(),
            now_ms: t + 1,
            handlers: Vec::new(),
            destinations: vec!["d".into()],
            sequence: None,
        })
        .await
        .unwrap();
    assert_eq!(outcome, Outcome::Applied);

    let page_size: u64 = conn
        .query_row("PRAGMA page_size", [], |x| x.get(0))
        .unwrap();
    let wal_bytes = std::fs::metadata(&wal).unwrap().len();
    // A 32-byte WAL header, then one 24-byte header and one page per frame.
    let frames = wal_bytes.saturating_sub(32) / (24 + page_size);
    let payload_pages = r.payload.len() as u64 / page_size;
    eprintln!("lease + complete: {frames} WAL frames; the payload spans {payload_pages} pages");
    assert!(frames > 0, "the updates went through the WAL");
    assert!(
        frames < payload_pages / 4,
        "lease + complete wrote {frames} WAL frames for a {payload_pages}-page payload"
    );
    assert!(stored(&conn) == before, "payload row unchanged");
    let got = store.get_event(&r.inbox_id).await.unwrap().unwrap();
    assert_eq!(got.status, InboxStatus::Processed);
    assert!(got.payload.as_deref() == Some(r.payload.as_slice()));
    drop(conn);
    store.close().await;
}

/// A full queue sheds at once with `Overloaded` (never blocks), and every `Ok` is stored.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn full_queue_sheds_without_losing_acknowledged_rows() {
    let (store, _dir) = fresh_with(GroupCommitOptions {
        enabled: true,
        max_batch: 1,
        queue_capacity: 1,
        ..Default::default()
    });
    let rows: Vec<_> = (0..300)
        .map(|i| row("ep-ov", &format!("evt_{i}")))
        .collect();
    let results = accept_all(&store, rows, 300).await;
    let mut accepted = 0;
    let mut shed = 0;
    for (r, result) in &results {
        match result {
            Ok(a) => {
                assert_eq!(
                    a,
                    &Acceptance::Accepted {
                        inbox_id: r.inbox_id.clone()
                    }
                );
                assert!(store.get_event(&r.inbox_id).await.unwrap().is_some());
                accepted += 1;
            }
            Err(StoreError::Overloaded) => shed += 1,
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    assert!(
        shed > 0,
        "a one-slot queue under 300 concurrent requests must shed some"
    );
    assert!(accepted > 0);
    assert_eq!(store.count_inbox().await.unwrap(), accepted);
    store.close().await;
}

/// `close` answers every queued request after committing it; nothing acknowledged is lost,
/// nobody is left waiting, and later requests are refused as unavailable.
/// Checkpoints run on the store's own checkpoint thread, not only inside the writer's commit:
/// after ~10 MiB of acceptances (well under the writer's 64 MiB backstop) the pages reach
/// the database file by themselves, and the WAL file stays bounded.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn committed_pages_are_checkpointed_off_the_writer() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(dir.path());
    let store: Arc<dyn Store> =
        Arc::new(SqliteStore::open(&path, GroupCommitOptions::default()).unwrap());
    let db_len = |path: &Path| std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
    let before = db_len(&path);
    let rows: Vec<_> = (0..40)
        .map(|i| {
            let mut r = row("ep-checkpoint", &format!("evt_{i}"));
            r.payload = vec![u8::try_from(i).unwrap(); 256 * 1024];
            r
        })
        .collect();
    for (_, result) in accept_all(&store, rows, 8).await {
        assert!(
            matches!(result, Ok(Acceptance::Accepted { .. })),
            "{result:?}"
        );
    }
    // Liveness, not speed: the checkpoint thread gets generous time to copy the pages.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while db_len(&path) < before + 8 * 1024 * 1024 {
        assert!(
            std::time::Instant::now() < deadline,
            "no checkpoint reached the database file: {} bytes (WAL {} bytes)",
            db_len(&path),
            db_len(&path.with_extension("db-wal"))
        );
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert_eq!(store.count_inbox().await.unwrap(), 40);
    store.close().await;
    // Closing the last connection checkpoints the rest and removes the WAL.
    assert!(!path.with_extension("db-wal").exists());
    let reopened = SqliteStore::open(&path, GroupCommitOptions::default()).unwrap();
    assert_eq!(reopened.count_inbox().await.unwrap(), 40);
    reopened.close().await;
}

/// A writer stalled behind another connection's write lock: rows that wait past
/// `max_queue_wait` are shed unwritten, and admission reopens once the queue drains.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stalled_writer_sheds_rows_that_waited_too_long() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(dir.path());
    let options = GroupCommitOptions {
        max_queue_wait: std::time::Duration::from_millis(100),
        ..Default::default()
    };
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path, options).unwrap());
    // An operator's transaction holds the write lock (the writer waits up to its busy timeout).
    let blocker = rusqlite::Connection::open(&path).unwrap();
    blocker.execute_batch("BEGIN IMMEDIATE").unwrap();
    conformance::shed_during_stall(Arc::clone(&store), async move {
        tokio::time::sleep(std::time::Duration::from_millis(600)).await;
        blocker.execute_batch("COMMIT").unwrap();
    })
    .await;
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn close_drains_the_queue() {
    let dir = tempfile::tempdir().unwrap();
    let path = db_path(dir.path());
    let options = GroupCommitOptions {
        max_queue_wait: conformance::NEVER_SHED,
        ..Default::default()
    };
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path, options).unwrap());
    let mut tasks = tokio::task::JoinSet::new();
    let rows: Vec<_> = (0..400)
        .map(|i| row("ep-close", &format!("evt_{i}")))
        .collect();
    for r in rows {
        let store = Arc::clone(&store);
        tasks.spawn(async move { (r.clone(), store.accept(r).await) });
    }
    tokio::task::yield_now().await;
    store.close().await;
    assert!(matches!(
        store.ping().await,
        Err(StoreError::Unavailable(_))
    ));
    let mut acked = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        match joined.unwrap() {
            (r, Ok(a)) => {
                assert_eq!(a.inbox_id(), r.inbox_id);
                acked.push(r);
            }
            (_, Err(StoreError::Unavailable(_))) => {}
            (_, Err(e)) => panic!("close must not leave a request in doubt: {e:?}"),
        }
    }
    drop(store);
    let store = SqliteStore::open(&path, GroupCommitOptions::default()).unwrap();
    assert_eq!(store.count_inbox().await.unwrap(), acked.len() as u64);
    for r in &acked {
        assert!(store.get_event(&r.inbox_id).await.unwrap().is_some());
    }
    store.close().await;
}

/// A 1 MiB tmpfs mounted for one test; unmounted on drop (also when the test fails).
struct Tmpfs {
    dir: TempDir,
}

impl Tmpfs {
    fn mount_1mib() -> Tmpfs {
        let dir = tempfile::tempdir().expect("temp dir");
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", "size=1m", "tmpfs"])
            .arg(dir.path())
            .output();
        match out {
            Ok(out) if out.status.success() => Tmpfs { dir },
            Ok(out) => panic!(
                "the disk-full test needs root (CAP_SYS_ADMIN) to mount a 1 MiB tmpfs: mount failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ),
            Err(e) => panic!("the disk-full test needs root (CAP_SYS_ADMIN) and mount(8): {e}"),
        }
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let ok = Command::new("umount")
            .arg(self.dir.path())
            .status()
            .is_ok_and(|s| s.success());
        if !ok {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(self.dir.path())
                .status();
        }
    }
}

/// Disk full answers 503-class errors (never `Ok` for a row that is not committed), and the
/// writer works again as soon as space is freed. Needs root: fails (never skips) without it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn disk_full_is_unavailable_then_recovers() {
    let fs = Tmpfs::mount_1mib();
    let filler = fs.path().join("filler");
    std::fs::write(&filler, vec![0xA5u8; 256 * 1024]).unwrap();
    let path = fs.path().join("db").join("hookgate.db");
    let options = GroupCommitOptions::default();
    let store: Arc<dyn Store> = Arc::new(SqliteStore::open(&path, options.clone()).unwrap());

    let sized_row = |i: usize| {
        let mut r = row("ep-disk", &format!("evt_{i:04}"));
        r.payload = vec![i as u8; 16 * 1024];
        r
    };
    let mut acked = Vec::new();
    let mut refused = None;
    for i in 0..200 {
        let r = sized_row(i);
        match store.accept(r.clone()).await {
            Ok(a) => {
                assert_eq!(
                    a,
                    Acceptance::Accepted {
                        inbox_id: r.inbox_id.clone()
                    }
                );
                acked.push(r);
            }
            Err(e @ (StoreError::Unavailable(_) | StoreError::CommitUnknown(_))) => {
                eprintln!("disk full after {} rows: {e}", acked.len());
                refused = Some(r);
                break;
            }
            Err(e) => panic!("disk full must be Unavailable or CommitUnknown, got {e:?}"),
        }
    }
    let refused = refused.expect("the 1 MiB tmpfs never filled up");
    assert!(
        !acked.is_empty(),
        "some rows must fit before the disk is full"
    );

    // Still full: a same-sized row is refused too; the store stays readable.
    match store.accept(sized_row(1000)).await {
        Err(StoreError::Unavailable(_) | StoreError::CommitUnknown(_)) => {}
        other => panic!("still full, expected a 503-class error, got {other:?}"),
    }
    for r in &acked {
        assert!(
            store.get_event(&r.inbox_id).await.unwrap().is_some(),
            "acknowledged row readable"
        );
    }

    // Space is back: the writer is not poisoned; the provider's retry converges.
    std::fs::remove_file(&filler).unwrap();
    let retried = store
        .accept(refused.clone())
        .await
        .expect("accept works again once space is back");
    let refused_landed = matches!(retried, Acceptance::Duplicate { .. });
    assert_eq!(retried.inbox_id(), refused.inbox_id);
    let fresh = sized_row(2000);
    assert_eq!(
        store.accept(fresh.clone()).await.unwrap(),
        Acceptance::Accepted {
            inbox_id: fresh.inbox_id.clone()
        }
    );
    let expected = acked.len() as u64 + 2;
    assert_eq!(
        store.count_inbox().await.unwrap(),
        expected,
        "refused row landed earlier: {refused_landed}"
    );
    store.close().await;
    drop(store);

    // Durable: everything acknowledged is there after a restart.
    let store = SqliteStore::open(&path, options).unwrap();
    assert_eq!(store.count_inbox().await.unwrap(), expected);
    for r in acked.iter().chain([&refused, &fresh]) {
        let got = store
            .get_event(&r.inbox_id)
            .await
            .unwrap()
            .expect("acknowledged row after restart");
        assert_eq!(got.payload.as_deref(), Some(r.payload.as_slice()));
    }
    store.close().await;
    drop(store);
    drop(fs);
}

/// What a `/metrics` scrape and the leases ask is answered from indexes on tables of a
/// realistic size (25,000 deliveries, 25,000 waiting events): `EXPLAIN QUERY PLAN` of the
/// FAILED-delivery count, the outbox lease (without `IS NULL OR`, one range of its
/// destination, no sort), the inbox lease (with its endpoint filter), the per-endpoint
/// waiting count and retention's searches never scan a table.
#[tokio::test]
async fn scrapes_and_leases_use_indexes_on_big_tables() {
    let dir = TempDir::new().unwrap();
    let path = db_path(dir.path());
    let store = SqliteStore::open(&path, GroupCommitOptions::default()).unwrap();
    store.close().await;
    drop(store);
    let conn = rusqlite::Connection::open(&path).unwrap();
    conn.execute_batch(
        "WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < 25000) \
         INSERT INTO inbox (inbox_id, provider, endpoint_id, provider_event_id, received_at, \
             payload_key_version, payload_digest, matched_secret_version, status, next_attempt_at) \
         SELECT 'row_' || i, 'stripe', 'ep' || (i % 4), 'evt_' || i, i, 1, x'00', 'v1', \
             CASE WHEN i % 2 = 0 THEN 'RECEIVED' ELSE 'PROCESSED' END, i FROM n; \
         INSERT INTO outbox (outbox_id, inbox_id, destination, status, attempt_count, \
             next_attempt_at, created_at) \
         SELECT inbox_id || ':d' || (rowid % 3), inbox_id, 'd' || (rowid % 3), \
             CASE WHEN rowid % 10 = 0 THEN 'FAILED' WHEN rowid % 3 = 0 THEN 'PENDING' \
                  ELSE 'DELIVERED' END, 1, received_at, received_at FROM inbox; \
         ANALYZE;",
    )
    .unwrap();
    let plan = |sql: &str| -> String {
        conn.prepare(&format!("EXPLAIN QUERY PLAN {sql}"))
            .unwrap()
            .query_map([], |r| r.get::<_, String>(3))
            .unwrap()
            .collect::<Result<Vec<_>, _>>()
            .unwrap()
            .join("\n")
    };
    let checks = [
        (
            "SELECT count(*) FROM outbox WHERE status = 'FAILED'",
            "outbox_failed",
        ),
        (
            "SELECT outbox_id FROM outbox INDEXED BY outbox_due \
             WHERE status = 'PENDING' AND destination = 'd1' AND next_attempt_at <= 20000 \
               AND (lease_until IS NULL OR lease_until <= 20000) \
             ORDER BY next_attempt_at, created_at LIMIT 16",
            "outbox_due",
        ),
        (
            "SELECT inbox_id FROM inbox INDEXED BY inbox_due \
             WHERE status = 'RECEIVED' \
               AND (next_attempt_at IS NULL OR next_attempt_at <= 20000) \
               AND (lease_until IS NULL OR lease_until <= 20000) \
               AND endpoint_id IN ('ep0', 'ep2') \
             ORDER BY next_attempt_at LIMIT 16",
            "COVERING INDEX inbox_due",
        ),
        (
            "SELECT endpoint_id, count(*) FROM inbox INDEXED BY inbox_due \
             WHERE status = 'RECEIVED' GROUP BY endpoint_id",
            "COVERING INDEX",
        ),
        // Retention's searches (sqlite/retention.rs): one range each, oldest first.
        (
            "SELECT inbox_id FROM inbox INDEXED BY inbox_payload_expiry \
             WHERE payload_purged_at IS NULL AND received_at < 20000 \
               AND status IN ('PROCESSED', 'IGNORED') \
               AND NOT EXISTS (SELECT 1 FROM outbox o \
                   WHERE o.inbox_id = inbox.inbox_id AND o.status = 'PENDING') \
             ORDER BY received_at LIMIT 256",
            "inbox_payload_expiry",
        ),
        (
            "SELECT inbox_id, provider, endpoint_id, provider_event_id \
             FROM inbox INDEXED BY inbox_endpoint_received \
             WHERE endpoint_id = 'ep1' AND received_at < 20000 \
               AND status IN ('PROCESSED', 'IGNORED') ORDER BY received_at LIMIT 256",
            "inbox_endpoint_received",
        ),
        (
            "SELECT inbox_id, provider, endpoint_id, provider_event_id \
             FROM inbox INDEXED BY inbox_status \
             WHERE status IN ('PROCESSED', 'IGNORED') AND received_at < 20000 LIMIT 256",
            "inbox_status",
        ),
    ];
    for (sql, index) in checks {
        let plan = plan(sql);
        assert!(plan.contains(index), "{sql}\nmust use {index}:\n{plan}");
        assert!(
            !plan
                .lines()
                .any(|l| l.starts_with("SCAN") && !l.contains("INDEX")),
            "{sql}\nscans a table:\n{plan}"
        );
        if sql.contains("LIMIT") {
            assert!(!plan.contains("TEMP B-TREE"), "{sql}\nsorts:\n{plan}");
        }
    }
}

/// A database at schema version 4 (the previous one) opens at version 6: a delivery left
/// without `next_attempt_at` becomes due at its creation and is leased, a waiting event is
/// leased with a lease number, and an old payment row (no lease number) gives way to a new
/// fetch.
#[tokio::test]
async fn version_4_database_upgrades_to_6() {
    let dir = TempDir::new().unwrap();
    let path = db_path(dir.path());
    let store = SqliteStore::open(&path, GroupCommitOptions::default()).unwrap();
    let accepted = store.accept(row("ep", "evt_old")).await.unwrap();
    store.close().await;
    drop(store);
    {
        // As a version 4 gateway left it.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(UNDO_VERSION_9).unwrap();
        conn.execute_batch(
            "DROP TABLE audit_log; DROP INDEX inbox_payload_expiry; \
             DROP INDEX object_state_expiry; DROP INDEX replay_digests_expiry; \
             ALTER TABLE inbox DROP COLUMN payload_purged_at; \
             DROP INDEX outbox_failed; DROP INDEX outbox_due; DROP INDEX inbox_due; \
             DROP TABLE lease_sequence; \
             ALTER TABLE inbox DROP COLUMN lease_seq; \
             ALTER TABLE payment_state DROP COLUMN fetch_seq; \
             CREATE INDEX inbox_due ON inbox (next_attempt_at, lease_until, inbox_id, status) \
                 WHERE status = 'RECEIVED'; \
             CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE status = 'PENDING'; \
             DELETE FROM schema_migrations WHERE version > 4;",
        )
        .unwrap();
        conn.execute(
            "INSERT INTO outbox (outbox_id, inbox_id, destination, status, created_at) \
             VALUES ('old:d', ?1, 'd', 'PENDING', 5)",
            [accepted.inbox_id()],
        )
        .unwrap();
        conn.execute(
            "INSERT INTO payment_state (object_id, object_type, status, refreshed_at, \
                 last_event_id) VALUES ('pi_old', 'payment_intent', 'old', 9000000000000, 'e0')",
            [],
        )
        .unwrap();
    }
    let store = SqliteStore::open(&path, GroupCommitOptions::default()).unwrap();
    let deliveries = store
        .lease_deliveries("d", "relay", 10, 1_000, 10)
        .await
        .unwrap();
    assert_eq!(deliveries.len(), 1, "due from its creation");
    let now = conformance::now_ms() + 1_000;
    let leased = store.lease_due("w", now, 60_000, 10).await.unwrap();
    assert_eq!(leased.len(), 1);
    let outcome = store
        .complete(ProcessingResult {
            inbox_id: leased[0].inbox_id.clone(),
            owner: "w".into(),
            now_ms: now,
            handlers: vec![hookgate_store::HandlerOutput {
                consumer: "p".into(),
                changes: vec![hookgate_store::BusinessChange::UpsertPaymentState {
                    object_id: "pi_old".into(),
                    object_type: "payment_intent".into(),
                    status: "new".into(),
                    amount: None,
                    currency: None,
                    refreshed_at_ms: now,
                    last_event_id: "evt_old".into(),
                }],
            }],
            destinations: Vec::new(),
            sequence: None,
        })
        .await
        .unwrap();
    assert_eq!(outcome, Outcome::Applied);
    let state = store.payment_state("pi_old").await.unwrap().unwrap();
    assert_eq!(
        state.status, "new",
        "a row from before lease numbers gives way"
    );
    store.close().await;
}

/// A database at schema version 7 (before the payload key index) opens at version 8 with its
/// rows, their payloads and key versions as they were; a purged payload pins no key.
#[tokio::test]
async fn version_7_database_upgrades_to_8_and_purged_payloads_pin_no_key() {
    use hookgate_store::{KeyVersionRows, PayloadKeyStore};
    let dir = TempDir::new().unwrap();
    let path = db_path(dir.path());
    let store = SqliteStore::open(&path, GroupCommitOptions::default()).unwrap();
    let mut old = row("ep", "evt_v1");
    old.payload_key_version = 1;
    let mut purged = row("ep", "evt_purged");
    purged.payload_key_version = 1;
    let mut newer = row("ep", "evt_v2");
    newer.payload_key_version = 2;
    for r in [old, purged.clone(), newer] {
        store.accept(r).await.unwrap();
    }
    store.close().await;
    drop(store);
    {
        // As a version 7 gateway left it, then retention purged one payload.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(UNDO_VERSION_9).unwrap();
        conn.execute_batch(
            "DROP INDEX inbox_payload_key; DELETE FROM schema_migrations WHERE version > 7;",
        )
        .unwrap();
        conn.execute(
            "DELETE FROM inbox_payload WHERE inbox_id = ?1",
            [&purged.inbox_id],
        )
        .unwrap();
        conn.execute(
            "UPDATE inbox SET payload_purged_at = received_at, status = 'PROCESSED' \
             WHERE inbox_id = ?1",
            [&purged.inbox_id],
        )
        .unwrap();
    }
    let store = SqliteStore::open(&path, GroupCommitOptions::default()).unwrap();
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        let version: i64 = conn
            .query_row("SELECT max(version) FROM schema_migrations", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(version, LATEST_SQLITE, "and on to the latest");
        let indexes: i64 = conn
            .query_row(
                "SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = 'inbox_payload_key'",
                [],
                |r| r.get(0),
            )
            .unwrap();
        assert_eq!(indexes, 1);
    }
    assert_eq!(store.count_inbox().await.unwrap(), 3, "no row lost");
    assert_eq!(
        store.payload_key_rows().await.unwrap(),
        vec![
            KeyVersionRows {
                version: 1,
                rows: 1
            },
            KeyVersionRows {
                version: 2,
                rows: 1
            },
        ],
        "the purged payload is not counted"
    );
    let walked = store
        .sealed_under(1, None, conformance::now_ms(), 10)
        .await
        .unwrap();
    assert_eq!(walked.len(), 1);
    assert_eq!(walked[0].payload, b"sealed:evt_v1".to_vec());
    // A re-seal of the purged row writes nothing (and brings no payload back).
    let written = store
        .reseal(
            vec![hookgate_store::ResealedPayload {
                inbox_id: purged.inbox_id.clone(),
                from_version: 1,
                key_version: 2,
                payload: b"resurrected".to_vec(),
                payload_digest: vec![1; 32],
            }],
            conformance::now_ms(),
        )
        .await
        .unwrap();
    assert_eq!(written, 0);
    let record = store.get_event(&purged.inbox_id).await.unwrap().unwrap();
    assert_eq!(record.payload, None);
    store.close().await;
}

/// A database at schema version 8 (before the operator API) opens at version 9: its audit
/// rows are `ok` with no filter, its deliveries keep the inbox id as their key, and the
/// event page reads it through the new index.
#[tokio::test]
async fn version_8_database_upgrades_to_9_for_the_operator_api() {
    use hookgate_store::{EventQuery, OperatorStore, Redelivery};
    let dir = TempDir::new().unwrap();
    let path = db_path(dir.path());
    let store = SqliteStore::open(&path, GroupCommitOptions::default()).unwrap();
    let id = store
        .accept(row("ep", "evt_old"))
        .await
        .unwrap()
        .inbox_id()
        .to_owned();
    let t = conformance::now_ms() + 1_000;
    let leased = store.lease_due("w", t, 30_000, 10).await.unwrap();
    assert_eq!(leased.len(), 1);
    store
        .complete(ProcessingResult {
            inbox_id: id.clone(),
            owner: "w".into(),
            now_ms: t,
            handlers: Vec::new(),
            destinations: vec!["d".into()],
            sequence: None,
        })
        .await
        .unwrap();
    store.close().await;
    drop(store);
    {
        // As a version 8 gateway left it, with a purge's audit row.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(UNDO_VERSION_9).unwrap();
        conn.execute_batch(
            "DELETE FROM schema_migrations WHERE version > 8; \
             INSERT INTO audit_log (audit_id, at, actor, action, target, detail) \
                 VALUES ('a1', 1, 'root', 'events.purge', 'endpoint=ep', '{}');",
        )
        .unwrap();
    }
    let store = SqliteStore::open(&path, GroupCommitOptions::default()).unwrap();
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        let version: i64 = conn
            .query_row("SELECT max(version) FROM schema_migrations", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert!(version >= 10, "migrated past 9 (to {version})");
        let plan: String = conn
            .query_row(
                "EXPLAIN QUERY PLAN SELECT inbox_id FROM inbox \
                 ORDER BY received_at DESC, inbox_id DESC LIMIT 5",
                [],
                |r| r.get(3),
            )
            .unwrap();
        assert!(plan.contains("inbox_received_page"), "{plan}");
    }
    let audit = store.audit_log(10).await.unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(
        (audit[0].result.as_str(), audit[0].filter.as_deref()),
        ("ok", None)
    );
    let d = store.list_deliveries(&id).await.unwrap();
    assert_eq!(
        d[0].idempotency_key, None,
        "an old delivery keeps the inbox id as key"
    );
    let page = store
        .page_events(&EventQuery {
            limit: 10,
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(page[0].inbox_id, id);
    store
        .redeliver(Redelivery {
            inbox_id: &id,
            destination: "d",
            fresh_key: Some("k2"),
            outbox_id: "ob-new",
            now_ms: t + 1,
        })
        .await
        .unwrap();
    let d = store.list_deliveries(&id).await.unwrap();
    assert_eq!(d[0].idempotency_key.as_deref(), Some("k2"));
    store.close().await;
}

/// A database at schema version 9 (before bulk jobs and the rejection log) opens at version
/// 10 with its events as they were; jobs and rejections then work on it.
#[tokio::test]
async fn version_9_database_upgrades_to_10_with_jobs_and_rejections() {
    use hookgate_store::{JobAction, JobStore, NewJob, RejectionQuery, RejectionStore};
    let dir = TempDir::new().unwrap();
    let path = db_path(dir.path());
    let store = SqliteStore::open(&path, GroupCommitOptions::default()).unwrap();
    let id = store
        .accept(row("ep", "evt_9"))
        .await
        .unwrap()
        .inbox_id()
        .to_owned();
    store.close().await;
    drop(store);
    {
        // As a version 9 gateway left it.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "DROP TABLE jobs; DROP TABLE rejections; DROP TABLE rejection_counts; \
             DELETE FROM schema_migrations WHERE version > 9;",
        )
        .unwrap();
    }
    let store = SqliteStore::open(&path, GroupCommitOptions::default()).unwrap();
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        let version: i64 = conn
            .query_row("SELECT max(version) FROM schema_migrations", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert!(version >= 10, "migrated past 9 (to {version})");
    }
    assert!(store.get_event(&id).await.unwrap().is_some(), "no row lost");
    store
        .create_job(NewJob {
            job_id: "j1".into(),
            action: JobAction::Retry,
            filter: "{}".into(),
            destination: None,
            fresh_key: false,
            created_by: "ops".into(),
            now_ms: 1,
        })
        .await
        .unwrap();
    assert_eq!(store.list_jobs(10, None).await.unwrap().len(), 1);
    let none = store
        .list_rejections(&RejectionQuery {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert!(none.is_empty());
    store.close().await;
}

/// A database at the schema version before reconciliation opens at the latest with its
/// events and markers as they were; a marker left without its inbox row (as an older build or
/// a hand-made deletion leaves it) is found, reported, and listed.
#[tokio::test]
async fn reconcile_tables_upgrade_an_older_database_and_orphan_markers_are_reported() {
    use hookgate_store::{
        FindingAction, FindingBatch, FindingKind, FindingQuery, NewFinding, ReconcileStore,
    };
    let dir = TempDir::new().unwrap();
    let path = db_path(dir.path());
    let store = SqliteStore::open(&path, GroupCommitOptions::default()).unwrap();
    let id = store
        .accept(row("ep", "evt_kept"))
        .await
        .unwrap()
        .inbox_id()
        .to_owned();
    store.close().await;
    drop(store);
    {
        // As the previous version left it, with a marker whose event row is gone.
        let conn = rusqlite::Connection::open(&path).unwrap();
        conn.execute_batch(
            "DROP TABLE reconcile_runs; DROP TABLE reconcile_findings; \
             DROP TABLE reconcile_checkpoints; DROP TABLE reconcile_no_retry_windows; \
             DROP INDEX inbox_sequence_waiting; DROP TABLE object_sequence; \
             ALTER TABLE inbox DROP COLUMN sequence_number; \
             ALTER TABLE inbox DROP COLUMN sequence_waiting_for; \
             DELETE FROM schema_migrations WHERE version >= 12; \
             INSERT INTO processed_events VALUES ('stripe', 'ep', 'evt_gone', 'payments_projection'); \
             INSERT INTO processed_events VALUES ('stripe', 'ep', 'evt_kept', 'payments_projection');",
        )
        .unwrap();
    }
    let store = SqliteStore::open(&path, GroupCommitOptions::default()).unwrap();
    {
        let conn = rusqlite::Connection::open(&path).unwrap();
        let version: i64 = conn
            .query_row("SELECT max(version) FROM schema_migrations", [], |r| {
                r.get(0)
            })
            .unwrap();
        assert_eq!(version, LATEST_SQLITE, "and on to the latest");
    }
    assert!(store.get_event(&id).await.unwrap().is_some(), "no row lost");
    let orphans = store.orphan_markers("ep", None, 10).await.unwrap();
    assert_eq!(orphans.len(), 1, "the kept event's marker has its row");
    assert_eq!(orphans[0].provider_event_id, "evt_gone");
    assert!(
        store
            .orphan_markers("ep", Some(&orphans[0]), 10)
            .await
            .unwrap()
            .is_empty()
    );
    let finding = NewFinding {
        kind: FindingKind::OrphanMarker,
        endpoint_id: "ep".into(),
        provider: Some("stripe".into()),
        provider_event_id: Some("evt_gone".into()),
        inbox_id: None,
        destination: None,
        consumer: Some("payments_projection".into()),
    };
    let recorded = store
        .record_findings(FindingBatch {
            run_id: "r".into(),
            repair: true,
            threshold_ms: 0,
            now_ms: 7,
            findings: vec![finding],
        })
        .await
        .unwrap();
    assert_eq!(recorded, vec![true]);
    let listed = store
        .list_findings(&FindingQuery {
            limit: 10,
            ..Default::default()
        })
        .await
        .unwrap();
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].action, FindingAction::Reported);
    assert_eq!(listed[0].consumer.as_deref(), Some("payments_projection"));
    assert_eq!(
        store.orphan_markers("ep", None, 10).await.unwrap().len(),
        1,
        "reported only: the marker stays"
    );
    store.close().await;
}
