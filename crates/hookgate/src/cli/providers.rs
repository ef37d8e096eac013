//! `hookgate providers list|show|docs|test`: what the provider packs verify, from the binary
//! itself — the built-in packs, plus a configuration's user packs with `--config` — and
//! `test`, which runs one captured request through an endpoint's pack step by step
//! (`providers_test.rs`).

use std::io::Write;
use std::path::PathBuf;

use clap::Subcommand;
use hookgate_providers::pack::{self, Pack};

use super::providers_test::{self, TestArgs};
use crate::config::Config;

#[derive(Debug, Subcommand)]
pub enum ProvidersCommand {
    /// List the provider packs (id, name, scheme, evidence, origin, vectors); with --config,
    /// the configuration's user packs too.
    List {
        /// Print only a JSON array, one object per pack, with every fact `show` prints.
        #[arg(long)]
        json: bool,
        /// Include the user packs of this configuration (`[[provider_packs]]`,
        /// `provider_packs_dir`).
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Show what one pack verifies: signature, signed bytes, secret format, event id, retries,
    /// tolerance, handshakes, batches, answer, options, replay defence, unauthenticated headers,
    /// evidence and sources.
    Show {
        /// The pack id, as in `provider = "<id>"` (see `providers list`).
        id: String,
        /// Also look among the user packs of this configuration.
        #[arg(long, short)]
        config: Option<PathBuf>,
    },
    /// Print docs/providers.md as generated from the packs
    /// (`hookgate providers docs > docs/providers.md`); with `--dir docs`, write
    /// `docs/providers.md` and one page per pack, `docs/providers/<id>.md`.
    Docs {
        /// Write the table and every provider page under this folder instead of printing.
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
    },
    /// Run a captured raw HTTP request through an endpoint's pack and print each step's
    /// verdict (never a secret, a signature or the body). Exit code 0 when it verifies.
    Test(TestArgs),
}

/// Runs a `providers` subcommand; returns the exit code (2: unknown pack id).
pub fn run(command: ProvidersCommand) -> anyhow::Result<i32> {
    let mut out = std::io::stdout().lock();
    match command {
        ProvidersCommand::List { json, config } => {
            let packs = all_packs(config)?;
            if json {
                let infos: Vec<pack::PackInfo> = packs.iter().map(|p| p.info()).collect();
                serde_json::to_writer_pretty(&mut out, &infos)?;
                writeln!(out)?;
            } else {
                out.write_all(list_table(&packs).as_bytes())?;
            }
        }
        ProvidersCommand::Show { id, config } => {
            let packs = all_packs(config)?;
            match packs.iter().find(|p| p.id() == id) {
                Some(pack) => out.write_all(show_text(pack).as_bytes())?,
                None => {
                    let known: Vec<&str> = packs.iter().map(|p| p.id()).collect();
                    eprintln!(
                        "error: unknown provider {id:?} (known: {})",
                        known.join(", ")
                    );
                    return Ok(2);
                }
            }
        }
        ProvidersCommand::Docs { dir: None } => {
            out.write_all(pack::render_providers_markdown().as_bytes())?
        }
        ProvidersCommand::Docs { dir: Some(dir) } => write_docs(&dir)?,
        ProvidersCommand::Test(args) => return providers_test::run(args),
    }
    out.flush()?;
    Ok(0)
}

/// `<dir>/providers.md` and `<dir>/providers/<id>.md` for every pack; a page of a pack that
/// no longer exists is removed, so the folder is exactly what the packs say.
fn write_docs(dir: &std::path::Path) -> anyhow::Result<()> {
    use anyhow::Context;
    let pages_dir = dir.join("providers");
    std::fs::create_dir_all(&pages_dir)
        .with_context(|| format!("creating {}", pages_dir.display()))?;
    let table = dir.join("providers.md");
    std::fs::write(&table, pack::render_providers_markdown())
        .with_context(|| format!("writing {}", table.display()))?;
    let pages = pack::render_provider_pages();
    for entry in std::fs::read_dir(&pages_dir)? {
        let path = entry?.path();
        let name = path
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or_default();
        if name.ends_with(".md") && !pages.iter().any(|(file, _)| file == name) {
            std::fs::remove_file(&path).with_context(|| format!("removing {}", path.display()))?;
        }
    }
    for (file, text) in pages {
        let path = pages_dir.join(file);
        std::fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
    }
    Ok(())
}

/// The built-in packs, then the user packs of `config` (validated like at start-up).
fn all_packs(config: Option<PathBuf>) -> anyhow::Result<Vec<&'static Pack>> {
    let mut packs: Vec<&'static Pack> = pack::builtin_packs().iter().collect();
    if let Some(path) = config {
        packs.extend(Config::load(&path)?.provider_packs);
    }
    Ok(packs)
}

/// The human listing: one aligned row per pack; user packs and experimental ones are marked.
fn list_table(packs: &[&Pack]) -> String {
    let header = ["ID", "NAME", "SCHEME", "EVIDENCE", "ORIGIN", "VECTORS"];
    let rows: Vec<[String; 6]> = packs
        .iter()
        .map(|p| {
            [
                p.id().to_owned(),
                p.display_name().to_owned(),
                p.scheme().as_str().to_owned(),
                match p.evidence() {
                    pack::Evidence::Experimental => "experimental (unconfirmed)".to_owned(),
                    other => other.as_str().to_owned(),
                },
                if p.user_defined() { "user" } else { "builtin" }.to_owned(),
                p.vectors().to_string(),
            ]
        })
        .collect();
    let mut widths = header.map(str::len);
    for row in &rows {
        for (w, cell) in widths.iter_mut().zip(row) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let mut out = String::new();
    let mut push_row = |cells: [&str; 6]| {
        let line: Vec<String> = cells
            .iter()
            .zip(widths)
            .map(|(c, w)| format!("{c:<w$}"))
            .collect();
        out.push_str(line.join("  ").trim_end());
        out.push('\n');
    };
    push_row(header);
    for row in &rows {
        push_row(row.each_ref().map(String::as_str));
    }
    out
}

/// `providers show`: the pack's facts as aligned `label: text` lines, then a configuration.
fn show_text(pack: &Pack) -> String {
    let lines = pack.describe();
    let width = lines.iter().map(|(l, _)| l.len()).max().unwrap_or(0) + 1;
    let mut out = format!(
        "{} ({}), scheme {}{}\n\n",
        pack.display_name(),
        pack.id(),
        pack.scheme().as_str(),
        if pack.user_defined() {
            ", user pack (from the configuration)"
        } else {
            ""
        }
    );
    for (label, text) in lines {
        let label = format!("{label}:");
        out.push_str(&format!("{label:<width$} {text}\n"));
    }
    out.push_str("\nConfiguration:\n\n");
    out.push_str(&pack.configuration_example());
    out
}
