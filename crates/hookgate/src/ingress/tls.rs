//! Built-in TLS of the webhook listener, with a certificate that can change under it.
//!
//! The listener's rustls configuration resolves its certificate through [`ReloadingCert`]:
//! every handshake takes the current `CertifiedKey` from an `ArcSwap`, so replacing it affects
//! only handshakes that come after, and connections already open (keep-alive included) go on
//! with the certificate they began with. The files are read again every
//! [`POLL_INTERVAL`] and on SIGHUP; a change (by content, so an atomic rename or a symlink swap
//! counts like an in-place write) that does not parse or whose key does not match its
//! certificate is logged and counted, and the previous certificate stays.

use std::path::Path;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use anyhow::Context;
use arc_swap::ArcSwap;
use rustls::server::{ClientHello, ResolvesServerCert};
use rustls::sign::CertifiedKey;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use sha2::{Digest, Sha256};
use tokio_rustls::TlsAcceptor;

use crate::config::TlsPaths;
use crate::telemetry;

/// How often the certificate and key files are read to see whether they changed.
pub const POLL_INTERVAL: Duration = Duration::from_secs(2);

/// Longest certificate chain or key file read (PEM files are a few KiB).
const MAX_PEM_BYTES: u64 = 1024 * 1024;

/// The listener's current certificate, replaced when its files change.
pub struct ReloadingCert {
    paths: TlsPaths,
    current: ArcSwap<CertifiedKey>,
    /// Digest of the files the current certificate, or the last refused attempt, came from:
    /// unchanged files are neither parsed again nor reported again.
    seen: Mutex<[u8; 32]>,
}

impl std::fmt::Debug for ReloadingCert {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ReloadingCert")
            .field("cert", &self.paths.cert)
            .field("key", &self.paths.key)
            .finish_non_exhaustive()
    }
}

impl ResolvesServerCert for ReloadingCert {
    fn resolve(&self, _client_hello: ClientHello<'_>) -> Option<Arc<CertifiedKey>> {
        Some(self.current.load_full())
    }
}

/// What [`ReloadingCert::reload_if_changed`] did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reload {
    Unchanged,
    Reloaded,
    /// The files changed but are unusable; the previous certificate is still served.
    Refused,
}

impl ReloadingCert {
    /// Loads the certificate and key (start-up: an unusable pair is an error).
    pub fn load(paths: &TlsPaths) -> anyhow::Result<Arc<ReloadingCert>> {
        let (digest, files) = read_files(paths)?;
        let key = certified_key(paths, &files)?;
        Ok(Arc::new(ReloadingCert {
            paths: paths.clone(),
            current: ArcSwap::from_pointee(key),
            seen: Mutex::new(digest),
        }))
    }

    /// Reads the files again and, when they changed and form a valid pair, serves them from
    /// the next handshake on.
    pub fn reload_if_changed(&self) -> Reload {
        let mut seen = self.seen.lock().unwrap_or_else(PoisonError::into_inner);
        let (digest, files) = match read_files(&self.paths) {
            Ok(read) => read,
            Err(e) => {
                // Mid-replacement (a file briefly missing) or gone: keep serving, say so once.
                let marker = [0xff; 32];
                if *seen != marker {
                    *seen = marker;
                    telemetry::tls_certificate_reload("failed", Some(&format!("{e:#}")));
                }
                return Reload::Refused;
            }
        };
        if *seen == digest {
            return Reload::Unchanged;
        }
        *seen = digest;
        match certified_key(&self.paths, &files) {
            Ok(key) => {
                self.current.store(Arc::new(key));
                telemetry::tls_certificate_reload("reloaded", None);
                Reload::Reloaded
            }
            Err(e) => {
                telemetry::tls_certificate_reload("failed", Some(&format!("{e:#}")));
                Reload::Refused
            }
        }
    }

    /// The acceptor of a listener that serves this certificate.
    pub fn acceptor(self: &Arc<Self>) -> anyhow::Result<TlsAcceptor> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let config = rustls::ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .context("TLS protocol versions")?
            .with_no_client_auth()
            .with_cert_resolver(Arc::clone(self) as Arc<dyn ResolvesServerCert>);
        Ok(TlsAcceptor::from(Arc::new(config)))
    }

    /// Polls the files every [`POLL_INTERVAL`] until the certificate is dropped elsewhere.
    pub fn spawn_polling(self: &Arc<Self>) {
        let weak = Arc::downgrade(self);
        tokio::spawn(async move {
            let mut tick = tokio::time::interval(POLL_INTERVAL);
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            tick.tick().await;
            loop {
                tick.tick().await;
                let Some(cert) = weak.upgrade() else { return };
                // Small blocking reads of two files.
                let _ = tokio::task::spawn_blocking(move || cert.reload_if_changed()).await;
            }
        });
    }
}

struct PemFiles {
    cert: Vec<u8>,
    key: zeroize::Zeroizing<Vec<u8>>,
}

fn read_bounded(path: &Path, key: &str) -> anyhow::Result<Vec<u8>> {
    use std::io::Read;
    let file = std::fs::File::open(path)
        .with_context(|| format!("{key}: cannot read {}", path.display()))?;
    let mut bytes = Vec::new();
    file.take(MAX_PEM_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("{key}: cannot read {}", path.display()))?;
    if bytes.len() as u64 > MAX_PEM_BYTES {
        anyhow::bail!("{key}: {} is larger than 1 MiB", path.display());
    }
    Ok(bytes)
}

fn read_files(paths: &TlsPaths) -> anyhow::Result<([u8; 32], PemFiles)> {
    let cert = read_bounded(&paths.cert, "server.tls.cert")?;
    let key = zeroize::Zeroizing::new(read_bounded(&paths.key, "server.tls.key")?);
    let mut digest = Sha256::new();
    digest.update((cert.len() as u64).to_be_bytes());
    digest.update(&cert);
    digest.update(&*key);
    Ok((digest.finalize().into(), PemFiles { cert, key }))
}

fn certified_key(paths: &TlsPaths, files: &PemFiles) -> anyhow::Result<CertifiedKey> {
    let certs = CertificateDer::pem_slice_iter(&files.cert)
        .collect::<Result<Vec<_>, _>>()
        .with_context(|| {
            format!(
                "server.tls.cert: {} is not PEM certificates",
                paths.cert.display()
            )
        })?;
    if certs.is_empty() {
        anyhow::bail!(
            "server.tls.cert: {} holds no certificate",
            paths.cert.display()
        );
    }
    let key = PrivateKeyDer::from_pem_slice(&files.key).with_context(|| {
        format!(
            "server.tls.key: cannot read a PEM private key from {}",
            paths.key.display()
        )
    })?;
    let provider = rustls::crypto::ring::default_provider();
    CertifiedKey::from_der(certs, key, &provider)
        .context("server.tls: certificate and key do not form a valid pair")
}
