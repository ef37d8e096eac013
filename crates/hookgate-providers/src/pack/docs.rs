//! What a pack says about itself: [`PackInfo`] for `providers list --json`, [`Pack::describe`]
//! for `providers show`, and `docs/providers.md`, generated from the built-in packs and the
//! page template `providers_page.md` ([`render_providers_markdown`]; a test of the binary
//! compares it with the file byte for byte).

use std::fmt::Write;

use super::api::OptionInfo;
use super::{
    Algorithm, Encoding, HandshakeAnswer, IdRule, Location, OptionFormat, Pack, PackInfo, Part,
    Scheme, SecretFormat, SignatureFormat, TimeFormat, Window, builtin_packs,
};

/// The page's general prose; `{summary}` and `{providers}` are replaced by the generated table
/// and sections.
const PAGE_TEMPLATE: &str = include_str!("providers_page.md");

fn location_text(location: &Location) -> String {
    match location {
        Location::Header(h) => format!("header {h}"),
        Location::Json { pointer, .. } => format!("body {pointer}"),
        Location::SignatureParam(k) => format!("signature item {k}"),
        Location::Query(q) => format!("query {q}"),
    }
}

fn locations_text(locations: &[Location]) -> Option<String> {
    if locations.is_empty() {
        return None;
    }
    let texts: Vec<String> = locations.iter().map(location_text).collect();
    Some(texts.join(", else "))
}

fn yes_no(value: bool) -> &'static str {
    if value { "yes" } else { "no" }
}

/// `259200` → `259200 s (3 days)`.
fn duration_text(seconds: u64) -> String {
    match seconds {
        s if s >= 86_400 && s % 86_400 == 0 => format!("{s} s ({} days)", s / 86_400),
        s if s >= 3_600 && s % 3_600 == 0 => format!("{s} s ({} h)", s / 3_600),
        s => format!("{s} s"),
    }
}

impl SecretFormat {
    fn as_str(self) -> &'static str {
        match self {
            SecretFormat::Utf8 => "utf8",
            SecretFormat::WhsecBase64 => "whsec_base64",
            SecretFormat::Hex => "hex",
            SecretFormat::Base64 => "base64",
            SecretFormat::Ed25519PublicHex => "ed25519_public_hex",
            SecretFormat::P256SpkiDerBase64 => "p256_spki_der_base64",
            SecretFormat::X509Pem => "x509_pem",
        }
    }

    fn description(self) -> &'static str {
        match self {
            SecretFormat::Utf8 => {
                "the secret string exactly as the provider shows it, used verbatim (its UTF-8 \
                 bytes; not decoded, any prefix included)"
            }
            SecretFormat::WhsecBase64 => {
                "`whsec_` followed by base64, as the provider shows it (the prefix is \
                 optional); the key is the decoded bytes"
            }
            SecretFormat::Hex => {
                "the HMAC key in hex, as the provider shows it; the key is the decoded bytes"
            }
            SecretFormat::Base64 => {
                "the key in base64, as the provider shows it; the key is the decoded bytes"
            }
            SecretFormat::Ed25519PublicHex => {
                "the provider's Ed25519 public key in hex (64 digits); it verifies only"
            }
            SecretFormat::P256SpkiDerBase64 => {
                "the provider's ECDSA P-256 verification key, base64 of its DER \
                 SubjectPublicKeyInfo; it verifies only"
            }
            SecretFormat::X509Pem => {
                "the provider's signing certificate in PEM (pinned: a certificate URL named by \
                 the request is never fetched); it verifies only"
            }
        }
    }
}

impl Encoding {
    fn as_str(self) -> &'static str {
        match self {
            Encoding::Hex => "hex",
            Encoding::Base64 => "base64",
            Encoding::Base64Url => "base64url",
            Encoding::Text => "text",
        }
    }
}

impl Algorithm {
    fn hmac_text(self) -> &'static str {
        match self {
            Algorithm::Sha1 => "HMAC-SHA1",
            Algorithm::Sha256 => "HMAC-SHA256",
            Algorithm::Sha512 => "HMAC-SHA512",
        }
    }
}

impl TimeFormat {
    fn as_str(self) -> &'static str {
        match self {
            TimeFormat::UnixSeconds => "unix seconds",
            TimeFormat::UnixMillis => "unix milliseconds",
            TimeFormat::Rfc3339 => "RFC 3339",
        }
    }
}

