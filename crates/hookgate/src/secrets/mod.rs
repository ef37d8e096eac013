//! Secret sources: `env:NAME`, `file:PATH` or a literal (accepted with a warning).
//!
//! Values are read when the configuration is loaded (at start and on every SIGHUP), held in
//! memory as [`SecretString`], and never printed: `Debug` is redacted and errors name only the
//! source, never the value.

use std::fmt;
use std::path::{Path, PathBuf};

use zeroize::Zeroizing;

/// A secret value read from its source. `Debug`/`Display` never show it.
#[derive(Clone)]
pub struct SecretString(Zeroizing<String>);

impl SecretString {
    pub fn new(value: String) -> Self {
        Self(Zeroizing::new(value))
    }
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for SecretString {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("<redacted>")
    }
}

/// Where a secret comes from; printed by `config check` instead of the value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretSource {
    Env(String),
    File(PathBuf),
    Literal,
}

impl fmt::Display for SecretSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretSource::Env(name) => write!(f, "env:{name}"),
            SecretSource::File(path) => write!(f, "file:{}", path.display()),
            SecretSource::Literal => f.write_str("<literal, redacted>"),
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    #[error("environment variable {0} is not set or not valid UTF-8")]
    EnvMissing(String),
    #[error("cannot read secret file {path}: {reason}")]
    File { path: PathBuf, reason: String },
    #[error("secret from {0} is empty")]
    Empty(SecretSource),
}

/// Parses a `env:`/`file:`/literal reference; relative `file:` paths resolve against `base`.
pub fn source_of(reference: &str, base: &Path) -> SecretSource {
    if let Some(name) = reference.strip_prefix("env:") {
        SecretSource::Env(name.to_owned())
    } else if let Some(path) = reference.strip_prefix("file:") {
        let path = Path::new(path);
        SecretSource::File(if path.is_absolute() {
            path.to_owned()
        } else {
            base.join(path)
        })
    } else {
        SecretSource::Literal
    }
}

/// Reads the secret. A file's trailing newline is not part of the secret.
pub fn resolve(reference: &str, base: &Path) -> Result<(SecretSource, SecretString), SecretError> {
    let source = source_of(reference, base);
    let value = match &source {
        SecretSource::Env(name) => {
            std::env::var(name).map_err(|_| SecretError::EnvMissing(name.clone()))?
        }
        SecretSource::File(path) => {
            // Bounded: a secret file is small; refuse anything that is not.
            let meta = std::fs::metadata(path).map_err(|e| SecretError::File {
                path: path.clone(),
                reason: e.kind().to_string(),
            })?;
            if meta.len() > 64 * 1024 {
                return Err(SecretError::File {
                    path: path.clone(),
                    reason: "larger than 64 KiB".into(),
                });
            }
            let text = std::fs::read_to_string(path).map_err(|e| SecretError::File {
                path: path.clone(),
                reason: e.kind().to_string(),
            })?;
            text.trim_end_matches(['\n', '\r']).to_owned()
        }
        SecretSource::Literal => reference.to_owned(),
    };
    if value.is_empty() {
        return Err(SecretError::Empty(source));
    }
    Ok((source, SecretString::new(value)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sources_and_redaction() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("s"), "whsec_abc\n").unwrap();
        let (src, v) = resolve("file:s", dir.path()).unwrap();
        assert_eq!(v.expose(), "whsec_abc");
        assert_eq!(src, SecretSource::File(dir.path().join("s")));
        assert_eq!(format!("{v:?}"), "<redacted>");
        let (src, _) = resolve("literal-value", dir.path()).unwrap();
        assert_eq!(src.to_string(), "<literal, redacted>");
        let err = resolve("env:HOOKGATE_TEST_SURELY_UNSET", dir.path()).unwrap_err();
        assert!(err.to_string().contains("HOOKGATE_TEST_SURELY_UNSET"));
        assert!(resolve("file:missing", dir.path()).is_err());
    }
}
