//! A pack in words: [`Pack::describe`] for `providers show`, and `docs/providers.md`, generated
//! from the built-in packs and the page template `providers_page.md`
//! ([`render_providers_markdown`]; a test of the binary compares it with the file byte for
//! byte).

use std::fmt::Write;

use super::docs::locations_text;
use super::{Pack, ReplayDefence, Scheme, builtin_packs};

/// The page's general prose; `{summary}` and `{providers}` are replaced by the generated table
/// and sections.
const PAGE_TEMPLATE: &str = include_str!("providers_page.md");

fn yes_no(value: bool) -> &'static str {
    if value { "yes" } else { "no" }
}

/// `259200` → `259200 s (3 days)`.
pub(crate) fn duration_text(seconds: u64) -> String {
    match seconds {
        s if s >= 86_400 && s % 86_400 == 0 => format!("{s} s ({} days)", s / 86_400),
        s if s >= 3_600 && s % 3_600 == 0 => format!("{s} s ({} h)", s / 3_600),
        s => format!("{s} s"),
    }
}

impl Pack {
    fn freshness_text(&self) -> String {
        match &self.timestamp {
            Some(t) => format!(
                "timestamp from {} ({}), signed; default tolerance {} s in the past, {} s ahead",
                locations_text(&t.from).unwrap_or_default(),
                t.format.as_str(),
                t.tolerance_seconds,
                t.max_future_seconds.unwrap_or(t.tolerance_seconds),
            ),
            None => {
                "nothing time-based is signed; a replay is recognised by its event id".to_owned()
                    + match self.replay_defence {
                        Some(ReplayDefence::BodyDigest) => {
                            " and by its body digest (see Replays of unsigned ids)"
                        }
                        Some(ReplayDefence::SignedToken) => " and by its signed token",
                        None => "",
                    }
            }
        }
    }

    fn object_text(&self) -> Option<String> {
        let parts: Vec<String> = [
            ("object id", &self.object_id),
            ("version", &self.object_version),
            ("created", &self.created_at),
            ("API version", &self.api_version),
        ]
        .iter()
        .filter_map(|(label, l)| locations_text(l).map(|t| format!("{label} = {t}")))
        .collect();
        (!parts.is_empty()).then(|| parts.join("; "))
    }

    /// An endpoint configuration for this pack: its id, a secret, `public_url` when the URL is
    /// signed and every required option.
    pub fn configuration_example(&self) -> String {
        let mut out = String::new();
        let _ = writeln!(out, "[[endpoints]]");
        let _ = writeln!(out, "id = \"{}\"", self.id.replace('_', "-"));
        let _ = writeln!(out, "provider = \"{}\"", self.id);
        let _ = writeln!(
            out,
            "secrets = [{{ version = \"v1\", value = \"env:{}_SECRET\" }}]",
            self.id.to_ascii_uppercase()
        );
        if self.needs_public_url() {
            let _ = writeln!(
                out,
                "public_url = \"https://hooks.example.com/webhooks/{}\"",
                self.id.replace('_', "-")
            );
        }
        let required: Vec<String> = self
            .options
            .iter()
            .filter(|o| o.required)
            .map(|o| format!("{} = \"…\"", o.name))
            .collect();
        if !required.is_empty() {
            let _ = writeln!(out, "options = {{ {} }}", required.join(", "));
        }
        out
    }

