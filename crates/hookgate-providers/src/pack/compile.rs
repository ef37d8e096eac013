//! Validation of a [`PackSpec`] into a [`Pack`]: every enumerated string parsed, every
//! location and the signed-bytes template parsed once, and the cross-field rules checked (the
//! template covers the body; `{id}`/`{ts}` have a header source; the declared `signed` flags
//! match what the scheme really covers; `replay_defence` is declared exactly when nothing
//! identifying is signed, or names the signed one-time token). Errors name the field path.
//!
//! Compiled strings are `&'static str`: a pack is compiled once per process (built-ins) or
//! once at start-up (configured packs), so the few bytes this keeps are bounded.

use super::spec::PackSpec;
use super::syntax::{
    Paths, answer_rules, batch_rule, header_names, id_rule, keep, keep_all, locations, non_empty,
    pick, timestamp_rule,
};
use super::{
    Encoding, Evidence, IdFallback, IdRule, Location, Pack, PackError, Part, ReplayDefence,
    RetriesKeepId, Scheme, SecretFormat, SignatureFormat,
};

/// What the signature of a scheme covers, to check the pack's `signed` flags.
struct Coverage<'a> {
    scheme: Scheme,
    template: &'a [Part],
    fields: &'a [&'static str],
    /// `jwt_hmac` with a body hash claim.
    jwt_body: bool,
}

impl Coverage<'_> {
    fn body(&self) -> bool {
        match self.scheme {
            Scheme::SharedToken => false,
            Scheme::UrlParamsHmac | Scheme::UrlNonceHmac => true,
            // the payload field is signed; other form fields are not (not the body as such)
            Scheme::FormPayloadHmac | Scheme::CanonicalRequestHmac => true,
            Scheme::FieldsHmac => false,
            Scheme::JwtHmac => self.jwt_body,
            // A SHA-256 of the body binds it as well as the body itself; a CRC does not.
            _ => self
                .template
                .iter()
                .any(|p| matches!(p, Part::Body | Part::BodySha256 | Part::BodyJson)),
        }
    }

    fn pointer(&self, pointer: &str) -> bool {
        self.body() || self.fields.contains(&pointer)
    }

    /// Whether a value found at every one of `from` is covered (`id_in_template`: the id
    /// header is the `{id}` placeholder).
    fn covers(&self, from: &[Location], id_in_template: bool) -> bool {
        !from.is_empty()
            && from.iter().all(|l| match l {
                Location::Json { pointer, .. } => self.pointer(pointer),
                Location::Header(h) => {
                    id_in_template
                        || self
                            .template
                            .iter()
                            .any(|p| matches!(p, Part::Header(t) if t == h))
                }
                Location::SignatureParam(_) | Location::Query(_) => false,
            })
    }
}

impl PackSpec {
    /// Validates the pack into its executable form (errors under `packs.<id>`).
    pub fn compile(&self) -> Result<Pack, PackError> {
        self.compile_at(&format!("packs.{}", self.id))
    }

    /// Validates the pack, naming errors under `root`.
    pub fn compile_at(&self, root: &str) -> Result<Pack, PackError> {
        self.compile_with(root, false)
    }

    /// A user-defined pack (`provider_packs[2]`): it may name no sources.
    pub(crate) fn compile_user(&self, root: &str) -> Result<Pack, PackError> {
        self.compile_with(root, true)
    }

    /// A `signature_versions` generation, named under `root`.
    pub(super) fn compile_nested(&self, root: &str, user: bool) -> Result<Pack, PackError> {
        self.compile_with(root, user)
    }

