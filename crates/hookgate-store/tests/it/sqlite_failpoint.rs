//! The `store.commit=error` failpoint on the SQLite writer (built with `--features
//! failpoints`; see `main.rs`).
//!
//! Failpoints are read from `HOOKGATE_FAILPOINTS` once per process and the environment
//! cannot be changed safely in-process, so the test re-runs itself as a child process with
//! the variable set and checks the database the child left behind.

use std::process::Command;
use std::sync::Arc;

use crate::conformance::{accept_all, row};
use hookgate_store::{
    Acceptance, GroupCommitOptions, InboxStore, InspectStore, SqliteStore, Store, StoreError,
};

const CHILD_DIR: &str = "HOOKGATE_STORE_FAILPOINT_CHILD_DIR";
const TEST_NAME: &str = "sqlite_failpoint::commit_failpoint_fails_every_caller_and_commits_nothing";

#[test]
fn commit_failpoint_fails_every_caller_and_commits_nothing() {
    if let Some(dir) = std::env::var_os(CHILD_DIR) {
        return child(std::path::Path::new(&dir));
    }
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", TEST_NAME, "--nocapture", "--test-threads=1"])
        .env("HOOKGATE_FAILPOINTS", "store.commit=error")
        .env(CHILD_DIR, dir.path())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "child failed:\n{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("1 passed"),
        "the child ran the test"
    );

    // Without the failpoint, the same database has no row and accepts normally.
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store =
            SqliteStore::open(&dir.path().join("fp.db"), GroupCommitOptions::default()).unwrap();
        assert_eq!(
            store.count_inbox().await.unwrap(),
            0,
            "a failed commit left rows behind"
        );
        let r = row("ep-fp", "evt_0");
        assert_eq!(
            store.accept(r.clone()).await.unwrap(),
            Acceptance::Accepted {
                inbox_id: r.inbox_id
            }
        );
        store.close().await;
    });
}

/// Runs with `HOOKGATE_FAILPOINTS=store.commit=error`: every commit fails.
fn child(dir: &std::path::Path) {
    let rt = tokio::runtime::Runtime::new().unwrap();
    rt.block_on(async {
        let store: Arc<dyn Store> =
            Arc::new(SqliteStore::open(&dir.join("fp.db"), GroupCommitOptions::default()).unwrap());
        // Distinct keys and copies, concurrently, so batches hold several rows.
        let rows: Vec<_> = (0..60)
            .map(|i| row("ep-fp", &format!("evt_{}", i % 20)))
            .collect();
        let results = accept_all(&store, rows, 60).await;
        for (_, result) in &results {
            assert!(
                matches!(result, Err(StoreError::CommitUnknown(_))),
                "never Ok without a commit: {result:?}"
            );
        }
        assert_eq!(store.count_inbox().await.unwrap(), 0);
        store
            .ping()
            .await
            .expect("the writer survives failed commits");
        store.close().await;
    });
}