    /// Everything `providers show` prints about this pack, as (label, text) lines in the order
    /// `docs/providers.md` lists them; a label may repeat (one line per handshake).
    pub fn describe(&self) -> Vec<(&'static str, String)> {
        let info = self.info();
        let mut lines = vec![
            ("Secret", info.secret.clone()),
            ("Content types", info.content_types.join(", ")),
        ];
        if !info.content_encodings.is_empty() {
            lines.push((
                "Content encodings",
                format!(
                    "{} (decoded within max_body_bytes; the decoded bytes are verified)",
                    info.content_encodings.join(", ")
                ),
            ));
        }
        lines.extend([
            ("Signature", info.signature.clone()),
            (
                "Signed bytes",
                if self.scheme.uses_template() {
                    format!("`{}`", info.signed_bytes)
                } else {
                    info.signed_bytes.clone()
                },
            ),
            ("Algorithm", info.algorithm.clone()),
            ("Freshness", self.freshness_text()),
            (
                "Event id",
                format!(
                    "{}; signed: {}; retries and redeliveries keep it: {}",
                    info.id_location,
                    yes_no(info.id_signed),
                    info.retries_keep_id
                ),
            ),
        ]);
        if let Some(location) = &info.event_type_location {
            let signed = info.type_signed.unwrap_or(false);
            lines.push((
                "Event type",
                format!("{location}; signed: {}", yes_no(signed)),
            ));
        }
        if let Some(object) = self.object_text() {
            lines.push(("Object", object));
        }
        let mut unauthenticated: Vec<String> = info
            .unauthenticated_headers
            .iter()
            .map(|h| format!("header {h}"))
            .collect();
        unauthenticated.extend(
            info.unauthenticated_fields
                .iter()
                .map(|f| format!("body {f}")),
        );
        let unauthenticated = if unauthenticated.is_empty() {
            "nothing hookgate reads (id, type, object and times are all covered)".to_owned()
        } else {
            unauthenticated.join(", ")
        };
        lines.push(("Not authenticated", unauthenticated));
        if let Some(items) = &info.batch_items {
            lines.push((
                "Batches",
                format!("one event per element of {items}, each verified; all or nothing"),
            ));
        }
        for h in &info.handshakes {
            lines.push(("Handshake", h.clone()));
        }
        let answer = if info.answers.is_empty() {
            "200 with hookgate's JSON status".to_owned()
        } else {
            info.answers.join("; otherwise ")
        };
        lines.push(("Answer", answer));
        if info.needs_public_url {
            lines.push((
                "Public URL",
                "required: `public_url`, the URL as registered with the provider (it is signed)"
                    .to_owned(),
            ));
        }
        for o in &info.options {
            lines.push((
                "Option",
                format!(
                    "`{}` ({}{}): {}",
                    o.name,
                    o.format,
                    if o.required { ", required" } else { "" },
                    o.description
                ),
            ));
        }
        let replay = match info.replay_defence {
            Some("body_digest") => "`body_digest`: a verified body already accepted under \
                                    another id within the idempotency window answers \
                                    `duplicate` of the first row"
                .to_owned(),
            Some(other) => format!(
                "`{other}`: a reused signed token answers `duplicate` of the row it first created"
            ),
            None => "none needed: the event id or a timestamp is signed".to_owned(),
        };
        lines.push(("Replay defence", replay));
        if let Some(h) = info.redelivery_horizon_seconds {
            lines.push(("Redelivery horizon", duration_text(h)));
        }
        let send = if info.signs {
            "signs with the endpoint's secret"
        } else {
            "needs the provider's private key to sign (the configured key only verifies)"
        };
        lines.push(("hookgate send", send.to_owned()));
        if let Some(notes) = &info.notes {
            lines.push(("Notes", notes.clone()));
        }
        lines.push(("Evidence", info.evidence.to_owned()));
        lines.push(("Known-answer vectors", info.vectors.to_string()));
        lines.push(("Sources", info.sources.join(", ")));
        if !info.citations.is_empty() {
            let cited: Vec<String> = info
                .citations
                .iter()
                .map(|(fact, source)| format!("{fact}: {source}"))
                .collect();
            lines.push(("Citations", cited.join("; ")));
        }
        lines
    }
}

/// A table cell: `|` would end the cell.
fn cell(text: &str) -> String {
    text.replace('|', "\\|")
}

fn summary_table(packs: &[Pack]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} provider packs. Evidence: `docs` = the provider's documentation, `sdk` = an \
         official SDK's source or tests, `experimental` = neither confirmed.\n",
        packs.len()
    );
    let _ = writeln!(
        out,
        "| provider | `provider =` | scheme | secret | signed bytes | id signed | timestamp signed | tolerance | retries keep id | replay defence | evidence | vectors |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|---|---|---|");
    for pack in packs {
        let info = pack.info();
        let signed = match pack.scheme {
            Scheme::Hmac | Scheme::Ed25519 | Scheme::EcdsaP256 | Scheme::RsaSha256Certificate => {
                format!("`{}`", pack.template_text())
            }
            Scheme::SharedToken => "— (token)".to_owned(),
            Scheme::UrlParamsHmac => "`{url}` + sorted form parameters".to_owned(),
            Scheme::FieldsHmac => "selected fields".to_owned(),
            Scheme::JwtHmac => "JWT claims (URL, body hash)".to_owned(),
            Scheme::UrlNonceHmac => {
                "`{url}` (query sorted) + sorted form parameters + nonce".to_owned()
            }
            Scheme::FormPayloadHmac => "a form field's text".to_owned(),
            Scheme::CanonicalRequestHmac => "method + path + listed headers + body".to_owned(),
        };
        let tolerance = match (info.tolerance_seconds, info.max_future_seconds) {
            (Some(t), Some(f)) if f != t => format!("{t} s past, {f} s ahead"),
            (Some(t), _) => format!("{t} s, both"),
            (None, _) => "—".to_owned(),
        };
        let _ = writeln!(
            out,
            "| [{}](providers/{}.md) | `{}` | `{}` | `{}` | {} | {} | {} | {} | {} | {} | {} | {} |",
            info.display_name,
            info.id,
            info.id,
            info.scheme,
            info.secret_format,
            cell(&signed),
            yes_no(info.id_signed),
            yes_no(info.timestamp_signed),
            tolerance,
            info.retries_keep_id,
            info.replay_defence.unwrap_or("—"),
            info.evidence,
            info.vectors
        );
    }
    out
}

fn provider_section(pack: &Pack) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "\n## {} (`{}`)\n", pack.display_name, pack.id);
    let _ = writeln!(out, "```toml\n{}```\n", pack.configuration_example());
    for (label, text) in pack.describe() {
        let _ = writeln!(out, "- **{label}:** {text}");
    }
    out
}

/// `docs/providers.md`, generated from the built-in packs.
pub fn render_providers_markdown() -> String {
    let packs = builtin_packs();
    let sections: String = packs.iter().map(provider_section).collect();
    PAGE_TEMPLATE
        .replacen("{summary}\n", &summary_table(packs), 1)
        .replacen("{providers}\n", &sections, 1)
}