    fn compile_with(&self, root: &str, user: bool) -> Result<Pack, PackError> {
        let root = Paths {
            root: root.to_owned(),
        };
        let paths = &root;
        let id_ok = !self.id.is_empty()
            && self.id.starts_with(|c: char| c.is_ascii_lowercase())
            && self
                .id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !id_ok {
            return Err(paths.err(
                "id",
                format!("pack id {:?} must be lower_snake_case", self.id),
            ));
        }
        if self.display_name.trim().is_empty() {
            return Err(paths.err("display_name", "must not be empty"));
        }
        let scheme = pick(
            paths,
            "scheme",
            "scheme",
            &self.scheme,
            &Scheme::ALL
                .iter()
                .map(|s| (s.as_str(), *s))
                .collect::<Vec<_>>(),
        )?;
        let evidence = pick(
            paths,
            "evidence",
            "evidence",
            &self.evidence,
            &[
                ("docs", Evidence::Docs),
                ("sdk", Evidence::Sdk),
                ("experimental", Evidence::Experimental),
            ],
        )?;
        if self.sources.is_empty() && !user {
            return Err(paths.err("sources", "name at least one source"));
        }
        for (i, source) in self.sources.iter().enumerate() {
            if !source.starts_with("https://") {
                return Err(paths.err(
                    &format!("sources[{i}]"),
                    format!("{source:?} is not an https:// URL"),
                ));
            }
        }
        if self.content_types.is_empty() {
            return Err(paths.err("content_types", "name at least one media type"));
        }
        let mut content_types = Vec::new();
        for (i, ct) in self.content_types.iter().enumerate() {
            let ok = ct
                .split_once('/')
                .is_some_and(|(a, b)| !a.is_empty() && !b.is_empty())
                && !ct.contains([';', ' '])
                && *ct == ct.to_ascii_lowercase();
            if !ok {
                return Err(paths.err(
                    &format!("content_types[{i}]"),
                    format!("{ct:?} is not a lower-case media type without parameters"),
                ));
            }
            content_types.push(keep(ct));
        }
        let send_content_type = match &self.send_content_type {
            Some(ct) => non_empty(paths, "send_content_type", ct)?,
            None => content_types[0],
        };
        let secret_format = pick(
            paths,
            "secret_format",
            "secret format",
            &self.secret_format,
            &[
                ("utf8", SecretFormat::Utf8),
                ("whsec_base64", SecretFormat::WhsecBase64),
                ("hex", SecretFormat::Hex),
                ("base64", SecretFormat::Base64),
                ("ed25519_public_hex", SecretFormat::Ed25519PublicHex),
                ("p256_spki_der_base64", SecretFormat::P256SpkiDerBase64),
                ("x509_pem", SecretFormat::X509Pem),
                ("whsec_base64_or_utf8", SecretFormat::WhsecBase64OrUtf8),
                ("ed25519_public_base64", SecretFormat::Ed25519PublicBase64),
                ("key_id_and_secret", SecretFormat::KeyIdAndSecret),
                ("utf8_nfkd", SecretFormat::Utf8Nfkd),
            ],
        )?;

        let public_key_format = match scheme {
            // Ed25519 keys come in hex or base64, as the provider shows them.
            Scheme::Ed25519 if secret_format == SecretFormat::Ed25519PublicBase64 => {
                Some(SecretFormat::Ed25519PublicBase64)
            }
            Scheme::Ed25519 => Some(SecretFormat::Ed25519PublicHex),
            Scheme::EcdsaP256 => Some(SecretFormat::P256SpkiDerBase64),
            Scheme::RsaSha256Certificate => Some(SecretFormat::X509Pem),
            _ => None,
        };
        let is_public = matches!(
            secret_format,
            SecretFormat::Ed25519PublicHex
                | SecretFormat::Ed25519PublicBase64
                | SecretFormat::P256SpkiDerBase64
                | SecretFormat::X509Pem
        );
        if public_key_format.is_some_and(|f| f != secret_format)
            || (public_key_format.is_none() && is_public)
        {
            return Err(paths.err(
                "secret_format",
                format!(
                    "{:?} does not fit the {} scheme",
                    self.secret_format,
                    scheme.as_str()
                ),
            ));
        }

        let (token_source, token_form) = super::generic::token_settings(paths, self, scheme)?;
        let gzip = super::generic::gzip_declared(paths, self)?;
        let super::signature_rules::SignatureRules {
            signature_headers,
            algorithm,
            algorithm_option,
            encoding,
            jwt,
            format,
            parts,
            option_rules,
            fields,
            key_id_header,
            nonce_header,
            form_payload,
            signed_headers_header,
            algorithm_header,
            body_hash_param,
            required_headers,
        } = super::signature_rules::signature_rules(
            paths,
            self,
            scheme,
            secret_format,
            token_source,
        )?;

        let timestamp = self
            .timestamp
            .as_ref()
            .map(|t| timestamp_rule(paths, t, &format))
            .transpose()?;
        if matches!(
            format,
            SignatureFormat::KeyValue {
                timestamp_key: Some(_),
                ..
            } | SignatureFormat::TimestampThenSignatures { .. }
        ) {
            let from_param = timestamp
                .as_ref()
                .is_some_and(|t| matches!(t.from.as_slice(), [Location::SignatureParam(_)]));
            if !from_param {
                return Err(paths.err(
                    "timestamp.from",
                    "the signature format has a timestamp_key; take the timestamp from it",
                ));
            }
        }
        let ts_in_template = parts.iter().any(|p| matches!(p, Part::Timestamp));
        let ts_from_body = timestamp
            .as_ref()
            .is_some_and(|t| matches!(t.from.as_slice(), [Location::Json { .. }]));
        if let Some(rules) = &fields {
            // The timestamp of a fields_hmac pack is one of its signed fields.
            if let Some(t) = &timestamp {
                let signed = match t.from.as_slice() {
                    [Location::Json { pointer, .. }] => rules.fields.contains(pointer),
                    _ => false,
                };
                if !signed {
                    return Err(paths.err(
                        "timestamp.from",
                        "a fields_hmac timestamp is one json pointer among signature.fields",
                    ));
                }
            }
        } else if scheme.uses_template() {
            if ts_in_template && (timestamp.is_none() || ts_from_body) {
                return Err(paths.err(
                    "signature.signed",
                    "{ts} needs a timestamp taken from a header or the signature header",
                ));
            }
            if timestamp.is_some() && !ts_in_template && !ts_from_body {
                return Err(paths.err(
                    "timestamp",
                    "the timestamp is not signed ({ts} is not in signature.signed); leave it out",
                ));
            }
        } else if scheme == Scheme::CanonicalRequestHmac {
            // the timestamp header is one of the canonical request's signed headers (its
            // presence is checked by signature_rules)
        } else if timestamp.is_some() {
            return Err(paths.err(
                "timestamp",
                format!("the {} scheme signs no timestamp", scheme.as_str()),
            ));
        }

        // Signed fields as pointers into the document (batch items: into each item).
        let covered_fields: Vec<&'static str> = match &fields {
            None => Vec::new(),
            Some(f) if self.batch.is_some() => f.fields.clone(),
            Some(f) => f
                .object
                .iter()
                .flat_map(|o| f.fields.iter().map(move |p| keep(&format!("{o}{p}"))))
                .collect(),
        };
        let coverage = Coverage {
            scheme,
            template: &parts,
            fields: &covered_fields,
            jwt_body: jwt.as_ref().is_some_and(|j| j.body_hash.is_some()),
        };
        // Without a location, the id is the body digest (`fallback = "body_digest"`).
        let event_id = if self.event_id.from.is_empty()
            && self.event_id.fallback.as_deref() == Some("body_digest")
        {
            IdRule::Json(Vec::new())
        } else {
            id_rule(paths, &self.event_id)?
        };
        let reconcile = super::reconcile::compile(paths, self.reconcile.as_ref(), &event_id)?;
        let id_in_template = parts.iter().any(|p| matches!(p, Part::Id));
        if id_in_template && !matches!(event_id, IdRule::Headers(_)) {
            return Err(paths.err("signature.signed", "{id} needs an event id from headers"));
        }
        let id_signed = match &event_id {
            IdRule::Headers(_) => id_in_template,
            IdRule::Json(pointers) if pointers.is_empty() => coverage.body(),
            IdRule::Json(pointers) => pointers.iter().all(|p| coverage.pointer(p)),
            IdRule::Composed(parts) => parts.iter().all(|(p, _)| coverage.pointer(p)),
        };
        if id_signed != self.event_id.signed {
            return Err(paths.err(
                "event_id.signed",
                format!(
                    "declared {} but the signature {} the id",
                    self.event_id.signed,
                    if id_signed {
                        "covers"
                    } else {
                        "does not cover"
                    }
                ),
            ));
        }
        let id_fallback = match self.event_id.fallback.as_deref() {
            None => IdFallback::None,
            Some("body_digest") => IdFallback::BodyDigest,
            Some("signature") => {
                let single = matches!(
                    format,
                    SignatureFormat::Plain {
                        repeated_header: false,
                        each_header: false,
                        separator: None,
                        ..
                    }
                ) && !signature_headers.is_empty()
                    && encoding != Encoding::Text;
                if !single {
                    return Err(paths.err(
                        "event_id.fallback",
                        "needs one signature from a plain signature header",
                    ));
                }
                IdFallback::Signature
            }
            Some(other) => {
                return Err(paths.err(
                    "event_id.fallback",
                    format!("unknown fallback {other:?} (expected signature, body_digest)"),
                ));
            }
        };
        let retries_keep_id = pick(
            paths,
            "event_id.retries_keep_id",
            "value",
            &self.event_id.retries_keep_id,
            &[
                ("yes", RetriesKeepId::Yes),
                ("no", RetriesKeepId::No),
                ("unknown", RetriesKeepId::Unknown),
            ],
        )?;

