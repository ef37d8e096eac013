//! TLS to PostgreSQL with rustls: `sslmode` and `sslrootcert` in the store URL, meaning what
//! they mean in libpq.
//!
//! | `sslmode` | encrypted | certificate checked |
//! | --- | --- | --- |
//! | `disable` | never | — |
//! | `prefer` | when the server offers TLS | no |
//! | `require` | always (else the connection fails) | no |
//! | `verify-ca` | always | chain to `sslrootcert` |
//! | `verify-full` | always | chain to `sslrootcert` and the host name |
//!
//! Without `sslmode` a URL whose hosts are all loopback (or Unix sockets) means `prefer`, any
//! other `verify-full`: a database across a network is reached encrypted and authenticated
//! unless the URL says otherwise. `sslrootcert=system` trusts the Mozilla root certificates
//! (libpq's spelling); the verifying modes refuse to start without a `sslrootcert`.
//! tokio-postgres knows only disable / prefer / require, so both keys are taken off the URL
//! here and the verifying modes become `require` with a verifying rustls configuration.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{CertificateError, DigitallySignedStruct, RootCertStore, SignatureScheme};
use tokio_postgres::config::{Host, SslMode as DriverSslMode};
use tokio_postgres_rustls::MakeRustlsConnect;

use crate::StoreError;

/// The `sslmode` of a store URL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    Disable,
    Prefer,
    Require,
    VerifyCa,
    VerifyFull,
}

impl SslMode {
    fn parse(value: &str) -> Result<SslMode, StoreError> {
        Ok(match value {
            "disable" => SslMode::Disable,
            "prefer" => SslMode::Prefer,
            "require" => SslMode::Require,
            "verify-ca" => SslMode::VerifyCa,
            "verify-full" => SslMode::VerifyFull,
            // libpq's `allow` tries plain text first: a downgrade nobody should choose.
            other => {
                return Err(StoreError::Config(format!(
                    "sslmode={other} is not supported: use disable, prefer, require, verify-ca \
                     or verify-full"
                )));
            }
        })
    }

    /// libpq's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            SslMode::Disable => "disable",
            SslMode::Prefer => "prefer",
            SslMode::Require => "require",
            SslMode::VerifyCa => "verify-ca",
            SslMode::VerifyFull => "verify-full",
        }
    }

    fn driver_mode(self) -> DriverSslMode {
        match self {
            SslMode::Disable => DriverSslMode::Disable,
            SslMode::Prefer => DriverSslMode::Prefer,
            SslMode::Require | SslMode::VerifyCa | SslMode::VerifyFull => DriverSslMode::Require,
        }
    }
}

/// Where the verifying modes take their trusted roots from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RootCert {
    /// A PEM file of one or more CA certificates.
    File(PathBuf),
    /// `sslrootcert=system`: the Mozilla root certificates.
    System,
}

/// The TLS settings of a store URL, after defaults.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsSettings {
    pub mode: SslMode,
    /// Whether `mode` was written in the URL (otherwise it is the default for its hosts).
    pub explicit: bool,
    pub root_cert: Option<RootCert>,
}

/// Takes `sslmode` and `sslrootcert` off `url` (URL query or `key=value` form): the URL the
/// driver parses, and the raw values.
pub(super) fn split_tls_params(url: &str) -> (String, Option<String>, Option<String>) {
    let (url, mode) = super::split_param(url, "sslmode");
    let (url, root) = super::split_param(&url, "sslrootcert");
    (url, mode, root)
}

/// The effective settings for `config` (whose hosts decide the default mode).
pub(super) fn settings(
    config: &tokio_postgres::Config,
    mode: Option<&str>,
    root_cert: Option<&str>,
) -> Result<TlsSettings, StoreError> {
    let explicit = mode.is_some();
    let mode = match mode {
        Some(m) => SslMode::parse(m)?,
        None if config.get_hosts().iter().all(is_loopback) => SslMode::Prefer,
        None => SslMode::VerifyFull,
    };
    let root_cert = root_cert.map(|r| match r {
        "system" => RootCert::System,
        path => RootCert::File(PathBuf::from(path)),
    });
    if matches!(mode, SslMode::VerifyCa | SslMode::VerifyFull) && root_cert.is_none() {
        let why = if explicit {
            format!("sslmode={}", mode.as_str())
        } else {
            "a host that is not loopback (default sslmode=verify-full)".to_owned()
        };
        return Err(StoreError::Config(format!(
            "{why} verifies the server certificate: add sslrootcert=PATH (a PEM file of the CA) \
             or sslrootcert=system, or say sslmode=require to encrypt without verifying"
        )));
    }
    Ok(TlsSettings {
        mode,
        explicit,
        root_cert,
    })
}

fn is_loopback(host: &Host) -> bool {
    match host {
        Host::Unix(_) => true,
        Host::Tcp(name) => {
            name.eq_ignore_ascii_case("localhost")
                || name
                    .trim_matches(['[', ']'])
                    .parse::<IpAddr>()
                    .is_ok_and(|ip| ip.is_loopback())
        }
    }
}

