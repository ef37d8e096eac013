//! `vault:MOUNT/PATH#FIELD` secrets: HashiCorp Vault's KV version 2 engine over HTTPS with
//! token auth. One read is `GET {address}/v1/{MOUNT}/data/{PATH}` with `X-Vault-Token`; the
//! value is `.data.data.{FIELD}` of the answer. Vault answers errors as `{"errors":[…]}` with
//! 403 (token invalid or without `read` on the path), 404 (no such secret, or its current
//! version deleted or destroyed), 429/472/473 (rate limited, standby), 500/502 and 503 (sealed
//! or in maintenance); each becomes a typed failure that names the path, never the token.

use std::path::Path;
use std::time::Duration;

use super::{MAX_SECRET_BYTES, SecretError, SecretString};

/// How long one Vault read may take (connect, TLS, answer).
pub const VAULT_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest answer read from Vault (a KV document holds more than one field).
const MAX_ANSWER_BYTES: usize = 1024 * 1024;

/// A client for one Vault server.
pub struct VaultClient {
    /// Without a trailing slash, e.g. `https://vault.internal:8200`.
    address: String,
    token: SecretString,
    http: reqwest::Client,
}

impl std::fmt::Debug for VaultClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VaultClient")
            .field("address", &self.address)
            .finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct VaultSetupError(String);

impl VaultClient {
    /// `ca_file`: PEM certificates to trust instead of the built-in roots.
    pub fn new(
        address: &str,
        token: SecretString,
        ca_file: Option<&Path>,
    ) -> Result<Self, VaultSetupError> {
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .https_only(true)
            .timeout(VAULT_TIMEOUT)
            .connect_timeout(VAULT_TIMEOUT)
            // A redirect would carry the token elsewhere.
            .redirect(reqwest::redirect::Policy::none());
        if let Some(ca_file) = ca_file {
            let pem = std::fs::read(ca_file).map_err(|e| {
                VaultSetupError(format!("cannot read {}: {}", ca_file.display(), e.kind()))
            })?;
            let certs = reqwest::Certificate::from_pem_bundle(&pem).map_err(|_| {
                VaultSetupError(format!("{} holds no PEM certificate", ca_file.display()))
            })?;
            if certs.is_empty() {
                return Err(VaultSetupError(format!(
                    "{} holds no PEM certificate",
                    ca_file.display()
                )));
            }
            builder = builder.tls_built_in_root_certs(false);
            for cert in certs {
                builder = builder.add_root_certificate(cert);
            }
        }
        let http = builder
            .build()
            .map_err(|e| VaultSetupError(format!("cannot build the HTTPS client: {e}")))?;
        Ok(VaultClient {
            address: address.trim_end_matches('/').to_owned(),
            token,
            http,
        })
    }

    /// Reads `.data.data.{field}` of the current version of `{mount}/{path}`.
    pub async fn read(&self, mount: &str, path: &str, field: &str) -> Result<String, SecretError> {
        let location = format!("{mount}/{path}#{field}");
        let fail = |reason: String| SecretError::Vault {
            location: location.clone(),
            reason,
        };
        let url = format!("{}/v1/{mount}/data/{path}", self.address);
        let response = self
            .http
            .get(&url)
            .header("X-Vault-Token", self.token.expose())
            .send()
            .await
            .map_err(|e| {
                fail(if e.is_timeout() {
                    format!("no answer within {} s", VAULT_TIMEOUT.as_secs())
                } else if e.is_connect() {
                    "cannot connect (or TLS handshake failed)".to_owned()
                } else {
                    "request failed".to_owned()
                })
            })?;
        let status = response.status().as_u16();
        if status != 200 {
            return Err(fail(match status {
                403 => {
                    "403 permission denied: the token is invalid, expired or may not read this path"
                        .into()
                }
                404 => {
                    "404: no secret at this path, or its current version is deleted or destroyed"
                        .into()
                }
                429 => "429: rate limited".into(),
                472 | 473 => format!("{status}: a standby node answered"),
                503 => "503: Vault is sealed or in maintenance".into(),
                other => format!("HTTP status {other}"),
            }));
        }
        let body = read_bounded(response)
            .await
            .map_err(|reason| fail(reason.into()))?;
        let document: serde_json::Value =
            serde_json::from_slice(&body).map_err(|_| fail("answer is not JSON".into()))?;
        let value = document
            .pointer("/data/data")
            .and_then(|data| data.as_object())
            .ok_or_else(|| fail("answer has no .data.data (is this a KV version 2 mount?)".into()))?
            .get(field)
            .ok_or_else(|| fail(format!("the secret has no field {field:?}")))?;
        let text = value
            .as_str()
            .ok_or_else(|| fail(format!("field {field:?} is not a string")))?;
        if text.len() > MAX_SECRET_BYTES {
            return Err(fail("field is larger than 64 KiB".into()));
        }
        Ok(text.to_owned())
    }
}

async fn read_bounded(mut response: reqwest::Response) -> Result<Vec<u8>, &'static str> {
    let mut body = Vec::new();
    while let Some(chunk) = response.chunk().await.map_err(|_| "answer cut off")? {
        if body.len() + chunk.len() > MAX_ANSWER_BYTES {
            return Err("answer larger than 1 MiB");
        }
        body.extend_from_slice(&chunk);
    }
    Ok(body)
}