        let event_type = match &self.event_type {
            Some(t) => {
                let from = locations(paths, "event_type.from", &t.from)?;
                if from
                    .iter()
                    .any(|l| matches!(l, Location::SignatureParam(_) | Location::Query(_)))
                    || from.is_empty()
                {
                    return Err(paths.err("event_type.from", "expected header or json locations"));
                }
                let signed = coverage.covers(&from, false);
                if signed != t.signed {
                    return Err(paths.err(
                        "event_type.signed",
                        format!(
                            "declared {} but the signature {} the type",
                            t.signed,
                            if signed { "covers" } else { "does not cover" }
                        ),
                    ));
                }
                from
            }
            None => Vec::new(),
        };
        let object_id = locations(paths, "object_id", &self.object_id)?;
        let object_version = locations(paths, "object_version", &self.object_version)?;
        let created_at = locations(paths, "created_at", &self.created_at)?;
        let api_version = locations(paths, "api_version", &self.api_version)?;
        let replay_key = locations(paths, "replay_key", &self.replay_key)?;
        for (field, locs) in [
            ("object_id", &object_id),
            ("object_version", &object_version),
            ("created_at", &created_at),
            ("api_version", &api_version),
            ("replay_key", &replay_key),
        ] {
            if locs
                .iter()
                .any(|l| matches!(l, Location::SignatureParam(_) | Location::Query(_)))
            {
                return Err(paths.err(field, "expected header or json locations"));
            }
        }
        let handshakes = self
            .handshakes
            .iter()
            .enumerate()
            .map(|(i, h)| super::handshake::handshake(paths, i, h))
            .collect::<Result<Vec<_>, _>>()?;
        for (i, h) in handshakes.iter().enumerate() {
            if let Some((_, option)) = h.token
                && !option_rules.iter().any(|o| o.name == option)
            {
                return Err(paths.err(
                    &format!("handshakes[{i}].token.option"),
                    format!("{option:?} is not declared in options"),
                ));
            }
        }
        let form_payload_field = self
            .form_payload_field
            .as_deref()
            .map(|f| non_empty(paths, "form_payload_field", f))
            .transpose()?;
        let batch = batch_rule(paths, self)?;
        let answers = answer_rules(paths, self, &option_rules)?;

