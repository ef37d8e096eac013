//! Secret sources and the cache that keeps their values fresh.
//!
//! A secret reference is `env:NAME`, `file:PATH`, `exec:/path/to/cmd arg …`,
//! `vault:MOUNT/PATH#FIELD` or a literal (development only). [`resolve`] reads an
//! `env:`/`file:`/literal reference once (payload keys, API keys, the Vault token);
//! endpoint secrets live in [`cache`], refreshed in the background and served until their
//! `max_age_seconds`. Values are held as [`SecretString`] and never printed: `Debug` is
//! redacted and errors name only the source, never the value.

pub mod cache;
mod exec;
mod file;
pub mod vault;

use std::fmt;
use std::path::{Path, PathBuf};

use zeroize::Zeroizing;

pub use file::FileFingerprint;

/// The largest secret any source may yield (file, command output, Vault field).
pub const MAX_SECRET_BYTES: usize = 64 * 1024;

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
    /// A command run without a shell; its standard output is the secret.
    Exec {
        program: PathBuf,
        args: Vec<String>,
    },
    /// HashiCorp Vault KV v2: `GET {address}/v1/{mount}/data/{path}`, `.data.data.{field}`.
    Vault {
        mount: String,
        path: String,
        field: String,
    },
    Literal,
}

impl fmt::Display for SecretSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SecretSource::Env(name) => write!(f, "env:{name}"),
            SecretSource::File(path) => write!(f, "file:{}", path.display()),
            // Arguments are not shown: a badly written config might carry a credential there.
            SecretSource::Exec { program, args } => {
                write!(f, "exec:{} ({} arguments)", program.display(), args.len())
            }
            SecretSource::Vault { mount, path, field } => write!(f, "vault:{mount}/{path}#{field}"),
            SecretSource::Literal => f.write_str("<literal, redacted>"),
        }
    }
}

#[derive(Debug, Clone, thiserror::Error)]
pub enum SecretError {
    #[error("environment variable {0} is not set or not valid UTF-8")]
    EnvMissing(String),
    #[error("cannot read secret file {path}: {reason}")]
    File { path: PathBuf, reason: String },
    #[error(
        "secret file {path} is readable by its group or by everyone (mode {mode:04o}): refused; \
         chmod 600 (or 400) it"
    )]
    FileTooOpen { path: PathBuf, mode: u32 },
    #[error("secret command {program}: {reason}")]
    Exec { program: PathBuf, reason: String },
    #[error("vault {location}: {reason}")]
    Vault { location: String, reason: String },
    #[error("secret from {0} is empty")]
    Empty(SecretSource),
    #[error("{0} secrets are read by the running gateway only, not here")]
    NotOneShot(SecretSource),
    #[error("malformed secret reference: {0}")]
    Malformed(String),
}

/// Parses a reference; relative `file:` and `exec:` paths resolve against `base`.
pub fn source_of(reference: &str, base: &Path) -> Result<SecretSource, SecretError> {
    let at_base = |p: &str| {
        let path = Path::new(p);
        if path.is_absolute() {
            path.to_owned()
        } else {
            base.join(path)
        }
    };
    if let Some(name) = reference.strip_prefix("env:") {
        Ok(SecretSource::Env(name.to_owned()))
    } else if let Some(path) = reference.strip_prefix("file:") {
        Ok(SecretSource::File(at_base(path)))
    } else if let Some(command) = reference.strip_prefix("exec:") {
        // No shell: split on spaces, nothing is expanded or quoted.
        let mut words = command.split(' ').filter(|w| !w.is_empty());
        let program = words.next().ok_or_else(|| {
            SecretError::Malformed(
                "exec: needs a command, e.g. exec:/usr/local/bin/get-secret stripe".into(),
            )
        })?;
        if !program.contains('/') {
            return Err(SecretError::Malformed(format!(
                "exec:{program}: give the command's path (absolute, or relative to the config file), \
                 it is run without a shell or PATH lookup"
            )));
        }
        Ok(SecretSource::Exec {
            program: at_base(program),
            args: words.map(str::to_owned).collect(),
        })
    } else if let Some(location) = reference.strip_prefix("vault:") {
        let malformed = || {
            SecretError::Malformed(format!(
                "vault:{location}: must be vault:MOUNT/PATH#FIELD, e.g. vault:secret/hookgate/stripe#signing_secret"
            ))
        };
        let (mount_path, field) = location.split_once('#').ok_or_else(malformed)?;
        let (mount, path) = mount_path.split_once('/').ok_or_else(malformed)?;
        let clean = |s: &str| {
            !s.is_empty()
                && !s.starts_with('/')
                && !s.ends_with('/')
                && s.split('/')
                    .all(|seg| !seg.is_empty() && seg != "." && seg != "..")
                && s.bytes()
                    .all(|b| b.is_ascii_graphic() && !matches!(b, b'?' | b'#' | b'%'))
        };
        if !clean(mount) || !clean(path) || field.is_empty() || field.contains(['/', '#']) {
            return Err(malformed());
        }
        Ok(SecretSource::Vault {
            mount: mount.to_owned(),
            path: path.to_owned(),
            field: field.to_owned(),
        })
    } else {
        Ok(SecretSource::Literal)
    }
}

