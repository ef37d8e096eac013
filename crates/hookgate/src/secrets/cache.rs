//! The in-memory cache of endpoint secrets: one [`SecretSlot`] per configured version, read
//! by ingress without a lock (an `ArcSwapOption` load) and written only by the refresher.
//!
//! A version's value is read at start-up and on reload, then again every `refresh_seconds`
//! (a `file:` secret also as soon as its file changes: checked every [`FILE_CHECK`]). A read
//! that fails keeps the cached value, which serves until `max_age_seconds` after the last
//! successful read; after that the version is not usable, and an endpoint without a usable
//! version answers 503. A retired version (or one past `not_after`) is never read and never
//! trusted, whatever its source does.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use arc_swap::ArcSwapOption;
use hookgate_providers::SecretMaterial;
use hookgate_providers::pack::Pack;

use super::file::FileFingerprint;
use super::vault::VaultClient;
use super::{SecretError, SecretSource, SecretString, exec, file, non_empty};
use crate::config::SecretVersion;

/// How often the refresher looks at every version (and at `file:` secrets' fingerprints).
pub const FILE_CHECK: Duration = Duration::from_secs(1);

/// Values published in `examples/hookgate.toml` (and the docs): refused outside development
/// wherever they come from, like literals.
pub const PUBLISHED_EXAMPLE_VALUES: &[&str] = &[
    "whsec_hookgate_dev_stripe_secret",
    "hookgate-dev-github-secret",
    "whsec_aG9va2dhdGUtZGV2LXN0YW5kYXJkLXdlYmhvb2tzLXNlY3JldCEh",
    "whsec_aG9va2dhdGUtZGV2LXN2aXgtc2VjcmV0LTAxMjM0NTY3ODk=",
    "hookgate-dev-shopify-secret",
    "hookgate-dev-slack-signing-secret",
    "686F6F6B676174652D6465762D616479656E2D686D61632D6B65792D30313233",
    "hookgate-dev-twilio-auth-token",
    "aG9va2dhdGUtZGV2LXBheWxvYWQta2V5LTMyYnl0ZXM=",
    "aG9va2dhdGUtZGV2LXJlcGxheS1kaWdlc3Qta2V5ISE=",
];

/// Reads secrets from every kind of source (the parts that need configuration).
#[derive(Debug, Clone)]
pub struct SecretReader {
    /// `[secrets] exec_timeout_ms`.
    pub exec_timeout: Duration,
    /// `[vault]`, when configured.
    pub vault: Option<Arc<VaultClient>>,
    /// Published example values are refused unless the process runs for development.
    pub allow_example_values: bool,
}

impl SecretReader {
    /// Reads `source` (`reference` is the configured text, the value itself for literals).
    pub async fn read(
        &self,
        source: &SecretSource,
        reference: &SecretString,
    ) -> Result<(SecretString, Option<FileFingerprint>), SecretError> {
        let (value, fingerprint) = match source {
            SecretSource::File(path) => {
                let path = path.clone();
                let (text, fp) = tokio::task::spawn_blocking(move || file::read(&path))
                    .await
                    .map_err(|_| SecretError::File {
                        path: Default::default(),
                        reason: "reader task failed".into(),
                    })??;
                (text, Some(fp))
            }
            SecretSource::Exec { program, args } => {
                (exec::run(program, args, self.exec_timeout).await?, None)
            }
            SecretSource::Vault { mount, path, field } => {
                let vault = self.vault.as_ref().ok_or_else(|| SecretError::Vault {
                    location: format!("{mount}/{path}#{field}"),
                    reason: "no [vault] is configured".into(),
                })?;
                (vault.read(mount, path, field).await?, None)
            }
            SecretSource::Env(_) | SecretSource::Literal => (
                super::read_one_shot(source, reference.expose())?
                    .expose()
                    .to_owned(),
                None,
            ),
        };
        let value = non_empty(source, value)?;
        if !self.allow_example_values && PUBLISHED_EXAMPLE_VALUES.contains(&value.expose()) {
            return Err(SecretError::Malformed(format!(
                "{source} holds a published example value; replace it (or run with --dev on a loopback listener)"
            )));
        }
        Ok((value, fingerprint))
    }
}

/// A value read from the source, decoded for the endpoint's pack.
pub struct CachedSecret {
    pub material: Arc<SecretMaterial>,
    pub read_at: Instant,
}

/// What only the refresher looks at.
#[derive(Default)]
struct RefreshState {
    last_attempt: Option<Instant>,
    /// `file:`: what the path resolved to at the last attempt (`Some(None)`: nothing there).
    seen: Option<Option<FileFingerprint>>,
    failing: bool,
}

