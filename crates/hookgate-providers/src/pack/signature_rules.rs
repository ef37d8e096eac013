//! The `signature` block of a pack, validated for its scheme: signature headers, algorithm,
//! encoding, format, the signed-bytes template, and the scheme-specific keys (`fields_hmac`'s
//! fields, `key_id_header`, `url_nonce_hmac`'s nonce, `url_params_hmac`'s algorithm header
//! and body hash parameter, `jwt_hmac`'s claims). Part of [`PackSpec::compile`]; errors name
//! the field path, in the order the fields are checked.

use super::form_payload::FormPayload;
use super::jwt::JwtRule;
use super::spec::PackSpec;
use super::syntax::{
    Paths, header_name, keep, non_empty, option_rules, pick, signature_format, template,
};
use super::{
    Algorithm, Encoding, FieldsRule, OptionRule, PackError, Part, Scheme, SecretFormat,
    SignatureFormat, TokenSource,
};

/// What [`signature_rules`] validated, for the rest of the compilation.
pub(super) struct SignatureRules {
    pub(super) signature_headers: Vec<&'static str>,
    pub(super) algorithm: Algorithm,
    pub(super) algorithm_option: Option<super::keyed_hash::AlgorithmOption>,
    pub(super) encoding: Encoding,
    pub(super) jwt: Option<JwtRule>,
    pub(super) format: SignatureFormat,
    pub(super) parts: Vec<Part>,
    pub(super) option_rules: Vec<OptionRule>,
    pub(super) fields: Option<FieldsRule>,
    pub(super) key_id_header: Option<&'static str>,
    pub(super) nonce_header: Option<&'static str>,
    pub(super) form_payload: Option<FormPayload>,
    pub(super) signed_headers_header: Option<&'static str>,
    pub(super) algorithm_header: Option<&'static str>,
    pub(super) body_hash_param: Option<&'static str>,
    pub(super) required_headers: &'static [(&'static str, &'static str)],
}

