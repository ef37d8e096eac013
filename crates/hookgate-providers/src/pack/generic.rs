//! The generic pieces for senders hookgate does not ship: where a `shared_token` pack finds
//! its token (a header — plain, `Bearer` or HTTP `Basic` — a query parameter, or a body field)
//! and the declared `Content-Encoding` of a body (`gzip`, decoded within the body limit before
//! verification). Every token comparison is constant time ([`primitives::token_matches`]).

use std::borrow::Cow;
use std::io::Read;

use base64::Engine;
use http::HeaderMap;
use http::header::CONTENT_ENCODING;

use super::primitives;
use super::spec::PackSpec;
use super::syntax::{Paths, keep, pick};
use super::{Pack, PackError, Scheme, TokenForm, TokenSource};
use crate::common::{self, bad};
use crate::{BadRequestReason, Rejection, TrustedSecret, Verified};

/// Where the token lives and how it is written, from `signature.query_param`,
/// `signature.body_field` and `signature.token_form`; checked against the scheme.
pub(crate) fn token_settings(
    paths: &Paths,
    spec: &PackSpec,
    scheme: Scheme,
) -> Result<(TokenSource, TokenForm), PackError> {
    let sig = &spec.signature;
    if scheme == Scheme::Hmac && sig.query_param.is_some() {
        return hmac_query_settings(paths, spec);
    }
    if scheme != Scheme::SharedToken {
        for (field, set) in [
            ("signature.query_param", sig.query_param.is_some()),
            ("signature.body_field", sig.body_field.is_some()),
            ("signature.token_form", sig.token_form.is_some()),
            ("signature.header_option", sig.header_option.is_some()),
        ] {
            if set {
                return Err(paths.err(field, "only for the shared_token scheme"));
            }
        }
        return Ok((TokenSource::Header, TokenForm::Plain));
    }
    let places = usize::from(!sig.headers.is_empty())
        + usize::from(sig.query_param.is_some())
        + usize::from(sig.body_field.is_some())
        + usize::from(sig.header_option.is_some());
    if places != 1 {
        return Err(paths.err(
            "signature.headers",
            "name exactly one place for the token: headers, query_param, body_field or header_option",
        ));
    }
    let source = if let Some(source) = super::header_option::source(paths, spec)? {
        source
    } else if let Some(name) = &sig.query_param {
        if name.is_empty() {
            return Err(paths.err("signature.query_param", "must not be empty"));
        }
        TokenSource::Query(keep(name))
    } else if let Some(field) = &sig.body_field {
        match field.split_once(':') {
            Some(("json", pointer)) if pointer.starts_with('/') => {
                TokenSource::BodyJson(keep(pointer))
            }
            Some(("form", name)) if !name.is_empty() => TokenSource::BodyForm(keep(name)),
            _ => {
                return Err(paths.err(
                    "signature.body_field",
                    format!("{field:?} must be json:/pointer or form:name"),
                ));
            }
        }
    } else {
        TokenSource::Header
    };
    if source != TokenSource::Header && sig.format.is_some() {
        return Err(paths.err(
            "signature.format",
            "only for tokens in a named header (query_param, body_field and header_option hold the bare token or its token_form)",
        ));
    }
    let form = match &sig.token_form {
        None => TokenForm::Plain,
        Some(text) => pick(
            paths,
            "signature.token_form",
            "token form",
            text,
            &[
                ("plain", TokenForm::Plain),
                ("bearer", TokenForm::Bearer),
                ("basic", TokenForm::Basic),
            ],
        )?,
    };
    if form != TokenForm::Plain
        && !matches!(source, TokenSource::Header | TokenSource::HeaderOption(_))
    {
        return Err(paths.err(
            "signature.token_form",
            "bearer and basic credentials are read from a header (Authorization, or the one header_option names)",
        ));
    }
    Ok((source, form))
}

/// An HMAC signature in a query parameter (PandaDoc): no header, a plain format.
fn hmac_query_settings(
    paths: &Paths,
    spec: &PackSpec,
) -> Result<(TokenSource, TokenForm), PackError> {
    let sig = &spec.signature;
    let name = sig.query_param.as_deref().unwrap_or_default();
    if name.is_empty() {
        return Err(paths.err("signature.query_param", "must not be empty"));
    }
    if !sig.headers.is_empty() {
        return Err(paths.err(
            "signature.query_param",
            "the signature is in headers or in a query parameter, not both",
        ));
    }
    for (field, set) in [
        ("signature.body_field", sig.body_field.is_some()),
        ("signature.token_form", sig.token_form.is_some()),
    ] {
        if set {
            return Err(paths.err(field, "only for the shared_token scheme"));
        }
    }
    if !matches!(
        sig.format,
        None | Some(super::spec::SignatureFormatSpec::Plain(_))
    ) {
        return Err(paths.err(
            "signature.format",
            "a signature in a query parameter is plain (one value, optionally prefixed)",
        ));
    }
    Ok((TokenSource::Query(keep(name)), TokenForm::Plain))
}

