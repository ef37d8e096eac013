//! Embeds every `packs/*.json` as a built-in pack: the list is generated from the folder, so
//! adding a provider is adding its file (sorted by id, so the order is stable).

use std::fmt::Write;
use std::path::Path;

fn main() {
    // Read at run time, not with `env!`: a build script compiled in one checkout and reused
    // from a moved or copied target/ must list the packs of the checkout being built.
    let manifest_dir = std::env::var("CARGO_MANIFEST_DIR").expect("CARGO_MANIFEST_DIR");
    let dir = Path::new(&manifest_dir).join("packs");
    println!("cargo::rerun-if-changed={}", dir.display());
    let mut ids: Vec<String> = std::fs::read_dir(&dir)
        .expect("packs/ is readable")
        .map(|entry| entry.expect("packs/ entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "json"))
        .map(|path| {
            println!("cargo::rerun-if-changed={}", path.display());
            path.file_stem()
                .and_then(|s| s.to_str())
                .expect("pack file names are UTF-8")
                .to_owned()
        })
        .collect();
    ids.sort();
    let mut out = String::from("&[\n");
    for id in &ids {
        let path = dir.join(format!("{id}.json"));
        let _ = writeln!(
            out,
            "    ({id:?}, include_str!({:?})),",
            path.display().to_string()
        );
    }
    out.push(']');
    let target = Path::new(&std::env::var("OUT_DIR").expect("OUT_DIR")).join("builtin_packs.rs");
    std::fs::write(target, out).expect("OUT_DIR is writable");
}
