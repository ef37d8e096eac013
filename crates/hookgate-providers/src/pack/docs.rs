//! What a pack says about itself: [`PackInfo`] for `providers list --json` (the words for
//! `providers show` and `docs/providers.md` are in `page`).

use std::fmt::Write;

use super::api::OptionInfo;
use super::{
    HandshakeAnswer, IdRule, Location, OptionFormat, Pack, PackInfo, Part, Scheme, SignatureFormat,
};

pub(super) fn location_text(location: &Location) -> String {
    match location {
        Location::Header(h) => format!("header {h}"),
        Location::Json { pointer, .. } => format!("body {pointer}"),
        Location::SignatureParam(k) => format!("signature item {k}"),
        Location::Query(q) => format!("query {q}"),
    }
}

pub(super) fn locations_text(locations: &[Location]) -> Option<String> {
    if locations.is_empty() {
        return None;
    }
    let texts: Vec<String> = locations.iter().map(location_text).collect();
    Some(texts.join(", else "))
}

impl Pack {
    /// Where the event id comes from, in words.
    pub fn id_source(&self) -> String {
        let mut text = match &self.event_id {
            IdRule::Headers(names) => format!("header {}", names.join(" or ")),
            // No id sent: the fallback is the whole answer.
            IdRule::Json(pointers)
                if pointers.is_empty() && self.id_fallback == super::IdFallback::Signature =>
            {
                return "none sent: sig:<the verified signature, hex>".to_owned();
            }
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
        match self.id_fallback {
            super::IdFallback::None => {}
            super::IdFallback::Signature => {
                text.push_str("; else sig:<the verified signature, hex>");
            }
            super::IdFallback::BodyDigest if matches!(&self.event_id, IdRule::Json(p) if p.is_empty()) =>
            {
                text = "sha256:<hex SHA-256 of the verified body>".to_owned();
            }
            super::IdFallback::BodyDigest => {
                text.push_str("; else sha256:<hex SHA-256 of the verified body>");
            }
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
                    Scheme::JwtHmac => self.jwt.as_ref().is_some_and(|j| j.body_hash.is_some()),
                    Scheme::UrlParamsHmac | Scheme::UrlNonceHmac | Scheme::FormPayloadHmac => true,
                    _ => self
                        .template
                        .iter()
                        .any(|p| matches!(p, Part::Body | Part::BodySha256 | Part::BodyJson)),
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
            &self.api_version,
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
                    HandshakeAnswer::Digest {
                        field,
                        prefix,
                        base64,
                    } => format!(
                        "{{\"{field}\": \"{prefix}\" + {} HMAC of the challenge}}",
                        if base64 { "base64" } else { "hex" }
                    ),
                    HandshakeAnswer::EchoHeader { header } => {
                        format!("200, the challenge in the {header} header")
                    }
                    HandshakeAnswer::Constant {
                        status, body: "", ..
                    } => {
                        format!("{status}, empty body")
                    }
                    HandshakeAnswer::Constant { status, body, .. } => format!("{status} {body}"),
                };
                let mut challenge = h.challenge.map_or(String::new(), |c| {
                    format!(" (challenge: {})", location_text(&c))
                });
                if let Some(format) = h.challenge_format {
                    let _ = write!(
                        challenge,
                        "; challenge at most {} {:?} characters",
                        format.max_length, format.chars
                    );
                }
                if let Some((query, option)) = h.token {
                    let _ = write!(
                        challenge,
                        "; unsigned, proven by query {query} equal to options.{option}"
                    );
                }
                if h.unsigned {
                    challenge.push_str("; unsigned");
                }
                let when = match (&h.when, h.equals) {
                    (None, _) => "any request".to_owned(),
                    (Some(l), Some(equals)) => format!("{} = {equals}", location_text(l)),
                    (Some(l), None) => format!("{} present", location_text(l)),
                };
                format!("{} {when}: {answer}{challenge}", h.method)
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
                each_header,
                separator,
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
                if *each_header {
                    text.push_str("; every one of these headers present is a candidate");
                }
                if let Some(s) = separator {
                    let _ = write!(text, "; several signatures separated by `{s}`");
                }
                text
            }
            SignatureFormat::KeyValue {
                pair_separator,
                kv_separator,
                signature_keys,
                timestamp_key,
                group_separator,
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
                if let Some(g) = group_separator {
                    let _ = write!(
                        text,
                        "; whole sets separated by `{g}` (one per secret), each set's signatures                          candidates when its timestamp is the first set's"
                    );
                }
                text
            }
            SignatureFormat::TimestampThenSignatures { separator } => format!(
                "the signed timestamp, then one or more signatures, separated by `{separator}`; \
                 every signature is a candidate"
            ),
            SignatureFormat::VersionedList {
                separator,
                version_separator,
                versions,
                key_id_first,
                ed25519_versions,
            } => {
                let quoted = |vs: &[&str]| -> String {
                    let vs: Vec<String> = vs.iter().map(|v| format!("`{v}`")).collect();
                    vs.join(" or ")
                };
                let key_id = if *key_id_first {
                    format!("<key id>{version_separator}")
                } else {
                    String::new()
                };
                let mut text = format!(
                    "`{key_id}<version>{version_separator}<signature>` entries separated by {}; \
                     every {} entry is a candidate (other versions are skipped)",
                    if *separator == " " {
                        "spaces".to_owned()
                    } else {
                        format!("`{separator}`")
                    },
                    quoted(versions)
                );
                if !ed25519_versions.is_empty() {
                    let _ = write!(
                        text,
                        "; every {} entry is an Ed25519 signature of the same bytes, checked \
                         with the `whpk_` public keys configured as secrets (a `whpk_` key never \
                         checks an HMAC entry, a `whsec_` secret never an Ed25519 one)",
                        quoted(ed25519_versions)
                    );
                }
                text
            }
        };
        let mut text = match self.token_source {
            super::TokenSource::Query(name) if self.scheme != Scheme::SharedToken => {
                format!("query parameter {name}: {format}")
            }
            _ if headers.is_empty() => String::new(),
            _ => format!("header {headers}: {format}"),
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
        if let Some(form) = self.form_payload {
            text = form.signature_text();
        }
        if self.scheme == Scheme::SharedToken {
            text = self.token_text(text);
        } else {
            text.push_str(". The request verifies if any candidate matches any trusted secret");
        }
        text
    }

