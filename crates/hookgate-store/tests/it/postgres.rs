//! The PostgreSQL backend: the shared conformance suite (`conformance/`) on a fresh
//! database per test, then what is specific to PostgreSQL (several instances on one database,
//! concurrent migrations, bad-row isolation, outage and recovery, schema details).
//!
//! Each test gets its own database (hookgate-testkit: on `DATABASE_URL` when set, otherwise
//! on a throwaway cluster started for this test process); tests that stop the server use a
//! throwaway cluster of their own.

use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::conformance;
use crate::conformance::StoreTestExt;
use crate::conformance::row_for as row;
use hookgate_store::postgres::{PostgresOptions, PostgresStore};
use hookgate_store::{
    Acceptance, GroupCommitOptions, InboxStore, InspectStore, OutboxStore, ProcessingStore, Store,
    StoreError,
};
use hookgate_testkit::PgTestDb;

/// Contract tests are not about shedding: a loaded CI machine could make rows wait past the
/// default `max_queue_wait`, so these stores never shed (shedding has its own tests).
/// The newest PostgreSQL schema version (migrations/postgres): upgrade tests migrate to it.
const LATEST_POSTGRES: i64 = 14;
/// Every version this build applies.
const POSTGRES_VERSIONS: &[i64] = &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14];

async fn store_on(url: &str, mut options: PostgresOptions) -> PostgresStore {
    options.group_commit.max_queue_wait = conformance::NEVER_SHED;
    PostgresStore::connect(url, options).await.expect("connect")
}

async fn fresh(options: PostgresOptions) -> (PgTestDb, PostgresStore) {
    let db = hookgate_testkit::postgres().await;
    let store = store_on(db.url(), options).await;
    (db, store)
}

async fn fresh_postgres() -> (Arc<dyn Store>, PgTestDb) {
    let (db, store) = fresh(PostgresOptions::default()).await;
    (Arc::new(store), db)
}

conformance_tests!(fresh_postgres);

/// The measurement-only mode (one transaction per request) keeps the same contract.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn group_commit_disabled_keeps_the_contract() {
    let (db, store) = fresh(PostgresOptions {
        group_commit: GroupCommitOptions {
            enabled: false,
            ..GroupCommitOptions::default()
        },
        ..PostgresOptions::default()
    })
    .await;
    conformance::mixed_distinct_and_duplicates_n(Arc::new(store), 300).await;
    drop(db);
}

/// Tiny batches and one worker: many commits, interleaved duplicates, same result.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn small_batches_keep_the_contract() {
    let (db, store) = fresh(PostgresOptions {
        batch_workers: 1,
        group_commit: GroupCommitOptions {
            enabled: true,
            max_batch: 3,
            queue_capacity: 4096,
            ..Default::default()
        },
        ..PostgresOptions::default()
    })
    .await;
    conformance::mixed_distinct_and_duplicates_n(Arc::new(store), 600).await;
    drop(db);
}

