//! hookgate's crash proof (run by `scripts/chaos.sh`; RELIABILITY.md says what it proves).
//!
//! Against the real binary: provider-style traffic from concurrent senders, while the gateway
//! is killed with SIGKILL at random moments and restarted, the database (PostgreSQL) and the
//! NATS server are stopped for a while and started again. Then one last instance recovers and
//! drains (waiting on its backlog gauges, bounded), stops, and the store, the HTTP receiver's
//! record and the NATS stream are checked (see `verify.rs`). Prints a JSON summary; exits 1 on
//! any violation. Every socket is on 127.0.0.1.

mod body;
mod gateway;
mod nats;
mod receiver;
mod traffic;
mod verify;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clap::Parser;
use rand::Rng;
use tokio::sync::watch;

use crate::gateway::{Gateway, GatewayCommand};

/// The one endpoint the runner configures and sends to.
pub(crate) const ENDPOINT: &str = "chaos";

#[derive(Debug, Parser)]
#[command(
    about = "Kills hookgate repeatedly under provider traffic, then checks nothing was lost or applied twice"
)]
struct Args {
    /// The hookgate binary under test.
    #[arg(long)]
    binary: PathBuf,
    /// `sqlite` or `postgres` (only used to name the run).
    #[arg(long)]
    backend: String,
    /// The store URL; SQLite default: a database in --work-dir.
    #[arg(long)]
    store_url: Option<String>,
    /// Directory for the config, logs and (SQLite) the database.
    #[arg(long)]
    work_dir: PathBuf,
    /// kill -9 cycles.
    #[arg(long, default_value_t = 100)]
    cycles: u32,
    /// Concurrent provider senders.
    #[arg(long, default_value_t = 8)]
    senders: usize,
    /// Uptime after the listening line before the kill, uniform in [min, max] ms.
    #[arg(long, default_value_t = 200)]
    uptime_min_ms: u64,
    #[arg(long, default_value_t = 1500)]
    uptime_max_ms: u64,
    /// Every Nth cycle (from N/2 on; never an outage cycle) is killed during start-up instead
    /// (before its listening line).
    #[arg(long, default_value_t = 10)]
    startup_kill_every: u32,
    /// Stop the database (pg_ctl stop -m immediate) every Nth cycle; 0: never.
    #[arg(long, default_value_t = 10)]
    db_outage_every: u32,
    /// pg_ctl, the cluster's data directory and server log, and the user to run pg_ctl as.
    #[arg(long)]
    pg_ctl: Option<PathBuf>,
    #[arg(long)]
    pg_data: Option<PathBuf>,
    #[arg(long)]
    pg_log: Option<PathBuf>,
    #[arg(long)]
    pg_user: Option<String>,
    /// nats-server binary; without it there is no NATS destination.
    #[arg(long)]
    nats_server: Option<PathBuf>,
    /// Stop the NATS server every Nth cycle; 0: never.
    #[arg(long, default_value_t = 7)]
    nats_outage_every: u32,
    /// Outage length, uniform in [min, max] ms.
    #[arg(long, default_value_t = 1000)]
    outage_min_ms: u64,
    #[arg(long, default_value_t = 3000)]
    outage_max_ms: u64,
    /// Share of HTTP deliveries the receiver refuses with 503.
    #[arg(long, default_value_t = 0.05)]
    refuse_share: f64,
    /// Bound on the final recovery and drain.
    #[arg(long, default_value_t = 180)]
    drain_timeout_s: u64,
    /// Stop cycling after this many seconds even if cycles remain (reported).
    #[arg(long, default_value_t = 3600)]
    max_seconds: u64,
    /// Also write the summary here.
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Debug, Default, serde::Serialize)]
struct Summary {
    backend: String,
    ok: bool,
    cycles: u32,
    cycles_requested: u32,
    kills_during_startup: u32,
    kills_while_serving: u32,
    database_outages_survived: u32,
    nats_outages_survived: u32,
    chaos_seconds: f64,
    drain_seconds: f64,
    /// Inbox rows RECEIVED and outbox rows PENDING when the drain began (after the senders
    /// finished): how far processing and delivery were behind.
    backlog_when_senders_finished: [u64; 2],
    total_seconds: f64,
    events_sent: u64,
    acknowledged: u64,
    lost: u64,
    duplicate_rows: u64,
    duplicate_outbox_rows: u64,
    deliveries: u64,
    duplicate_deliveries_on_wire: u64,
    nats_deliveries: u64,
    nats_duplicates_in_stream: u64,
    violations: u64,
    traffic: traffic::TrafficCounts,
    verification: verify::Verification,
    unexpected_answers: Vec<String>,
}