/// Validates `spec.signature` (and the pack's `options`, which the template may name).
pub(super) fn signature_rules(
    paths: &Paths,
    spec: &PackSpec,
    scheme: Scheme,
    secret_format: SecretFormat,
    token_source: TokenSource,
) -> Result<SignatureRules, PackError> {
    let sig = &spec.signature;
    let header_required = !matches!(scheme, Scheme::FieldsHmac | Scheme::FormPayloadHmac)
        && token_source == TokenSource::Header;
    if header_required && sig.headers.is_empty() {
        return Err(paths.err("signature.headers", "name at least one header"));
    }
    let signature_headers = sig
        .headers
        .iter()
        .enumerate()
        .map(|(i, h)| header_name(paths, &format!("signature.headers[{i}]"), h))
        .collect::<Result<Vec<_>, _>>()?;
    let hmac_based = matches!(
        scheme,
        Scheme::Hmac
            | Scheme::UrlParamsHmac
            | Scheme::FieldsHmac
            | Scheme::UrlNonceHmac
            | Scheme::FormPayloadHmac
            | Scheme::CanonicalRequestHmac
    );
    let algorithm = match (&sig.algorithm, hmac_based) {
        (Some(text), true) => pick(
            paths,
            "signature.algorithm",
            "algorithm",
            text,
            super::keyed_hash::ALGORITHMS,
        )?,
        (None, true) => {
            return Err(paths.err("signature.algorithm", "required by HMAC schemes"));
        }
        (Some(_), false) => {
            return Err(paths.err(
                "signature.algorithm",
                format!("the {} scheme fixes its algorithm", scheme.as_str()),
            ));
        }
        // Unused by the scheme; a placeholder keeps the struct simple.
        (None, false) => Algorithm::Sha256,
    };
    let own_parts = matches!(
        scheme,
        Scheme::FormPayloadHmac | Scheme::CanonicalRequestHmac
    );
    if own_parts
        && !matches!(
            algorithm,
            Algorithm::Sha1 | Algorithm::Sha256 | Algorithm::Sha512
        )
    {
        return Err(paths.err(
            "signature.algorithm",
            format!(
                "the {} scheme needs an HMAC (hmac-sha1, hmac-sha256 or hmac-sha512)",
                scheme.as_str()
            ),
        ));
    }
    let encoding = pick(
        paths,
        "signature.encoding",
        "encoding",
        &sig.encoding,
        &[
            ("hex", Encoding::Hex),
            ("hex_upper", Encoding::HexUpper),
            ("base64", Encoding::Base64),
            ("base64url", Encoding::Base64Url),
            ("base64_hex", Encoding::Base64Hex),
            ("text", Encoding::Text),
        ],
    )?;
    if (encoding == Encoding::Text) != matches!(scheme, Scheme::SharedToken | Scheme::JwtHmac) {
        return Err(paths.err(
            "signature.encoding",
            "\"text\" is the encoding of shared tokens and JWTs, and only theirs",
        ));
    }
    let jwt = super::syntax::jwt_rule(paths, scheme, sig.jwt.as_ref())?;
    let format = match &sig.format {
        Some(f) => signature_format(paths, f)?,
        // A shared token is the header's whole value unless a format says otherwise.
        None if (header_required || !signature_headers.is_empty())
            && scheme != Scheme::SharedToken =>
        {
            return Err(paths.err("signature.format", "required with signature headers"));
        }
        None => SignatureFormat::Plain {
            prefix: None,
            prefix_optional: false,
            repeated_header: false,
            each_header: false,
            separator: None,
        },
    };
    super::ed25519_versions::check(paths, scheme, secret_format, &format)?;
    let parts = match (&sig.signed, scheme.uses_template()) {
        (Some(text), true) => template(paths, text)?,
        (None, true) => {
            return Err(paths.err(
                "signature.signed",
                format!("required by the {} scheme", scheme.as_str()),
            ));
        }
        (Some(_), false) => {
            return Err(paths.err(
                "signature.signed",
                format!("the {} scheme builds its own signed bytes", scheme.as_str()),
            ));
        }
        (None, false) => Vec::new(),
    };
    let option_rules = option_rules(paths, spec)?;
    let algorithm_option = super::keyed_hash::algorithm_option(
        paths,
        sig.algorithm_option.as_ref(),
        scheme == Scheme::Hmac,
        &option_rules,
    )?;
    super::key_value::check_signature_items(paths, &parts, &format)?;
    for part in &parts {
        if let Part::Option(name) = part
            && !option_rules.iter().any(|o| o.name == *name && o.required)
        {
            return Err(paths.err(
                "signature.signed",
                format!("{{option:{name}}} needs a required option {name:?} in options"),
            ));
        }
    }
    let fields = if scheme == Scheme::FieldsHmac {
        if sig.fields.is_empty() {
            return Err(paths.err("signature.fields", "name the signed fields"));
        }
        for (i, f) in sig.fields.iter().enumerate() {
            if !f.starts_with('/') {
                return Err(paths.err(
                    &format!("signature.fields[{i}]"),
                    format!("JSON pointer {f:?} must start with \"/\""),
                ));
            }
        }
        let signature = match &sig.field_signature {
            Some(s) if s.starts_with('/') => keep(s),
            _ => {
                return Err(paths.err(
                    "signature.field_signature",
                    "the JSON pointer of the signature inside the signed object",
                ));
            }
        };
        if spec.batch.is_none() && sig.object.is_empty() {
            return Err(paths.err(
                "signature.object",
                "without a batch, name where the signed object lives",
            ));
        }
        Some(FieldsRule {
            fields: sig.fields.iter().map(|f| keep(f)).collect(),
            separator: keep(&sig.field_separator),
            signature,
            object: sig.object.iter().map(|o| keep(o)).collect(),
        })
    } else {
        if !sig.fields.is_empty() || sig.field_signature.is_some() || !sig.object.is_empty() {
            return Err(paths.err("signature.fields", "only for the fields_hmac scheme"));
        }
        None
    };
    let key_id_header = sig
        .key_id_header
        .as_deref()
        .map(|h| header_name(paths, "signature.key_id_header", h))
        .transpose()?;
    let keyed = secret_format == SecretFormat::KeyIdAndSecret;
    // A JWT may name its key in `iss` instead of a header (LiveKit).
    let by_issuer = jwt.as_ref().is_some_and(|j| j.issuer_is_key_id);
    if by_issuer != (keyed && key_id_header.is_none() && scheme == Scheme::JwtHmac) {
        return Err(paths.err(
            "signature.jwt.issuer_is_key_id",
            "goes with secret_format \"key_id_and_secret\" and no key_id_header",
        ));
    }
    // A form_payload_hmac signature names its key itself (`key_id|hex` pairs).
    let form_scheme = scheme == Scheme::FormPayloadHmac;
    if form_scheme && (!keyed || key_id_header.is_some()) {
        return Err(paths.err(
            "secret_format",
            "form_payload_hmac needs \"key_id_and_secret\" and no key_id_header",
        ));
    }
    if !by_issuer
        && !form_scheme
        && (keyed != key_id_header.is_some() || (keyed && scheme != Scheme::Hmac))
    {
        return Err(paths.err(
            "signature.key_id_header",
            "goes with secret_format \"key_id_and_secret\", for the hmac scheme",
        ));
    }
    let nonce_header = match (&sig.nonce_header, scheme == Scheme::UrlNonceHmac) {
        (Some(h), true) => Some(header_name(paths, "signature.nonce_header", h)?),
        (None, true) => {
            return Err(paths.err("signature.nonce_header", "required by url_nonce_hmac"));
        }
        (Some(_), false) => {
            return Err(paths.err("signature.nonce_header", "only for url_nonce_hmac"));
        }
        (None, false) => None,
    };
    let form_payload = form_payload_rule(paths, spec, scheme)?;
    let canonical = scheme == Scheme::CanonicalRequestHmac;
    let signed_headers_header = match (&sig.signed_headers_header, canonical) {
        (Some(h), true) => Some(header_name(paths, "signature.signed_headers_header", h)?),
        (None, true) => {
            return Err(paths.err(
                "signature.signed_headers_header",
                "required by canonical_request_hmac",
            ));
        }
        (Some(_), false) => {
            return Err(paths.err(
                "signature.signed_headers_header",
                "only for canonical_request_hmac",
            ));
        }
        (None, false) => None,
    };
    let timestamp_header = spec
        .timestamp
        .as_ref()
        .is_some_and(|t| t.from.iter().any(|l| l.starts_with("header:")));
    if canonical && !timestamp_header {
        return Err(paths.err(
            "timestamp.from",
            "canonical_request_hmac signs a timestamp header: name one",
        ));
    }
    let url_scheme = scheme == Scheme::UrlParamsHmac;
    if !url_scheme && (sig.algorithm_header.is_some() || sig.body_hash_param.is_some()) {
        return Err(paths.err(
            "signature.body_hash_param",
            "only for the url_params_hmac scheme",
        ));
    }
    if url_scheme && sig.body_hash_param.is_none() {
        return Err(paths.err(
            "signature.body_hash_param",
            "required: a non-form body is bound by its hash",
        ));
    }
    let algorithm_header = sig
        .algorithm_header
        .as_deref()
        .map(|h| header_name(paths, "signature.algorithm_header", h))
        .transpose()?;
    let body_hash_param = sig
        .body_hash_param
        .as_deref()
        .map(|p| non_empty(paths, "signature.body_hash_param", p))
        .transpose()?;
    Ok(SignatureRules {
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
        required_headers: required_headers(paths, spec)?,
    })
}

