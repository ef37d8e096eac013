//! What a `kind = "redis_stream"` destination is configured with, and the checks config runs
//! on it at load.

use std::fmt;
use std::time::Duration;

use crate::redact_password;
use crate::subject::SubjectTemplate;

/// The largest `max_len` accepted: a stream trimmed later than this is unbounded in practice.
pub const MAX_MAX_LEN: u64 = 1_000_000_000;

/// A resolved Redis Streams destination. `Debug` hides the URL's password.
#[derive(Clone)]
pub struct RedisStreamSettings {
    pub id: String,
    /// `redis://` or `rediss://` (TLS), with a password and database as Redis URLs have them
    /// (a secret: never logged).
    pub url: String,
    /// The stream key, rendered per event.
    pub stream: SubjectTemplate,
    /// `XADD … MAXLEN ~ <max_len>`: the stream keeps at least this many newest entries.
    pub max_len: u64,
    /// Longest wait for one `XADD`, connecting included.
    pub timeout: Duration,
}

impl fmt::Debug for RedisStreamSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStreamSettings")
            .field("id", &self.id)
            .field("url", &redact_password(&self.url))
            .field("stream", &self.stream.filter())
            .field("max_len", &self.max_len)
            .field("timeout", &self.timeout)
            .finish()
    }
}

/// `url` checked as the client will read it. The message never quotes the URL.
pub fn check_url(url: &str) -> Result<(), String> {
    if !(url.starts_with("redis://") || url.starts_with("rediss://")) {
        return Err("must start with redis:// or rediss://".into());
    }
    redis::Client::open(url)
        .map(|_| ())
        .map_err(|_| "is not a valid Redis URL (redis://[:password@]host[:port][/db])".into())
}

/// `max_len` checked: 1 to [`MAX_MAX_LEN`].
pub fn check_max_len(max_len: u64) -> Result<(), String> {
    if max_len == 0 || max_len > MAX_MAX_LEN {
        return Err(format!("must be between 1 and {MAX_MAX_LEN}"));
    }
    Ok(())
}
