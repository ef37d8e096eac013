//! The HTTP side of provider reconciliation: one client for the providers' APIs, calls paced
//! per provider (a least gap between two calls, `Retry-After` and the rate-limit headers
//! honoured), bounded reads and waits, and errors that name the endpoint and the status but
//! never the key or a body.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use http::HeaderMap;
use tokio::time::Instant;

/// The least time between two calls to one provider's API from this process.
const MIN_GAP: Duration = Duration::from_millis(50);

/// The longest one wait for a rate limit (`Retry-After`, a reset time); a longer one fails the
/// run, which the next one resumes from its checkpoint.
const MAX_RATE_WAIT: Duration = Duration::from_secs(60);

/// The wait after a rate-limit answer that names no time (GitHub's secondary rate limit).
const SECONDARY_RATE_WAIT: Duration = Duration::from_secs(60);

/// Calls made again after a 429 (or a 5xx) before the run fails.
const MAX_RETRIES: u32 = 4;

/// The most of one API answer that is read.
const MAX_ANSWER_BYTES: usize = 8 * 1024 * 1024;

/// Why an API call did not give an answer a run can use.
#[derive(Debug, thiserror::Error)]
pub enum ApiError {
    #[error(
        "{provider} API refused the credentials of endpoint {endpoint:?} (HTTP {status}{detail}): check reconcile.api_key"
    )]
    Unauthorized {
        provider: &'static str,
        endpoint: String,
        status: u16,
        /// The provider's error type or code, when it gave one (never a key, never a body).
        detail: String,
    },
    #[error("{provider} API answered HTTP {status} to {what} for endpoint {endpoint:?}")]
    Status {
        provider: &'static str,
        endpoint: String,
        what: &'static str,
        status: u16,
    },
    #[error("{provider} API still rate-limits endpoint {endpoint:?} after {tries} tries")]
    RateLimited {
        provider: &'static str,
        endpoint: String,
        tries: u32,
    },
    #[error(
        "{provider} API's next page for endpoint {endpoint:?} is on another origin ({origin}) than reconcile.api_base: not followed"
    )]
    ForeignLink {
        provider: &'static str,
        endpoint: String,
        origin: String,
    },
    #[error("{provider} API call ({what}) for endpoint {endpoint:?} failed: {reason}")]
    Transport {
        provider: &'static str,
        endpoint: String,
        what: &'static str,
        reason: String,
    },
    #[error("{provider} API answer to {what} for endpoint {endpoint:?} is malformed: {reason}")]
    Malformed {
        provider: &'static str,
        endpoint: String,
        what: &'static str,
        reason: String,
    },
}

/// One answer: status, headers, body (bounded).
pub struct Answer {
    pub status: u16,
    pub headers: HeaderMap,
    pub body: Vec<u8>,
}

/// When each provider may be called next, in this process.
fn next_call() -> &'static Mutex<HashMap<&'static str, Instant>> {
    static NEXT: OnceLock<Mutex<HashMap<&'static str, Instant>>> = OnceLock::new();
    NEXT.get_or_init(Default::default)
}

/// Waits for the provider's turn, and takes it.
async fn pace(provider: &'static str) {
    let wait_until = {
        let mut next = next_call().lock().unwrap_or_else(|p| p.into_inner());
        let now = Instant::now();
        let at = next.get(provider).copied().unwrap_or(now).max(now);
        next.insert(provider, at + MIN_GAP);
        at
    };
    tokio::time::sleep_until(wait_until).await;
}

/// Pushes the provider's next call to `after` from now (a rate limit), for every run here.
fn hold_off(provider: &'static str, after: Duration) {
    let mut next = next_call().lock().unwrap_or_else(|p| p.into_inner());
    let at = Instant::now() + after;
    let entry = next.entry(provider).or_insert(at);
    *entry = (*entry).max(at);
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Option<&'a str> {
    headers
        .get(name)
        .and_then(|v| v.to_str().ok())
        .map(str::trim)
}