async fn sql(url: &str) -> tokio_postgres::Client {
    let (client, conn) = tokio_postgres::connect(url, tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    client
}

/// The store's connections plan every execution with the table's current size. With
/// PostgreSQL's default, a statement run five times on a new inbox keeps a generic plan costed
/// for an empty table — the duplicate lookup as a hash join over a sequential scan of the whole
/// inbox, the completion fence as a scan of every waiting row — while the table grows, until an
/// ANALYZE (autovacuum may be off, or minutes away).
#[tokio::test]
async fn plans_follow_the_inbox_as_it_grows() {
    let (db, store) = fresh(PostgresOptions::default()).await;
    store.close().await;
    let config = PostgresStore::client_config(db.url(), &PostgresOptions::default()).unwrap();
    let (client, conn) = config
        .connect(tokio_postgres::NoTls)
        .await
        .expect("connect");
    tokio::spawn(conn);
    client
        .batch_execute(
            "PREPARE dup(text[], text[], text[]) AS \
             SELECT i.inbox_id FROM inbox i \
             JOIN unnest($1, $2, $3) AS k(provider, endpoint_id, provider_event_id) \
               ON i.provider = k.provider AND i.endpoint_id = k.endpoint_id \
              AND i.provider_event_id = k.provider_event_id; \
             PREPARE fence(text) AS SELECT provider FROM inbox \
             WHERE inbox_id = $1 AND status = 'RECEIVED' FOR UPDATE",
        )
        .await
        .unwrap();
    let dup = "EXECUTE dup('{stripe,stripe}', '{ep,ep}', '{evt_1,evt_2}')";
    let fence = "EXECUTE fence('row_1')";
    for _ in 0..10 {
        client.batch_execute(dup).await.unwrap();
        client.batch_execute(fence).await.unwrap();
    }
    client
        .batch_execute(
            "INSERT INTO inbox (inbox_id, provider, endpoint_id, provider_event_id, received_at, \
                 payload_key_version, payload_digest, matched_secret_version, status, \
                 next_attempt_at) \
             SELECT 'row_' || n, 'stripe', 'ep', 'evt_' || n, n, 1, '\\x00', 'v1', 'RECEIVED', n \
             FROM generate_series(1, 20000) AS n",
        )
        .await
        .unwrap();
    for (statement, name) in [(dup, "duplicate lookup"), (fence, "completion fence")] {
        let plan: Vec<String> = client
            .simple_query(&format!("EXPLAIN {statement}"))
            .await
            .unwrap()
            .into_iter()
            .filter_map(|m| match m {
                tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
                _ => None,
            })
            .collect();
        let plan = plan.join("\n");
        assert!(
            plan.contains("inbox_event_key") || plan.contains("inbox_pkey"),
            "{name} on 20,000 rows must use the unique index:\n{plan}"
        );
        assert!(!plan.contains("Seq Scan on inbox"), "{name}:\n{plan}");
    }
    drop(client);
    drop(db);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_instances_300_copies_one_row_one_accepted() {
    let db = hookgate_testkit::postgres().await;
    let a = Arc::new(store_on(db.url(), PostgresOptions::default()).await);
    let b = Arc::new(store_on(db.url(), PostgresOptions::default()).await);
    let barrier = Arc::new(tokio::sync::Barrier::new(300));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..300 {
        let store = if i % 2 == 0 {
            Arc::clone(&a)
        } else {
            Arc::clone(&b)
        };
        let barrier = Arc::clone(&barrier);
        tasks.spawn(async move {
            barrier.wait().await;
            store.accept(row("stripe", "ep", "evt_shared")).await
        });
    }
    let mut results = Vec::new();
    while let Some(r) = tasks.join_next().await {
        results.push(r.unwrap().expect("every copy answered"));
    }
    assert_eq!(results.len(), 300);
    let accepted = results
        .iter()
        .filter(|r| matches!(r, Acceptance::Accepted { .. }))
        .count();
    assert_eq!(accepted, 1, "exactly one copy is accepted");
    let id = results[0].inbox_id().to_owned();
    assert!(
        results.iter().all(|r| r.inbox_id() == id),
        "all copies name the same row"
    );
    assert_eq!(a.count_inbox().await.unwrap(), 1);
    assert_eq!(b.count_inbox().await.unwrap(), 1);
    a.close().await;
    b.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mixed_load_across_instances_stores_exactly_the_distinct_set() {
    let db = hookgate_testkit::postgres().await;
    let stores: Vec<Arc<PostgresStore>> = vec![
        Arc::new(store_on(db.url(), PostgresOptions::default()).await),
        Arc::new(store_on(db.url(), PostgresOptions::default()).await),
        Arc::new(store_on(db.url(), PostgresOptions::default()).await),
    ];
    let mut tasks = tokio::task::JoinSet::new();
    let mut sent = std::collections::BTreeSet::new();
    for i in 0..1500u32 {
        // ~10 % duplicates, some of them concurrent with their first copy.
        let id = if i % 10 == 9 {
            format!("evt-{:05}", i / 3)
        } else {
            format!("evt-{i:05}")
        };
        sent.insert(id.clone());
        let store = Arc::clone(&stores[(i % 3) as usize]);
        tasks.spawn(async move { store.accept(row("stripe", "mix", &id)).await });
    }
    let mut accepted = 0;
    while let Some(r) = tasks.join_next().await {
        if let Acceptance::Accepted { .. } = r.unwrap().expect("accepted or duplicate") {
            accepted += 1;
        }
    }
    let stored = stores[0].distinct_event_ids("mix").await.unwrap();
    assert_eq!(stored, sent.iter().cloned().collect::<Vec<_>>());
    assert_eq!(stores[1].count_inbox().await.unwrap(), sent.len() as u64);
    assert_eq!(accepted, sent.len());
    for s in stores {
        s.close().await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bad_row_is_isolated_from_its_batch() {
    let (_db, store) = fresh(PostgresOptions {
        batch_workers: 1,
        ..PostgresOptions::default()
    })
    .await;
    let store = Arc::new(store);
    let barrier = Arc::new(tokio::sync::Barrier::new(64));
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..64 {
        let store = Arc::clone(&store);
        let barrier = Arc::clone(&barrier);
        tasks.spawn(async move {
            // PostgreSQL text cannot hold NUL: the database refuses this row.
            let id = if i == 17 {
                "bad\0row".to_owned()
            } else {
                format!("good-{i:02}")
            };
            barrier.wait().await;
            (i, store.accept(row("stripe", "ep", &id)).await)
        });
    }
    while let Some(r) = tasks.join_next().await {
        let (i, res) = r.unwrap();
        if i == 17 {
            assert!(matches!(res, Err(StoreError::Unavailable(_))), "{res:?}");
        } else {
            assert!(
                matches!(res, Ok(Acceptance::Accepted { .. })),
                "{i}: {res:?}"
            );
        }
    }
    assert_eq!(store.count_inbox().await.unwrap(), 63);
    store.close().await;
}

#[tokio::test]
async fn one_transaction_per_request_when_group_commit_is_off() {
    let (_db, store) = fresh(PostgresOptions {
        group_commit: GroupCommitOptions {
            enabled: false,
            ..GroupCommitOptions::default()
        },
        ..PostgresOptions::default()
    })
    .await;
    let r = row("stripe", "ep", "e1");
    let id = r.inbox_id.clone();
    assert_eq!(
        store.accept(r).await.unwrap(),
        Acceptance::Accepted {
            inbox_id: id.clone()
        }
    );
    assert_eq!(
        store.accept(row("stripe", "ep", "e1")).await.unwrap(),
        Acceptance::Duplicate { inbox_id: id }
    );
    let bad = store.accept(row("stripe", "ep", "nul\0")).await;
    assert!(matches!(bad, Err(StoreError::Unavailable(_))), "{bad:?}");
    store.close().await;
}

#[tokio::test]
async fn full_queue_sheds_with_overloaded() {
    let (_db, store) = fresh(PostgresOptions {
        batch_workers: 1,
        group_commit: GroupCommitOptions {
            enabled: true,
            max_batch: 1,
            queue_capacity: 1,
            ..Default::default()
        },
        ..PostgresOptions::default()
    })
    .await;
    let store = Arc::new(store);
    let mut tasks = tokio::task::JoinSet::new();
    for i in 0..100 {
        let store = Arc::clone(&store);
        tasks.spawn(async move { store.accept(row("stripe", "ep", &format!("e{i}"))).await });
    }
    let (mut ok, mut shed) = (0, 0);
    while let Some(r) = tasks.join_next().await {
        match r.unwrap() {
            Ok(Acceptance::Accepted { .. }) => ok += 1,
            Err(StoreError::Overloaded) => shed += 1,
            other => panic!("unexpected {other:?}"),
        }
    }
    assert!(shed > 0, "a full queue sheds");
    assert!(ok > 0);
    assert_eq!(store.count_inbox().await.unwrap(), ok);
    store.close().await;
}

/// Batch workers stalled behind a table lock: rows that wait past `max_queue_wait` are shed
/// unwritten, and admission reopens once the queue drains.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn stalled_commits_shed_rows_that_waited_too_long() {
    let db = hookgate_testkit::postgres().await;
    let mut options = PostgresOptions::default();
    options.group_commit.max_queue_wait = std::time::Duration::from_millis(100);
    // Not `store_on`: this test is about shedding.
    let store: Arc<dyn Store> = Arc::new(
        PostgresStore::connect(db.url(), options)
            .await
            .expect("connect"),
    );
    let (mut blocker, connection) = tokio_postgres::connect(db.url(), tokio_postgres::NoTls)
        .await
        .expect("blocker connects");
    tokio::spawn(connection);
    let lock = blocker.transaction().await.unwrap();
    lock.batch_execute("LOCK TABLE inbox IN EXCLUSIVE MODE")
        .await
        .unwrap();
    conformance::shed_during_stall(Arc::clone(&store), async move {
        tokio::time::sleep(std::time::Duration::from_millis(600)).await;
        lock.commit().await.unwrap();
    })
    .await;
    store.close().await;
}

/// Schema version 4: RECEIVED rows accepted by an older version (no `next_attempt_at`) become
/// due, so the lease query's single range condition still finds them.
#[tokio::test]
async fn migration_4_makes_old_received_rows_due() {
    let db = hookgate_testkit::postgres().await;
    let store = store_on(db.url(), PostgresOptions::default()).await;
    let accepted = store.accept(row("stripe", "ep", "evt_old")).await.unwrap();
    store.close().await;
    // As a version 3 gateway left it.
    let client = sql(db.url()).await;
    client
        .batch_execute(
            "UPDATE inbox SET next_attempt_at = NULL; \
             DELETE FROM schema_migrations WHERE version >= 4",
        )
        .await
        .unwrap();
    let store = store_on(db.url(), PostgresOptions::default()).await;
    // Ciphertext is still stored without compression attempts (since version 1).
    let storage: i8 = client
        .query_one(
            "SELECT attstorage FROM pg_attribute \
             WHERE attrelid = 'inbox'::regclass AND attname = 'payload'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(storage as u8, b'e', "payload storage must be EXTERNAL");
    let leased = store
        .lease_due("worker", conformance::now_ms() + 1, 30_000, 10)
        .await
        .unwrap();
    assert_eq!(
        leased
            .iter()
            .map(|r| r.inbox_id.as_str())
            .collect::<Vec<_>>(),
        vec![accepted.inbox_id()]
    );
    store.close().await;
}

/// Schema version 6 (replay digests) on a database as a version 5 gateway left it, with
/// rows in it: upgraded in place, every row intact and readable, old keys still duplicates,
/// and the replay defence working on new rows.
#[tokio::test]
async fn migration_6_keeps_rows_and_catches_replays() {
    let db = hookgate_testkit::postgres().await;
    let store = store_on(db.url(), PostgresOptions::default()).await;
    let mut old = Vec::new();
    for (i, payload) in [vec![0u8; 0], vec![7u8; 10 * 1024], b"small".to_vec()]
        .into_iter()
        .enumerate()
    {
        let r = hookgate_store::NewInboxRow {
            payload,
            ..row("github", "ep", &format!("old-{i}"))
        };
        store.accept(r.clone()).await.unwrap();
        old.push(r);
    }
    store.close().await;
    let client = sql(db.url()).await;
    client
        .batch_execute(
            "DROP TABLE replay_digests; \
             DELETE FROM schema_migrations WHERE version >= 6",
        )
        .await
        .unwrap();

    let store = store_on(db.url(), PostgresOptions::default()).await;
    for r in &old {
        let rec = store
            .get_event(&r.inbox_id)
            .await
            .unwrap()
            .expect("row kept");
        assert_eq!(rec.payload.as_deref(), Some(r.payload.as_slice()));
        assert_eq!(rec.provider_event_id, r.provider_event_id);
        assert_eq!(rec.payload_digest, r.payload_digest);
        assert_eq!(rec.received_at_ms, r.received_at_ms);
    }
    assert_eq!(
        store.accept(row("github", "ep", "old-1")).await.unwrap(),
        Acceptance::Duplicate {
            inbox_id: old[1].inbox_id.clone()
        }
    );
    let with_digest = |event_id: &str| hookgate_store::NewInboxRow {
        replay_digest: Some(hookgate_store::ReplayDigest {
            digest: [3; 32],
            window_ms: 60_000,
        }),
        ..row("github", "ep", event_id)
    };
    let first = with_digest("d1");
    assert_eq!(
        store.accept(first.clone()).await.unwrap(),
        Acceptance::Accepted {
            inbox_id: first.inbox_id.clone()
        }
    );
    assert_eq!(
        store.accept(with_digest("d2")).await.unwrap(),
        Acceptance::ReplaySuspected {
            inbox_id: first.inbox_id.clone()
        }
    );
    assert_eq!(store.count_inbox().await.unwrap(), 4);
    let leased = store
        .lease_due("worker", conformance::now_ms() + 1, 30_000, 10)
        .await
        .unwrap();
    assert_eq!(leased.len(), 4, "old rows are still due, the replay is not");
    store.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_migrations_apply_once() {
    let db = hookgate_testkit::postgres().await;
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..8 {
        let url = db.url().to_owned();
        tasks.spawn(async move { PostgresStore::connect(&url, PostgresOptions::default()).await });
    }
    let mut stores = Vec::new();
    while let Some(r) = tasks.join_next().await {
        stores.push(r.unwrap().expect("every instance starts"));
    }
    let client = sql(db.url()).await;
    let versions: Vec<i64> = client
        .query(
            "SELECT version FROM schema_migrations ORDER BY version",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions, POSTGRES_VERSIONS);
    for s in stores {
        s.close().await;
    }
    // Re-opening an up-to-date database is a no-op.
    let again = store_on(db.url(), PostgresOptions::default()).await;
    again.accept(row("stripe", "ep", "e")).await.unwrap();
    again.close().await;
}

#[tokio::test]
async fn schema_option_isolates_stores_on_one_database() {
    let db = hookgate_testkit::postgres().await;
    let a = store_on(
        &format!("{}?schema=tenant_a", db.url()),
        PostgresOptions::default(),
    )
    .await;
    let b = store_on(
        db.url(),
        PostgresOptions {
            schema: Some("tenant_b".into()),
            ..PostgresOptions::default()
        },
    )
    .await;
    a.accept(row("stripe", "ep", "e1")).await.unwrap();
    assert!(matches!(
        b.accept(row("stripe", "ep", "e1")).await.unwrap(),
        Acceptance::Accepted { .. }
    ));
    assert_eq!(a.count_inbox().await.unwrap(), 1);
    assert_eq!(b.count_inbox().await.unwrap(), 1);
    let bad = PostgresStore::connect(
        db.url(),
        PostgresOptions {
            schema: Some("Bad Name".into()),
            ..Default::default()
        },
    )
    .await;
    assert!(matches!(bad, Err(StoreError::Config(_))));
    a.close().await;
    b.close().await;
}

#[tokio::test]
async fn schema_matches_design() {
    let (db, store) = fresh(PostgresOptions::default()).await;
    let client = sql(db.url()).await;
    // The sealed payload is stored out of line without compression.
    let storage: i8 = client
        .query_one(
            "SELECT attstorage FROM pg_attribute WHERE attrelid = 'inbox'::regclass AND attname = 'payload'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(storage as u8, b'e');
    for table in [
        "inbox",
        "outbox",
        "processed_events",
        "object_state",
        "schema_migrations",
    ] {
        let n: i64 = client
            .query_one(
                "SELECT count(*) FROM pg_tables WHERE tablename = $1",
                &[&table],
            )
            .await
            .unwrap()
            .get(0);
        assert_eq!(n, 1, "{table}");
    }
    // Status values are constrained to the names the core's status enums spell.
    let bogus = client
        .execute(
            "INSERT INTO inbox (inbox_id, provider, endpoint_id, provider_event_id, received_at,
                 payload_key_version, payload_digest, matched_secret_version, status)
             VALUES ('x', 'p', 'e', 'v', 0, 1, '\\x00', 's', 'BOGUS')",
            &[],
        )
        .await;
    assert!(bogus.is_err());
    let bad_outcome = client
        .execute(
            "INSERT INTO inbox (inbox_id, provider, endpoint_id, provider_event_id, received_at,
                 payload_key_version, payload_digest, matched_secret_version, status, outcome)
             VALUES ('x', 'p', 'e', 'v', 0, 1, '\\x00', 's', 'PROCESSED', 'maybe')",
            &[],
        )
        .await;
    assert!(bad_outcome.is_err());
    store.close().await;
}

/// Completions run together in one transaction; when the database refuses one row's
/// statement, each row is completed on its own, so only that row fails.
#[tokio::test]
async fn a_refused_row_does_not_fail_the_rows_completed_with_it() {
    let (db, store) = fresh(PostgresOptions::default()).await;
    let mut ids = Vec::new();
    for i in 0..3 {
        let accepted = store
            .accept(row("stripe", "ep", &format!("evt_{i}")))
            .await
            .unwrap();
        ids.push(accepted.inbox_id().to_owned());
    }
    let now = conformance::now_ms() + 1_000;
    assert_eq!(
        store.lease_due("w", now, 30_000, 10).await.unwrap().len(),
        3
    );
    let results: Vec<_> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| hookgate_store::ProcessingResult {
            inbox_id: id.clone(),
            owner: "w".into(),
            now_ms: now + 1,
            handlers: Vec::new(),
            // PostgreSQL text cannot hold a NUL byte: the middle row's outbox insert is refused.
            destinations: vec![if i == 1 {
                "bad\0dest".into()
            } else {
                "ok".into()
            }],
            sequence: None,
        })
        .collect();
    let outcomes = store.complete_all(results).await;
    assert_eq!(
        outcomes[0].as_ref().unwrap(),
        &hookgate_store::Completion::Processed(hookgate_core::Outcome::Applied)
    );
    assert!(outcomes[1].is_err(), "{:?}", outcomes[1]);
    assert_eq!(
        outcomes[2].as_ref().unwrap(),
        &hookgate_store::Completion::Processed(hookgate_core::Outcome::Applied)
    );
    for (i, id) in ids.iter().enumerate() {
        let rec = store.get_event(id).await.unwrap().unwrap();
        let expected = if i == 1 {
            hookgate_core::InboxStatus::Received
        } else {
            hookgate_core::InboxStatus::Processed
        };
        assert_eq!(rec.status, expected, "row {i}");
    }
    store.close().await;
    drop(db);
}

/// A lease writes no indexed column, and the inbox keeps room on its pages, so PostgreSQL
/// updates a leased row in place (HOT) instead of adding a row version to every index.
#[tokio::test]
async fn leases_are_heap_only_updates() {
    let (db, store) = fresh(PostgresOptions::default()).await;
    for i in 0..40 {
        store
            .accept(row("stripe", "ep", &format!("evt_{i}")))
            .await
            .unwrap();
    }
    let leased = store
        .lease_due("w1", i64::MAX / 4, 60_000, 40)
        .await
        .unwrap();
    assert_eq!(leased.len(), 40);
    // Backends flush their statistics when they exit.
    store.close().await;
    let client = sql(db.url()).await;
    let deadline = Instant::now() + Duration::from_secs(10);
    let (updates, hot) = loop {
        client
            .batch_execute("SELECT pg_stat_clear_snapshot()")
            .await
            .unwrap();
        let r = client
            .query_one(
                "SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables WHERE relname = 'inbox'",
                &[],
            )
            .await
            .unwrap();
        let (updates, hot): (i64, i64) = (r.get(0), r.get(1));
        if updates >= 40 || Instant::now() > deadline {
            break (updates, hot);
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(updates, 40, "one update per leased row");
    // While an index held lease_until, none could be; as many as fit in the room the
    // fillfactor leaves on each page are.
    assert!(hot >= 8, "{hot} of {updates} lease updates were HOT");
}

#[tokio::test]
async fn unreachable_database_is_unavailable_quickly() {
    // A port nothing listens on.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let started = Instant::now();
    let res = PostgresStore::connect(
        &format!("postgres://postgres@127.0.0.1:{port}/postgres"),
        PostgresOptions::default(),
    )
    .await;
    assert!(matches!(res, Err(StoreError::Unavailable(_))), "{res:?}");
    assert!(started.elapsed() < Duration::from_secs(2));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn outage_gives_503_quickly_and_recovers_without_restart() {
    let cluster = Arc::new(
        tokio::task::spawn_blocking(hookgate_testkit::throwaway_cluster)
            .await
            .unwrap(),
    );
    let url = cluster.create_database("outage").await;
    let store = store_on(&url, PostgresOptions::default()).await;
    let first = row("stripe", "ep", "before");
    let first_id = first.inbox_id.clone();
    store.accept(first).await.unwrap();

    let c = Arc::clone(&cluster);
    tokio::task::spawn_blocking(move || c.stop()).await.unwrap();
    for i in 0..3 {
        let started = Instant::now();
        let res = store
            .accept(row("stripe", "ep", &format!("during-{i}")))
            .await;
        let took = started.elapsed();
        assert!(matches!(res, Err(StoreError::Unavailable(_))), "{res:?}");
        assert!(took < Duration::from_secs(2), "answered in {took:?}");
        let started = Instant::now();
        assert!(store.ping().await.is_err());
        assert!(started.elapsed() < Duration::from_secs(2));
    }

    let c = Arc::clone(&cluster);
    tokio::task::spawn_blocking(move || c.start())
        .await
        .unwrap();
    // The same store recovers: new connections are made on demand.
    store.ping().await.expect("ready again");
    assert!(matches!(
        store.accept(row("stripe", "ep", "after")).await.unwrap(),
        Acceptance::Accepted { .. }
    ));
    assert_eq!(
        store.accept(row("stripe", "ep", "before")).await.unwrap(),
        Acceptance::Duplicate { inbox_id: first_id }
    );
    assert_eq!(store.count_inbox().await.unwrap(), 2);
    store.close().await;
}

/// The `store.commit=error` failpoint (needs `--features failpoints`): every caller of the
/// batch gets 503 (`CommitUnknown`) and nothing is committed. Failpoints are read once per
/// process, so the test re-runs itself as a child with `HOOKGATE_FAILPOINTS` set.
#[cfg(feature = "failpoints")]
#[test]
fn commit_failpoint_fails_every_caller_and_commits_nothing() {
    const CHILD_URL: &str = "HOOKGATE_STORE_PG_FAILPOINT_CHILD_URL";
    const TEST_NAME: &str = "postgres::commit_failpoint_fails_every_caller_and_commits_nothing";
    let rt = tokio::runtime::Runtime::new().unwrap();
    if let Ok(url) = std::env::var(CHILD_URL) {
        rt.block_on(async {
            let store: Arc<dyn Store> = Arc::new(store_on(&url, PostgresOptions::default()).await);
            let rows: Vec<_> = (0..50)
                .map(|i| row("stripe", "ep-fp", &format!("evt_{i}")))
                .collect();
            for (_, result) in conformance::accept_all(&store, rows, 50).await {
                assert!(
                    matches!(result, Err(StoreError::CommitUnknown(_))),
                    "{result:?}"
                );
            }
            store.close().await;
        });
        return;
    }
    rt.block_on(async {
        let db = hookgate_testkit::postgres().await;
        let out = std::process::Command::new(std::env::current_exe().unwrap())
            .args(["--exact", TEST_NAME, "--nocapture", "--test-threads=1"])
            .env("HOOKGATE_FAILPOINTS", "store.commit=error")
            .env(CHILD_URL, db.url())
            .output()
            .unwrap();
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("1 passed"),
            "child failed:\n{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let store = store_on(db.url(), PostgresOptions::default()).await;
        assert_eq!(
            store.count_inbox().await.unwrap(),
            0,
            "a failed commit left rows behind"
        );
        let r = row("stripe", "ep-fp", "evt_0");
        assert_eq!(
            store.accept(r.clone()).await.unwrap(),
            Acceptance::Accepted {
                inbox_id: r.inbox_id
            }
        );
        store.close().await;
    });
}

/// The text of each plan line of `EXPLAIN {statement}`.
async fn explain(client: &tokio_postgres::Client, statement: &str) -> String {
    client
        .simple_query(&format!("EXPLAIN {statement}"))
        .await
        .unwrap()
        .into_iter()
        .filter_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => r.get(0).map(str::to_owned),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// What a `/metrics` scrape and the outbox lease ask is answered from indexes on an outbox of
/// 25,000 rows: the FAILED count reads `outbox_failed`, and the lease (no `IS NULL OR`, no
/// `NULLS FIRST`) is one range scan of its destination's due rows in `outbox_due`.
#[tokio::test]
async fn scrapes_and_outbox_leases_use_indexes_on_a_big_outbox() {
    let (db, store) = fresh(PostgresOptions::default()).await;
    store.close().await;
    let client = sql(db.url()).await;
    client
        .batch_execute(
            "INSERT INTO inbox (inbox_id, provider, endpoint_id, provider_event_id, received_at, \
                 payload_key_version, payload_digest, matched_secret_version, status, \
                 next_attempt_at) \
             SELECT 'row_' || n, 'stripe', 'ep', 'evt_' || n, n, 1, '\\x00', 'v1', 'PROCESSED', n \
             FROM generate_series(1, 25000) AS n; \
             INSERT INTO outbox (outbox_id, inbox_id, destination, status, attempt_count, \
                 next_attempt_at, created_at) \
             SELECT 'row_' || n || ':d', 'row_' || n, 'd' || (n % 3), \
                 CASE WHEN n % 10 = 0 THEN 'FAILED' WHEN n % 3 = 0 THEN 'PENDING' \
                      ELSE 'DELIVERED' END, 1, n, n \
             FROM generate_series(1, 25000) AS n; \
             ANALYZE inbox; ANALYZE outbox;",
        )
        .await
        .unwrap();
    let failed = explain(
        &client,
        "SELECT count(*) FROM outbox WHERE status = 'FAILED'",
    )
    .await;
    assert!(failed.contains("outbox_failed"), "{failed}");
    assert!(!failed.contains("Seq Scan on outbox"), "{failed}");
    // The lease's CTE as the store runs it.
    let lease = explain(
        &client,
        "SELECT outbox_id FROM outbox \
         WHERE status = 'PENDING' AND destination = 'd1' \
           AND next_attempt_at <= 20000 \
           AND (lease_until IS NULL OR lease_until <= 20000) \
         ORDER BY next_attempt_at, created_at LIMIT 16 FOR UPDATE SKIP LOCKED",
    )
    .await;
    assert!(lease.contains("outbox_due"), "{lease}");
    assert!(!lease.contains("Seq Scan on outbox"), "{lease}");
    assert!(
        !lease.contains("Sort"),
        "the index gives the order:\n{lease}"
    );
    drop(client);
    drop(db);
}

/// A database at schema version 5 (the previous one) opens at version 7: a delivery left
/// without `next_attempt_at` becomes due at its creation and is leased, and an old payment row
/// (no lease number, a far-future `refreshed_at`) gives way to a new fetch.
#[tokio::test]
async fn migration_7_makes_old_deliveries_due_and_orders_fetches_by_lease() {
    let db = hookgate_testkit::postgres().await;
    let store = store_on(db.url(), PostgresOptions::default()).await;
    let accepted = store.accept(row("stripe", "ep", "evt_old")).await.unwrap();
    store.close().await;
    // As a version 5 gateway left it.
    let client = sql(db.url()).await;
    client
        .batch_execute(
            "DROP INDEX outbox_failed; DROP INDEX outbox_due; DROP SEQUENCE lease_seq; \
             ALTER TABLE inbox DROP COLUMN lease_seq; \
             ALTER TABLE payment_state DROP COLUMN fetch_seq; \
             CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE status = 'PENDING'; \
             DELETE FROM schema_migrations WHERE version > 5; \
             INSERT INTO payment_state (object_id, object_type, status, refreshed_at, \
                 last_event_id) VALUES ('pi_old', 'payment_intent', 'old', 9000000000000, 'e0');",
        )
        .await
        .unwrap();
    client
        .execute(
            "INSERT INTO outbox (outbox_id, inbox_id, destination, status, created_at) \
             VALUES ('old:d', $1, 'd', 'PENDING', 5)",
            &[&accepted.inbox_id()],
        )
        .await
        .unwrap();
    let store = store_on(db.url(), PostgresOptions::default()).await;
    let deliveries = store
        .lease_deliveries("d", "relay", 10, 1_000, 10)
        .await
        .unwrap();
    assert_eq!(deliveries.len(), 1, "due from its creation");
    let now = conformance::now_ms() + 1_000;
    let leased = store.lease_due("w", now, 60_000, 10).await.unwrap();
    assert_eq!(leased.len(), 1);
    let outcome = store
        .complete(hookgate_store::ProcessingResult {
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
    assert_eq!(outcome, hookgate_core::Outcome::Applied);
    let state = store.payment_state("pi_old").await.unwrap().unwrap();
    assert_eq!(state.status, "new");
    store.close().await;
}

/// A database at schema version 8 (before the payload key index) opens at version 9 with its
/// rows as they were; a purged payload (`payload` NULL) pins no key and is not re-sealed.
#[tokio::test]
async fn migration_9_keeps_rows_and_purged_payloads_pin_no_key() {
    use hookgate_store::{KeyVersionRows, PayloadKeyStore};
    let db = hookgate_testkit::postgres().await;
    let store = store_on(db.url(), PostgresOptions::default()).await;
    let mut old = row("stripe", "ep", "evt_v1");
    old.payload_key_version = 1;
    let mut purged = row("stripe", "ep", "evt_purged");
    purged.payload_key_version = 1;
    let mut newer = row("stripe", "ep", "evt_v2");
    newer.payload_key_version = 2;
    for r in [old, purged.clone(), newer] {
        store.accept(r).await.unwrap();
    }
    store.close().await;
    // As a version 8 gateway left it, then retention purged one payload.
    let client = sql(db.url()).await;
    client
        .batch_execute(
            "DROP INDEX inbox_payload_key; DELETE FROM schema_migrations WHERE version > 8;",
        )
        .await
        .unwrap();
    client
        .execute(
            "UPDATE inbox SET payload = NULL, payload_purged_at = received_at, \
             status = 'PROCESSED' WHERE inbox_id = $1",
            &[&purged.inbox_id],
        )
        .await
        .unwrap();
    let store = store_on(db.url(), PostgresOptions::default()).await;
    let version: i64 = client
        .query_one("SELECT max(version) FROM schema_migrations", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, LATEST_POSTGRES, "and on to the latest");
    let index: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_indexes WHERE indexname = 'inbox_payload_key'",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(index, 1);
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
    assert_eq!(
        store
            .get_event(&purged.inbox_id)
            .await
            .unwrap()
            .unwrap()
            .payload,
        None
    );
    store.close().await;
}

/// A database at schema version 7 (the previous one) opens at version 8: a stored payload is
/// recorded as stored, a row left without one as purged at its receipt, and retention and an
/// operator's purge (with its audit row) work on the migrated rows.
#[tokio::test]
async fn migration_8_records_payload_state_and_adds_the_audit_log() {
    use hookgate_store::{PurgeRequest, PurgeSelection, RetentionStore};

    let db = hookgate_testkit::postgres().await;
    let store = store_on(db.url(), PostgresOptions::default()).await;
    let kept = row("stripe", "ep", "kept");
    let gone = row("stripe", "ep", "gone");
    store.accept(kept.clone()).await.unwrap();
    store.accept(gone.clone()).await.unwrap();
    store.close().await;
    let client = sql(db.url()).await;
    // As a version 7 gateway left it (one row without payload, as a version 1 schema allowed).
    client
        .batch_execute(
            "DROP INDEX inbox_payload_key; DROP TABLE audit_log; DROP INDEX inbox_payload_expiry; \
             DROP INDEX object_state_expiry; DROP INDEX replay_digests_expiry; \
             ALTER TABLE inbox DROP COLUMN payload_purged_at; \
             DELETE FROM schema_migrations WHERE version >= 8",
        )
        .await
        .unwrap();
    client
        .execute(
            "UPDATE inbox SET payload = NULL, status = 'PROCESSED' WHERE inbox_id = $1",
            &[&gone.inbox_id],
        )
        .await
        .unwrap();

    let store = store_on(db.url(), PostgresOptions::default()).await;
    let k = store.get_event(&kept.inbox_id).await.unwrap().unwrap();
    assert!(k.payload_stored());
    assert_eq!(k.payload.as_deref(), Some(kept.payload.as_slice()));
    let g = store.get_event(&gone.inbox_id).await.unwrap().unwrap();
    assert!(!g.payload_stored());
    assert_eq!(g.payload_purged_at_ms, Some(gone.received_at_ms));
    assert_eq!(
        store.oldest_stored_payload_ms().await.unwrap(),
        Some(kept.received_at_ms)
    );
    let selection = PurgeSelection {
        inbox_ids: vec![kept.inbox_id.clone()],
        ..PurgeSelection::default()
    };
    // Still RECEIVED: left alone and reported.
    let batch = store
        .purge_payloads(PurgeRequest {
            selection: &selection,
            limit: 10,
            now_ms: conformance::now_ms(),
            actor: "ops",
            audit_id: "a1",
        })
        .await
        .unwrap();
    assert!(batch.purged.is_empty());
    assert_eq!(batch.still_received, 1);
    assert_eq!(store.audit_log(5).await.unwrap().len(), 1);
    let versions: Vec<i64> = client
        .query(
            "SELECT version FROM schema_migrations ORDER BY version",
            &[],
        )
        .await
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(versions.last(), Some(&LATEST_POSTGRES));
    store.close().await;
}

/// Retention's searches are index range scans on an inbox of 50,000 rows, most of them
/// purged already: the expired-payload search reads `inbox_payload_expiry` (purged rows are
/// not in it), the expired-row search `inbox_endpoint_received`.
#[tokio::test]
async fn retention_searches_use_indexes_on_a_big_inbox() {
    let (db, store) = fresh(PostgresOptions::default()).await;
    store.close().await;
    let client = sql(db.url()).await;
    client
        .batch_execute(
            "INSERT INTO inbox (inbox_id, provider, endpoint_id, provider_event_id, received_at, \
                 payload_key_version, payload_digest, matched_secret_version, status, \
                 payload_purged_at) \
             SELECT 'row_' || n, 'stripe', 'ep' || (n % 4), 'evt_' || n, n, 1, '\\x00', 'v1', \
                 'PROCESSED', CASE WHEN n < 45000 THEN n END \
             FROM generate_series(1, 50000) AS n; \
             ANALYZE inbox;",
        )
        .await
        .unwrap();
    let payloads = explain(
        &client,
        "SELECT inbox_id FROM inbox i WHERE payload_purged_at IS NULL AND received_at < 46000 \
         AND status IN ('PROCESSED', 'IGNORED') AND NOT EXISTS (SELECT 1 FROM outbox o \
         WHERE o.inbox_id = i.inbox_id AND o.status = 'PENDING') \
         ORDER BY received_at LIMIT 256 FOR UPDATE SKIP LOCKED",
    )
    .await;
    assert!(payloads.contains("inbox_payload_expiry"), "{payloads}");
    assert!(!payloads.contains("Seq Scan on inbox"), "{payloads}");
    let rows = explain(
        &client,
        "SELECT inbox_id FROM inbox WHERE endpoint_id = 'ep1' AND received_at < 20000 \
         AND status IN ('PROCESSED', 'IGNORED') ORDER BY received_at LIMIT 256 \
         FOR UPDATE SKIP LOCKED",
    )
    .await;
    // Either index is a range scan in `received_at` order (the planner weighs the endpoint's
    // share of the rows); the operator API's page index is the other candidate.
    assert!(
        rows.contains("inbox_endpoint_received") || rows.contains("inbox_received_page"),
        "{rows}"
    );
    assert!(!rows.contains("Seq Scan on inbox"), "{rows}");
}

/// Schema version 10 (the operator API) on a database as a version 9 gateway left it: audit
/// rows become `ok` with no filter, deliveries keep the inbox id as key, a re-delivery can
/// record a fresh one, and the page reads the rows.
#[tokio::test]
async fn migration_10_adds_audit_results_delivery_keys_and_page_indexes() {
    use hookgate_store::{EventQuery, OperatorStore, ProcessingResult, Redelivery};
    let db = hookgate_testkit::postgres().await;
    let store = store_on(db.url(), PostgresOptions::default()).await;
    let id = store
        .accept(row("stripe", "ep", "evt_old"))
        .await
        .unwrap()
        .inbox_id()
        .to_owned();
    let t = conformance::now_ms() + 1_000;
    assert_eq!(store.lease_due("w", t, 30_000, 10).await.unwrap().len(), 1);
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
    let client = sql(db.url()).await;
    client
        .batch_execute(
            "DROP INDEX inbox_received_page; DROP INDEX inbox_provider_event; \
             DROP INDEX inbox_object; \
             ALTER TABLE audit_log DROP COLUMN result; ALTER TABLE audit_log DROP COLUMN filter; \
             ALTER TABLE outbox DROP COLUMN idempotency_key; \
             DELETE FROM schema_migrations WHERE version >= 10; \
             INSERT INTO audit_log (audit_id, at, actor, action, target, detail) \
                 VALUES ('a1', 1, 'root', 'events.purge', 'endpoint=ep', '{}');",
        )
        .await
        .unwrap();

    let store = store_on(db.url(), PostgresOptions::default()).await;
    let version: i64 = client
        .query_one("SELECT max(version) FROM schema_migrations", &[])
        .await
        .unwrap()
        .get(0);
    assert!(version >= 11, "migrated past 10 (to {version})");
    let indexes: i64 = client
        .query_one(
            "SELECT count(*) FROM pg_indexes WHERE indexname IN \
             ('inbox_received_page', 'inbox_provider_event', 'inbox_object')",
            &[],
        )
        .await
        .unwrap()
        .get(0);
    assert_eq!(indexes, 3);
    let audit = store.audit_log(10).await.unwrap();
    assert_eq!(audit.len(), 1);
    assert_eq!(
        (audit[0].result.as_str(), audit[0].filter.as_deref()),
        ("ok", None)
    );
    let d = store.list_deliveries(&id).await.unwrap();
    assert_eq!(d[0].idempotency_key, None);
    let page = store
        .page_events(&EventQuery {
            limit: 10,
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(page.len(), 1);
    assert_eq!(page[0].inbox_id, id);
    assert!(page[0].payload.is_none());
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
    assert_eq!(
        store.list_deliveries(&id).await.unwrap()[0]
            .idempotency_key
            .as_deref(),
        Some("k2")
    );
    store.close().await;
}

/// A database at schema version 10 (before bulk jobs and the rejection log) opens at version
/// 11 with its events as they were; jobs and rejections then work on it.
#[tokio::test]
async fn migration_11_adds_jobs_and_rejections_to_a_version_10_database() {
    use hookgate_store::{JobAction, JobStore, NewJob, RejectionQuery, RejectionStore};
    let db = hookgate_testkit::postgres().await;
    let store = store_on(db.url(), PostgresOptions::default()).await;
    let id = store
        .accept(row("stripe", "ep", "evt_10"))
        .await
        .unwrap()
        .inbox_id()
        .to_owned();
    store.close().await;
    let client = sql(db.url()).await;
    client
        .batch_execute(
            "DROP TABLE jobs; DROP TABLE rejections; DROP TABLE rejection_counts; \
             DELETE FROM schema_migrations WHERE version > 10;",
        )
        .await
        .unwrap();
    let store = store_on(db.url(), PostgresOptions::default()).await;
    let version: i64 = client
        .query_one("SELECT max(version) FROM schema_migrations", &[])
        .await
        .unwrap()
        .get(0);
    assert!(version >= 11, "migrated past 10 (to {version})");
    assert!(store.get_event(&id).await.unwrap().is_some(), "no row lost");
    store
        .create_job(NewJob {
            job_id: "j1".into(),
            action: JobAction::Replay,
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

/// A database at schema version 11 (before HELD and `source`) opens at version 12: its rows
/// read as `webhook`, and a leased row can be held and released.
#[tokio::test]
async fn migration_12_adds_held_and_source_to_a_version_11_database() {
    use hookgate_core::{EventSource, InboxStatus};
    use hookgate_store::{HeldEvent, LeaseRequest, ReleaseRequest};
    let db = hookgate_testkit::postgres().await;
    let store = store_on(db.url(), PostgresOptions::default()).await;
    let id = store
        .accept(row("stripe", "ep", "evt_11"))
        .await
        .unwrap()
        .inbox_id()
        .to_owned();
    store.close().await;
    let client = sql(db.url()).await;
    // As a version 11 gateway left it.
    client
        .batch_execute(
            "ALTER TABLE inbox DROP CONSTRAINT inbox_status_check; \
             ALTER TABLE inbox ADD CONSTRAINT inbox_status_check \
                 CHECK (status IN ('RECEIVED', 'PROCESSED', 'FAILED', 'IGNORED')); \
             ALTER TABLE inbox DROP COLUMN source, DROP COLUMN api_version, \
                 DROP COLUMN held_reason, DROP COLUMN released_at; \
             DELETE FROM schema_migrations WHERE version > 11;",
        )
        .await
        .unwrap();
    let refused = client
        .execute(
            "UPDATE inbox SET status = 'HELD' WHERE inbox_id = $1",
            &[&id],
        )
        .await;
    assert!(refused.is_err(), "version 11 refuses HELD");
    let store = store_on(db.url(), PostgresOptions::default()).await;
    let version: i64 = client
        .query_one("SELECT max(version) FROM schema_migrations", &[])
        .await
        .unwrap()
        .get(0);
    assert!(version >= 12, "migrated past 11 (to {version})");
    let event = store.get_event(&id).await.unwrap().expect("no row lost");
    assert_eq!(event.source, EventSource::Webhook);
    let leased = store
        .lease(LeaseRequest {
            owner: "w",
            now_ms: i64::MAX / 4,
            lease_ms: 1000,
            limit: 10,
            with_payload: false,
            endpoints: None,
        })
        .await
        .unwrap();
    assert_eq!(leased.len(), 1);
    let hold = |owner: &str| HeldEvent {
        inbox_id: id.clone(),
        owner: owner.into(),
        now_ms: i64::MAX / 4 + 1,
        reason: "api version \"2023-10-16\" is not pinned".into(),
    };
    assert!(
        store.hold_event(hold("another")).await.is_err(),
        "fenced on the lease"
    );
    store.hold_event(hold("w")).await.unwrap();
    let held = store.get_event(&id).await.unwrap().unwrap();
    assert_eq!(held.status, InboxStatus::Held);
    assert!(held.held_reason.unwrap().contains("2023-10-16"));
    let none = ReleaseRequest {
        endpoint_id: Some("other".into()),
        inbox_id: None,
        now_ms: 5,
    };
    assert_eq!(store.release_held(none).await.unwrap(), 0);
    let one = ReleaseRequest {
        endpoint_id: None,
        inbox_id: Some(id.clone()),
        now_ms: 5,
    };
    assert_eq!(store.release_held(one.clone()).await.unwrap(), 1);
    assert_eq!(
        store.release_held(one).await.unwrap(),
        0,
        "already released"
    );
    let released = store.get_event(&id).await.unwrap().unwrap();
    assert_eq!(released.status, InboxStatus::Received);
    assert_eq!(released.released_at_ms, Some(5));
    assert_eq!(released.attempt_count, 0);
    store.close().await;
}

/// A database at schema version 12 (before sequenced deltas) opens at version 14: its rows
/// have no sequence, and sequenced processing works on it (a row waits, is held by the gap
/// check, released, applied).
#[tokio::test]
async fn migration_14_adds_object_sequence_to_a_version_12_database() {
    use hookgate_core::InboxStatus;
    use hookgate_store::{
        Completion, LeaseRequest, ReleaseRequest, SequenceGapCheck, SequenceStart,
    };
    let db = hookgate_testkit::postgres().await;
    let store = store_on(db.url(), PostgresOptions::default()).await;
    let old = store
        .accept(row("stripe", "ep", "evt_12"))
        .await
        .unwrap()
        .inbox_id()
        .to_owned();
    store.close().await;
    let client = sql(db.url()).await;
    // As a version 12 gateway left it.
    client
        .batch_execute(
            "DROP INDEX inbox_sequence_waiting; DROP TABLE object_sequence; \
             ALTER TABLE inbox DROP COLUMN sequence_number, DROP COLUMN sequence_waiting_for; \
             DELETE FROM schema_migrations WHERE version > 12;",
        )
        .await
        .unwrap();
    let store = store_on(db.url(), PostgresOptions::default()).await;
    let version: i64 = client
        .query_one("SELECT max(version) FROM schema_migrations", &[])
        .await
        .unwrap()
        .get(0);
    assert!(version >= 14, "migrated past 12 (to {version})");
    let event = store.get_event(&old).await.unwrap().expect("no row lost");
    assert_eq!(
        (event.sequence_number, event.sequence_waiting_for),
        (None, None)
    );

    let mut ahead = row("stripe", "ep", "evt_seq_2");
    ahead.object_id = Some("obj".into());
    ahead.sequence_number = Some(2);
    let ahead = store.accept(ahead).await.unwrap().inbox_id().to_owned();
    let t = i64::MAX / 4;
    let leased = store
        .lease(LeaseRequest {
            owner: "w",
            now_ms: t,
            lease_ms: 1000,
            limit: 10,
            with_payload: false,
            endpoints: None,
        })
        .await
        .unwrap();
    assert_eq!(leased.len(), 2);
    let complete = |id: &str, now_ms| hookgate_store::ProcessingResult {
        inbox_id: id.to_owned(),
        owner: "w".into(),
        now_ms,
        handlers: Vec::new(),
        destinations: Vec::new(),
        sequence: Some(SequenceStart::One),
    };
    let done = store
        .complete_all(vec![complete(&old, t + 1), complete(&ahead, t + 1)])
        .await;
    assert_eq!(
        done[1].as_ref().unwrap(),
        &Completion::Waiting { for_sequence: 1 }
    );
    let held = store
        .hold_sequence_gaps(SequenceGapCheck {
            endpoint_id: "ep".into(),
            opened_before_ms: t,
            max_waiting: 100,
            reason: String::new(),
        })
        .await
        .unwrap();
    assert_eq!(held.len(), 1);
    assert_eq!(
        store.get_event(&ahead).await.unwrap().unwrap().status,
        InboxStatus::Held
    );
    let released = ReleaseRequest {
        endpoint_id: None,
        inbox_id: Some(ahead.clone()),
        now_ms: t + 2,
    };
    assert_eq!(store.release_held(released).await.unwrap(), 1);
    let rec = store.get_event(&ahead).await.unwrap().unwrap();
    assert_eq!(
        rec.next_attempt_at_ms,
        Some(t + 2),
        "the lowest released is due"
    );
    store.close().await;
}

/// The operator API's pages are index scans on an inbox of 50,000 rows: newest first from
/// `inbox_received_page` (no sort of the table), after a cursor, and the id lookups from
/// their own indexes; and a page through the store reads the rows it returns.
#[tokio::test]
async fn event_pages_use_indexes_on_a_big_inbox() {
    use hookgate_store::{EventQuery, PageKey};
    let (db, store) = fresh(PostgresOptions::default()).await;
    let client = sql(db.url()).await;
    client
        .batch_execute(
            "INSERT INTO inbox (inbox_id, provider, endpoint_id, provider_event_id, object_id, \
                 received_at, payload, payload_key_version, payload_digest, \
                 matched_secret_version, status) \
             SELECT 'row_' || lpad(n::text, 6, '0'), 'stripe', 'ep' || (n % 4), 'evt_' || n, \
                 'obj_' || (n % 5000), n, decode(repeat('ab', 2048), 'hex'), 1, '\\x00', 'v1', \
                 'PROCESSED' \
             FROM generate_series(1, 50000) AS n; \
             ANALYZE inbox;",
        )
        .await
        .unwrap();
    let columns = "inbox_id, received_at, status";
    for (statement, index) in [
        (
            format!(
                "SELECT {columns} FROM inbox ORDER BY received_at DESC, inbox_id DESC LIMIT 51"
            ),
            "inbox_received_page",
        ),
        (
            format!(
                "SELECT {columns} FROM inbox WHERE (received_at < 30000 OR (received_at = 30000 \
                 AND inbox_id < 'row_030000')) ORDER BY received_at DESC, inbox_id DESC LIMIT 51"
            ),
            "inbox_received_page",
        ),
        (
            format!(
                "SELECT {columns} FROM inbox WHERE endpoint_id = 'ep1' AND status = 'PROCESSED' \
                 ORDER BY received_at DESC, inbox_id DESC LIMIT 51"
            ),
            "inbox_",
        ),
        (
            format!(
                "SELECT {columns} FROM inbox WHERE object_id = 'obj_7' \
                 ORDER BY received_at DESC, inbox_id DESC LIMIT 51"
            ),
            "inbox_object",
        ),
        (
            format!(
                "SELECT {columns} FROM inbox WHERE provider_event_id = 'evt_77' \
                 ORDER BY received_at DESC, inbox_id DESC LIMIT 51"
            ),
            "inbox_provider_event",
        ),
    ] {
        let plan = explain(&client, &statement).await;
        assert!(plan.contains(index), "{statement}\n{plan}");
        assert!(!plan.contains("Seq Scan on inbox"), "{statement}\n{plan}");
    }
    // Through the store: the newest page, the page after it, a lookup.
    let first = store
        .page_events(&EventQuery {
            limit: 50,
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(first.len(), 50);
    assert_eq!(first[0].inbox_id, "row_050000");
    assert!(first.iter().all(|r| r.payload.is_none()));
    let last = first.last().unwrap();
    let second = store
        .page_events(&EventQuery {
            limit: 50,
            after: Some(PageKey {
                received_at_ms: last.received_at_ms,
                inbox_id: last.inbox_id.clone(),
            }),
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(second[0].inbox_id, "row_049950");
    let object = store
        .page_events(&EventQuery {
            limit: 50,
            object_id: Some("obj_7".into()),
            ..EventQuery::default()
        })
        .await
        .unwrap();
    assert_eq!(object.len(), 10);
    store.close().await;
}

/// A database at the schema version before reconciliation opens at the latest with its
/// events as they were; a marker left without its inbox row is found, reported, and listed.
#[tokio::test]
async fn reconcile_tables_upgrade_an_older_database_and_orphan_markers_are_reported() {
    use hookgate_store::{
        FindingAction, FindingBatch, FindingKind, FindingQuery, NewFinding, ReconcileStore,
    };
    let db = hookgate_testkit::postgres().await;
    let store = store_on(db.url(), PostgresOptions::default()).await;
    let id = store
        .accept(row("stripe", "ep", "evt_kept"))
        .await
        .unwrap()
        .inbox_id()
        .to_owned();
    store.close().await;
    let client = sql(db.url()).await;
    client
        .batch_execute(
            "DROP TABLE reconcile_runs; DROP TABLE reconcile_findings; \
             DROP TABLE reconcile_checkpoints; DROP TABLE reconcile_no_retry_windows; \
             DELETE FROM schema_migrations WHERE version >= 13; \
             INSERT INTO processed_events VALUES ('stripe', 'ep', 'evt_gone', 'payments_projection'); \
             INSERT INTO processed_events VALUES ('stripe', 'ep', 'evt_kept', 'payments_projection');",
        )
        .await
        .unwrap();
    let store = store_on(db.url(), PostgresOptions::default()).await;
    let version: i64 = client
        .query_one("SELECT max(version) FROM schema_migrations", &[])
        .await
        .unwrap()
        .get(0);
    assert_eq!(version, LATEST_POSTGRES, "and on to the latest");
    assert!(store.get_event(&id).await.unwrap().is_some(), "no row lost");
    let orphans = store.orphan_markers("ep", None, 10).await.unwrap();
    assert_eq!(orphans.len(), 1);
    assert_eq!(orphans[0].provider_event_id, "evt_gone");
    let recorded = store
        .record_findings(FindingBatch {
            run_id: "r".into(),
            repair: true,
            threshold_ms: 0,
            now_ms: 7,
            findings: vec![NewFinding {
                kind: FindingKind::OrphanMarker,
                endpoint_id: "ep".into(),
                provider: Some("stripe".into()),
                provider_event_id: Some("evt_gone".into()),
                inbox_id: None,
                destination: None,
                consumer: Some("payments_projection".into()),
            }],
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
    assert_eq!(listed[0].action, FindingAction::Reported);
    store.close().await;
}