/// Reads an `env:`, `file:` or literal secret once (configuration load). A file's trailing
/// newline is not part of the secret; a group- or world-readable file is refused.
pub fn resolve(reference: &str, base: &Path) -> Result<(SecretSource, SecretString), SecretError> {
    let source = source_of(reference, base)?;
    let value = read_one_shot(&source, reference)?;
    Ok((source, value))
}

/// Reads what needs no child process and no network: `env:`, `file:` and literals.
pub(crate) fn read_one_shot(
    source: &SecretSource,
    reference: &str,
) -> Result<SecretString, SecretError> {
    let value = match source {
        SecretSource::Env(name) => {
            std::env::var(name).map_err(|_| SecretError::EnvMissing(name.clone()))?
        }
        SecretSource::File(path) => file::read(path)?.0,
        SecretSource::Literal => reference.to_owned(),
        SecretSource::Exec { .. } | SecretSource::Vault { .. } => {
            return Err(SecretError::NotOneShot(source.clone()));
        }
    };
    non_empty(source, value)
}

fn non_empty(source: &SecretSource, value: String) -> Result<SecretString, SecretError> {
    let value = SecretString::new(value);
    if value.expose().is_empty() {
        return Err(SecretError::Empty(source.clone()));
    }
    Ok(value)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn sources_and_redaction() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("s");
        std::fs::write(&path, "whsec_abc\n").unwrap();
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
        let (src, v) = resolve("file:s", dir.path()).unwrap();
        assert_eq!(v.expose(), "whsec_abc");
        assert_eq!(src, SecretSource::File(path.clone()));
        assert_eq!(format!("{v:?}"), "<redacted>");
        let (src, _) = resolve("literal-value", dir.path()).unwrap();
        assert_eq!(src.to_string(), "<literal, redacted>");
        let err = resolve("env:HOOKGATE_TEST_SURELY_UNSET", dir.path()).unwrap_err();
        assert!(err.to_string().contains("HOOKGATE_TEST_SURELY_UNSET"));
        assert!(resolve("file:missing", dir.path()).is_err());

        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
        let err = resolve("file:s", dir.path()).unwrap_err();
        assert!(
            matches!(err, SecretError::FileTooOpen { mode: 0o640, .. }),
            "{err}"
        );
    }

    #[test]
    fn exec_and_vault_references_parse() {
        let base = Path::new("/etc/hookgate");
        assert_eq!(
            source_of("exec:/usr/bin/get  stripe v2", base).unwrap(),
            SecretSource::Exec {
                program: "/usr/bin/get".into(),
                args: vec!["stripe".into(), "v2".into()],
            }
        );
        assert_eq!(
            source_of("exec:bin/get", base).unwrap(),
            SecretSource::Exec {
                program: "/etc/hookgate/bin/get".into(),
                args: vec![],
            }
        );
        assert!(source_of("exec:get", base).is_err(), "no PATH lookup");
        assert!(source_of("exec:", base).is_err());
        assert_eq!(
            source_of("vault:secret/hookgate/stripe#signing", base).unwrap(),
            SecretSource::Vault {
                mount: "secret".into(),
                path: "hookgate/stripe".into(),
                field: "signing".into(),
            }
        );
        for bad in [
            "vault:secret#f",
            "vault:secret/p",
            "vault:secret/../x#f",
            "vault:/p#f",
            "vault:s/p#",
            "vault:s/p?x=1#f",
        ] {
            assert!(source_of(bad, base).is_err(), "{bad}");
        }
        let shown = source_of("exec:/bin/get --token abc", base)
            .unwrap()
            .to_string();
        assert!(!shown.contains("abc"), "{shown}");
        assert!(matches!(
            resolve("exec:/bin/true", base),
            Err(SecretError::NotOneShot(_))
        ));
    }
}
