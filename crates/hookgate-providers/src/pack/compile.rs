//! Validation of a [`PackSpec`] into a [`PackAdapter`]: every enumerated string parsed, every
//! location and the signed-bytes template parsed once, and the cross-field rules checked (the
//! template covers the body; `{id}`/`{ts}` have a header source; the declared `signed` flags
//! match what the template covers; `replay_defence` is declared exactly when nothing
//! identifying is signed). Errors name the field path.
//!
//! Compiled strings are `&'static str`, because the [`crate::Adapter`] trait hands out static
//! header names and content types: a pack is compiled once per process (built-ins) or once at
//! start-up (configured packs), so the few bytes this keeps are bounded.

use http::HeaderName;

use super::spec::{
    EventIdSpec, HandshakeAnswerSpec, HandshakeSpec, PackSpec, SignatureFormatSpec, TimestampSpec,
};
use super::{
    Algorithm, Encoding, Evidence, HandshakeAnswer, HandshakeRule, IdRule, Location, PackAdapter,
    PackError, Part, ReplayDefence, RetriesKeepId, Scheme, SecretFormat, SignatureFormat,
    TimeFormat, TimestampRule, Window,
};

fn keep(text: &str) -> &'static str {
    Box::leak(text.to_owned().into_boxed_str())
}

fn keep_all(texts: Vec<&'static str>) -> &'static [&'static str] {
    Box::leak(texts.into_boxed_slice())
}

/// Field paths under `packs.<id>`.
struct Paths {
    root: String,
}

impl Paths {
    fn at(&self, field: &str) -> String {
        format!("{}.{field}", self.root)
    }
    fn err(&self, field: &str, message: impl Into<String>) -> PackError {
        PackError::new(self.at(field), message.into())
    }
}

/// Picks one of `allowed` or fails with `unknown <what> "<value>" (expected a, b, c)`.
fn pick<T: Copy>(
    paths: &Paths,
    field: &str,
    what: &str,
    value: &str,
    allowed: &[(&str, T)],
) -> Result<T, PackError> {
    allowed
        .iter()
        .find(|(name, _)| *name == value)
        .map(|(_, v)| *v)
        .ok_or_else(|| {
            let names: Vec<&str> = allowed.iter().map(|(n, _)| *n).collect();
            paths.err(
                field,
                format!("unknown {what} {value:?} (expected {})", names.join(", ")),
            )
        })
}

fn header_name(paths: &Paths, field: &str, name: &str) -> Result<&'static str, PackError> {
    let lower = name.to_ascii_lowercase();
    HeaderName::from_bytes(lower.as_bytes())
        .map_err(|_| paths.err(field, format!("{name:?} is not a valid header name")))?;
    Ok(keep(&lower))
}

fn location(paths: &Paths, field: &str, text: &str) -> Result<Location, PackError> {
    let (kind, rest) = text.split_once(':').ok_or_else(|| {
        paths.err(
            field,
            format!("location {text:?} must be kind:value (header, json, signature)"),
        )
    })?;
    match kind {
        "header" => Ok(Location::Header(header_name(paths, field, rest)?)),
        "json" => {
            let (pointer, optional) = match rest.strip_suffix('?') {
                Some(p) => (p, true),
                None => (rest, false),
            };
            if !pointer.starts_with('/') {
                return Err(paths.err(
                    field,
                    format!("JSON pointer {pointer:?} must start with \"/\""),
                ));
            }
            Ok(Location::Json {
                pointer: keep(pointer),
                optional,
            })
        }
        "signature" if !rest.is_empty() => Ok(Location::SignatureParam(keep(rest))),
        _ => Err(paths.err(
            field,
            format!("unknown location kind {kind:?} (expected header, json, signature)"),
        )),
    }
}

fn locations(paths: &Paths, field: &str, texts: &[String]) -> Result<Vec<Location>, PackError> {
    texts
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let loc = location(paths, &format!("{field}[{i}]"), t)?;
            match loc {
                Location::Json { optional: true, .. } => Err(paths.err(
                    &format!("{field}[{i}]"),
                    "optional (`?`) locations are only for composed event ids",
                )),
                other => Ok(other),
            }
        })
        .collect()
}

