//! `hookgate bench`: a load generator for a running gateway (or, with `--ceiling`, for a
//! built-in sink measuring the HTTP ceiling), with store verification afterwards.
//!
//! Module map: [`plan`] builds and signs the traffic ahead of time (bodies, ids, duplicates),
//! [`load`] sends it (open or closed loop, HDR latency from the intended send time), [`sink`]
//! is the `--ceiling` target, [`verify`] checks the store, [`procstat`] reads the gateway's
//! CPU and memory from `/proc`, [`gateway_metrics`] scrapes the gateway's own ack latency,
//! [`report`] is what a run prints and writes. `scripts/bench.sh` drives it; results are in
//! `BENCHMARKS.md`.
//!
//! This crate does not depend on the `hookgate` crate (which embeds it as the `bench`
//! subcommand): what it needs from the gateway's configuration and store comes through
//! [`GatewayConfig`], implemented by the embedding binary.

pub mod gateway_metrics;
pub mod load;
pub mod plan;
pub mod procstat;
pub mod report;
pub mod sink;
pub mod verify;

use std::future::Future;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use hdrhistogram::Histogram;
use hookgate_providers::SecretMaterial;
use hookgate_providers::pack::Pack;
use hookgate_store::SharedStore;

use gateway_metrics::AckHistogram;
use load::{LoadOptions, Outcome};
use plan::{BodySize, Kind, PlanOptions, Planner, Produced};
pub use report::{Report, render};

/// What the bench reads from the configuration of the gateway it measures. The embedding
/// binary implements it over its own configuration, so this crate needs neither the gateway's
/// config loader nor its store wiring.
pub trait GatewayConfig: Sized {
    /// Loads and validates the configuration file at `path`.
    fn load(path: &Path) -> anyhow::Result<Self>;
    /// The endpoint named `id`, or `None` when the configuration has none.
    fn endpoint(&self, id: &str) -> Option<Endpoint>;
    /// The URL of `endpoint` on the configured webhook listener (the target without `--url`).
    fn webhook_url(&self, endpoint: &str) -> String;
    /// The configured admin listener, whose `/metrics` gives the gateway's own ack latency.
    fn admin_listen(&self) -> Option<SocketAddr>;
    /// The store URL as the report shows it, credentials redacted.
    fn store_label(&self) -> String;
    /// Opens the configured store for the verification (a `--ceiling` run never calls it).
    fn open_store(&self) -> impl Future<Output = anyhow::Result<SharedStore>>;
}

/// The endpoint traffic is signed for and sent to.
#[derive(Debug, Clone)]
pub struct Endpoint {
    pub id: String,
    /// The endpoint's provider pack.
    pub pack: &'static Pack,
    /// A secret version trusted now, to sign with; `None` fails the run before sending.
    pub signing_secret: Option<Arc<SecretMaterial>>,
    /// Bodies are capped at this size.
    pub max_body_bytes: usize,
}