    /// Where a shared token is found and how it is written, in words.
    fn token_text(&self, header_text: String) -> String {
        use super::{TokenForm, TokenSource};
        match (self.token_source, self.token_form) {
            (TokenSource::Query(name), _) => {
                format!("query parameter {name}: the token itself (never logged)")
            }
            (TokenSource::BodyJson(pointer), _) => format!("body {pointer}: the token itself"),
            (TokenSource::BodyForm(name), _) => format!("form field {name}: the token itself"),
            (TokenSource::HeaderOption(option), form) => format!(
                "the header named by the endpoint option {option}: {}",
                match form {
                    TokenForm::Plain => "the token itself",
                    TokenForm::Bearer => "`Bearer <token>`",
                    TokenForm::Basic => "`Basic base64(user:password)`",
                }
            ),
            (TokenSource::Header, TokenForm::Plain) => header_text,
            (TokenSource::Header, TokenForm::Bearer) => format!(
                "header {}: `Bearer <token>`",
                self.signature_header_names.join(" or ")
            ),
            (TokenSource::Header, TokenForm::Basic) => format!(
                "header {}: `Basic base64(user:password)`, compared with the secret \
                 `user:password`",
                self.signature_header_names.join(" or ")
            ),
        }
    }

    /// The signed bytes: the pack's template (raw), or what its scheme signs, in words.
    fn signed_bytes_text(&self) -> String {
        if let Some(jwt) = &self.jwt {
            return jwt.describe();
        }
        if let Some(nonce) = self.nonce_header {
            return format!(
                "`{{url}}` without its query, then `?` and the query parameters sorted as \
                 `k=v` joined by `&` (when there is a query or a form), `.` when there are both, \
                 every form parameter's name and value sorted by name, then `.` and the \
                 {nonce} header"
            );
        }
        if let Some(text) = self.code_scheme_signed_text() {
            return text;
        }
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

    pub(super) fn template_text(&self) -> String {
        let mut out = String::new();
        for part in &self.template {
            match part {
                Part::Literal(bytes) => out.push_str(
                    &String::from_utf8_lossy(bytes)
                        .replace('{', "{{")
                        .replace('}', "}}"),
                ),
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
                Part::BodySha256 => out.push_str("{body_sha256}"),
                Part::BodyJson => out.push_str("{body_json}"),
                Part::SignatureItem(k) => {
                    let _ = write!(out, "{{signature:{k}}}");
                }
            }
        }
        out
    }

    fn algorithm_text(&self) -> String {
        match self.scheme {
            Scheme::Hmac
            | Scheme::FieldsHmac
            | Scheme::UrlNonceHmac
            | Scheme::FormPayloadHmac
            | Scheme::CanonicalRequestHmac => {
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
            Scheme::JwtHmac => {
                let algs: Vec<&str> = self
                    .jwt
                    .iter()
                    .flat_map(|j| j.algorithms.iter().map(|a| a.as_str()))
                    .collect();
                format!(
                    "JWT signed with {} (the configured secret)",
                    algs.join(" / ")
                )
            }
        }
    }

    /// Everything `providers list --json` prints about this pack.
    pub fn info(&self) -> PackInfo {
        PackInfo {
            id: self.id,
            display_name: self.display_name,
            scheme: self.scheme.as_str(),
            evidence: self.evidence.as_str(),
            sources: self.sources.clone(),
            citations: self.citations.clone(),
            vectors: self.vectors,
            origin: if self.user_defined { "user" } else { "builtin" },
            content_types: self.content_types.to_vec(),
            content_encodings: self.content_encodings().to_vec(),
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
            max_future_seconds: self
                .timestamp
                .as_ref()
                .map(|t| t.max_future_seconds.unwrap_or(t.tolerance_seconds)),
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