/// Parses `{body}`, `{ts}`, `{id}`, `{header:Name}` and literal text.
fn template(paths: &Paths, text: &str) -> Result<Vec<Part>, PackError> {
    let field = "signature.signed";
    let mut parts = Vec::new();
    let mut rest = text;
    let mut bodies = 0;
    while !rest.is_empty() {
        match rest.find(['{', '}']) {
            Some(0) if rest.starts_with('{') => {
                let end = rest
                    .find('}')
                    .ok_or_else(|| paths.err(field, format!("unclosed \"{{\" in {text:?}")))?;
                let name = &rest[1..end];
                parts.push(match name {
                    "body" => {
                        bodies += 1;
                        Part::Body
                    }
                    "ts" => Part::Timestamp,
                    "id" => Part::Id,
                    _ => match name.strip_prefix("header:") {
                        Some(h) => Part::Header(header_name(paths, field, h)?),
                        None => {
                            return Err(paths.err(
                                field,
                                format!(
                                    "unknown placeholder {{{name}}} (expected body, ts, id, header:Name)"
                                ),
                            ));
                        }
                    },
                });
                rest = &rest[end + 1..];
            }
            Some(0) => return Err(paths.err(field, format!("stray \"}}\" in {text:?}"))),
            Some(at) => {
                parts.push(Part::Literal(keep(&rest[..at]).as_bytes()));
                rest = &rest[at..];
            }
            None => {
                parts.push(Part::Literal(keep(rest).as_bytes()));
                rest = "";
            }
        }
    }
    if bodies != 1 {
        return Err(paths.err(field, "the template must contain {body} exactly once"));
    }
    Ok(parts)
}

fn non_empty(paths: &Paths, field: &str, value: &str) -> Result<&'static str, PackError> {
    if value.is_empty() {
        Err(paths.err(field, "must not be empty"))
    } else {
        Ok(keep(value))
    }
}

fn signature_format(
    paths: &Paths,
    spec: &SignatureFormatSpec,
) -> Result<SignatureFormat, PackError> {
    Ok(match spec {
        SignatureFormatSpec::Plain(p) => SignatureFormat::Plain {
            prefix: match &p.prefix {
                Some(prefix) => Some(non_empty(paths, "signature.format.plain.prefix", prefix)?),
                None if p.prefix_optional => {
                    return Err(
                        paths.err("signature.format.plain.prefix_optional", "needs a prefix")
                    );
                }
                None => None,
            },
            prefix_optional: p.prefix_optional,
            repeated_header: p.repeated_header,
        },
        SignatureFormatSpec::KeyValue(kv) => {
            let f = |n: &str| format!("signature.format.key_value.{n}");
            if kv.signature_keys.is_empty() {
                return Err(paths.err(&f("signature_keys"), "must name at least one key"));
            }
            SignatureFormat::KeyValue {
                pair_separator: non_empty(paths, &f("pair_separator"), &kv.pair_separator)?,
                kv_separator: non_empty(paths, &f("kv_separator"), &kv.kv_separator)?,
                signature_keys: kv.signature_keys.iter().map(|k| keep(k)).collect(),
                timestamp_key: kv.timestamp_key.as_deref().map(keep),
                skip_undecodable: kv.skip_undecodable,
            }
        }
        SignatureFormatSpec::VersionedList(vl) => {
            let f = |n: &str| format!("signature.format.versioned_list.{n}");
            if vl.versions.is_empty() {
                return Err(paths.err(&f("versions"), "must name at least one version"));
            }
            SignatureFormat::VersionedList {
                separator: non_empty(paths, &f("separator"), &vl.separator)?,
                version_separator: non_empty(
                    paths,
                    &f("version_separator"),
                    &vl.version_separator,
                )?,
                versions: vl.versions.iter().map(|k| keep(k)).collect(),
            }
        }
    })
}

fn timestamp_rule(
    paths: &Paths,
    spec: &TimestampSpec,
    format: &SignatureFormat,
) -> Result<TimestampRule, PackError> {
    let from = locations(paths, "timestamp.from", &spec.from)?;
    let shape_ok = match from.as_slice() {
        [] => false,
        [Location::SignatureParam(key)] => {
            matches!(format, SignatureFormat::KeyValue { timestamp_key: Some(k), .. } if k == key)
        }
        [Location::Json { .. }] => true,
        many => many.iter().all(|l| matches!(l, Location::Header(_))),
    };
    if !shape_ok {
        return Err(paths.err(
            "timestamp.from",
            "expected header locations, or the signature format's timestamp_key as \
             signature:<key>, or one json:/pointer",
        ));
    }
    Ok(TimestampRule {
        from,
        format: pick(
            paths,
            "timestamp.format",
            "timestamp format",
            &spec.format,
            &[
                ("unix_seconds", TimeFormat::UnixSeconds),
                ("unix_millis", TimeFormat::UnixMillis),
                ("rfc3339", TimeFormat::Rfc3339),
            ],
        )?,
        tolerance_seconds: spec.tolerance_seconds,
        window: pick(
            paths,
            "timestamp.window",
            "window",
            &spec.window,
            &[("past_only", Window::PastOnly), ("both", Window::Both)],
        )?,
    })
}