/// `content_encoding`: only `gzip` is known.
pub(crate) fn gzip_declared(paths: &Paths, spec: &PackSpec) -> Result<bool, PackError> {
    let mut gzip = false;
    for (i, encoding) in spec.content_encoding.iter().enumerate() {
        match encoding.as_str() {
            "gzip" if !gzip => gzip = true,
            "gzip" => {
                return Err(paths.err(&format!("content_encoding[{i}]"), "listed twice"));
            }
            other => {
                return Err(paths.err(
                    &format!("content_encoding[{i}]"),
                    format!("unknown content encoding {other:?} (expected gzip)"),
                ));
            }
        }
    }
    Ok(gzip)
}

/// Why a body could not be decoded: the answer is 415 or 413. Carries no body bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BodyDecodeError {
    /// A `Content-Encoding` the pack does not declare (or several): 415.
    #[error("unsupported content encoding")]
    Unsupported,
    /// More than the limit once decoded (a gzip bomb stops there): 413.
    #[error("decoded body exceeds the limit")]
    TooLarge,
    /// Not valid gzip: 400.
    #[error("body does not decode")]
    Corrupt,
}

/// The request's single `Content-Encoding` (lower case, `x-gzip` as `gzip`), `None` when
/// absent or `identity`.
fn content_encoding(headers: &HeaderMap) -> Result<Option<String>, BodyDecodeError> {
    let mut values = headers.get_all(CONTENT_ENCODING).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(BodyDecodeError::Unsupported);
    }
    let text = first
        .to_str()
        .map_err(|_| BodyDecodeError::Unsupported)?
        .trim()
        .to_ascii_lowercase();
    match text.as_str() {
        "" | "identity" => Ok(None),
        // RFC 9110 §8.4.1.3: `x-gzip` is to be read as `gzip`.
        "x-gzip" => Ok(Some("gzip".to_owned())),
        _ => Ok(Some(text)),
    }
}

impl Pack {
    /// Whether the request's `Content-Encoding` is none or one the pack declares (else 415,
    /// answered before the body is read).
    pub fn accepts_content_encoding(&self, headers: &HeaderMap) -> bool {
        match content_encoding(headers) {
            Ok(None) => true,
            Ok(Some(e)) => self.gzip && e == "gzip",
            Err(_) => false,
        }
    }

