//! What a pack says about itself: [`PackInfo`] for `providers list --json` / `providers
//! show`, and `docs/providers.md`, generated from the built-in packs
//! ([`render_providers_markdown`]; a test of the binary compares it with the file).

use std::fmt::Write;

use super::api::OptionInfo;
use super::{HandshakeAnswer, IdRule, Location, OptionFormat, Pack, PackInfo, Part, builtin_packs};

fn location_text(location: &Location) -> String {
    match location {
        Location::Header(h) => format!("header {h}"),
        Location::Json { pointer, .. } => format!("body {pointer}"),
        Location::SignatureParam(k) => format!("signature item {k}"),
        Location::Query(q) => format!("query {q}"),
    }
}

impl Pack {
    /// Where the event id comes from, in words.
    pub fn id_source(&self) -> String {
        let mut text = match &self.event_id {
            IdRule::Headers(names) => format!("header {}", names.join(" or ")),
            IdRule::Json(pointers) => format!("body {}", pointers.join(" or ")),
            IdRule::Composed(parts) => {
                let names: Vec<String> = parts
                    .iter()
                    .map(|(p, optional)| format!("{p}{}", if *optional { "?" } else { "" }))
                    .collect();
                format!("body {} joined by ':'", names.join(" + "))
            }
        };
        if self.batch.is_some() {
            text.push_str(" (of each batch item)");
        }
        if self.id_fallback_signature {
            text.push_str("; else sig:<the verified signature, hex>");
        }
        text
    }

    /// Headers hookgate reads that no signature covers (a sender could change them).
    pub fn unauthenticated_headers(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        let mut add = |locations: &[Location]| {
            for l in locations {
                if let Location::Header(h) = l {
                    let signed = self.duplicate_checked_headers.contains(h)
                        || self
                            .template
                            .iter()
                            .any(|p| matches!(p, Part::Header(t) if t == h));
                    if !signed && !out.contains(h) {
                        out.push(*h);
                    }
                }
            }
        };
        if let IdRule::Headers(names) = &self.event_id {
            add(&names
                .iter()
                .map(|n| Location::Header(n))
                .collect::<Vec<_>>());
        }
        add(&self.event_type);
        add(&self.object_id);
        add(&self.created_at);
        out
    }

    fn handshake_texts(&self) -> Vec<String> {
        self.handshakes
            .iter()
            .map(|h| {
                let answer = match h.answer {
                    HandshakeAnswer::EchoText => "echo the challenge as text/plain".to_owned(),
                    HandshakeAnswer::EchoJson { field } => format!("echo {{\"{field}\": …}}"),
                    HandshakeAnswer::EchoWithDigest {
                        echo_field,
                        digest_field,
                    } => format!("{echo_field} + {digest_field} (hex HMAC of it)"),
                    HandshakeAnswer::Constant {
                        status, body: "", ..
                    } => {
                        format!("{status}, empty body")
                    }
                    HandshakeAnswer::Constant { status, body, .. } => format!("{status} {body}"),
                };
                format!(
                    "{} {} = {}: {answer}",
                    h.method,
                    location_text(&h.when),
                    h.equals
                )
            })
            .collect()
    }

    /// Everything `providers list --json` / `providers show` print about this pack.
    pub fn info(&self) -> PackInfo {
        PackInfo {
            id: self.id,
            display_name: self.display_name,
            scheme: self.scheme.as_str(),
            evidence: self.evidence.as_str(),
            sources: self.sources.clone(),
            vectors: self.vectors,
            content_types: self.content_types.to_vec(),
            signature_headers: self.signature_header_names.to_vec(),
            id_location: self.id_source(),
            id_signed: self.id_signed,
            type_signed: self.type_signed(),
            timestamp_signed: self.timestamp.is_some(),
            tolerance_seconds: self.default_tolerance_seconds(),
            retries_keep_id: self.retries_keep_id.as_str(),
            replay_defence: self.replay_defence.map(|d| d.as_str()),
            batch: self.batch.is_some(),
            handshakes: self.handshake_texts(),
            methods: self.methods.iter().map(ToString::to_string).collect(),
            options: self
                .options
                .iter()
                .map(|o| OptionInfo {
                    name: o.name,
                    required: o.required,
                    format: match o.format {
                        OptionFormat::Text => "text",
                        OptionFormat::Json => "json",
                    },
                    description: o.description,
                })
                .collect(),
            needs_public_url: self.needs_public_url(),
            signs: self.has_shared_secret(),
            unauthenticated_headers: self.unauthenticated_headers(),
            redelivery_horizon_seconds: self.redelivery_horizon_seconds,
            notes: self.notes.clone(),
        }
    }