#[derive(Debug, clap::Args)]
pub struct BenchArgs {
    #[arg(long, short)]
    pub config: PathBuf,
    /// Endpoint id from the configuration (its provider and secret sign the traffic).
    #[arg(long)]
    pub endpoint: String,
    /// Target requests per second (open loop); 0 = closed loop with --connections workers.
    #[arg(long)]
    pub rate: u64,
    /// Seconds of sending (answers are then awaited up to --drain-timeout).
    #[arg(long)]
    pub duration: f64,
    /// Also write the results as JSON to this file.
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Target URL; default: the configured listener and the endpoint's path. Plain HTTP only.
    #[arg(long)]
    pub url: Option<String>,
    /// Persistent HTTP/1.1 connections (closed loop: concurrent requests; open loop: the
    /// most in flight at once, further due requests wait and that wait counts as latency).
    #[arg(long, default_value_t = 64)]
    pub connections: usize,
    /// Share of requests that repeat an event: exact re-sends, provider-style retries (new
    /// timestamp and signature), and bursts of 2-8 concurrent copies.
    #[arg(long, default_value_t = 0.1)]
    pub duplicates: f64,
    /// `mixed` (~10 KiB average, 0.5 % tail of 128 KiB-1 MiB) or a fixed size (`10KiB`);
    /// capped at the endpoint's max_body_bytes.
    #[arg(long, default_value = "mixed")]
    pub body_size: BodySize,
    /// Send the same traffic to a built-in sink that only reads the body and answers 200
    /// (the HTTP ceiling); no store verification.
    #[arg(long)]
    pub ceiling: bool,
    /// Report this local process's CPU seconds and RSS (the gateway's pid).
    #[arg(long)]
    pub gateway_pid: Option<u32>,
    /// Seconds to wait for outstanding answers after the sending period.
    #[arg(long, default_value_t = 10.0)]
    pub drain_timeout: f64,
    /// Seconds one request may take before it counts as an error.
    #[arg(long, default_value_t = 10.0)]
    pub request_timeout: f64,
    /// Requests planned and signed before the clock starts (and refilled in bulk when three
    /// quarters are sent). Default: open loop, the whole run; closed loop,
    /// min(200,000, 20,000 x duration).
    #[arg(long)]
    pub plan_ahead: Option<usize>,
    /// Seed of the traffic plan (sizes, duplicates); random when absent.
    #[arg(long)]
    pub seed: Option<u64>,
    /// Free text copied into the JSON (the benchmark script names its runs with it).
    #[arg(long)]
    pub label: Option<String>,
}

/// Runs `hookgate bench` on its own runtime; returns the exit code (1 when the store
/// verification fails).
pub fn run_blocking<C: GatewayConfig>(args: BenchArgs) -> anyhow::Result<i32> {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()?;
    let report = runtime.block_on(run::<C>(args))?;
    Ok(if report.store_verified == Some(false) {
        1
    } else {
        0
    })
}