    /// The body as the provider signed it: decoded per its `Content-Encoding` when the pack
    /// declares it, at most `max_bytes` once decoded (the work is bounded by that too).
    pub fn decode_body<'b>(
        &self,
        headers: &HeaderMap,
        body: &'b [u8],
        max_bytes: usize,
    ) -> Result<Cow<'b, [u8]>, BodyDecodeError> {
        match content_encoding(headers)? {
            None => Ok(Cow::Borrowed(body)),
            Some(e) if self.gzip && e == "gzip" => {
                let limit = u64::try_from(max_bytes)
                    .unwrap_or(u64::MAX)
                    .saturating_add(1);
                let mut out = Vec::new();
                flate2::read::GzDecoder::new(body)
                    .take(limit)
                    .read_to_end(&mut out)
                    .map_err(|_| BodyDecodeError::Corrupt)?;
                if out.len() > max_bytes {
                    return Err(BodyDecodeError::TooLarge);
                }
                Ok(Cow::Owned(out))
            }
            Some(_) => Err(BodyDecodeError::Unsupported),
        }
    }

    /// A token candidate from a header value, in the pack's token form.
    pub(crate) fn token_candidate(&self, text: &str) -> Result<Vec<u8>, Rejection> {
        let malformed = bad(BadRequestReason::MalformedSignature);
        let credential = |scheme: &str| -> Result<&str, Rejection> {
            let (name, rest) = text.split_once(' ').ok_or(malformed)?;
            if !name.eq_ignore_ascii_case(scheme) {
                return Err(malformed);
            }
            Ok(rest.trim_start_matches(' '))
        };
        let token = match self.token_form {
            TokenForm::Plain => text.as_bytes().to_vec(),
            TokenForm::Bearer => credential("Bearer")?.as_bytes().to_vec(),
            TokenForm::Basic => {
                let decoded = base64::engine::general_purpose::STANDARD
                    .decode(credential("Basic")?)
                    .map_err(|_| malformed)?;
                if !decoded.contains(&b':') {
                    return Err(malformed);
                }
                decoded
            }
        };
        if token.is_empty() {
            return Err(malformed);
        }
        Ok(token)
    }

    /// Whether the token is read from the body (after the bounded read, before verification).
    pub(crate) fn token_in_body(&self) -> bool {
        matches!(
            self.token_source,
            TokenSource::BodyJson(_) | TokenSource::BodyForm(_)
        )
    }

    fn token_from_body(&self, headers: &HeaderMap, body: &[u8]) -> Result<Vec<u8>, Rejection> {
        let missing = bad(BadRequestReason::MissingSignature);
        let token = match self.token_source {
            TokenSource::BodyJson(pointer) => {
                let doc: serde_json::Value = serde_json::from_slice(body).map_err(|_| missing)?;
                doc.pointer(pointer)
                    .and_then(serde_json::Value::as_str)
                    .map(|s| s.as_bytes().to_vec())
            }
            TokenSource::BodyForm(name) if common::is_form(headers) => {
                common::form_field(body, name)
            }
            _ => None,
        };
        token.filter(|t| !t.is_empty()).ok_or(missing)
    }

    /// Compares every candidate with every trusted secret in constant time (each comparison
    /// hashes both sides first, so lengths do not leak); the first secret that matches wins.
    pub(crate) fn verify_token(
        &self,
        headers: &HeaderMap,
        candidates: &[Vec<u8>],
        body: &[u8],
        secrets: &[TrustedSecret<'_>],
    ) -> Result<Verified, Rejection> {
        let from_body;
        let candidates = if self.token_in_body() {
            from_body = [self.token_from_body(headers, body)?];
            &from_body[..]
        } else {
            candidates
        };
        for (index, secret) in secrets.iter().enumerate() {
            let mut matched = false;
            for candidate in candidates {
                matched |= primitives::token_matches(secret.key.expose(), candidate);
            }
            if matched {
                return Ok(Verified {
                    matched_secret_index: index,
                });
            }
        }
        Err(Rejection::InvalidSignature)
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use http::HeaderValue;

    use super::*;

    fn gzip(bytes: &[u8]) -> Vec<u8> {
        let mut encoder = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        encoder.write_all(bytes).unwrap();
        encoder.finish().unwrap()
    }

    /// A minimal pack, with or without `content_encoding = ["gzip"]`.
    fn pack(gzip: bool) -> Pack {
        let coding = if gzip {
            r#""content_encoding": ["gzip"],"#
        } else {
            ""
        };
        let text = format!(
            r#"{{"id": "coded", "display_name": "Coded", "scheme": "hmac", "vectors": 0,
            "evidence": "experimental", "sources": ["https://example.com/"], {coding}
            "content_types": ["application/json"], "secret_format": "utf8",
            "signature": {{"headers": ["X-Sig"], "format": {{"plain": {{}}}},
              "algorithm": "hmac-sha256", "encoding": "hex", "signed": "{{body}}"}},
            "event_id": {{"from": ["json:/id"], "signed": true, "retries_keep_id": "yes"}}}}"#
        );
        crate::pack::PackSpec::from_json("packs.coded", &text)
            .and_then(|spec| spec.compile())
            .unwrap()
    }

    fn coded(value: &str) -> HeaderMap {
        let mut headers = HeaderMap::new();
        headers.insert(CONTENT_ENCODING, HeaderValue::from_str(value).unwrap());
        headers
    }

    #[test]
    fn gzip_is_decoded_within_the_limit_counted_after_decoding() {
        let pack = pack(true);
        let body = br#"{"type":"message.new"}"#;
        let zipped = gzip(body);
        let decoded = pack
            .decode_body(&coded("gzip"), &zipped, body.len())
            .unwrap();
        assert_eq!(&*decoded, body);
        assert_eq!(
            pack.decode_body(&coded("gzip"), &zipped, body.len() - 1),
            Err(BodyDecodeError::TooLarge)
        );
        // a small coded body that decodes far past the limit stops at the limit
        let bomb = gzip(&vec![b'a'; 1 << 20]);
        assert!(bomb.len() < 4096);
        assert_eq!(
            pack.decode_body(&coded("gzip"), &bomb, 64 * 1024),
            Err(BodyDecodeError::TooLarge)
        );
        assert_eq!(
            pack.decode_body(&coded("gzip"), b"not gzip", 1024),
            Err(BodyDecodeError::Corrupt)
        );
        let plain = pack.decode_body(&HeaderMap::new(), body, 1024).unwrap();
        assert!(matches!(plain, Cow::Borrowed(_)));
    }

    #[test]
    fn other_codings_and_undeclared_gzip_are_refused() {
        let (stream, stripe) = (pack(true), pack(false));
        assert!(stream.accepts_content_encoding(&coded("gzip")));
        assert!(stream.accepts_content_encoding(&coded("identity")));
        assert!(stream.accepts_content_encoding(&coded("x-gzip")));
        assert!(stream.accepts_content_encoding(&HeaderMap::new()));
        assert!(!stream.accepts_content_encoding(&coded("br")));
        assert!(!stream.accepts_content_encoding(&coded("gzip, br")));
        assert!(!stripe.accepts_content_encoding(&coded("gzip")));
        assert!(stripe.accepts_content_encoding(&HeaderMap::new()));
    }
}