fn id_rule(paths: &Paths, spec: &EventIdSpec) -> Result<IdRule, PackError> {
    if spec.from.is_empty() {
        return Err(paths.err("event_id.from", "must name at least one location"));
    }
    if spec.compose {
        let mut parts = Vec::new();
        for (i, text) in spec.from.iter().enumerate() {
            let field = format!("event_id.from[{i}]");
            match location(paths, &field, text)? {
                Location::Json { pointer, optional } => parts.push((pointer, optional)),
                _ => return Err(paths.err(&field, "composed ids take json locations only")),
            }
        }
        if parts.iter().all(|(_, optional)| *optional) {
            return Err(paths.err("event_id.from", "a composed id needs a required part"));
        }
        return Ok(IdRule::Composed(parts));
    }
    let from = locations(paths, "event_id.from", &spec.from)?;
    if from
        .iter()
        .any(|l| matches!(l, Location::SignatureParam(_)))
    {
        return Err(paths.err("event_id.from", "an event id is a header or json location"));
    }
    let headers = from.iter().all(|l| matches!(l, Location::Header(_)));
    let json = from.iter().all(|l| matches!(l, Location::Json { .. }));
    match (headers, json) {
        (true, _) => Ok(IdRule::Headers(header_names(&from))),
        (_, true) => Ok(IdRule::Json(
            from.iter()
                .filter_map(|l| match l {
                    Location::Json { pointer, .. } => Some(*pointer),
                    _ => None,
                })
                .collect(),
        )),
        _ => Err(paths.err(
            "event_id.from",
            "alternatives must all be headers or all be json",
        )),
    }
}

fn header_names(from: &[Location]) -> Vec<&'static str> {
    from.iter()
        .filter_map(|l| match l {
            Location::Header(h) => Some(*h),
            _ => None,
        })
        .collect()
}

fn handshake(paths: &Paths, i: usize, spec: &HandshakeSpec) -> Result<HandshakeRule, PackError> {
    let f = |n: &str| format!("handshakes[{i}].{n}");
    let when = location(paths, &f("when"), &spec.when)?;
    let challenge = match location(paths, &f("challenge"), &spec.challenge)? {
        Location::Json {
            pointer,
            optional: false,
        } => pointer,
        _ => return Err(paths.err(&f("challenge"), "the challenge is a json location")),
    };
    if matches!(
        when,
        Location::SignatureParam(_) | Location::Json { optional: true, .. }
    ) {
        return Err(paths.err(&f("when"), "expected a header or json location"));
    }
    let answer = match &spec.answer {
        HandshakeAnswerSpec::EchoText => HandshakeAnswer::EchoText,
        HandshakeAnswerSpec::EchoJson(e) => HandshakeAnswer::EchoJson {
            field: non_empty(paths, &f("answer.echo_json.field"), &e.field)?,
        },
        HandshakeAnswerSpec::EchoWithDigest(e) => HandshakeAnswer::EchoWithDigest {
            echo_field: non_empty(
                paths,
                &f("answer.echo_with_digest.echo_field"),
                &e.echo_field,
            )?,
            digest_field: non_empty(
                paths,
                &f("answer.echo_with_digest.digest_field"),
                &e.digest_field,
            )?,
        },
    };
    Ok(HandshakeRule {
        when,
        equals: keep(&spec.equals),
        challenge,
        answer,
    })
}

/// Whether the signed bytes cover a value found at `from` (json: the body is signed).
fn covered(from: &[Location], template: &[Part], id_in_template: bool) -> bool {
    !from.is_empty()
        && from.iter().all(|l| match l {
            Location::Json { .. } => true,
            Location::Header(h) => {
                id_in_template
                    || template
                        .iter()
                        .any(|p| matches!(p, Part::Header(t) if t == h))
            }
            Location::SignatureParam(_) => false,
        })
}