struct Postgres {
    pg_ctl: PathBuf,
    data: PathBuf,
    log: PathBuf,
    user: Option<String>,
}

impl Postgres {
    fn command(&self) -> std::process::Command {
        let mut c = match &self.user {
            Some(u) => {
                let mut c = std::process::Command::new("runuser");
                c.args(["-u", u, "--"]).arg(&self.pg_ctl);
                c
            }
            None => std::process::Command::new(&self.pg_ctl),
        };
        c.arg("-D").arg(&self.data);
        c.stdin(std::process::Stdio::null());
        c
    }

    async fn run(&self, args: &[&str]) -> anyhow::Result<()> {
        let mut c = self.command();
        c.arg("-l").arg(&self.log).args(args);
        let out = tokio::task::spawn_blocking(move || c.output()).await??;
        if !out.status.success() {
            bail!(
                "pg_ctl {args:?} failed: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    }

    /// The outage: an immediate stop (no checkpoint, connections cut: a crash for the server).
    async fn stop_immediate(&self) -> anyhow::Result<()> {
        self.run(&["stop", "-w", "-t", "60", "-m", "immediate"])
            .await
    }

    async fn start(&self) -> anyhow::Result<()> {
        self.run(&["start", "-w", "-t", "60"]).await
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    let args = Args::parse();
    match run(args).await {
        Ok(summary) => {
            println!(
                "{}",
                serde_json::to_string_pretty(&summary).unwrap_or_default()
            );
            if summary.ok {
                std::process::ExitCode::SUCCESS
            } else {
                eprintln!(
                    "chaos: {} violation(s) on {}: {:?}",
                    summary.violations, summary.backend, summary.verification.problems
                );
                std::process::ExitCode::FAILURE
            }
        }
        Err(e) => {
            eprintln!("chaos: the run could not complete: {e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

fn random_ms(min: u64, max: u64) -> Duration {
    Duration::from_millis(rand::thread_rng().gen_range(min..=max.max(min)))
}

async fn run(args: Args) -> anyhow::Result<Summary> {
    let started = Instant::now();
    std::fs::create_dir_all(&args.work_dir)?;
    let work = args.work_dir.canonicalize()?;
    let store_url = match &args.store_url {
        Some(u) => u.clone(),
        None => format!("sqlite://{}", work.join("hookgate.db").display()),
    };
    let postgres = match (&args.pg_ctl, &args.pg_data) {
        (Some(pg_ctl), Some(data)) => Some(Postgres {
            pg_ctl: pg_ctl.clone(),
            data: data.clone(),
            log: args
                .pg_log
                .clone()
                .unwrap_or_else(|| work.join("postgres.log")),
            user: args.pg_user.clone(),
        }),
        _ => None,
    };
    let receiver = receiver::Receiver::start(args.refuse_share).await?;
    let mut nats = match &args.nats_server {
        Some(bin) => {
            let dir = work.join("nats");
            std::fs::create_dir_all(&dir)?;
            Some(nats::NatsServer::start(bin.clone(), dir, work.join("nats.log")).await?)
        }
        None => None,
    };
    let secret = format!("whsec_chaos_{:016x}", rand::thread_rng().r#gen::<u64>());
    let payload_key: [u8; 32] = rand::thread_rng().r#gen();
    let cmd = GatewayCommand {
        binary: args.binary.clone(),
        config: work.join("hookgate.toml"),
        log: work.join("gateway.log"),
    };
    gateway::write_config(
        &cmd.config,
        &store_url,
        receiver.addr,
        nats.as_ref().map(nats::NatsServer::url).as_deref(),
    )?;
    let env = [
        (
            "HOOKGATE_CHAOS_PAYLOAD_KEY",
            base64::Engine::encode(&base64::engine::general_purpose::STANDARD, payload_key),
        ),
        ("HOOKGATE_CHAOS_STRIPE_SECRET", secret.clone()),
    ];
    let cmd = Env { cmd, env };

    let (target_tx, target_rx) = watch::channel::<Option<SocketAddr>>(None);
    let run_id = format!("{:08x}", rand::thread_rng().r#gen::<u32>());
    let traffic = traffic::Traffic::new(run_id, &secret, target_rx)?;
    let senders = traffic.spawn(args.senders);

    let mut s = Summary {
        backend: args.backend.clone(),
        cycles_requested: args.cycles,
        ..Summary::default()
    };
    let chaos_started = Instant::now();
    for cycle in 1..=args.cycles {
        if chaos_started.elapsed() > Duration::from_secs(args.max_seconds) {
            eprintln!("chaos: --max-seconds reached after {} cycles", s.cycles);
            break;
        }
        if cycle % 10 == 1 && cycle > 1 {
            eprintln!(
                "chaos: {} cycle {cycle}/{} ({:.0} s), {} events so far",
                args.backend,
                args.cycles,
                chaos_started.elapsed().as_secs_f64(),
                traffic.ledger.lock().map(|l| l.len()).unwrap_or(0)
            );
        }
        let due = |every: u32| every > 0 && cycle % every == 0;
        let db_outage = postgres.is_some() && due(args.db_outage_every);
        let nats_outage = nats.is_some() && due(args.nats_outage_every);
        let mut gw = cmd.spawn()?;
        // Start-up kills are offset by half a period, and outage cycles (which need a serving
        // gateway) are never start-up kills.
        let startup_kill = args.startup_kill_every > 0
            && cycle % args.startup_kill_every == args.startup_kill_every / 2;
        if startup_kill && !db_outage && !nats_outage {
            // A kill during start-up: migrations, pool, listeners half done.
            tokio::time::sleep(random_ms(0, 300)).await;
            gw.kill9().await?;
            s.kills_during_startup += 1;
            s.cycles += 1;
            continue;
        }
        let l = gw
            .wait_listening(Duration::from_secs(30))
            .await
            .with_context(|| {
                format!(
                    "cycle {cycle}: the gateway did not start (see {})",
                    cmd.cmd.log.display()
                )
            })?;
        target_tx.send_replace(Some(l.webhook));
        let uptime = random_ms(args.uptime_min_ms, args.uptime_max_ms);
        // The database outage starts halfway through the uptime; the NATS outage at once.
        let mut served = Duration::ZERO;
        if let Some(pg) = postgres.as_ref().filter(|_| db_outage) {
            tokio::time::sleep(uptime / 2).await;
            served = uptime / 2;
            pg.stop_immediate().await.context("stop the database")?;
            let d = random_ms(args.outage_min_ms, args.outage_max_ms);
            tokio::time::sleep(d).await;
            pg.start().await.context("start the database again")?;
            s.database_outages_survived += 1;
        }
        if let Some(n) = nats.as_mut().filter(|_| nats_outage) {
            n.down().await.context("stop nats-server")?;
            let d = random_ms(args.outage_min_ms, args.outage_max_ms);
            tokio::time::sleep(d).await;
            n.up().await.context("start nats-server again")?;
            s.nats_outages_survived += 1;
        }
        tokio::time::sleep(uptime - served).await;
        target_tx.send_replace(None);
        gw.kill9().await?;
        s.kills_while_serving += 1;
        s.cycles += 1;
    }
    s.chaos_seconds = chaos_started.elapsed().as_secs_f64();

    // Final recovery: one last instance, the senders finish the events they started, then the
    // backlog drains (bounded).
    let drain_started = Instant::now();
    let deadline = drain_started + Duration::from_secs(args.drain_timeout_s);
    traffic.finish();
    let mut gw = cmd.spawn()?;
    let l = gw.wait_listening(Duration::from_secs(30)).await?;
    target_tx.send_replace(Some(l.webhook));
    for h in senders {
        let left = deadline.saturating_duration_since(Instant::now());
        if tokio::time::timeout(left, h).await.is_err() {
            traffic.stop();
        }
    }
    traffic.stop();
    let mut backlog = None;
    let drained = wait_drained(l.admin, deadline, &mut backlog).await;
    if let Some((inbox, outbox)) = backlog {
        s.backlog_when_senders_finished = [inbox as u64, outbox as u64];
    }
    target_tx.send_replace(None);
    gw.stop(Duration::from_secs(30)).await?;
    s.drain_seconds = drain_started.elapsed().as_secs_f64();
    if let Err(e) = &drained {
        eprintln!("chaos: {e}");
    }

    let stream = match &nats {
        Some(n) => Some(nats::read_stream(&n.url()["nats://".len()..]).await?),
        None => None,
    };
    let store = hookgate_store::open(&store_url, hookgate_store::OpenOptions::default())
        .await
        .context("open the store for the checks")?;
    let mut destinations = vec!["receiver"];
    if nats.is_some() {
        destinations.push("nats");
    }
    let v = verify::verify(
        &store,
        &traffic.ledger(),
        &receiver.snapshot(),
        stream.as_ref(),
        &destinations,
    )
    .await?;
    store.close().await;
    if let Some(n) = nats.as_mut() {
        n.down().await?;
    }
    s.traffic = traffic.counts();
    s.unexpected_answers = traffic.unexpected_examples();
    s.events_sent = v.events_sent;
    s.acknowledged = v.acknowledged;
    s.lost = v.lost;
    s.duplicate_rows = v.duplicate_rows;
    s.duplicate_outbox_rows = v.duplicate_outbox_rows;
    s.deliveries = v.http_deliveries;
    s.duplicate_deliveries_on_wire = v.http_duplicate_deliveries_on_wire;
    s.nats_deliveries = v.nats_deliveries;
    s.nats_duplicates_in_stream = v.nats_duplicates_in_stream;
    s.violations = v.violations() + s.traffic.unexpected_status + u64::from(drained.is_err());
    if drained.is_err() {
        s.unexpected_answers.push(format!("{drained:?}"));
    }
    s.verification = v;
    s.ok = s.violations == 0;
    s.total_seconds = started.elapsed().as_secs_f64();
    if let Some(path) = &args.json {
        std::fs::write(path, serde_json::to_string_pretty(&s)?)?;
    }
    Ok(s)
}

/// The gateway command with the run's secrets in its environment.
struct Env {
    cmd: GatewayCommand,
    env: [(&'static str, String); 2],
}

impl Env {
    fn spawn(&self) -> anyhow::Result<Gateway> {
        self.cmd.spawn_with_env(&self.env)
    }
}

/// Polls `/metrics` until the inbox has nothing `RECEIVED` and the outbox nothing `PENDING`
/// (twice in a row: the gauges are refreshed by each scrape), or the deadline.
async fn wait_drained(
    admin: SocketAddr,
    deadline: Instant,
    backlog_at_start: &mut Option<(f64, f64)>,
) -> anyhow::Result<()> {
    let mut clean = 0;
    let mut last = String::new();
    while Instant::now() < deadline {
        if let Ok(text) = get_metrics(admin).await {
            let received = gauge(&text, "hookgate_inbox_received");
            let pending = gauge(&text, "hookgate_outbox_pending");
            last = format!("inbox RECEIVED {received:?}, outbox PENDING {pending:?}");
            if backlog_at_start.is_none() {
                *backlog_at_start = received.zip(pending);
            }
            if received == Some(0.0) && pending == Some(0.0) {
                clean += 1;
                if clean == 2 {
                    return Ok(());
                }
            } else {
                clean = 0;
            }
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    bail!("not drained within the bound: {last}")
}

fn gauge(text: &str, name: &str) -> Option<f64> {
    let mut sum = None;
    for line in text.lines() {
        let Some(rest) = line.strip_prefix(name) else {
            continue;
        };
        if !(rest.starts_with(' ') || rest.starts_with('{')) {
            continue;
        }
        let value = rest.rsplit(' ').next()?.parse::<f64>().ok()?;
        *sum.get_or_insert(0.0) += value;
    }
    sum
}

async fn get_metrics(admin: SocketAddr) -> anyhow::Result<String> {
    let fetch = async {
        let stream = tokio::net::TcpStream::connect(admin).await?;
        let (mut sender, conn) =
            hyper::client::conn::http1::handshake(hyper_util::rt::TokioIo::new(stream)).await?;
        tokio::spawn(conn);
        let req = http::Request::get("/metrics")
            .header(http::header::HOST, admin.to_string())
            .body(http_body_util::Empty::<bytes::Bytes>::new())?;
        let body = sender.send_request(req).await?.into_body();
        let body = crate::body::read_bounded(body, 16 << 20).await?;
        anyhow::Ok(String::from_utf8_lossy(&body).into_owned())
    };
    tokio::time::timeout(Duration::from_secs(5), fetch)
        .await
        .context("metrics: timed out")?
}

#[cfg(test)]
mod tests {
    use super::gauge;

    #[test]
    fn gauges_are_summed_over_labels_and_not_confused_with_longer_names() {
        let text = "# TYPE hookgate_outbox_pending gauge\n\
                    hookgate_outbox_pending{destination=\"a\"} 2\n\
                    hookgate_outbox_pending{destination=\"b\"} 3\n\
                    hookgate_outbox_pending_age_seconds 9\n\
                    hookgate_inbox_received 0\n";
        assert_eq!(gauge(text, "hookgate_outbox_pending"), Some(5.0));
        assert_eq!(gauge(text, "hookgate_inbox_received"), Some(0.0));
        assert_eq!(gauge(text, "hookgate_inbox_failed"), None);
    }
}
