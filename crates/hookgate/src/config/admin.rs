//! `[admin]` and `[[admin.tokens]]`: the admin listener's bounds, its optional TLS, and the
//! operator API's bearer tokens (raw, resolved, rendered).
//!
//! A token's `value` is a secret reference like an endpoint secret's (`env:`, `file:`,
//! `exec:`, `vault:` or a literal — development only, with the same loopback / `--dev`
//! rule); it is read when the gateway starts, never at load. Where the listener is not on
//! loopback, the API needs tokens (else `admin.tokens` is an error; with
//! `allow_unauthenticated = true` only `/metrics` and the probes are served there), and tokens
//! need `[admin] tls` (else `admin.tls` is an error): a bearer token never crosses a network
//! in clear text.

use std::net::SocketAddr;
use std::path::Path;
use std::time::Duration;

use serde::Deserialize;

use super::{AdminConfig, ConfigError, TlsPaths, err};
use crate::secrets::{self, SecretSource, SecretString};

/// `[admin]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawAdmin {
    pub listen: String,
    pub request_timeout_ms: Option<u64>,
    pub max_connections: Option<usize>,
    /// Serve `/metrics` and the probes on a non-loopback `listen` without any token (the
    /// operator API is then not served there).
    #[serde(default)]
    pub allow_unauthenticated: bool,
    /// Built-in TLS of the admin listener (required for tokens on a non-loopback `listen`).
    pub tls: Option<super::raw::RawTls>,
    #[serde(default)]
    pub tokens: Vec<RawToken>,
}

/// `[[admin.tokens]]` as written.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct RawToken {
    pub name: String,
    pub scopes: Vec<String>,
    pub value: String,
}

/// What a token may do. Scopes are independent: `decrypt` and `operate` do not include
/// `read`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Scope {
    /// List and show events (metadata), read the audit log.
    Read,
    /// Read an event's decrypted payload (audited).
    Decrypt,
    /// Retry, replay and re-deliver events (audited).
    Operate,
}

impl Scope {
    pub fn as_str(self) -> &'static str {
        match self {
            Scope::Read => "read",
            Scope::Decrypt => "decrypt",
            Scope::Operate => "operate",
        }
    }

    fn parse(s: &str) -> Option<Scope> {
        match s {
            "read" => Some(Scope::Read),
            "decrypt" => Some(Scope::Decrypt),
            "operate" => Some(Scope::Operate),
            _ => None,
        }
    }
}

/// One configured token: its name (the audit's `token`), scopes and where its value is.
#[derive(Debug, Clone)]
pub struct TokenConfig {
    pub name: String,
    pub scopes: Vec<Scope>,
    pub source: SecretSource,
    /// The reference as written (the value itself for a literal; never printed).
    pub reference: SecretString,
}

/// Shortest token value accepted when it is read (a guessable token is no protection).
pub const MIN_TOKEN_BYTES: usize = 16;

/// Resolves `[admin]`: `(listen, config)`, pushing warnings (and `<key> is a literal in the
/// config file` for literal token values, which the loopback / `--dev` rule checks).
pub(super) fn resolve_admin(
    a: RawAdmin,
    base: &Path,
    warnings: &mut Vec<String>,
) -> Result<(Option<SocketAddr>, AdminConfig), ConfigError> {
    let listen: SocketAddr = a
        .listen
        .parse()
        .map_err(|_| err("admin.listen", "must be IP:PORT"))?;
    let tls = a.tls.map(|t| TlsPaths {
        cert: base.join(&t.cert),
        key: base.join(&t.key),
    });
    let tokens = resolve_tokens(&a.tokens, base, warnings)?;
    let mut api = true;
    if !listen.ip().is_loopback() {
        if tokens.is_empty() {
            if !a.allow_unauthenticated {
                return Err(err(
                    "admin.tokens",
                    format!(
                        "admin.listen {listen} is not a loopback address and no [[admin.tokens]] \
                         is configured: the operator API refuses to serve there; add tokens \
                         (and admin.tls), or set admin.allow_unauthenticated = true to serve only \
                         /metrics and the health probes"
                    ),
                ));
            }
            api = false;
            warnings.push(format!(
                "admin.listen {listen} is not loopback: /metrics and the health probes are \
                 served without authentication (admin.allow_unauthenticated = true); the \
                 operator API is not served without [[admin.tokens]]"
            ));
        } else if tls.is_none() {
            return Err(err(
                "admin.tls",
                format!(
                    "admin.listen {listen} is not a loopback address: with [[admin.tokens]] the \
                     admin listener needs admin.tls = {{ cert, key }}, so tokens never cross \
                     the network in clear text"
                ),
            ));
        }
    }
    let admin = AdminConfig {
        request_timeout: Duration::from_millis(super::resolve::positive(
            a.request_timeout_ms.map(|v| v as usize),
            10_000,
            "admin.request_timeout_ms",
        )? as u64),
        max_connections: super::resolve::positive(a.max_connections, 64, "admin.max_connections")?,
        tls,
        tokens,
        api,
    };
    Ok((Some(listen), admin))
}