/// Applies `settings` to the driver's config and builds the connector every pooled connection
/// uses (also for `disable`, where it is never called).
pub(super) fn connector(
    config: &mut tokio_postgres::Config,
    settings: &TlsSettings,
) -> Result<MakeRustlsConnect, StoreError> {
    config.ssl_mode(settings.mode.driver_mode());
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let verifier: Arc<dyn ServerCertVerifier> = match settings.mode {
        SslMode::Disable | SslMode::Prefer | SslMode::Require => Arc::new(ServerCheck {
            provider: Arc::clone(&provider),
            chain: None,
        }),
        SslMode::VerifyCa | SslMode::VerifyFull => {
            let roots = load_roots(settings.root_cert.as_ref())?;
            let webpki =
                WebPkiServerVerifier::builder_with_provider(Arc::new(roots), Arc::clone(&provider))
                    .build()
                    .map_err(|e| StoreError::Config(format!("sslrootcert: {e}")))?;
            if settings.mode == SslMode::VerifyCa {
                Arc::new(ServerCheck {
                    provider: Arc::clone(&provider),
                    chain: Some(webpki),
                })
            } else {
                webpki
            }
        }
    };
    let tls = rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| StoreError::Config(format!("TLS protocol versions: {e}")))?
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    Ok(MakeRustlsConnect::new(tls))
}

fn load_roots(root_cert: Option<&RootCert>) -> Result<RootCertStore, StoreError> {
    let mut roots = RootCertStore::empty();
    match root_cert {
        None => {}
        Some(RootCert::System) => roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned()),
        Some(RootCert::File(path)) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| {
                    StoreError::Config(format!(
                        "sslrootcert: cannot read PEM certificates from {}: {e}",
                        path.display()
                    ))
                })?;
            let (added, _ignored) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(StoreError::Config(format!(
                    "sslrootcert: {} holds no usable CA certificate",
                    path.display()
                )));
            }
        }
    }
    Ok(roots)
}

/// What `prefer` / `require` and `verify-ca` check of the server (`verify-full` is WebPKI's own
/// verifier). The handshake signatures are always verified, so the session is bound to the
/// certificate's key.
#[derive(Debug)]
struct ServerCheck {
    provider: Arc<CryptoProvider>,
    /// `None`: encrypted, the certificate not checked (`prefer` / `require`, as in libpq).
    /// `Some`: `verify-ca`, the chain must lead to a trusted root and the host name is not
    /// compared: WebPKI checks the chain before the name, so a name mismatch means the chain
    /// was good.
    chain: Option<Arc<WebPkiServerVerifier>>,
}

impl ServerCertVerifier for ServerCheck {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let Some(chain) = &self.chain else {
            return Ok(ServerCertVerified::assertion());
        };
        match chain.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(rustls::Error::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::str::FromStr;

    fn settings_of(url: &str) -> Result<TlsSettings, StoreError> {
        let (rest, mode, root) = split_tls_params(url);
        let config = tokio_postgres::Config::from_str(&rest).unwrap();
        settings(&config, mode.as_deref(), root.as_deref())
    }

    #[test]
    fn defaults_depend_on_the_hosts() {
        assert_eq!(
            settings_of("postgres://u@127.0.0.1/db").unwrap().mode,
            SslMode::Prefer
        );
        assert_eq!(
            settings_of("postgres://u@localhost/db").unwrap().mode,
            SslMode::Prefer
        );
        assert_eq!(
            settings_of("host=/run/postgresql dbname=d").unwrap().mode,
            SslMode::Prefer
        );
        let remote = settings_of("postgres://u@db.internal/db?sslrootcert=/ca.pem").unwrap();
        assert_eq!(remote.mode, SslMode::VerifyFull);
        assert!(!remote.explicit);
        let err = settings_of("postgres://u@db.internal/db").unwrap_err();
        assert!(err.to_string().contains("sslrootcert"), "{err}");
        assert_eq!(
            settings_of("postgres://u@db.internal/db?sslmode=require")
                .unwrap()
                .mode,
            SslMode::Require
        );
    }

    #[test]
    fn both_keys_leave_the_driver_url() {
        assert_eq!(
            split_tls_params("postgres://u@h/db?sslmode=verify-ca&x=1&sslrootcert=/c.pem"),
            (
                "postgres://u@h/db?x=1".to_owned(),
                Some("verify-ca".to_owned()),
                Some("/c.pem".to_owned())
            )
        );
        assert_eq!(
            split_tls_params("host=h sslmode=verify-full sslrootcert=system"),
            (
                "host=h".to_owned(),
                Some("verify-full".to_owned()),
                Some("system".to_owned())
            )
        );
        assert!(settings_of("postgres://u@h/db?sslmode=allow").is_err());
    }
}
