//! A signature or token carried in a query parameter of the URL the provider calls — PandaDoc
//! appends `?signature=<hex HMAC-SHA256 of the body>`, some senders a bare shared token. The
//! verifier reads it here (`signature.query_param`), and the sender's side writes it
//! (`sign_delivery`, hence `hookgate send`), percent-encoded.
//!
//! Where it is read: a shared token only from the request's own query (a credential is never
//! taken from the configuration); an HMAC signature from the URL the provider signed — the
//! request's query, or `public_url`'s when the request has none, as `{url}` templates do
//! (a signature proves the body whatever its source, it grants nothing by itself).

use super::{Pack, RequestContext, Scheme, SignatureFormat, TokenSource};
use crate::common::{self, bad};
use crate::{BadRequestReason, Rejection};

impl Pack {
    /// The candidates of a query-parameter pack: the token bytes (shared tokens) or the
    /// decoded signature (HMAC). A repeated parameter is refused (which one is meant would be
    /// a guess). `None` for packs that read their signature elsewhere.
    pub(crate) fn token_from_query(
        &self,
        ctx: &RequestContext<'_>,
    ) -> Result<Option<Vec<Vec<u8>>>, Rejection> {
        let TokenSource::Query(name) = self.token_source else {
            return Ok(None);
        };
        let query = match (ctx.raw_query, self.scheme) {
            (Some(query), _) => query,
            (None, Scheme::Hmac) => ctx
                .public_url
                .and_then(|url| url.split_once('?'))
                .map_or("", |(_, query)| query),
            (None, _) => "",
        }
        .as_bytes();
        let occurrences = query
            .split(|&b| b == b'&')
            .filter(|pair| {
                let raw = pair.split(|&b| b == b'=').next().unwrap_or(&[]);
                common::form_decode(raw) == name.as_bytes()
            })
            .count();
        if occurrences > 1 {
            return Err(bad(BadRequestReason::DuplicatedSignature));
        }
        let value = common::form_field(query, name)
            .filter(|t| !t.is_empty())
            .ok_or(bad(BadRequestReason::MissingSignature))?;
        if self.scheme == Scheme::SharedToken {
            return Ok(Some(vec![value]));
        }
        let text =
            std::str::from_utf8(&value).map_err(|_| bad(BadRequestReason::MalformedSignature))?;
        let signature = match &self.format {
            SignatureFormat::Plain {
                prefix,
                prefix_optional,
                ..
            } => self.plain(text, *prefix, *prefix_optional)?,
            _ => return Err(bad(BadRequestReason::MalformedSignature)),
        };
        Ok(Some(vec![signature]))
    }
}

/// `url` (the endpoint's `public_url`, or nothing) with `name=value` appended to its query,
/// the value percent-encoded (base64's `+`, `/` and `=` included).
pub(crate) fn with_query_param(url: Option<&str>, name: &str, value: &str) -> String {
    let url = url.unwrap_or("");
    let joiner = if url.contains('?') { '&' } else { '?' };
    format!(
        "{url}{joiner}{}={}",
        percent_encode(name),
        percent_encode(value)
    )
}

fn percent_encode(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn appended_values_are_percent_encoded_and_decode_back() {
        let url = with_query_param(Some("https://h/in?a=1"), "signature", "ab+/c=");
        assert_eq!(url, "https://h/in?a=1&signature=ab%2B%2Fc%3D");
        let query = url.split_once('?').unwrap().1;
        assert_eq!(
            common::form_field(query.as_bytes(), "signature").as_deref(),
            Some(&b"ab+/c="[..])
        );
        assert_eq!(with_query_param(None, "t", "x y"), "?t=x%20y");
    }
}