impl Window {
    fn as_str(self) -> &'static str {
        match self {
            Window::PastOnly => "past_only",
            Window::Both => "both",
        }
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

    /// Whether the signature covers a value read at `location` (the rule `compile` checks
    /// the declared `signed` flags against).
    fn location_signed(&self, location: &Location) -> bool {
        match location {
            Location::Header(h) => {
                self.duplicate_checked_headers.contains(h)
                    || self
                        .template
                        .iter()
                        .any(|p| matches!(p, Part::Header(t) if t == h))
            }
            Location::Json { pointer, .. } => {
                let body = match self.scheme {
                    Scheme::SharedToken | Scheme::FieldsHmac => false,
                    Scheme::UrlParamsHmac => true,
                    _ => self.template.contains(&Part::Body),
                };
                body || self
                    .fields
                    .as_ref()
                    .is_some_and(|f| f.fields.contains(pointer))
            }
            Location::SignatureParam(_) => true,
            Location::Query(_) => false,
        }
    }

    /// Every location hookgate reads the id, type, object or created-at from.
    fn read_locations(&self) -> Vec<Location> {
        let mut out: Vec<Location> = match &self.event_id {
            IdRule::Headers(names) => names.iter().map(|n| Location::Header(n)).collect(),
            IdRule::Json(pointers) => pointers
                .iter()
                .map(|p| Location::Json {
                    pointer: p,
                    optional: false,
                })
                .collect(),
            IdRule::Composed(parts) => parts
                .iter()
                .map(|(p, optional)| Location::Json {
                    pointer: p,
                    optional: *optional,
                })
                .collect(),
        };
        for l in [
            &self.event_type,
            &self.object_id,
            &self.object_version,
            &self.created_at,
        ] {
            out.extend(l.iter().copied());
        }
        out
    }

    /// Headers hookgate reads that no signature covers (a sender could change them).
    pub fn unauthenticated_headers(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        for l in self.read_locations() {
            if let Location::Header(h) = l
                && !self.location_signed(&l)
                && !out.contains(&h)
            {
                out.push(h);
            }
        }
        out
    }

