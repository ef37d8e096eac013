//! A shared token in a header whose name the endpoint chooses (`signature.header_option`):
//! senders such as BigCommerce send whatever custom headers the team set on the hook, so the
//! pack cannot name the header — a required text option of the endpoint does. The option is
//! checked at load (it must be an HTTP header name); the header is then read like any
//! signature header (a repeated one is refused) and its value compared in constant time with
//! the configured secret, in the pack's token form.

use http::HeaderName;

use super::spec::PackSpec;
use super::syntax::{Paths, keep};
use super::{EndpointOptions, OptionError, Pack, PackError, RequestContext, TokenSource};
use crate::common::{self, bad};
use crate::{BadRequestReason, Rejection};

/// `signature.header_option`: the option it names must be declared, required and text.
pub(crate) fn source(paths: &Paths, spec: &PackSpec) -> Result<Option<TokenSource>, PackError> {
    let Some(name) = &spec.signature.header_option else {
        return Ok(None);
    };
    let field = "signature.header_option";
    match spec.options.iter().find(|o| &o.name == name) {
        None => Err(paths.err(field, format!("{name:?} is not declared in options"))),
        Some(o) if !o.required || o.format != "text" => Err(paths.err(
            field,
            format!("option {name:?} must be required, of format \"text\" (it names a header)"),
        )),
        Some(_) => Ok(Some(TokenSource::HeaderOption(keep(name)))),
    }
}

/// Whether the endpoint's options name a usable header (for a `header_option` pack).
pub(crate) fn check(
    pack_source: TokenSource,
    options: &EndpointOptions,
) -> Result<(), OptionError> {
    let TokenSource::HeaderOption(option) = pack_source else {
        return Ok(());
    };
    match options.get(option) {
        Some(value) if HeaderName::from_bytes(value.trim().as_bytes()).is_ok() => Ok(()),
        _ => Err(OptionError::Malformed {
            key: option.to_owned(),
            expected: "must be an HTTP header name (the header the sender carries the token in)",
        }),
    }
}

/// The header name the endpoint's options give (checked at load).
pub(crate) fn header(options: &EndpointOptions, option: &str) -> Option<String> {
    options.get(option).map(|v| v.trim().to_ascii_lowercase())
}

impl Pack {
    /// The headers an endpoint with these options reads the signature or token from: the
    /// pack's signature headers, or the one its `header_option` names.
    pub fn signature_headers_for(&self, options: &EndpointOptions) -> Vec<String> {
        match self.token_source {
            TokenSource::HeaderOption(option) => header(options, option).into_iter().collect(),
            _ => self
                .signature_header_names
                .iter()
                .map(|n| (*n).to_owned())
                .collect(),
        }
    }

    /// The token of a `header_option` pack, from the header its endpoint names. `None` for
    /// other token sources.
    pub(crate) fn token_from_option_header(
        &self,
        ctx: &RequestContext<'_>,
    ) -> Result<Option<Vec<Vec<u8>>>, Rejection> {
        let TokenSource::HeaderOption(option) = self.token_source else {
            return Ok(None);
        };
        let missing = bad(BadRequestReason::MissingSignature);
        let name = header(ctx.options, option).ok_or(missing)?;
        let text = common::signed_header(ctx.headers, &name, BadRequestReason::MalformedSignature)?
            .ok_or(missing)?;
        Ok(Some(vec![self.token_candidate(text)?]))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use http::{HeaderMap, HeaderValue};

    use super::*;

    fn spec(options: &str, form: &str) -> Result<Pack, PackError> {
        let text = format!(
            r#"{{"id": "hooked", "display_name": "Hooked", "scheme": "shared_token", "vectors": 0,
            "evidence": "experimental", "sources": ["https://example.com/"],
            "content_types": ["application/json"], "secret_format": "utf8",
            "signature": {{"header_option": "token_header", "encoding": "text"{form}}},
            "options": [{options}],
            "event_id": {{"from": [], "signed": false, "retries_keep_id": "unknown",
              "fallback": "body_digest"}}, "replay_defence": "body_digest"}}"#
        );
        PackSpec::from_json("packs.hooked", &text).and_then(|s| s.compile())
    }

    const OPTION: &str = r#"{"name": "token_header", "required": true, "format": "text",
        "description": "the header"}"#;

    fn endpoint(pack: &Pack, header: &str) -> Result<EndpointOptions, OptionError> {
        let values = BTreeMap::from([("token_header".to_owned(), header.to_owned())]);
        pack.check_options(&values)
    }

    fn tokens(
        pack: &Pack,
        opts: &EndpointOptions,
        headers: &HeaderMap,
    ) -> Result<usize, Rejection> {
        let ctx = RequestContext {
            method: &http::Method::POST,
            headers,
            raw_query: None,
            public_url: None,
            options: opts,
        };
        pack.token_from_option_header(&ctx)
            .map(|t| t.map_or(0, |t| t.len()))
    }

    #[test]
    fn the_option_names_the_header_and_is_checked_at_load() {
        let pack = spec(OPTION, "").unwrap();
        let opts = endpoint(&pack, "X-Hook-Token").unwrap();
        let mut headers = HeaderMap::new();
        assert_eq!(
            tokens(&pack, &opts, &headers),
            Err(bad(BadRequestReason::MissingSignature))
        );
        headers.insert("x-other", HeaderValue::from_static("t0ken"));
        assert_eq!(
            tokens(&pack, &opts, &headers),
            Err(bad(BadRequestReason::MissingSignature)),
            "another header does not carry the token"
        );
        headers.insert("x-hook-token", HeaderValue::from_static("t0ken"));
        assert_eq!(tokens(&pack, &opts, &headers), Ok(1));
        headers.append("x-hook-token", HeaderValue::from_static("t0ken"));
        assert_eq!(
            tokens(&pack, &opts, &headers),
            Err(bad(BadRequestReason::DuplicatedSignature))
        );
        for bad_name in ["two words", "x:y", "caf\u{e9}"] {
            assert_eq!(
                endpoint(&pack, bad_name).unwrap_err().to_string(),
                "options.token_header: must be an HTTP header name (the header the sender carries the token in)",
                "{bad_name:?}"
            );
        }
    }

    #[test]
    fn the_key_is_validated_naming_it() {
        let err = |options: &str, form: &str| spec(options, form).unwrap_err().to_string();
        assert_eq!(
            err("", ""),
            "packs.hooked.signature.header_option: \"token_header\" is not declared in options"
        );
        let optional = OPTION.replace("true", "false");
        assert_eq!(
            err(&optional, ""),
            "packs.hooked.signature.header_option: option \"token_header\" must be required, of format \"text\" (it names a header)"
        );
        assert_eq!(
            err(OPTION, r#", "headers": ["X-Token"]"#),
            "packs.hooked.signature.headers: name exactly one place for the token: headers, query_param, body_field or header_option"
        );
        assert_eq!(
            err(OPTION, r#", "format": {"plain": {}}"#),
            "packs.hooked.signature.format: only for tokens in a named header (query_param, body_field and header_option hold the bare token or its token_form)"
        );
        // bearer credentials in the chosen header
        assert!(spec(OPTION, r#", "token_form": "bearer""#).is_ok());
    }
}