        let needs_replay_defence = !id_signed && timestamp.is_none();
        let replay_defence = match &self.replay_defence {
            Some(value) => {
                let defence = pick(
                    paths,
                    "replay_defence",
                    "replay defence",
                    value,
                    &[
                        ("body_digest", ReplayDefence::BodyDigest),
                        ("signed_token", ReplayDefence::SignedToken),
                    ],
                )?;
                match defence {
                    ReplayDefence::BodyDigest if !needs_replay_defence => {
                        return Err(paths.err(
                            "replay_defence",
                            "only for packs whose id and timestamp are both unsigned",
                        ));
                    }
                    ReplayDefence::SignedToken
                        if replay_key.is_empty() || !coverage.covers(&replay_key, false) =>
                    {
                        return Err(paths.err(
                            "replay_defence",
                            "signed_token needs a replay_key the signature covers",
                        ));
                    }
                    _ => {}
                }
                Some(defence)
            }
            None if needs_replay_defence => {
                return Err(paths.err(
                    "replay_defence",
                    "required: neither the id nor a timestamp is signed (use \"body_digest\")",
                ));
            }
            None => None,
        };
        if !replay_key.is_empty() && replay_defence != Some(ReplayDefence::SignedToken) {
            return Err(paths.err("replay_key", "only with replay_defence \"signed_token\""));
        }

