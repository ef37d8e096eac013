//! `docs/providers/<id>.md`: one page per built-in pack, generated from it — the facts the
//! issue asks every pack to record (scheme, secret format, id source and whether retries keep
//! it, timestamp and tolerance, handshake, retry horizon), each next to its citation.

use std::fmt::Write;

use super::page::duration_text;
use super::{Pack, builtin_packs};

/// A citation as a Markdown cell: a link for a docs page, code for an SDK file.
fn citation_cell(pack: &Pack, fact: &str) -> String {
    match pack.citations.get(fact) {
        Some(url) if url.starts_with("https://") => format!("<{url}>"),
        Some(sdk) => format!("`{sdk}`"),
        None => "not cited (the pack is experimental)".to_owned(),
    }
}

fn cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

impl Pack {
    /// The page `docs/providers/<id>.md` of this pack.
    pub fn provider_page(&self) -> String {
        let info = self.info();
        let mut out = String::new();
        let _ = writeln!(out, "# {} (`{}`)\n", self.display_name, self.id);
        let _ = writeln!(
            out,
            "<!-- Generated from crates/hookgate-providers/packs/{}.json; do not edit by hand.\n\
             Regenerate with: hookgate providers docs --dir docs -->\n",
            self.id
        );
        let evidence = match info.evidence {
            "sdk" => {
                "every fact below is confirmed in the provider's documentation or its official \
                      SDK's source, at least one in the SDK"
            }
            "docs" => "every fact below is confirmed in the provider's documentation",
            _ => {
                "experimental: not every fact below is confirmed in the provider's documentation \
                  or SDK source"
            }
        };
        let _ = writeln!(
            out,
            "Evidence: **{}** — {evidence}. Known-answer vectors: {} \
             (`testdata/vectors/{}*.json`). All providers: [providers.md](../providers.md).\n",
            info.evidence, info.vectors, self.id
        );
        let _ = writeln!(out, "```toml\n{}```\n", self.configuration_example());
        let timestamp = match &info.tolerance_seconds {
            Some(tolerance) => format!(
                "{} ({}), signed; tolerance {tolerance} s in the past, {} s ahead",
                info.timestamp_location.clone().unwrap_or_default(),
                info.timestamp_format.unwrap_or_default(),
                info.max_future_seconds.unwrap_or(*tolerance)
            ),
            None => "none signed".to_owned(),
        };
        let handshake = if info.handshakes.is_empty() {
            "none".to_owned()
        } else {
            info.handshakes.join("; ")
        };
        let horizon = match info.redelivery_horizon_seconds {
            Some(h) => duration_text(h),
            None => "not documented by the provider (see the notes)".to_owned(),
        };
        let signed_bytes = if self.scheme.uses_template() {
            format!("`{}`", info.signed_bytes)
        } else {
            info.signed_bytes.clone()
        };
        let rows = [
            (
                "Scheme",
                format!(
                    "`{}`: {}; signed bytes {signed_bytes}; {}",
                    info.scheme, info.signature, info.algorithm
                ),
                "signature",
            ),
            (
                "Secret format",
                format!("`{}`: {}", info.secret_format, info.secret),
                "secret_format",
            ),
            (
                "Content types",
                info.content_types.join(", "),
                "content_types",
            ),
            ("Timestamp and tolerance", timestamp, "timestamp"),
            (
                "Event id",
                format!(
                    "{}; signed: {}; retries and manual redeliveries keep it: {}",
                    info.id_location,
                    if info.id_signed { "yes" } else { "no" },
                    info.retries_keep_id
                ),
                "event_id",
            ),
            ("Handshake", handshake, "handshake"),
            ("Retry horizon", horizon, "redelivery_horizon"),
        ];
        let _ = writeln!(out, "| fact | value | source |\n|---|---|---|");
        for (fact, value, key) in rows {
            let source = match key {
                "timestamp" if info.tolerance_seconds.is_none() => "—".to_owned(),
                "handshake" if info.handshakes.is_empty() => "—".to_owned(),
                "redelivery_horizon" if info.redelivery_horizon_seconds.is_none() => "—".to_owned(),
                _ => citation_cell(self, key),
            };
            let _ = writeln!(out, "| {fact} | {} | {source} |", cell(&value));
        }
        let _ = writeln!(out, "\n## Everything the pack says\n");
        for (label, text) in self.describe() {
            let _ = writeln!(out, "- **{label}:** {text}");
        }
        out
    }
}

/// Every page under `docs/providers/`: `(file name, text)`, one per built-in pack.
pub fn render_provider_pages() -> Vec<(String, String)> {
    builtin_packs()
        .iter()
        .map(|p| (format!("{}.md", p.id), p.provider_page()))
        .collect()
}
