//! `hookgate keys status`: how many stored payloads each payload key version seals, which one
//! is active, and whether a version may be removed from the configuration (0 rows).

use std::path::PathBuf;

use clap::Subcommand;
use hookgate_store::KeyVersionRows;
use serde_json::json;

use crate::app::open_store;
use crate::config::Config;
use crate::telemetry;

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Stored payloads per key version (purged payloads pin no key).
    Status {
        #[arg(long, short)]
        config: PathBuf,
        /// One JSON object.
        #[arg(long)]
        json: bool,
    },
}

pub fn run(command: KeysCommand) -> anyhow::Result<i32> {
    let KeysCommand::Status { config, json } = command;
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async move {
        let config = Config::load(&config)?;
        telemetry::init_logging(&config.log);
        let store = open_store(&config).await?;
        let counts = store.payload_key_rows().await;
        store.close().await;
        let rows = status_rows(&config, &counts?);
        if json {
            println!("{}", to_json(config.payload_keys.active, &rows));
        } else {
            print!("{}", to_text(&rows));
        }
        Ok(0)
    })
}

/// One line of the status: a version that is configured, seals stored payloads, or both.
#[derive(Debug, Clone, PartialEq, Eq)]
struct VersionStatus {
    version: u32,
    rows: u64,
    active: bool,
    configured: bool,
}

fn status_rows(config: &Config, counts: &[KeyVersionRows]) -> Vec<VersionStatus> {
    let configured = config.payload_keys.versions();
    let mut versions: Vec<u32> = configured
        .iter()
        .copied()
        .chain(counts.iter().map(|c| c.version))
        .collect();
    versions.sort_unstable();
    versions.dedup();
    versions
        .into_iter()
        .map(|version| VersionStatus {
            version,
            rows: counts
                .iter()
                .find(|c| c.version == version)
                .map_or(0, |c| c.rows),
            active: version == config.payload_keys.active,
            configured: configured.contains(&version),
        })
        .collect()
}

fn to_json(active: u32, rows: &[VersionStatus]) -> serde_json::Value {
    json!({
        "active": active,
        "versions": rows.iter().map(|r| json!({
            "version": r.version,
            "rows": r.rows,
            "active": r.active,
            "configured": r.configured,
        })).collect::<Vec<_>>(),
        "pending_reseal": rows.iter().filter(|r| !r.active).map(|r| r.rows).sum::<u64>(),
    })
}

fn to_text(rows: &[VersionStatus]) -> String {
    let mut out = String::from("version  rows        state\n");
    for r in rows {
        let state = match (r.active, r.configured, r.rows) {
            (true, _, _) => "active",
            (false, true, 0) => "retired, no stored payload: may be removed",
            (false, true, _) => "retired, waiting to be re-sealed",
            (false, false, _) => "NOT CONFIGURED: these payloads cannot be opened",
        };
        out.push_str(&format!("{:<8} {:<11} {state}\n", r.version, r.rows));
    }
    out
}
