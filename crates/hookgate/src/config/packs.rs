//! User-defined provider packs: `[[provider_packs]]` tables and the `*.json` files of
//! `provider_packs_dir`, compiled at start-up and on reload by the same engine as the
//! built-in packs. Errors name the key (`provider_packs[2].signature.encoding`) or, for a
//! directory pack, the file (`provider_packs_dir[acme.json].id`).

use std::io::Read;
use std::path::Path;

use hookgate_providers::pack::{self, Pack, UserPackSource};

use super::{ConfigError, err};

/// A pack file larger than this is refused (packs are a few KiB).
const MAX_PACK_FILE_BYTES: u64 = 1024 * 1024;
/// At most this many files are read from `provider_packs_dir`.
const MAX_PACK_FILES: usize = 1024;

/// Compiles every user pack, tables first, then the directory's files by name.
pub(super) fn resolve_user_packs(
    tables: Vec<toml::Value>,
    dir: Option<&str>,
    base: &Path,
) -> Result<Vec<&'static Pack>, ConfigError> {
    let mut packs: Vec<&'static Pack> = Vec::new();
    let mut add = |source: UserPackSource<'_>, doc: serde_json::Value| {
        let pack = pack::compile_user_pack(source, doc).map_err(|e| err(e.path, e.message))?;
        if packs.iter().any(|p| p.id() == pack.id()) {
            return Err(err(
                format!("{}.id", source.label()),
                format!("duplicate provider pack id {:?}", pack.id()),
            ));
        }
        packs.push(pack);
        Ok(())
    };
    for (i, table) in tables.into_iter().enumerate() {
        let doc =
            serde_json::to_value(&table).map_err(|e| err(format!("provider_packs[{i}]"), e))?;
        add(UserPackSource::Table(i), doc)?;
    }
    let Some(dir) = dir else {
        return Ok(packs);
    };
    let path = base.join(dir);
    let entries = std::fs::read_dir(&path).map_err(|e| {
        err(
            "provider_packs_dir",
            format!("cannot read {}: {e}", path.display()),
        )
    })?;
    let mut files = Vec::new();
    for entry in entries {
        let entry = entry.map_err(|e| err("provider_packs_dir", e))?;
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.ends_with(".json") && entry.path().is_file() {
            files.push((name, entry.path()));
        }
    }
    if files.len() > MAX_PACK_FILES {
        return Err(err(
            "provider_packs_dir",
            format!("more than {MAX_PACK_FILES} *.json files"),
        ));
    }
    files.sort();
    for (name, file) in files {
        let at = format!("provider_packs_dir[{name}]");
        let mut text = String::new();
        std::fs::File::open(&file)
            .and_then(|f| f.take(MAX_PACK_FILE_BYTES + 1).read_to_string(&mut text))
            .map_err(|e| err(&at, format!("cannot read {}: {e}", file.display())))?;
        if text.len() as u64 > MAX_PACK_FILE_BYTES {
            return Err(err(&at, format!("larger than {MAX_PACK_FILE_BYTES} bytes")));
        }
        let doc: serde_json::Value =
            serde_json::from_str(&text).map_err(|e| err(&at, format!("not JSON: {e}")))?;
        add(UserPackSource::DirFile(&name), doc)?;
    }
    Ok(packs)
}

/// The pack an endpoint's `provider = "<id>"` names: a built-in one, else a user pack.
pub(super) fn find_pack(id: &str, user_packs: &[&'static Pack]) -> Option<&'static Pack> {
    pack::builtin(id).or_else(|| user_packs.iter().copied().find(|p| p.id() == id))
}

/// Every known id, for the error naming an unknown provider.
pub(super) fn known_ids(user_packs: &[&'static Pack]) -> String {
    let mut ids: Vec<&str> = pack::builtin_packs().iter().map(Pack::id).collect();
    ids.extend(user_packs.iter().map(|p| p.id()));
    ids.join(", ")
}
