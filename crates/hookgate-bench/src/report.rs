//! What a run reports: the JSON written by `--json` (its field names are relied on by
//! `scripts/bench.sh` and the tests) and the human-readable `key: value` lines on stdout.

use serde::Serialize;

use crate::verify;

/// Everything `bench` reports; the JSON written by `--json`.
#[derive(Debug, Serialize)]
pub struct Report {
    pub label: Option<String>,
    pub mode: &'static str,
    pub ceiling: bool,
    pub target: String,
    pub endpoint: String,
    pub provider: &'static str,
    pub store: Option<String>,
    pub rate_target: u64,
    pub duration_s: f64,
    pub connections: usize,
    pub duplicates_share: f64,
    pub body_size: String,
    pub event_id_prefix: String,
    pub elapsed_s: f64,
    /// 2xx answers (acknowledgements) per second of elapsed time.
    pub achieved_rps: f64,
    /// Every HTTP answer per second, whatever its status.
    pub responses_rps: f64,
    /// Latency of 2xx answers from the intended send time.
    pub p50_ms: f64,
    pub p90_ms: f64,
    pub p99_ms: f64,
    pub p999_ms: f64,
    pub max_ms: f64,
    pub mean_ms: f64,
    /// p99 over every HTTP answer (429/503 included).
    pub all_p99_ms: f64,
    pub requests: u64,
    pub accepted: u64,
    pub duplicate: u64,
    pub ignored: u64,
    pub other_2xx: u64,
    pub rejected_4xx: u64,
    pub rate_limited: u64,
    pub unavailable: u64,
    pub errors: u64,
    pub not_sent: u64,
    pub unique_events: u64,
    pub sent_resends: u64,
    pub sent_retries: u64,
    pub sent_burst_copies: u64,
    pub mean_body_bytes: f64,
    pub body_mib_per_s: f64,
    pub gateway_pid: Option<u32>,
    pub gateway_cpu_seconds: Option<f64>,
    /// Gateway CPU seconds per elapsed second (2.0 = both cores of this machine).
    pub gateway_cpu_cores: Option<f64>,
    pub gateway_rss_peak_mib: Option<f64>,
    pub gateway_vmhwm_mib: Option<f64>,
    pub gateway_vmrss_mib: Option<f64>,
    /// The gateway's own ack-latency histogram for this run (admin `/metrics`, arrival to
    /// answer, without the load generator's CPU queueing): upper bound of the bucket holding
    /// its 99th percentile. `None` without an admin listener or with `--url`.
    pub gateway_ack_p99_le_ms: Option<f64>,
    pub bench_cpu_seconds: Option<f64>,
    pub store_verified: Option<bool>,
    pub verification: Option<verify::Verification>,
    pub first_error: Option<String>,
    pub machine_cpus: usize,
}

/// The human-readable report: one `key: value` per line.
pub fn render(r: &Report) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let opt = |v: Option<f64>| v.map_or("-".to_owned(), |v| format!("{v}"));
    let _ = writeln!(
        out,
        "target: {}{}",
        r.target,
        if r.ceiling { " (ceiling sink)" } else { "" }
    );
    let _ = writeln!(
        out,
        "mode: {} ({}), {} connections, {}s, duplicates {}, body {} (mean {} bytes)",
        r.mode,
        if r.rate_target > 0 {
            format!("{}/s", r.rate_target)
        } else {
            "max throughput".into()
        },
        r.connections,
        r.duration_s,
        r.duplicates_share,
        r.body_size,
        r.mean_body_bytes
    );
    let _ = writeln!(out, "elapsed_s: {}", r.elapsed_s);
    let _ = writeln!(out, "achieved_rps: {}", r.achieved_rps);
    let _ = writeln!(out, "responses_rps: {}", r.responses_rps);
    let _ = writeln!(
        out,
        "latency_ms (2xx, from intended send time): p50_ms: {} p90_ms: {} p99_ms: {} p999_ms: {} max_ms: {}",
        r.p50_ms, r.p90_ms, r.p99_ms, r.p999_ms, r.max_ms
    );
    let _ = writeln!(
        out,
        "requests: {} (unique events {}, re-sends {}, retries {}, burst copies {})",
        r.requests, r.unique_events, r.sent_resends, r.sent_retries, r.sent_burst_copies
    );
    let _ = writeln!(
        out,
        "accepted: {} duplicate: {} ignored: {} other_2xx: {} rejected_4xx: {} rate_limited: {} unavailable: {} errors: {} not_sent: {}",
        r.accepted,
        r.duplicate,
        r.ignored,
        r.other_2xx,
        r.rejected_4xx,
        r.rate_limited,
        r.unavailable,
        r.errors,
        r.not_sent
    );
    if let Some(e) = &r.first_error {
        let _ = writeln!(out, "first_error: {e}");
    }
    if r.gateway_pid.is_some() {
        let _ = writeln!(
            out,
            "gateway: cpu_seconds: {} cpu_cores: {} rss_peak_mib: {} vmhwm_mib: {} vmrss_mib: {}",
            opt(r.gateway_cpu_seconds),
            opt(r.gateway_cpu_cores),
            opt(r.gateway_rss_peak_mib),
            opt(r.gateway_vmhwm_mib),
            opt(r.gateway_vmrss_mib)
        );
    }
    if let Some(p99) = r.gateway_ack_p99_le_ms {
        let _ = writeln!(
            out,
            "gateway_ack_p99_le_ms (the gateway's own histogram, arrival to answer): {p99}"
        );
    }
    let _ = writeln!(out, "bench_cpu_seconds: {}", opt(r.bench_cpu_seconds));
    match &r.verification {
        Some(v) => {
            let _ = writeln!(
                out,
                "store: acknowledged_events: {} stored_events: {} missing: {} accepted_twice: {} inconsistent_ids: {} unknown_stored: {} stored_unacknowledged: {} inbox_rows_added: {} waiting_for_processing: {}",
                v.acknowledged_events,
                v.stored_events,
                v.missing,
                v.accepted_twice,
                v.inconsistent_ids,
                v.unknown_stored,
                v.stored_unacknowledged,
                v.inbox_rows_added,
                v.waiting_for_processing
            );
            for p in &v.problems {
                let _ = writeln!(out, "store problem: {p}");
            }
            let _ = writeln!(out, "store_verified: {}", v.store_verified);
        }
        None => {
            let _ = writeln!(out, "store_verified: - (ceiling run: no store)");
        }
    }
    out
}
