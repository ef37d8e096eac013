//! CI smoke run of `hookgate bench`: a couple of seconds of signed traffic with duplicates
//! against a gateway on SQLite, then the store verification. Asserts correctness only, never
//! speed, so the tool cannot rot.

use std::process::Command;

use crate::support::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_smoke_run_verifies_the_store() {
    let now = jiff::Timestamp::now().as_second();
    let endpoints = endpoint_toml(
        "stripe-bench",
        "stripe",
        &["whsec_hookgate_bench_smoke"],
        "",
    );
    let mut gw = TestGateway::start(&endpoints, now).await;
    let config = gw.config_path().to_owned();
    let json = gw.dir().join("bench.json");
    let url = format!("http://{}/webhooks/stripe-bench", gw.addr);

    let mut command = Command::new(binary());
    command
        .args(["bench", "--endpoint", "stripe-bench", "--rate", "200"])
        .args([
            "--duration",
            "2",
            "--connections",
            "8",
            "--duplicates",
            "0.3",
        ])
        .args(["--drain-timeout", "10", "--seed", "42"])
        .arg("--config")
        .arg(&config)
        .arg("--url")
        .arg(&url)
        .arg("--json")
        .arg(&json)
        .arg("--gateway-pid")
        .arg(std::process::id().to_string());
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "bench failed: {:?}\n{stdout}\n{stderr}",
        out.status
    );
    assert!(stdout.contains("store_verified: true"), "{stdout}");

    let report: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(report["store_verified"], true, "{report:#}");
    let acked = report["accepted"].as_u64().unwrap() + report["duplicate"].as_u64().unwrap();
    assert!(acked > 0, "{report:#}");
    // Duplicates were sent, and the store holds one row per acknowledged event.
    assert!(report["duplicate"].as_u64().unwrap() > 0, "{report:#}");
    let v = &report["verification"];
    assert_eq!(v["missing"], 0, "{report:#}");
    assert_eq!(v["accepted_twice"], 0, "{report:#}");
    // No workers run here, so every row the run added still waits for processing.
    assert!(v["inbox_rows_added"].as_u64().unwrap() > 0, "{report:#}");
    assert_eq!(
        v["waiting_for_processing"], v["inbox_rows_added"],
        "{report:#}"
    );
    gw.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_ceiling_mode_needs_no_gateway() {
    let endpoints = endpoint_toml("gh", "github", &["bench-smoke-secret"], "");
    let files = TestGateway::builder()
        .workers(0)
        .endpoints(&endpoints)
        .write()
        .await;
    let (path, db) = (files.config_path.clone(), files.db.clone().unwrap());
    let mut command = Command::new(binary());
    command
        .args([
            "bench",
            "--endpoint",
            "gh",
            "--rate",
            "0",
            "--duration",
            "0.5",
        ])
        .args([
            "--connections",
            "4",
            "--body-size",
            "2KiB",
            "--plan-ahead",
            "2000",
        ])
        .args(["--ceiling", "--config"])
        .arg(&path);
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(stdout.contains("ceiling sink"), "{stdout}");
    assert!(!db.exists(), "a ceiling run must not touch the store");
}

/// A gateway that acknowledges without storing (here: another gateway with its own database)
/// must fail the benchmark.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_fails_when_acknowledged_events_are_not_in_the_store() {
    let now = jiff::Timestamp::now().as_second();
    let endpoints = endpoint_toml("stripe-bench", "stripe", &["whsec_hookgate_bench_lost"], "");
    let mut verified = TestGateway::start(&endpoints, now).await;
    let mut elsewhere = TestGateway::start(&endpoints, now).await;
    let config = verified.config_path().to_owned();
    let url = format!("http://{}/webhooks/stripe-bench", elsewhere.addr);
    let mut command = Command::new(binary());
    command
        .args(["bench", "--endpoint", "stripe-bench", "--rate", "100"])
        .args([
            "--duration",
            "0.5",
            "--connections",
            "4",
            "--body-size",
            "1KiB",
        ])
        .arg("--config")
        .arg(&config)
        .arg("--url")
        .arg(&url);
    let out = tokio::task::spawn_blocking(move || command.output().unwrap())
        .await
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(stdout.contains("store_verified: false"), "{stdout}");
    assert!(
        stdout.contains("acknowledged but is not in the store"),
        "{stdout}"
    );
    verified.stop().await;
    elsewhere.stop().await;
}