    /// Whether the signature covers the event type (`None`: the pack reads no type).
    pub fn type_signed(&self) -> Option<bool> {
        if self.event_type.is_empty() {
            return None;
        }
        Some(
            !self
                .unauthenticated_headers()
                .iter()
                .any(|h| self.event_type.contains(&Location::Header(h))),
        )
    }
}

fn yes_no(value: bool) -> &'static str {
    if value { "yes" } else { "no" }
}

/// `docs/providers.md`, generated from the built-in packs.
pub fn render_providers_markdown() -> String {
    let packs = builtin_packs();
    let mut out = String::new();
    let _ = writeln!(out, "# Providers\n");
    let _ = writeln!(
        out,
        "<!-- Generated from crates/hookgate-providers/packs/*.json by \
         hookgate_providers::pack::render_providers_markdown; do not edit. -->\n"
    );
    let _ = writeln!(
        out,
        "hookgate ships {} provider packs. Each pack is data executed by one engine; the \
         scheme names the small piece of code that verifies it. Evidence: `docs` = the \
         provider's documentation, `sdk` = an official SDK's source or tests, `experimental` \
         = neither confirmed.\n",
        packs.len()
    );
    let _ = writeln!(
        out,
        "| id | provider | scheme | evidence | id signed | timestamp signed | tolerance | retries keep id | vectors |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|---|");
    for pack in packs {
        let info = pack.info();
        let _ = writeln!(
            out,
            "| `{}` | {} | {} | {} | {} | {} | {} | {} | {} |",
            info.id,
            info.display_name,
            info.scheme,
            info.evidence,
            yes_no(info.id_signed),
            yes_no(info.timestamp_signed),
            info.tolerance_seconds
                .map_or("—".to_owned(), |t| format!("{t} s")),
            info.retries_keep_id,
            info.vectors
        );
    }
    for pack in packs {
        let info = pack.info();
        let _ = writeln!(out, "\n## {} (`{}`)\n", info.display_name, info.id);
        let _ = writeln!(
            out,
            "- Scheme: `{}`; evidence: {}",
            info.scheme, info.evidence
        );
        let _ = writeln!(out, "- Content types: {}", info.content_types.join(", "));
        if !info.signature_headers.is_empty() {
            let _ = writeln!(
                out,
                "- Signature headers: {}",
                info.signature_headers.join(", ")
            );
        }
        let _ = writeln!(
            out,
            "- Event id: {} (signed: {}; retries keep it: {})",
            info.id_location,
            yes_no(info.id_signed),
            info.retries_keep_id
        );
        if let Some(signed) = info.type_signed {
            let _ = writeln!(out, "- Event type signed: {}", yes_no(signed));
        }
        match info.tolerance_seconds {
            Some(t) => {
                let _ = writeln!(out, "- Timestamp signed; tolerance {t} s");
            }
            None => {
                let _ = writeln!(out, "- No signed timestamp");
            }
        }
        if !info.unauthenticated_headers.is_empty() {
            let _ = writeln!(
                out,
                "- Not authenticated by the signature: {}",
                info.unauthenticated_headers.join(", ")
            );
        }
        if let Some(defence) = info.replay_defence {
            let text = match defence {
                "body_digest" => {
                    "a verified body already accepted under another id within the idempotency \
                     window answers `duplicate` of the first row"
                }
                _ => "a reused signed token answers `duplicate` of the row it first created",
            };
            let _ = writeln!(out, "- Replay defence: `{defence}`: {text}");
        }
        if info.batch {
            let _ = writeln!(out, "- Batches: one event per item, all or nothing");
        }
        for h in &info.handshakes {
            let _ = writeln!(out, "- Handshake: {h}");
        }
        if info.needs_public_url {
            let _ = writeln!(out, "- Needs `public_url` (the URL is signed)");
        }
        for o in &info.options {
            let _ = writeln!(
                out,
                "- Option `{}` ({}{}): {}",
                o.name,
                o.format,
                if o.required { ", required" } else { "" },
                o.description
            );
        }
        let _ = writeln!(out, "- `hookgate send` signs: {}", yes_no(info.signs));
        let _ = writeln!(out, "- Known-answer vectors: {}", info.vectors);
        if let Some(notes) = &info.notes {
            let _ = writeln!(out, "- Notes: {notes}");
        }
        let _ = writeln!(out, "- Sources: {}", info.sources.join(", "));
    }
    out
}
