//! `hookgate jobs create|show|list|pause|resume|cancel`: bulk jobs through the operator API
//! (`--url`, the token in `HOOKGATE_ADMIN_TOKEN`). `show --watch` draws a progress bar on
//! standard error until the job ends, then prints the job as JSON like `show`.

use std::time::Duration;

use clap::{Args, Subcommand};
use serde_json::{Value, json};

use super::events_api::{ApiClient, Filters, refused};

#[derive(Debug, Subcommand)]
pub enum JobsCommand {
    /// Create a bulk job: an action over the events the filters select.
    Create(Box<CreateArgs>),
    /// Show one job (with --watch: a progress bar until it ends).
    Show {
        #[command(flatten)]
        api: ApiArgs,
        id: String,
        /// Follow its progress until it is done, failed, cancelled or paused.
        #[arg(long)]
        watch: bool,
        /// How often --watch asks, in milliseconds.
        #[arg(long, default_value_t = 500)]
        interval_ms: u64,
    },
    /// List jobs, newest first.
    List {
        #[command(flatten)]
        api: ApiArgs,
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Pause a pending or running job.
    Pause {
        #[command(flatten)]
        api: ApiArgs,
        id: String,
    },
    /// Resume a paused job from where it stopped.
    Resume {
        #[command(flatten)]
        api: ApiArgs,
        id: String,
    },
    /// Cancel a job that has not ended.
    Cancel {
        #[command(flatten)]
        api: ApiArgs,
        id: String,
    },
}

#[derive(Debug, Clone, Args)]
pub struct ApiArgs {
    /// The admin listener (e.g. http://127.0.0.1:9090); the token is read from
    /// HOOKGATE_ADMIN_TOKEN.
    #[arg(long)]
    pub url: String,
}

#[derive(Debug, Clone, Args)]
pub struct CreateArgs {
    #[command(flatten)]
    pub api: ApiArgs,
    /// retry, replay or redeliver.
    #[arg(long)]
    pub action: String,
    #[command(flatten)]
    pub filters: Filters,
    /// For redeliver: the destination to deliver to again. (The filter's own
    /// `--destination` selects events by their deliveries; this names the target.)
    #[arg(long = "to")]
    pub to: Option<String>,
    /// For redeliver: a new Idempotency-Key per event.
    #[arg(long)]
    pub fresh_key: bool,
}

pub fn run(command: JobsCommand) -> anyhow::Result<i32> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(run_async(command))
}

fn print(v: &Value) {
    println!("{}", serde_json::to_string_pretty(v).unwrap_or_default());
}

async fn run_async(command: JobsCommand) -> anyhow::Result<i32> {
    let get = reqwest::Method::GET;
    let post = reqwest::Method::POST;
    let (client, method, path, query, body, watch) = match command {
        JobsCommand::Create(a) => {
            let a = *a;
            let filter: serde_json::Map<String, Value> = a
                .filters
                .pairs()
                .into_iter()
                .map(|(k, v)| (k.to_owned(), Value::String(v)))
                .collect();
            let mut body = json!({ "action": a.action, "filter": filter });
            if let Some(to) = a.to {
                body["destination"] = Value::String(to);
            }
            if a.fresh_key {
                body["fresh_key"] = Value::Bool(true);
            }
            (
                a.api,
                post,
                "/api/v1/jobs".to_owned(),
                Vec::new(),
                Some(body),
                None,
            )
        }
        JobsCommand::Show {
            api,
            id,
            watch,
            interval_ms,
        } => (
            api,
            get,
            format!("/api/v1/jobs/{id}"),
            Vec::new(),
            None,
            watch.then_some(Duration::from_millis(interval_ms.max(50))),
        ),
        JobsCommand::List { api, limit } => (
            api,
            get,
            "/api/v1/jobs".to_owned(),
            vec![("limit", limit.to_string())],
            None,
            None,
        ),
        JobsCommand::Pause { api, id } => control(api, &id, "pause"),
        JobsCommand::Resume { api, id } => control(api, &id, "resume"),
        JobsCommand::Cancel { api, id } => control(api, &id, "cancel"),
    };
    let api = ApiClient::new(&client.url)?;
    let first = match api.call(method, &path, &query, body).await? {
        Ok(v) => v,
        Err(r) => return Ok(refused(&r)),
    };
    let Some(interval) = watch else {
        print(&first);
        return Ok(0);
    };
    let job = follow(&api, &path, first, interval).await?;
    print(&job);
    Ok(if job["state"] == "failed" { 1 } else { 0 })
}

type Request = (
    ApiArgs,
    reqwest::Method,
    String,
    Vec<(&'static str, String)>,
    Option<Value>,
    Option<Duration>,
);

fn control(api: ApiArgs, id: &str, what: &str) -> Request {
    (
        api,
        reqwest::Method::POST,
        format!("/api/v1/jobs/{id}/{what}"),
        Vec::new(),
        None,
        None,
    )
}

fn counts(job: &Value) -> (Option<u64>, u64, u64) {
    let p = &job["progress"];
    (
        p["total"].as_u64(),
        p["done"].as_u64().unwrap_or(0),
        p["failed"].as_u64().unwrap_or(0),
    )
}

/// Polls the job and draws its progress until it stops moving for good (or is paused).
async fn follow(
    api: &ApiClient,
    path: &str,
    mut job: Value,
    interval: Duration,
) -> anyhow::Result<Value> {
    let bar = indicatif::ProgressBar::new(0);
    bar.set_style(
        indicatif::ProgressStyle::with_template(
            "{prefix} [{bar:40}] {pos}/{len} ({per_sec}, eta {eta}) {msg}",
        )
        .map_err(|e| anyhow::anyhow!("progress bar: {e}"))?
        .progress_chars("=> "),
    );
    bar.set_prefix(format!(
        "{} {}",
        job["action"].as_str().unwrap_or("job"),
        job["id"].as_str().unwrap_or("")
    ));
    loop {
        let (total, done, failed) = counts(&job);
        bar.set_length(total.unwrap_or(0));
        bar.set_position(done + failed);
        let state = job["state"].as_str().unwrap_or("").to_owned();
        bar.set_message(format!("{state}, {failed} failed"));
        if matches!(state.as_str(), "done" | "failed" | "cancelled" | "paused") {
            bar.finish();
            return Ok(job);
        }
        tokio::time::sleep(interval).await;
        job = match api.call(reqwest::Method::GET, path, &[], None).await? {
            Ok(v) => v,
            Err(r) => anyhow::bail!("the job could not be read: {} {}", r.status, r.body),
        };
    }
}