impl PackSpec {
    /// Validates the pack into its executable form.
    pub fn compile(&self) -> Result<PackAdapter, PackError> {
        let root = Paths {
            root: format!("packs.{}", self.id),
        };
        let paths = &root;
        let id_ok = !self.id.is_empty()
            && self.id.starts_with(|c: char| c.is_ascii_lowercase())
            && self
                .id
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
        if !id_ok {
            return Err(PackError::new(
                "packs".to_owned(),
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
            &[("hmac", Scheme::Hmac)],
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
        if self.sources.is_empty() {
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
            ],
        )?;

        let sig = &self.signature;
        if sig.headers.is_empty() {
            return Err(paths.err("signature.headers", "name at least one header"));
        }
        let signature_headers = sig
            .headers
            .iter()
            .enumerate()
            .map(|(i, h)| header_name(paths, &format!("signature.headers[{i}]"), h))
            .collect::<Result<Vec<_>, _>>()?;
        let algorithm = pick(
            paths,
            "signature.algorithm",
            "algorithm",
            &sig.algorithm,
            &[
                ("hmac-sha1", Algorithm::Sha1),
                ("hmac-sha256", Algorithm::Sha256),
                ("hmac-sha512", Algorithm::Sha512),
            ],
        )?;
        let encoding = pick(
            paths,
            "signature.encoding",
            "encoding",
            &sig.encoding,
            &[
                ("hex", Encoding::Hex),
                ("base64", Encoding::Base64),
                ("base64url", Encoding::Base64Url),
            ],
        )?;
        let format = signature_format(paths, &sig.format)?;
        let parts = template(paths, &sig.signed)?;

        let timestamp = self
            .timestamp
            .as_ref()
            .map(|t| timestamp_rule(paths, t, &format))
            .transpose()?;
        if let SignatureFormat::KeyValue {
            timestamp_key: Some(_),
            ..
        } = format
        {
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

        let event_id = id_rule(paths, &self.event_id)?;
        let id_in_template = parts.iter().any(|p| matches!(p, Part::Id));
        if id_in_template && !matches!(event_id, IdRule::Headers(_)) {
            return Err(paths.err("signature.signed", "{id} needs an event id from headers"));
        }
        let id_signed = match &event_id {
            IdRule::Headers(_) => id_in_template,
            IdRule::Json(_) | IdRule::Composed(_) => true,
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
                    .any(|l| matches!(l, Location::SignatureParam(_)))
                    || from.is_empty()
                {
                    return Err(paths.err("event_type.from", "expected header or json locations"));
                }
                let signed = covered(&from, &parts, false);
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
        for (field, locs) in [
            ("object_id", &object_id),
            ("object_version", &object_version),
            ("created_at", &created_at),
        ] {
            if locs
                .iter()
                .any(|l| matches!(l, Location::SignatureParam(_)))
            {
                return Err(paths.err(field, "expected header or json locations"));
            }
        }
        let handshakes = self
            .handshakes
            .iter()
            .enumerate()
            .map(|(i, h)| handshake(paths, i, h))
            .collect::<Result<Vec<_>, _>>()?;
        let form_payload_field = self
            .form_payload_field
            .as_deref()
            .map(|f| non_empty(paths, "form_payload_field", f))
            .transpose()?;

        let needs_replay_defence = !id_signed && timestamp.is_none();
        let replay_defence = match &self.replay_defence {
            Some(value) => {
                let defence = pick(
                    paths,
                    "replay_defence",
                    "replay defence",
                    value,
                    &[("body_digest", ReplayDefence::BodyDigest)],
                )?;
                if !needs_replay_defence {
                    return Err(paths.err(
                        "replay_defence",
                        "only for packs whose id and timestamp are both unsigned",
                    ));
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
        let mut unique = Vec::new();
        for h in signed_headers {
            if !unique.contains(&h) {
                unique.push(h);
            }
        }
        Ok(PackAdapter {
            id: keep(&self.id),
            display_name: keep(&self.display_name),
            scheme,
            evidence,
            sources: self.sources.clone(),
            content_types: keep_all(content_types),
            send_content_type,
            secret_format,
            signature_header_names: keep_all(signature_headers),
            format,
            algorithm,
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
            handshakes,
            require_body: self.require_body,
            form_payload_field,
            replay_defence,
            redelivery_horizon_seconds: self.redelivery_horizon_seconds,
            duplicate_checked_headers: keep_all(unique),
        })
    }
}