fn resolve_tokens(
    raw: &[RawToken],
    base: &Path,
    warnings: &mut Vec<String>,
) -> Result<Vec<TokenConfig>, ConfigError> {
    let mut out: Vec<TokenConfig> = Vec::with_capacity(raw.len());
    for (i, t) in raw.iter().enumerate() {
        let key = |field: &str| format!("admin.tokens[{i}].{field}");
        if !super::valid_id(&t.name) {
            return Err(err(
                key("name"),
                "must be 1-128 characters of A-Z a-z 0-9 - _ .",
            ));
        }
        if out.iter().any(|o| o.name == t.name) {
            return Err(err(
                key("name"),
                format!("another token is named {:?}", t.name),
            ));
        }
        if t.scopes.is_empty() {
            return Err(err(
                key("scopes"),
                "must name at least one of \"read\", \"decrypt\", \"operate\"",
            ));
        }
        let mut scopes = Vec::new();
        for (j, s) in t.scopes.iter().enumerate() {
            let scope = Scope::parse(s).ok_or_else(|| {
                err(
                    format!("admin.tokens[{i}].scopes[{j}]"),
                    format!("unknown scope {s:?}: one of \"read\", \"decrypt\", \"operate\""),
                )
            })?;
            if !scopes.contains(&scope) {
                scopes.push(scope);
            }
        }
        scopes.sort();
        let source = secrets::source_of(&t.value, base).map_err(|e| err(key("value"), e))?;
        if source == SecretSource::Literal {
            if t.value.len() < MIN_TOKEN_BYTES {
                return Err(err(
                    key("value"),
                    format!("a token must be at least {MIN_TOKEN_BYTES} bytes long"),
                ));
            }
            warnings.push(format!(
                "{} is a literal in the config file; use env:, file:, exec: or vault: outside development",
                key("value")
            ));
        }
        out.push(TokenConfig {
            name: t.name.clone(),
            scopes,
            source,
            reference: SecretString::new(t.value.clone()),
        });
    }
    Ok(out)
}

/// `config check`'s `[admin]` section (token values never shown, only their sources).
pub(super) fn render(out: &mut String, listen: SocketAddr, a: &AdminConfig) {
    use std::fmt::Write;
    let _ = writeln!(
        out,
        "\n[admin]\nlisten = \"{listen}\"\nrequest_timeout_ms = {}\nmax_connections = {}",
        a.request_timeout.as_millis(),
        a.max_connections
    );
    if let Some(tls) = &a.tls {
        let _ = writeln!(
            out,
            "tls = {{ cert = {:?}, key = {:?} }}",
            tls.cert.display().to_string(),
            tls.key.display().to_string()
        );
    }
    if !a.api {
        let _ = writeln!(out, "# operator API not served (no tokens, not loopback)");
    }
    for t in &a.tokens {
        let scopes: Vec<String> = t
            .scopes
            .iter()
            .map(|s| format!("{:?}", s.as_str()))
            .collect();
        let _ = writeln!(
            out,
            "[[admin.tokens]]\nname = {:?}\nscopes = [{}]\n# value from {} (redacted)",
            t.name,
            scopes.join(", "),
            t.source
        );
    }
}