    /// JSON fields (or form fields) hookgate reads that no signature covers.
    pub fn unauthenticated_fields(&self) -> Vec<&'static str> {
        let mut out = Vec::new();
        for l in self.read_locations() {
            if let Location::Json { pointer, .. } = l
                && !self.location_signed(&l)
                && !out.contains(&pointer)
            {
                out.push(pointer);
            }
        }
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
                let challenge = h
                    .challenge
                    .map_or(String::new(), |c| format!(" (challenge: body {c})"));
                format!(
                    "{} {} = {}: {answer}{challenge}",
                    h.method,
                    location_text(&h.when),
                    h.equals
                )
            })
            .collect()
    }

    fn answer_texts(&self) -> Vec<String> {
        self.answers
            .iter()
            .map(|a| {
                let mut text = match a.when_present {
                    Some(l) => format!("when {} is present: ", location_text(&l)),
                    None => String::new(),
                };
                text.push_str(&a.status.to_string());
                match (a.content_type, a.body) {
                    (_, "") => text.push_str(", empty body"),
                    (Some(ct), body) => {
                        let _ = write!(text, " {ct} {body}");
                    }
                    (None, body) => {
                        let _ = write!(text, " {body}");
                    }
                }
                if let Some(option) = a.body_option {
                    let _ = write!(text, " (options.{option} replaces the body)");
                }
                text
            })
            .collect()
    }

    fn signature_text(&self) -> String {
        let headers = self.signature_header_names.join(" or ");
        let format = match &self.format {
            SignatureFormat::Plain {
                prefix,
                prefix_optional,
                repeated_header,
            } => {
                let mut text = "the value is the signature".to_owned();
                if let Some(p) = prefix {
                    let _ = write!(
                        text,
                        " after the prefix `{p}`{}",
                        if *prefix_optional { " (optional)" } else { "" }
                    );
                }
                if *repeated_header {
                    text.push_str("; every occurrence of the header is a candidate");
                }
                text
            }
            SignatureFormat::KeyValue {
                pair_separator,
                kv_separator,
                signature_keys,
                timestamp_key,
                ..
            } => {
                let keys: Vec<String> = signature_keys.iter().map(|k| format!("`{k}`")).collect();
                let mut text = format!(
                    "`key{kv_separator}value` items separated by `{pair_separator}`; every {} \
                     item is a candidate (other keys are ignored)",
                    keys.join(" or ")
                );
                if let Some(t) = timestamp_key {
                    let _ = write!(text, "; the timestamp is item `{t}`");
                }
                text
            }
            SignatureFormat::VersionedList {
                separator,
                version_separator,
                versions,
            } => {
                let versions: Vec<String> = versions.iter().map(|v| format!("`{v}`")).collect();
                format!(
                    "`<version>{version_separator}<signature>` entries separated by {}; every {} \
                     entry is a candidate (other versions are skipped)",
                    if *separator == " " {
                        "spaces".to_owned()
                    } else {
                        format!("`{separator}`")
                    },
                    versions.join(" or ")
                )
            }
        };
        let mut text = if headers.is_empty() {
            String::new()
        } else {
            format!("header {headers}: {format}")
        };
        if let Some(fields) = &self.fields {
            let place = match &self.batch {
                Some(_) => "each batch item".to_owned(),
                None => fields
                    .object
                    .iter()
                    .map(|o| {
                        if o.is_empty() {
                            "the body itself".to_owned()
                        } else {
                            format!("the object at body {o}")
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(", else "),
            };
            let embedded = format!("field {} of {place}", fields.signature);
            text = if text.is_empty() {
                embedded
            } else {
                format!("{embedded}; without it, {text} (over the raw body)")
            };
        }
        if self.scheme != Scheme::SharedToken {
            text.push_str(". The request verifies if any candidate matches any trusted secret");
        }
        text
    }

    /// The signed bytes: the pack's template (raw), or what its scheme signs, in words.
    fn signed_bytes_text(&self) -> String {
        match self.scheme {
            Scheme::SharedToken => {
                "nothing: the header carries the shared token itself, compared in constant time \
                 (it authenticates the sender, not the body, id or type)"
                    .to_owned()
            }
            Scheme::UrlParamsHmac => {
                let mut text = "`{url}` followed by every form parameter's name and value, sorted \
                                by name"
                    .to_owned();
                if let Some(p) = self.body_hash_param {
                    let _ = write!(
                        text,
                        "; a non-form body is bound by its hex SHA-256 in the signed query \
                         parameter `{p}`"
                    );
                }
                text
            }
            Scheme::FieldsHmac => {
                let mut text = match &self.fields {
                    Some(f) => {
                        let fields: Vec<String> =
                            f.fields.iter().map(|p| format!("`{p}`")).collect();
                        let joined = if f.separator.is_empty() {
                            "concatenated".to_owned()
                        } else {
                            format!("joined by `{}`", f.separator)
                        };
                        format!("the fields {} {joined}", fields.join(", "))
                    }
                    None => String::new(),
                };
                if !self.signature_header_names.is_empty() && !self.template.is_empty() {
                    let _ = write!(text, "; header form: `{}`", self.template_text());
                }
                text
            }
            _ => self.template_text(),
        }
    }

    fn template_text(&self) -> String {
        let mut out = String::new();
        for part in &self.template {
            match part {
                Part::Literal(bytes) => out.push_str(&String::from_utf8_lossy(bytes)),
                Part::Body => out.push_str("{body}"),
                Part::Timestamp => out.push_str("{ts}"),
                Part::Id => out.push_str("{id}"),
                Part::Header(h) => {
                    let _ = write!(out, "{{header:{h}}}");
                }
                Part::Url => out.push_str("{url}"),
                Part::Option(o) => {
                    let _ = write!(out, "{{option:{o}}}");
                }
                Part::BodyCrc32 => out.push_str("{body_crc32}"),
            }
        }
        out
    }

    fn algorithm_text(&self) -> String {
        match self.scheme {
            Scheme::Hmac | Scheme::FieldsHmac => {
                format!("{}, {}", self.algorithm.hmac_text(), self.encoding.as_str())
            }
            Scheme::UrlParamsHmac => {
                let mut text =
                    format!("{}, {}", self.algorithm.hmac_text(), self.encoding.as_str());
                if let Some(h) = self.algorithm_header {
                    let _ = write!(text, " (or the HMAC the `algorithm=` item of {h} selects)");
                }
                text
            }
            Scheme::Ed25519 => format!("Ed25519, {}", self.encoding.as_str()),
            Scheme::EcdsaP256 => {
                format!("ECDSA P-256 / SHA-256 (DER), {}", self.encoding.as_str())
            }
            Scheme::RsaSha256Certificate => {
                format!("RSA PKCS#1 v1.5 / SHA-256, {}", self.encoding.as_str())
            }
            Scheme::SharedToken => "shared token, constant-time comparison".to_owned(),
        }
    }

    fn freshness_text(&self) -> String {
        match &self.timestamp {
            Some(t) => format!(
                "timestamp from {} ({}), signed; default tolerance {} s, {}",
                locations_text(&t.from).unwrap_or_default(),
                t.format.as_str(),
                t.tolerance_seconds,
                match t.window {
                    Window::PastOnly => "past only (future timestamps are accepted)",
                    Window::Both => "both directions",
                }
            ),
            None => {
                "nothing time-based is signed; a replay is recognised by its event id".to_owned()
                    + match self.replay_defence {
                        Some(super::ReplayDefence::BodyDigest) => {
                            " and by its body digest (see Replays of unsigned ids)"
                        }
                        Some(super::ReplayDefence::SignedToken) => " and by its signed token",
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
        ];
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
        lines
    }

    /// Everything `providers list --json` prints about this pack.
    pub fn info(&self) -> PackInfo {
        PackInfo {
            id: self.id,
            display_name: self.display_name,
            scheme: self.scheme.as_str(),
            evidence: self.evidence.as_str(),
            sources: self.sources.clone(),
            vectors: self.vectors,
            content_types: self.content_types.to_vec(),
            secret_format: self.secret_format.as_str(),
            secret: self.secret_format.description().to_owned(),
            signature_headers: self.signature_header_names.to_vec(),
            signature: self.signature_text(),
            signed_bytes: self.signed_bytes_text(),
            algorithm: self.algorithm_text(),
            encoding: self.encoding.as_str(),
            id_location: self.id_source(),
            id_signed: self.id_signed,
            event_type_location: locations_text(&self.event_type),
            type_signed: self.type_signed(),
            timestamp_signed: self.timestamp.is_some(),
            timestamp_location: self
                .timestamp
                .as_ref()
                .and_then(|t| locations_text(&t.from)),
            timestamp_format: self.timestamp.as_ref().map(|t| t.format.as_str()),
            tolerance_seconds: self.default_tolerance_seconds(),
            tolerance_window: self.timestamp.as_ref().map(|t| t.window.as_str()),
            retries_keep_id: self.retries_keep_id.as_str(),
            replay_defence: self.replay_defence.map(|d| d.as_str()),
            batch: self.batch.is_some(),
            batch_items: self.batch.as_ref().map(|b| {
                let items = if b.items.is_empty() {
                    "the body array".to_owned()
                } else {
                    format!("body {}", b.items)
                };
                match b.item {
                    Some(item) => format!("{items} (the object at {item} of each)"),
                    None => items,
                }
            }),
            handshakes: self.handshake_texts(),
            answers: self.answer_texts(),
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
            unauthenticated_fields: self.unauthenticated_fields(),
            redelivery_horizon_seconds: self.redelivery_horizon_seconds,
            notes: self.notes.clone(),
            configuration: self.configuration_example(),
        }
    }

    /// Whether the signature covers the event type (`None`: the pack reads no type).
    pub fn type_signed(&self) -> Option<bool> {
        if self.event_type.is_empty() {
            return None;
        }
        Some(self.event_type.iter().all(|l| self.location_signed(l)))
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
        };
        let tolerance = match (info.tolerance_seconds, info.tolerance_window) {
            (Some(t), Some("past_only")) => format!("{t} s, past only"),
            (Some(t), _) => format!("{t} s, both"),
            (None, _) => "—".to_owned(),
        };
        let _ = writeln!(
            out,
            "| {} | `{}` | `{}` | `{}` | {} | {} | {} | {} | {} | {} | {} | {} |",
            info.display_name,
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
