//! The small grammars of a pack: enumerated names, header names, locations
//! (`header:Name`, `json:/pointer`, `signature:key`, `query:name`), the signed-bytes template,
//! signature formats, timestamp, id and handshake rules. Each parser names the field path of
//! what it refuses.

use http::HeaderName;

use super::spec::{EventIdSpec, PackSpec, SignatureFormatSpec, TimestampSpec};
use super::{
    AnswerRule, BatchRule, IdRule, Location, OptionFormat, OptionRule, PackError, Part,
    SignatureFormat, TimeFormat, TimestampRule,
};

pub(crate) fn keep(text: &str) -> &'static str {
    Box::leak(text.to_owned().into_boxed_str())
}

pub(crate) fn keep_all(texts: Vec<&'static str>) -> &'static [&'static str] {
    Box::leak(texts.into_boxed_slice())
}

/// Field paths under `packs.<id>`.
pub(crate) struct Paths {
    pub(crate) root: String,
}

impl Paths {
    pub(crate) fn at(&self, field: &str) -> String {
        format!("{}.{field}", self.root)
    }
    pub(crate) fn err(&self, field: &str, message: impl Into<String>) -> PackError {
        PackError::new(self.at(field), message.into())
    }
}

/// Picks one of `allowed` or fails with `unknown <what> "<value>" (expected a, b, c)`.
pub(crate) fn pick<T: Copy>(
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

pub(crate) fn header_name(
    paths: &Paths,
    field: &str,
    name: &str,
) -> Result<&'static str, PackError> {
    let lower = name.to_ascii_lowercase();
    HeaderName::from_bytes(lower.as_bytes())
        .map_err(|_| paths.err(field, format!("{name:?} is not a valid header name")))?;
    Ok(keep(&lower))
}

pub(crate) fn location(paths: &Paths, field: &str, text: &str) -> Result<Location, PackError> {
    let (kind, rest) = text.split_once(':').ok_or_else(|| {
        paths.err(
            field,
            format!("location {text:?} must be kind:value (header, json, signature, query)"),
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
        "query" if !rest.is_empty() => Ok(Location::Query(keep(rest))),
        _ => Err(paths.err(
            field,
            format!("unknown location kind {kind:?} (expected header, json, signature, query)"),
        )),
    }
}

pub(crate) fn locations(
    paths: &Paths,
    field: &str,
    texts: &[String],
) -> Result<Vec<Location>, PackError> {
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

/// Parses `{body}`, `{ts}`, `{id}`, `{header:Name}`, … and literal text (`{{`, `}}`: braces).
pub(crate) fn template(paths: &Paths, text: &str) -> Result<Vec<Part>, PackError> {
    let field = "signature.signed";
    let mut parts = Vec::new();
    let mut rest = text;
    let mut bodies = 0;
    while !rest.is_empty() {
        match rest.find(['{', '}']) {
            // `{{` and `}}` are literal braces (a signed JSON document: Hygraph)
            Some(0) if rest.starts_with("{{") || rest.starts_with("}}") => {
                parts.push(Part::Literal(keep(&rest[..1]).as_bytes()));
                rest = &rest[2..];
            }
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
                    "body_crc32" => {
                        bodies += 1;
                        Part::BodyCrc32
                    }
                    "body_sha256" => {
                        bodies += 1;
                        Part::BodySha256
                    }
                    "body_json" => {
                        bodies += 1;
                        Part::BodyJson
                    }
                    "ts" => Part::Timestamp,
                    "id" => Part::Id,
                    "url" => Part::Url,
                    _ => match (name.strip_prefix("header:"), name.strip_prefix("option:")) {
                        (Some(h), _) => Part::Header(header_name(paths, field, h)?),
                        (_, Some(o)) if !o.is_empty() => Part::Option(keep(o)),
                        _ if name.len() > 10 && name.starts_with("signature:") => {
                            Part::SignatureItem(keep(&name[10..]))
                        }
                        _ => {
                            return Err(paths.err(
                                field,
                                format!(
                                    "unknown placeholder {{{name}}} (expected body, body_crc32, body_sha256, body_json, ts, id, url, header:Name, option:name, signature:key)"
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
        return Err(paths.err(
            field,
            "the template must contain {body}, {body_crc32}, {body_sha256} or {body_json} exactly once",
        ));
    }
    Ok(parts)
}

pub(crate) fn non_empty(
    paths: &Paths,
    field: &str,
    value: &str,
) -> Result<&'static str, PackError> {
    if value.is_empty() {
        Err(paths.err(field, "must not be empty"))
    } else {
        Ok(keep(value))
    }
}

pub(crate) fn signature_format(
    paths: &Paths,
    spec: &SignatureFormatSpec,
) -> Result<SignatureFormat, PackError> {
    Ok(match spec {
        SignatureFormatSpec::Plain(p) if p.repeated_header && p.each_header => {
            return Err(paths.err(
                "signature.format.plain.each_header",
                "either repeated_header or each_header",
            ));
        }
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
            each_header: p.each_header,
            separator: p
                .separator
                .as_deref()
                .map(|s| non_empty(paths, "signature.format.plain.separator", s))
                .transpose()?,
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
                group_separator: kv
                    .group_separator
                    .as_deref()
                    .map(|s| non_empty(paths, &f("group_separator"), s))
                    .transpose()?,
            }
        }
        SignatureFormatSpec::TimestampThenSignatures(t) => {
            SignatureFormat::TimestampThenSignatures {
                separator: non_empty(
                    paths,
                    "signature.format.timestamp_then_signatures.separator",
                    &t.separator,
                )?,
            }
        }
        SignatureFormatSpec::VersionedList(vl) => {
            let f = |n: &str| format!("signature.format.versioned_list.{n}");
            if vl.versions.is_empty() {
                return Err(paths.err(&f("versions"), "must name at least one version"));
            }
            if let Some(v) = vl
                .ed25519_versions
                .iter()
                .find(|v| v.is_empty() || vl.versions.contains(v))
            {
                return Err(paths.err(
                    &f("ed25519_versions"),
                    format!("{v:?} is empty or also an HMAC version"),
                ));
            }
            SignatureFormat::VersionedList {
                separator: non_empty(paths, &f("separator"), &vl.separator)?,
                version_separator: non_empty(
                    paths,
                    &f("version_separator"),
                    &vl.version_separator,
                )?,
                versions: vl.versions.iter().map(|k| keep(k)).collect(),
                ed25519_versions: vl.ed25519_versions.iter().map(|k| keep(k)).collect(),
                key_id_first: vl.key_id_first,
            }
        }
    })
}

pub(crate) fn timestamp_rule(
    paths: &Paths,
    spec: &TimestampSpec,
    format: &SignatureFormat,
) -> Result<TimestampRule, PackError> {
    let from = locations(paths, "timestamp.from", &spec.from)?;
    let shape_ok = match from.as_slice() {
        [] => false,
        [Location::SignatureParam(key)] => match format {
            SignatureFormat::KeyValue {
                timestamp_key: Some(k),
                ..
            } => k == key,
            SignatureFormat::TimestampThenSignatures { .. } => *key == "timestamp",
            _ => false,
        },
        [Location::Json { .. }] => true,
        many => many.iter().all(|l| matches!(l, Location::Header(_))),
    };
    if !shape_ok {
        return Err(paths.err(
            "timestamp.from",
            "expected header locations, or the signature format's timestamp_key as \
             signature:<key> (signature:timestamp for timestamp_then_signatures), or one \
             json:/pointer",
        ));
    }
    let max_future_seconds = match spec.max_future_seconds {
        Some(max) if max > spec.tolerance_seconds => {
            return Err(paths.err(
                "timestamp.max_future_seconds",
                format!(
                    "{max} exceeds tolerance_seconds ({}): the future bound is at most the tolerance",
                    spec.tolerance_seconds
                ),
            ));
        }
        other => other,
    };
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
                ("iso8601_utc", TimeFormat::Iso8601Utc),
            ],
        )?,
        tolerance_seconds: spec.tolerance_seconds,
        max_future_seconds,
    })
}

pub(crate) fn id_rule(paths: &Paths, spec: &EventIdSpec) -> Result<IdRule, PackError> {
    if spec.from.is_empty() {
        // The provider sends no id: only the verified signature identifies a delivery.
        if !spec.compose && spec.fallback.as_deref() == Some("signature") {
            return Ok(IdRule::Json(Vec::new()));
        }
        return Err(paths.err(
            "event_id.from",
            "must name at least one location (or none, with fallback \"signature\")",
        ));
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
        return Ok(IdRule::Composed(parts));
    }
    let from = locations(paths, "event_id.from", &spec.from)?;
    if from
        .iter()
        .any(|l| matches!(l, Location::SignatureParam(_)))
    {
        return Err(paths.err("event_id.from", "an event id is a header or json location"));
    }
    if from.iter().any(|l| matches!(l, Location::Query(_))) {
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

pub(crate) fn header_names(from: &[Location]) -> Vec<&'static str> {
    from.iter()
        .filter_map(|l| match l {
            Location::Header(h) => Some(*h),
            _ => None,
        })
        .collect()
}

/// An HTTP status a pack may answer with: 2xx only (anything else would make the provider
/// retry a delivery hookgate accepted).
pub(crate) fn status(paths: &Paths, field: &str, status: u16) -> Result<u16, PackError> {
    if (200..300).contains(&status) {
        Ok(status)
    } else {
        Err(paths.err(field, format!("{status} is not a 2xx status")))
    }
}

/// The options a pack declares.
pub(crate) fn option_rules(paths: &Paths, spec: &PackSpec) -> Result<Vec<OptionRule>, PackError> {
    spec.options
        .iter()
        .enumerate()
        .map(|(i, o)| {
            let f = |n: &str| format!("options[{i}].{n}");
            let name_ok = !o.name.is_empty()
                && o.name
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_');
            if !name_ok {
                return Err(paths.err(&f("name"), format!("{:?} is not lower_snake", o.name)));
            }
            Ok(OptionRule {
                name: keep(&o.name),
                required: o.required,
                format: pick(
                    paths,
                    &f("format"),
                    "option format",
                    &o.format,
                    &[("text", OptionFormat::Text), ("json", OptionFormat::Json)],
                )?,
                description: non_empty(paths, &f("description"), &o.description)?,
            })
        })
        .collect::<Result<Vec<_>, _>>()
}

/// Where a batch's items live.
pub(crate) fn batch_rule(paths: &Paths, spec: &PackSpec) -> Result<Option<BatchRule>, PackError> {
    spec.batch
        .as_ref()
        .map(|b| {
            let pointer_ok = |p: &str| p.is_empty() || p.starts_with('/');
            if !pointer_ok(&b.items) {
                return Err(paths.err("batch.items", "a JSON pointer (\"\" = the body)"));
            }
            if b.item.as_deref().is_some_and(|p| !p.starts_with('/')) {
                return Err(paths.err("batch.item", "a JSON pointer starting with \"/\""));
            }
            Ok(BatchRule {
                items: keep(&b.items),
                item: b.item.as_deref().map(keep),
            })
        })
        .transpose()
}

/// The provider-required answers to accepted events.
pub(crate) fn answer_rules(
    paths: &Paths,
    spec: &PackSpec,
    option_rules: &[OptionRule],
) -> Result<Vec<AnswerRule>, PackError> {
    spec.answers
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let f = |n: &str| format!("answers[{i}].{n}");
            if let Some(name) = &a.body_option
                && !option_rules.iter().any(|o| o.name == name)
            {
                return Err(paths.err(
                    &f("body_option"),
                    format!("{name:?} is not one of the pack's options"),
                ));
            }
            Ok(AnswerRule {
                when_present: a
                    .when_present
                    .as_deref()
                    .map(|l| location(paths, &f("when_present"), l))
                    .transpose()?,
                status: status(paths, &f("status"), a.status)?,
                content_type: a.content_type.as_deref().map(keep),
                body: keep(&a.body),
                body_option: a.body_option.as_deref().map(keep),
            })
        })
        .collect::<Result<Vec<_>, _>>()
}

/// `signature.jwt`: required by the `jwt_hmac` scheme, refused by the others.
pub(crate) fn jwt_rule(
    paths: &Paths,
    scheme: super::Scheme,
    spec: Option<&super::spec::JwtSpec>,
) -> Result<Option<super::jwt::JwtRule>, PackError> {
    use super::jwt::{HashClaim, HashEncoding, JwtAlgorithm, JwtRule};
    let spec = match (spec, scheme == super::Scheme::JwtHmac) {
        (None, false) => return Ok(None),
        (Some(_), false) => {
            return Err(paths.err("signature.jwt", "only for the jwt_hmac scheme"));
        }
        (None, true) => return Err(paths.err("signature.jwt", "required by the jwt_hmac scheme")),
        (Some(spec), true) => spec,
    };
    if spec.algorithms.is_empty() {
        return Err(paths.err("signature.jwt.algorithms", "name at least one algorithm"));
    }
    let algorithms = spec
        .algorithms
        .iter()
        .enumerate()
        .map(|(i, a)| {
            JwtAlgorithm::parse(a).ok_or_else(|| {
                paths.err(
                    &format!("signature.jwt.algorithms[{i}]"),
                    format!("unknown algorithm {a:?} (expected HS256, HS384, HS512)"),
                )
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let hash = |field: &str, spec: &Option<super::spec::HashClaimSpec>| {
        spec.as_ref()
            .map(|h| {
                Ok(HashClaim {
                    claim: non_empty(paths, &format!("signature.jwt.{field}.claim"), &h.claim)?,
                    encoding: pick(
                        paths,
                        &format!("signature.jwt.{field}.encoding"),
                        "encoding",
                        &h.encoding,
                        &[
                            ("hex", HashEncoding::Hex),
                            ("base64", HashEncoding::Base64),
                            ("base64url", HashEncoding::Base64Url),
                        ],
                    )?,
                })
            })
            .transpose()
    };
    let body_hash = hash("body_hash", &spec.body_hash)?;
    if body_hash.is_none() {
        // Without it the body would be unauthenticated.
        return Err(paths.err(
            "signature.jwt.body_hash",
            "required: the token must bind the body",
        ));
    }
    if spec.issuer_is_key_id && spec.issuer.is_some() {
        return Err(paths.err(
            "signature.jwt.issuer_is_key_id",
            "the issuer is either fixed (issuer) or the signing key's id, not both",
        ));
    }
    Ok(Some(JwtRule {
        algorithms,
        issuer: spec
            .issuer
            .as_deref()
            .map(|i| non_empty(paths, "signature.jwt.issuer", i))
            .transpose()?,
        issuer_is_key_id: spec.issuer_is_key_id,
        subject_is_url: spec.subject_is_url,
        url_hash: hash("url_hash", &spec.url_hash)?,
        body_hash,
        required: spec.required_claims.iter().map(|c| keep(c)).collect(),
        leeway_seconds: spec.leeway_seconds,
    }))
}