/// `signature.signature_field` and `signature.payload_field`: both required by
/// `form_payload_hmac`, refused elsewhere.
fn form_payload_rule(
    paths: &Paths,
    spec: &PackSpec,
    scheme: Scheme,
) -> Result<Option<FormPayload>, PackError> {
    let sig = &spec.signature;
    if scheme != Scheme::FormPayloadHmac {
        if sig.signature_field.is_some() {
            return Err(paths.err("signature.signature_field", "only for form_payload_hmac"));
        }
        if sig.payload_field.is_some() {
            return Err(paths.err("signature.payload_field", "only for form_payload_hmac"));
        }
        return Ok(None);
    }
    let field = |key: &str, value: &Option<String>| match value {
        Some(v) => non_empty(paths, key, v),
        None => Err(paths.err(key, "required by form_payload_hmac")),
    };
    let signature_field = field("signature.signature_field", &sig.signature_field)?;
    let payload_field = field("signature.payload_field", &sig.payload_field)?;
    if signature_field == payload_field {
        return Err(paths.err(
            "signature.payload_field",
            "must differ from signature.signature_field",
        ));
    }
    if !sig.headers.is_empty() {
        return Err(paths.err(
            "signature.headers",
            "form_payload_hmac reads its signature from signature.signature_field",
        ));
    }
    Ok(Some(FormPayload {
        signature_field,
        payload_field,
    }))
}