/// How long the answer asks to wait before the next call: `Retry-After` (seconds), or with no
/// call left (`X-RateLimit-Remaining: 0`) until `X-RateLimit-Reset` (unix seconds).
pub fn rate_wait(headers: &HeaderMap, now_unix: i64) -> Option<Duration> {
    if let Some(secs) = header(headers, "retry-after").and_then(|v| v.parse::<u64>().ok()) {
        return Some(Duration::from_secs(secs));
    }
    if header(headers, "x-ratelimit-remaining") == Some("0") {
        let reset = header(headers, "x-ratelimit-reset").and_then(|v| v.parse::<i64>().ok())?;
        return Some(Duration::from_secs(
            u64::try_from(reset.saturating_sub(now_unix)).unwrap_or(0),
        ));
    }
    None
}

/// The API client of one run.
pub struct ApiClient {
    http: reqwest::Client,
}

impl ApiClient {
    pub fn new() -> Result<Self, reqwest::Error> {
        let http = reqwest::Client::builder()
            .timeout(Duration::from_secs(30))
            .connect_timeout(Duration::from_secs(10))
            // A redirect could lead the key off the configured origin.
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("hookgate/", env!("CARGO_PKG_VERSION")))
            .build()?;
        Ok(Self { http })
    }

    /// Sends `request` (made again for each try) paced for `provider`, waiting out 429s and a
    /// spent rate limit, and retrying 5xx answers; 401 and 403 (not a rate limit) are
    /// [`ApiError::Unauthorized`].
    pub async fn call(
        &self,
        provider: &'static str,
        endpoint: &str,
        what: &'static str,
        request: impl Fn(&reqwest::Client) -> reqwest::RequestBuilder,
    ) -> Result<Answer, ApiError> {
        let transport = |reason: String| ApiError::Transport {
            provider,
            endpoint: endpoint.to_owned(),
            what,
            reason,
        };
        let mut tries = 0;
        loop {
            tries += 1;
            pace(provider).await;
            let response = request(&self.http)
                .send()
                .await
                .map_err(|e| transport(without_url(&e)))?;
            let status = response.status().as_u16();
            let headers = response.headers().clone();
            let body = read_bounded(response)
                .await
                .map_err(|e| transport(e.to_owned()))?;
            let now_unix = jiff::Timestamp::now().as_second();
            let mut wait = rate_wait(&headers, now_unix);
            // GitHub's secondary rate limit: a 403 (or 429) that may carry neither header; its
            // docs ask for at least a minute's wait.
            if wait.is_none() && matches!(status, 403 | 429) && mentions_rate_limit(&body) {
                wait = Some(SECONDARY_RATE_WAIT);
            }
            let limited = status == 429 || (status == 403 && wait.is_some());
            if limited || (500..600).contains(&status) {
                if tries > MAX_RETRIES {
                    return Err(if limited {
                        ApiError::RateLimited {
                            provider,
                            endpoint: endpoint.to_owned(),
                            tries,
                        }
                    } else {
                        ApiError::Status {
                            provider,
                            endpoint: endpoint.to_owned(),
                            what,
                            status,
                        }
                    });
                }
                let wait = wait.unwrap_or(Duration::from_millis(500 << tries.min(5)));
                if wait > MAX_RATE_WAIT {
                    return Err(ApiError::RateLimited {
                        provider,
                        endpoint: endpoint.to_owned(),
                        tries,
                    });
                }
                tracing::info!(
                    provider,
                    endpoint,
                    status,
                    wait_ms = wait.as_millis() as u64,
                    "provider API asks to wait"
                );
                hold_off(provider, wait);
                continue;
            }
            if let Some(wait) = wait.filter(|w| !w.is_zero()) {
                // The last call of the window: the next one waits for the reset.
                hold_off(provider, wait.min(MAX_RATE_WAIT));
            }
            if status == 401 || status == 403 {
                return Err(ApiError::Unauthorized {
                    provider,
                    endpoint: endpoint.to_owned(),
                    status,
                    detail: error_detail(&body),
                });
            }
            return Ok(Answer {
                status,
                headers,
                body,
            });
        }
    }
}

