//! The `events` commands' two ways to the same operations: the operator API (`--url`, the
//! token from `HOOKGATE_ADMIN_TOKEN`) or the store directly (`--config`). Both page the list
//! (never loading every row, never a payload) and take the list's filters by the API's
//! names.

use std::path::PathBuf;

use clap::Args;
use serde_json::{Value, json};

/// Where the token for `--url` comes from.
pub const TOKEN_ENV: &str = "HOOKGATE_ADMIN_TOKEN";

/// Where an `events` command works: the store of a configuration, or an admin listener.
#[derive(Debug, Clone, Args)]
pub struct Target {
    /// The gateway's configuration: work on its store directly.
    #[arg(long, short, required_unless_present = "url", conflicts_with = "url")]
    pub config: Option<PathBuf>,
    /// The admin listener (e.g. http://127.0.0.1:9090): work through the operator API, with
    /// the token in HOOKGATE_ADMIN_TOKEN.
    #[arg(long)]
    pub url: Option<String>,
}

/// The list's filters (`GET /api/v1/events` parameters).
#[derive(Debug, Clone, Default, Args)]
pub struct Filters {
    /// received, processed, failed or ignored (failed also lists events with a FAILED
    /// delivery).
    #[arg(long)]
    pub status: Option<String>,
    #[arg(long)]
    pub provider: Option<String>,
    #[arg(long)]
    pub endpoint: Option<String>,
    /// A glob: * any run of characters, ? one.
    #[arg(long)]
    pub event_type: Option<String>,
    /// RFC 3339 or unix ms (inclusive).
    #[arg(long)]
    pub received_after: Option<String>,
    /// RFC 3339 or unix ms (exclusive).
    #[arg(long)]
    pub received_before: Option<String>,
    #[arg(long)]
    pub provider_event_id: Option<String>,
    #[arg(long)]
    pub object_id: Option<String>,
    /// Only events this secret version verified (after a leak: what it let in).
    #[arg(long)]
    pub secret_version: Option<String>,
    /// Only events with a delivery to this destination (with --delivery-status: in it).
    #[arg(long)]
    pub destination: Option<String>,
    /// pending, delivered or failed.
    #[arg(long)]
    pub delivery_status: Option<String>,
}

impl Filters {
    /// `(parameter, value)` pairs by the API's names.
    pub fn pairs(&self) -> Vec<(&'static str, String)> {
        [
            ("status", &self.status),
            ("provider", &self.provider),
            ("endpoint_id", &self.endpoint),
            ("event_type", &self.event_type),
            ("received_after", &self.received_after),
            ("received_before", &self.received_before),
            ("provider_event_id", &self.provider_event_id),
            ("object_id", &self.object_id),
            ("matched_secret_version", &self.secret_version),
            ("destination", &self.destination),
            ("delivery_status", &self.delivery_status),
        ]
        .into_iter()
        .filter_map(|(k, v)| v.clone().map(|v| (k, v)))
        .collect()
    }
}

/// A client of the operator API.
pub struct ApiClient {
    base: String,
    token: String,
    http: reqwest::Client,
}

/// An answer that is not 2xx: the status and the `{"error"}` body.
#[derive(Debug)]
pub struct Refused {
    pub status: u16,
    pub body: Value,
}

impl ApiClient {
    pub fn new(url: &str) -> anyhow::Result<ApiClient> {
        let token = std::env::var(TOKEN_ENV)
            .map_err(|_| anyhow::anyhow!("--url needs the API token in {TOKEN_ENV}"))?;
        let http = reqwest::Client::builder()
            .timeout(std::time::Duration::from_secs(30))
            .build()?;
        Ok(ApiClient {
            base: url.trim_end_matches('/').to_owned(),
            token,
            http,
        })
    }

    pub async fn call(
        &self,
        method: reqwest::Method,
        path: &str,
        query: &[(&str, String)],
        body: Option<Value>,
    ) -> anyhow::Result<Result<Value, Refused>> {
        let mut request = self
            .http
            .request(method, format!("{}{path}", self.base))
            .bearer_auth(&self.token)
            .query(query);
        if let Some(b) = body {
            request = request.json(&b);
        }
        let response = request
            .send()
            .await
            .map_err(|e| anyhow::anyhow!("{}: {e}", self.base))?;
        let status = response.status().as_u16();
        let body: Value = response.json().await.unwrap_or(Value::Null);
        Ok(if (200..300).contains(&status) {
            Ok(body)
        } else {
            Err(Refused { status, body })
        })
    }
}

/// The exit code and message for an operation the API refused (3 for a purged payload, as
/// on the store directly).
pub fn refused(r: &Refused) -> i32 {
    eprintln!(
        "{}",
        json!({ "error": r.body["error"], "status": r.status })
    );
    if let Some(m) = r.body["message"].as_str() {
        eprintln!("{m}");
    }
    if r.body["error"] == "payload_purged" {
        super::events::EXIT_PAYLOAD_PURGED
    } else {
        1
    }
}
