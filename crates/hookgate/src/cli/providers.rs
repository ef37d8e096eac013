//! `hookgate providers list|show|docs`: what the built-in provider packs verify, from the
//! binary itself. Needs no configuration (user packs from a config file come later).

use std::io::Write;

use clap::Subcommand;
use hookgate_providers::pack::{self, Pack};

#[derive(Debug, Subcommand)]
pub enum ProvidersCommand {
    /// List the built-in provider packs (id, name, scheme, evidence, vectors).
    List {
        /// Print only a JSON array, one object per pack, with every fact `show` prints.
        #[arg(long)]
        json: bool,
    },
    /// Show what one pack verifies: signature, signed bytes, secret format, event id, retries,
    /// tolerance, handshakes, batches, answer, options, replay defence, unauthenticated headers,
    /// evidence and sources.
    Show {
        /// The pack id, as in `provider = "<id>"` (see `providers list`).
        id: String,
    },
    /// Print docs/providers.md as generated from the packs
    /// (`hookgate providers docs > docs/providers.md`); with `--dir docs`, write
    /// `docs/providers.md` and one page per pack, `docs/providers/<id>.md`.
    Docs {
        /// Write the table and every provider page under this folder instead of printing.
        #[arg(long)]
        dir: Option<std::path::PathBuf>,
    },
}

/// Runs a `providers` subcommand; returns the exit code (2: unknown pack id).
pub fn run(command: ProvidersCommand) -> anyhow::Result<i32> {
    let packs = pack::builtin_packs();
    let mut out = std::io::stdout().lock();
    match command {
        ProvidersCommand::List { json: true } => {
            let infos: Vec<pack::PackInfo> = packs.iter().map(Pack::info).collect();
            serde_json::to_writer_pretty(&mut out, &infos)?;
            writeln!(out)?;
        }
        ProvidersCommand::List { json: false } => out.write_all(list_table(packs).as_bytes())?,
        ProvidersCommand::Show { id } => match pack::builtin(&id) {
            Some(pack) => out.write_all(show_text(pack).as_bytes())?,
            None => {
                let known: Vec<&str> = packs.iter().map(Pack::id).collect();
                eprintln!(
                    "error: unknown provider {id:?} (known: {})",
                    known.join(", ")
                );
                return Ok(2);
            }
        },
        ProvidersCommand::Docs { dir: None } => {
            out.write_all(pack::render_providers_markdown().as_bytes())?
        }
        ProvidersCommand::Docs { dir: Some(dir) } => write_docs(&dir)?,
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

/// The human listing: one aligned row per pack.
fn list_table(packs: &[Pack]) -> String {
    let header = ["ID", "NAME", "SCHEME", "EVIDENCE", "VECTORS"];
    let rows: Vec<[String; 5]> = packs
        .iter()
        .map(|p| {
            [
                p.id().to_owned(),
                p.display_name().to_owned(),
                p.scheme().as_str().to_owned(),
                p.evidence().as_str().to_owned(),
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
    let mut push_row = |cells: [&str; 5]| {
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
        "{} ({}), scheme {}\n\n",
        pack.display_name(),
        pack.id(),
        pack.scheme().as_str()
    );
    for (label, text) in lines {
        let label = format!("{label}:");
        out.push_str(&format!("{label:<width$} {text}\n"));
    }
    out.push_str("\nConfiguration:\n\n");
    out.push_str(&pack.configuration_example());
    out
}