/// `signature.required_headers`: header names checked, values not empty.
fn required_headers(
    paths: &Paths,
    spec: &PackSpec,
) -> Result<&'static [(&'static str, &'static str)], PackError> {
    let mut out = Vec::new();
    for (name, value) in &spec.signature.required_headers {
        let field = format!("signature.required_headers.{name}");
        out.push((
            header_name(paths, &field, name)?,
            non_empty(paths, &field, value)?,
        ));
    }
    Ok(Box::leak(out.into_boxed_slice()))
}

#[cfg(test)]
mod tests {
    use super::super::spec::PackSpec;

    fn compile(required: serde_json::Value) -> Result<(), (String, String)> {
        let pack = serde_json::json!({
            "id": "rh_test", "display_name": "T", "scheme": "hmac", "vectors": 0,
            "evidence": "experimental", "sources": ["https://example.com/docs"],
            "content_types": ["application/json"], "secret_format": "utf8",
            "signature": {"headers": ["X-Sig"], "format": {"plain": {}},
                          "algorithm": "hmac-sha256", "encoding": "hex", "signed": "{body}",
                          "required_headers": required},
            "event_id": {"from": [], "signed": true, "retries_keep_id": "unknown",
                         "fallback": "signature"}
        });
        PackSpec::from_json("packs.rh_test", &pack.to_string())
            .unwrap()
            .compile()
            .map(|_| ())
            .map_err(|e| (e.path, e.message))
    }

    #[test]
    fn a_jwt_issuer_names_its_key_only_with_key_id_and_secret() {
        let pack = |format: &str| {
            serde_json::json!({
                "id": "jwt_test", "display_name": "T", "scheme": "jwt_hmac", "vectors": 0,
                "evidence": "experimental", "sources": ["https://example.com/docs"],
                "content_types": ["application/json"], "secret_format": format,
                "signature": {"headers": ["Authorization"], "format": {"plain": {}},
                              "encoding": "text",
                              "jwt": {"algorithms": ["HS256"], "issuer_is_key_id": true,
                                      "body_hash": {"claim": "sha256", "encoding": "base64"}}},
                "event_id": {"from": ["json:/id"], "signed": true, "retries_keep_id": "unknown"}
            })
        };
        let compile = |doc: serde_json::Value| {
            PackSpec::from_json("packs.jwt_test", &doc.to_string())
                .unwrap()
                .compile()
                .map(|_| ())
                .map_err(|e| e.path)
        };
        assert_eq!(compile(pack("key_id_and_secret")), Ok(()));
        assert_eq!(
            compile(pack("utf8")),
            Err("packs.jwt_test.signature.jwt.issuer_is_key_id".to_owned())
        );
    }

    #[test]
    fn required_headers_name_the_key_they_refuse() {
        assert_eq!(compile(serde_json::json!({"X-Version": "1"})), Ok(()));
        let (path, _) = compile(serde_json::json!({"X-Version": ""})).unwrap_err();
        assert_eq!(path, "packs.rh_test.signature.required_headers.X-Version");
        let (path, _) = compile(serde_json::json!({"Bad Header": "1"})).unwrap_err();
        assert_eq!(path, "packs.rh_test.signature.required_headers.Bad Header");
    }
}