/// One configured secret version of one endpoint and its cached value.
pub struct SecretSlot {
    pub endpoint: String,
    pub config: SecretVersion,
    pack: &'static Pack,
    cached: ArcSwapOption<CachedSecret>,
    refresh: Mutex<RefreshState>,
}

impl SecretSlot {
    pub fn new(endpoint: &str, config: SecretVersion, pack: &'static Pack) -> Self {
        SecretSlot {
            endpoint: endpoint.to_owned(),
            config,
            pack,
            cached: ArcSwapOption::empty(),
            refresh: Mutex::new(RefreshState::default()),
        }
    }

    /// Whether this slot is the same secret as `other` (so a reload keeps its value).
    pub fn same_secret(&self, other: &SecretSlot) -> bool {
        self.endpoint == other.endpoint
            && self.config.version == other.config.version
            && self.config.reference.expose() == other.config.reference.expose()
            && std::ptr::eq(self.pack, other.pack)
    }

    /// Takes over `previous`'s cached value and refresh state (a reload of the same secret).
    pub fn inherit(&self, previous: &SecretSlot) {
        if self.config.retired {
            return;
        }
        self.cached.store(previous.cached.load_full());
        let prev = previous.refresh.lock().expect("not poisoned");
        let mut mine = self.refresh.lock().expect("not poisoned");
        mine.seen = prev.seen;
        mine.failing = prev.failing;
    }

    /// The value to verify with at `now_secs` (wall clock, for `not_after`), or `None`:
    /// retired, expired, never read, or last read longer than `max_age` ago.
    pub fn usable(&self, now_secs: i64) -> Option<Arc<SecretMaterial>> {
        if !self.config.trusted_at(now_secs) {
            return None;
        }
        let cached = self.cached.load_full()?;
        (cached.read_at.elapsed() <= self.config.max_age).then(|| cached.material.clone())
    }

    /// Seconds since the last successful read, if any.
    pub fn age(&self) -> Option<Duration> {
        self.cached.load().as_ref().map(|c| c.read_at.elapsed())
    }

    /// Whether the refresher should read now: never read, `refresh` elapsed, or (`file:`) the
    /// file the path resolves to is not the one last read.
    fn due(&self) -> bool {
        if self.config.retired {
            return false;
        }
        let state = self.refresh.lock().expect("not poisoned");
        let Some(last) = state.last_attempt else {
            return true;
        };
        if last.elapsed() >= self.config.refresh {
            return true;
        }
        match &self.config.source {
            SecretSource::File(path) => state
                .seen
                .is_none_or(|seen| FileFingerprint::current(path) != seen),
            _ => false,
        }
    }

    /// Reads the source once; on success the new value replaces the old one at once (the old
    /// value stops verifying at the same moment), on failure the cached value stays.
    pub async fn refresh(&self, reader: &SecretReader) -> Result<(), SecretError> {
        if self.config.retired {
            return Ok(());
        }
        self.refresh.lock().expect("not poisoned").last_attempt = Some(Instant::now());
        let read = reader
            .read(&self.config.source, &self.config.reference)
            .await;
        let outcome = read.and_then(|(value, fingerprint)| {
            let material = self.pack.decode_secret(value.expose()).map_err(|e| {
                SecretError::Malformed(format!(
                    "{} for provider {} (from {})",
                    e,
                    self.pack.id(),
                    self.config.source
                ))
            })?;
            Ok((material, fingerprint))
        });
        let mut state = self.refresh.lock().expect("not poisoned");
        match outcome {
            Ok((material, fingerprint)) => {
                self.cached.store(Some(Arc::new(CachedSecret {
                    material: Arc::new(material),
                    read_at: Instant::now(),
                })));
                if fingerprint.is_some() {
                    state.seen = Some(fingerprint);
                }
                if std::mem::take(&mut state.failing) {
                    crate::telemetry::secret_recovered(&self.endpoint, &self.config.version);
                }
                Ok(())
            }
            Err(e) => {
                state.failing = true;
                // A file that changes again (put back, fixed mode) is read at once.
                if let SecretSource::File(path) = &self.config.source {
                    state.seen = Some(FileFingerprint::current(path));
                }
                Err(e)
            }
        }
    }
}

/// Every slot of a runtime, refreshed once: those that are due (or all, `force`), at once.
pub async fn refresh_slots(slots: &[Arc<SecretSlot>], reader: &SecretReader, force: bool) {
    let mut reads = tokio::task::JoinSet::new();
    for slot in slots {
        if slot.config.retired || !(force || slot.due()) {
            continue;
        }
        let slot = slot.clone();
        let reader = reader.clone();
        reads.spawn(async move {
            if let Err(e) = slot.refresh(&reader).await {
                crate::telemetry::secret_refresh_failed(&slot.endpoint, &slot.config.version, &e);
            }
        });
    }
    while reads.join_next().await.is_some() {}
}