/// Runs the benchmark, prints the report and writes the JSON.
pub async fn run<C: GatewayConfig>(args: BenchArgs) -> anyhow::Result<Report> {
    if !(0.0..1.0).contains(&args.duplicates) {
        bail!("--duplicates must be in [0, 1)");
    }
    if args.duration.is_nan() || args.duration <= 0.0 || args.duration > 24.0 * 3600.0 {
        bail!("--duration must be positive seconds");
    }
    if args.connections == 0 {
        bail!("--connections must be at least 1");
    }
    let config = C::load(&args.config)?;
    let Some(endpoint) = config.endpoint(&args.endpoint) else {
        bail!(
            "no endpoint {:?} in {}",
            args.endpoint,
            args.config.display()
        );
    };

    let sink = if args.ceiling {
        Some(sink::start().context("starting the ceiling sink")?)
    } else {
        None
    };
    let url = match &sink {
        Some(s) => format!("http://{}/webhooks/{}", s.addr, endpoint.id),
        None => args
            .url
            .clone()
            .unwrap_or_else(|| config.webhook_url(&endpoint.id)),
    };
    let uri: http::Uri = url.parse().with_context(|| format!("bad URL {url:?}"))?;
    if uri.scheme_str() != Some("http") {
        bail!("bench speaks plain HTTP only; point --url at an http:// listener (got {url})");
    }
    let authority = uri.authority().context("URL has no host")?.clone();
    let port = authority.port_u16().unwrap_or(80);
    let target = tokio::net::lookup_host((authority.host(), port))
        .await?
        .next()
        .with_context(|| format!("cannot resolve {authority}"))?;
    let path: http::Uri = uri
        .path_and_query()
        .map(|p| p.as_str())
        .unwrap_or("/")
        .parse()?;

    let run_id = format!("{:08x}", rand::random::<u32>());
    let planner = Arc::new(Planner::new(&endpoint, &run_id, authority.as_str())?);

    // The store, before the run (also proves it is reachable before sending anything).
    let store = if args.ceiling {
        None
    } else {
        let store = config.open_store().await?;
        // The endpoint's rows, not the whole inbox: retention may delete other rows meanwhile.
        let before = store.distinct_event_ids(&endpoint.id).await?.len() as u64;
        Some((store, before))
    };

    // Plan and sign ahead; fill the channel before the clock starts.
    let total = (args.rate > 0).then(|| (args.rate as f64 * args.duration).ceil() as u64);
    // A planned request costs about a kilobyte (bodies share their padding), so plan the
    // whole open-loop run, or up to 200,000 requests of a closed-loop one, before the clock
    // starts; a longer run keeps signing on the producer thread, ahead of the sender.
    let capacity = args
        .plan_ahead
        .unwrap_or_else(|| match total {
            Some(t) => t.min(2_000_000) as usize,
            None => (20_000.0 * args.duration).min(200_000.0) as usize,
        })
        .max(1);
    let (tx, rx) = tokio::sync::mpsc::channel(capacity);
    let produced = Arc::new(Produced::default());
    let plan_options = PlanOptions {
        body_size: args.body_size,
        duplicates: args.duplicates,
        seed: args.seed.unwrap_or_else(rand::random),
        total,
    };
    let producer = {
        let planner = planner.clone();
        let produced = produced.clone();
        std::thread::Builder::new()
            .name("bench-plan".into())
            .spawn(move || plan::produce(&planner, &plan_options, tx, &produced))?
    };
    let prefill_started = Instant::now();
    while (produced.requests.load(Ordering::Relaxed) as usize) < capacity && !producer.is_finished()
    {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    eprintln!(
        "bench: {} requests signed ahead in {:.2}s; sending to {url} for {}s ({})",
        produced.requests.load(Ordering::Relaxed),
        prefill_started.elapsed().as_secs_f64(),
        args.duration,
        if args.rate > 0 {
            format!("open loop at {}/s", args.rate)
        } else {
            format!("closed loop, {} connections", args.connections)
        }
    );

    // The gateway's own histogram, when it is the config's own listener (not `--url`).
    let admin = config
        .admin_listen()
        .filter(|_| !args.ceiling && args.url.is_none());
    let ack_before = admin.and_then(|a| AckHistogram::scrape(a, &endpoint.id));
    let pid = args.gateway_pid.map(|p| p.to_string());
    let cpu_before = pid.as_deref().and_then(procstat::cpu_seconds);
    let self_cpu_before = procstat::cpu_seconds("self");
    let sampler = pid.clone().map(procstat::RssSampler::start);

    let result = load::run(
        LoadOptions {
            target,
            path,
            rate: args.rate,
            connections: args.connections,
            duration: Duration::from_secs_f64(args.duration),
            drain_timeout: Duration::from_secs_f64(args.drain_timeout),
            request_timeout: Duration::from_secs_f64(args.request_timeout),
        },
        rx,
    )
    .await;
    let _ = producer.join();

    let cpu_after = pid.as_deref().and_then(procstat::cpu_seconds);
    let self_cpu_after = procstat::cpu_seconds("self");
    let gateway_ack_p99_le_ms = admin
        .and_then(|a| AckHistogram::scrape(a, &endpoint.id))
        .zip(ack_before)
        .and_then(|(after, before)| after.p99_upper_bound_ms(&before));
    let rss_peak = sampler.as_ref().map(|s| s.peak_mib());
    drop(sampler);
    drop(sink);

    let count = |o: Outcome| result.records.iter().filter(|r| r.outcome == o).count() as u64;
    let count_kind = |k: Kind| {
        result
            .records
            .iter()
            .filter(|r| r.kind == k && r.outcome != Outcome::NotSent)
            .count() as u64
    };
    let elapsed = result.elapsed.as_secs_f64().max(1e-9);
    let successes = result
        .records
        .iter()
        .filter(|r| r.outcome.is_success())
        .count() as u64;
    let responses = result
        .records
        .iter()
        .filter(|r| !matches!(r.outcome, Outcome::Error | Outcome::NotSent))
        .count() as u64;
    let sent = result
        .records
        .iter()
        .filter(|r| r.outcome != Outcome::NotSent)
        .count() as u64;
    let planned = produced.requests.load(Ordering::Relaxed).max(1);
    let mean_body = produced.bytes.load(Ordering::Relaxed) as f64 / planned as f64;
    let ms = |h: &Histogram<u64>, q: f64| {
        if h.is_empty() {
            0.0
        } else {
            h.value_at_quantile(q) as f64 / 1000.0
        }
    };

    let verification = match &store {
        Some((store, before)) => {
            let v = verify::verify(
                store,
                &endpoint.id,
                &planner.prefix,
                *before,
                &result.records,
            )
            .await?;
            store.close().await;
            Some(v)
        }
        None => None,
    };

    let report = Report {
        label: args.label.clone(),
        mode: if args.rate > 0 { "open" } else { "closed" },
        ceiling: args.ceiling,
        target: url,
        endpoint: endpoint.id.clone(),
        provider: endpoint.pack.id(),
        store: (!args.ceiling).then(|| config.store_label()),
        rate_target: args.rate,
        duration_s: args.duration,
        connections: args.connections,
        duplicates_share: args.duplicates,
        body_size: match args.body_size {
            BodySize::Mixed => "mixed".into(),
            BodySize::Fixed(n) => n.to_string(),
        },
        event_id_prefix: planner.prefix.clone(),
        elapsed_s: round3(elapsed),
        achieved_rps: round1(successes as f64 / elapsed),
        responses_rps: round1(responses as f64 / elapsed),
        p50_ms: ms(&result.ack_latency, 0.5),
        p90_ms: ms(&result.ack_latency, 0.9),
        p99_ms: ms(&result.ack_latency, 0.99),
        p999_ms: ms(&result.ack_latency, 0.999),
        max_ms: ms(&result.ack_latency, 1.0),
        mean_ms: round3(result.ack_latency.mean() / 1000.0),
        all_p99_ms: ms(&result.all_latency, 0.99),
        requests: sent,
        accepted: count(Outcome::Accepted),
        duplicate: count(Outcome::Duplicate),
        ignored: count(Outcome::Ignored),
        other_2xx: count(Outcome::OtherSuccess),
        rejected_4xx: count(Outcome::Rejected4xx),
        rate_limited: count(Outcome::RateLimited),
        unavailable: count(Outcome::Unavailable),
        errors: count(Outcome::Error),
        not_sent: result.unfinished,
        unique_events: count_kind(Kind::Original),
        sent_resends: count_kind(Kind::Resend),
        sent_retries: count_kind(Kind::Retry),
        sent_burst_copies: count_kind(Kind::Burst),
        mean_body_bytes: round1(mean_body),
        body_mib_per_s: round3(sent as f64 * mean_body / elapsed / (1024.0 * 1024.0)),
        gateway_pid: args.gateway_pid,
        gateway_cpu_seconds: cpu_after.zip(cpu_before).map(|(a, b)| round3(a - b)),
        gateway_cpu_cores: cpu_after
            .zip(cpu_before)
            .map(|(a, b)| round3((a - b) / elapsed)),
        gateway_rss_peak_mib: rss_peak.map(round1),
        gateway_vmhwm_mib: pid
            .as_deref()
            .and_then(|p| procstat::status_mib(p, "VmHWM"))
            .map(round1),
        gateway_vmrss_mib: pid
            .as_deref()
            .and_then(|p| procstat::status_mib(p, "VmRSS"))
            .map(round1),
        gateway_ack_p99_le_ms,
        bench_cpu_seconds: self_cpu_after
            .zip(self_cpu_before)
            .map(|(a, b)| round3(a - b)),
        store_verified: verification.as_ref().map(|v| v.store_verified),
        verification,
        first_error: result.first_error,
        machine_cpus: std::thread::available_parallelism()
            .map(|n| n.get())
            .unwrap_or(1),
    };

    print!("{}", render(&report));
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report)?;
        std::fs::write(path, text + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(report)
}

fn round1(v: f64) -> f64 {
    (v * 10.0).round() / 10.0
}

fn round3(v: f64) -> f64 {
    (v * 1000.0).round() / 1000.0
}