/// The transport error without the URL (it carries query parameters, never the key, but the
/// message stays short and the same for every page).
fn without_url(e: &reqwest::Error) -> String {
    let kind = if e.is_timeout() {
        "timed out"
    } else if e.is_connect() {
        "could not connect"
    } else {
        "request failed"
    };
    kind.to_owned()
}

/// `: <type> <code>` of a Stripe-style `{"error": {"type", "code"}}` or GitHub's
/// `{"message"}`, each bounded and only of safe characters.
fn error_detail(body: &[u8]) -> String {
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) else {
        return String::new();
    };
    let words: Vec<&str> = [
        json.pointer("/error/type"),
        json.pointer("/error/code"),
        json.pointer("/message"),
    ]
    .into_iter()
    .flatten()
    .filter_map(|v| v.as_str())
    .filter(|s| {
        s.len() <= 64
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | ' ' | '.'))
    })
    .collect();
    if words.is_empty() {
        String::new()
    } else {
        format!(": {}", words.join(" "))
    }
}

/// Whether an error answer's `message` (GitHub's `{"message": …}`) says it is a rate limit.
fn mentions_rate_limit(body: &[u8]) -> bool {
    serde_json::from_slice::<serde_json::Value>(body)
        .ok()
        .and_then(|json| {
            json.get("message")
                .and_then(|m| m.as_str())
                .map(|m| m.to_ascii_lowercase().contains("rate limit"))
        })
        .unwrap_or(false)
}

async fn read_bounded(mut response: reqwest::Response) -> Result<Vec<u8>, &'static str> {
    let mut body = Vec::new();
    while let Some(chunk) = response
        .chunk()
        .await
        .map_err(|_| "the answer's body could not be read")?
    {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err("the answer is larger than 8 MiB");
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retry_after_wins_and_a_spent_limit_waits_for_its_reset() {
        let mut h = HeaderMap::new();
        assert_eq!(rate_wait(&h, 100), None);
        h.insert("x-ratelimit-remaining", "0".parse().unwrap());
        h.insert("x-ratelimit-reset", "130".parse().unwrap());
        assert_eq!(rate_wait(&h, 100), Some(Duration::from_secs(30)));
        assert_eq!(rate_wait(&h, 200), Some(Duration::ZERO));
        h.insert("retry-after", "2".parse().unwrap());
        assert_eq!(rate_wait(&h, 100), Some(Duration::from_secs(2)));
        let mut left = HeaderMap::new();
        left.insert("x-ratelimit-remaining", "10".parse().unwrap());
        left.insert("x-ratelimit-reset", "130".parse().unwrap());
        assert_eq!(rate_wait(&left, 100), None);
    }

    #[test]
    fn secondary_rate_limits_are_told_by_their_message() {
        assert!(mentions_rate_limit(
            br#"{"message":"You have exceeded a secondary rate limit. Please wait a few minutes before you try again."}"#
        ));
        assert!(mentions_rate_limit(
            br#"{"message":"API rate limit exceeded for installation ID 1."}"#
        ));
        assert!(!mentions_rate_limit(br#"{"message":"Bad credentials"}"#));
        assert!(!mentions_rate_limit(b"rate limit"));
    }

    #[test]
    fn error_details_are_the_providers_words_only() {
        assert_eq!(
            error_detail(br#"{"error":{"type":"invalid_request_error","code":"api_key_expired","message":"Invalid API Key provided: sk_test_****1234"}}"#),
            ": invalid_request_error api_key_expired"
        );
        assert_eq!(
            error_detail(br#"{"message":"Bad credentials"}"#),
            ": Bad credentials"
        );
        assert_eq!(error_detail(b"<html>"), "");
    }
}
