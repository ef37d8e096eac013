//! Packs a team defines in its own configuration (`[[provider_packs]]` tables and the
//! `*.json` files of `provider_packs_dir`): the built-in schema, with what only a shipped pack
//! must say made optional (`vectors` 0, `evidence` `experimental`, `sources` may be empty) and
//! `event_id.fallback` defaulting to `body_digest`, so a verified delivery always has an
//! identity. A user pack may not take a built-in id.
//!
//! Compiled packs are interned by their definition: the engine keeps compiled strings for
//! the life of the process, so a reload that keeps a definition reuses its pack instead of
//! compiling it again, and memory grows only with distinct definitions.

use std::sync::Mutex;

use serde_json::Value;

use super::spec::PackSpec;
use super::{Pack, PackError, builtin};

/// Where a user pack was written; its errors are named under it.
#[derive(Debug, Clone, Copy)]
pub enum UserPackSource<'a> {
    /// The `index`-th `[[provider_packs]]` table.
    Table(usize),
    /// A file of `provider_packs_dir`, by file name.
    DirFile(&'a str),
}

impl UserPackSource<'_> {
    /// The error path prefix: `provider_packs[2]`, `provider_packs_dir[acme.json]`.
    pub fn label(&self) -> String {
        match self {
            UserPackSource::Table(i) => format!("provider_packs[{i}]"),
            UserPackSource::DirFile(name) => format!("provider_packs_dir[{name}]"),
        }
    }
}

/// Compiles one user-defined pack (a JSON document: a dir file as parsed, or a TOML table
/// converted), refusing a built-in id. Errors name the key under [`UserPackSource::label`].
pub fn compile_user_pack(
    source: UserPackSource<'_>,
    mut doc: Value,
) -> Result<&'static Pack, PackError> {
    let label = source.label();
    let Some(object) = doc.as_object_mut() else {
        return Err(PackError::new(
            label,
            "a pack is a table (object)".to_owned(),
        ));
    };
    object.entry("vectors").or_insert(Value::from(0));
    object
        .entry("evidence")
        .or_insert(Value::from("experimental"));
    object.entry("sources").or_insert(Value::Array(Vec::new()));
    if let Some(Value::Object(id)) = object.get_mut("event_id") {
        id.entry("fallback").or_insert(Value::from("body_digest"));
        id.entry("from").or_insert(Value::Array(Vec::new()));
        id.entry("retries_keep_id")
            .or_insert(Value::from("unknown"));
    }
    let key = doc.to_string();
    let spec: PackSpec = serde_path_to_error::deserialize(doc).map_err(|e| {
        let path = e.path().to_string();
        let path = if path == "." {
            label.clone()
        } else {
            format!("{label}.{path}")
        };
        PackError::new(path, e.into_inner().to_string())
    })?;
    if builtin(&spec.id).is_some() {
        return Err(PackError::new(
            format!("{label}.id"),
            format!(
                "{:?} is a built-in provider; a user pack needs an id of its own",
                spec.id
            ),
        ));
    }
    static INTERNED: Mutex<Vec<(String, &'static Pack)>> = Mutex::new(Vec::new());
    let mut interned = INTERNED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some((_, pack)) = interned.iter().find(|(k, _)| *k == key) {
        return Ok(pack);
    }
    let mut pack = spec.compile_user(&label)?;
    pack.user_defined = true;
    let pack: &'static Pack = Box::leak(Box::new(pack));
    interned.push((key, pack));
    Ok(pack)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn doc(id: &str) -> Value {
        serde_json::json!({
            "id": id,
            "display_name": "T",
            "scheme": "shared_token",
            "content_types": ["application/json"],
            "secret_format": "utf8",
            "signature": {"headers": ["Authorization"], "token_form": "bearer", "encoding": "text"},
            "event_id": {"signed": false},
            "replay_defence": "body_digest"
        })
    }

    #[test]
    fn a_definition_compiles_once_and_defaults_what_only_shipped_packs_say() {
        let first = compile_user_pack(UserPackSource::Table(0), doc("interned_once")).unwrap();
        // A reload with the same definition (even at another index) reuses the pack.
        let again = compile_user_pack(UserPackSource::Table(3), doc("interned_once")).unwrap();
        assert!(std::ptr::eq(first, again));
        assert!(first.user_defined());
        assert_eq!(first.vectors(), 0);
        assert_eq!(first.evidence().as_str(), "experimental");
        assert_eq!(
            first.id_source(),
            "sha256:<hex SHA-256 of the verified body>"
        );
        let other = compile_user_pack(UserPackSource::Table(0), doc("interned_other")).unwrap();
        assert!(!std::ptr::eq(first, other));
    }

    #[test]
    fn a_built_in_id_is_refused_under_the_source_label() {
        let e = compile_user_pack(UserPackSource::DirFile("gh.json"), doc("github")).unwrap_err();
        assert_eq!(e.path, "provider_packs_dir[gh.json].id");
        let e = compile_user_pack(UserPackSource::Table(1), Value::from(3)).unwrap_err();
        assert_eq!(e.path, "provider_packs[1]");
    }
}