        // Headers whose repetition is refused as `duplicated_signature`: everything signed.
        let repeated = matches!(
            format,
            SignatureFormat::Plain {
                repeated_header: true,
                ..
            }
        );
        let mut signed_headers: Vec<&'static str> = Vec::new();
        if !repeated {
            signed_headers.extend(&signature_headers);
        }
        if let Some(t) = &timestamp {
            signed_headers.extend(header_names(&t.from));
        }
        if let (IdRule::Headers(names), true) = (&event_id, id_signed) {
            signed_headers.extend(names);
        }
        for part in &parts {
            if let Part::Header(h) = part {
                signed_headers.push(h);
            }
        }
        if let Some(h) = algorithm_header {
            signed_headers.push(h);
        }
        if let Some(h) = key_id_header {
            signed_headers.push(h);
        }
        if let Some(h) = nonce_header {
            signed_headers.push(h);
        }
        if let Some(h) = signed_headers_header {
            signed_headers.push(h);
        }
        let mut unique = Vec::new();
        for h in signed_headers {
            if !unique.contains(&h) {
                unique.push(h);
            }
        }
        let mut methods = vec![http::Method::POST];
        for h in &handshakes {
            if !methods.contains(&h.method) {
                methods.push(h.method.clone());
            }
        }
        // Last, so that a structural error is reported before a missing citation.
        let citations = super::citations::check_citations(paths, self, evidence)?;
        Ok(Pack {
            id: keep(&self.id),
            vectors: self.vectors,
            notes: self.notes.clone(),
            options: option_rules,
            batch,
            answers,
            replay_key,
            fields,
            algorithm_header,
            body_hash_param,
            id_fallback,
            token_source,
            token_form,
            gzip,
            user_defined: false,
            methods,
            display_name: keep(&self.display_name),
            scheme,
            evidence,
            sources: self.sources.clone(),
            citations,
            content_types: keep_all(content_types),
            send_content_type,
            secret_format,
            signature_header_names: keep_all(signature_headers),
            format,
            algorithm,
            algorithm_option,
            signature_versions: super::signature_versions::compile(paths, self, user)?
                .map(Box::new),
            encoding,
            template: parts,
            timestamp,
            event_id,
            id_signed,
            retries_keep_id,
            event_type,
            object_id,
            object_version,
            created_at,
            api_version,
            handshakes,
            require_body: self.require_body,
            form_payload_field,
            replay_defence,
            redelivery_horizon_seconds: self.redelivery_horizon_seconds,
            reconcile,
            key_id_header,
            jwt,
            nonce_header,
            form_payload,
            signed_headers_header,
            required_headers,
            duplicate_checked_headers: keep_all(unique),
        })
    }
}
