//! `canonical_request_hmac`: an HMAC over a canonical request whose signed headers the sender
//! chooses per request (Contentful's request verification). The request names them in
//! `signature.signed_headers_header` (`x-contentful-signed-headers`: lower-case names joined
//! by `,`); the signed string is
//!
//! ```text
//! <METHOD>\n<path>\n<name>:<value>;<name>:<value>…\n<body>
//! ```
//!
//! - `path`: the path and query of the URL the provider called (`public_url`, its query
//!   replaced by the request's), the query escaped as a URI component and the whole then
//!   URI-encoded (so `=` in the query becomes `%253D`); the host is not signed.
//! - headers: the request's headers (names lower-cased, values trimmed) whose names the list
//!   holds, plus the list header itself and the timestamp header — the list header's value
//!   being the sorted names joined by `,`, the timestamp's its decimal milliseconds — sorted
//!   by name. A listed header the request lacks (the reference verifier would skip it, so the
//!   list's own bytes would not all be bound), or repeats, is refused.
//!
//! Headers not listed are not signed (the event id header among them, unless listed).

use http::HeaderMap;

use super::engine::verify_hmac;
use super::{Pack, RequestContext};
use crate::common::bad;
use crate::{BadRequestReason, Metadata, Rejection, TrustedSecret, Verified};

/// At most this many names in the signed headers list.
const MAX_SIGNED_HEADERS: usize = 32;

/// What is signed, for the listing and the provider pages (`list`: the list header).
pub(crate) fn signed_text(list: &str) -> String {
    format!(
        "the method, `\\n`, the path and query of `{{url}}` (the query escaped as a URI \
         component, then the whole URI-encoded; the host is not signed), `\\n`, the headers \
         named in {list} (lower-case names, trimmed values; with {list} itself as the sorted \
         names and the timestamp header) as `name:value` sorted by name and joined by `;`, \
         `\\n`, then the raw body"
    )
}

/// `text` percent-encoded except for the bytes in `keep` and ASCII letters and digits.
fn percent_encode(text: &str, keep: &[u8]) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || keep.contains(&b) {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// What a URI component keeps (`querystring.escape` / `encodeURIComponent`).
const COMPONENT_KEEP: &[u8] = b"-_.!~*'()";
/// What a whole URI keeps (`encodeURI`).
const URI_KEEP: &[u8] = b"-_.!~*'();/?:@&=+$,#";

/// The signed path of `url`: its path and query (the part after a second `?` dropped, as the
/// provider's reference verifier does), the query escaped, then the whole URI-encoded.
pub(crate) fn signed_path(url: &str) -> String {
    let rest = url.split_once("://").map_or(url, |(_, rest)| rest);
    let path_and_query = rest.find(['/', '?']).map_or("", |i| &rest[i..]);
    let path_and_query = path_and_query
        .split_once('#')
        .map_or(path_and_query, |(p, _)| p);
    let mut parts = path_and_query.split('?');
    let pathname = parts.next().unwrap_or("");
    let pathname = if pathname.is_empty() { "/" } else { pathname };
    let joined = match parts.next().filter(|q| !q.is_empty()) {
        Some(search) => format!("{pathname}?{}", percent_encode(search, COMPONENT_KEEP)),
        None => pathname.to_owned(),
    };
    percent_encode(&joined, URI_KEEP)
}

/// The canonical string (see the module documentation) from the signed headers' values.
pub(crate) fn canonical_string(
    method: &str,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> Vec<u8> {
    let mut sorted: Vec<&(String, String)> = headers.iter().collect();
    sorted.sort_by(|a, b| a.0.cmp(&b.0));
    let rendered: Vec<String> = sorted.iter().map(|(k, v)| format!("{k}:{v}")).collect();
    let mut out = Vec::with_capacity(body.len() + 256);
    out.extend_from_slice(method.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(path.as_bytes());
    out.push(b'\n');
    out.extend_from_slice(rendered.join(";").as_bytes());
    out.push(b'\n');
    out.extend_from_slice(body);
    out
}

/// The signed headers of a request: every listed header present (lower-case name, trimmed
/// value), then the list header (the sorted names) and the timestamp header (`millis`).
fn signed_headers(
    headers: &HeaderMap,
    list_header: &'static str,
    timestamp_header: &'static str,
    millis: i64,
) -> Result<Vec<(String, String)>, Rejection> {
    let list = headers
        .get(list_header)
        .and_then(|v| v.to_str().ok())
        .ok_or(bad(BadRequestReason::MissingSignature))?;
    let names: Vec<&str> = list.split(',').collect();
    if names.len() > MAX_SIGNED_HEADERS {
        return Err(bad(BadRequestReason::MalformedSignature));
    }
    let mut out: Vec<(String, String)> = Vec::new();
    for name in &names {
        if *name == list_header || *name == timestamp_header || out.iter().any(|(n, _)| n == name) {
            continue;
        }
        // A listed name the request lacks (or not in lower case, as sent) makes the list's
        // bytes meaningless; the provider lists what it sends, so such a list is refused.
        if name.bytes().any(|b| b.is_ascii_uppercase()) {
            return Err(Rejection::InvalidSignature);
        }
        let mut values = headers.get_all(*name).iter();
        let Some(value) = values.next() else {
            return Err(Rejection::InvalidSignature);
        };
        if values.next().is_some() {
            // which value was signed would be a guess
            return Err(Rejection::InvalidSignature);
        }
        let value = value.to_str().map_err(|_| Rejection::InvalidSignature)?;
        out.push(((*name).to_owned(), value.trim().to_owned()));
    }
    let mut all: Vec<&str> = out.iter().map(|(n, _)| n.as_str()).collect();
    all.push(list_header);
    all.push(timestamp_header);
    all.sort_unstable();
    let joined = all.join(",");
    out.push((list_header.to_owned(), joined));
    out.push((timestamp_header.to_owned(), millis.to_string()));
    Ok(out)
}

impl Pack {
    /// The signed bytes of the two schemes that name their own parts, for the listing.
    pub(crate) fn code_scheme_signed_text(&self) -> Option<String> {
        match (self.signed_headers_header, self.form_payload) {
            (Some(list), _) => Some(signed_text(list)),
            (None, Some(form)) => Some(form.signed_text()),
            (None, None) => None,
        }
    }

    /// The list header and the timestamp header of a `canonical_request_hmac` pack.
    fn canonical_headers(&self) -> Option<(&'static str, &'static str)> {
        let list = self.signed_headers_header?;
        let timestamp = self.timestamp.as_ref()?.from.iter().find_map(|l| match l {
            super::Location::Header(h) => Some(*h),
            _ => None,
        })?;
        Some((list, timestamp))
    }

    /// `canonical_request_hmac`: the canonical request of this request against every secret.
    pub(crate) fn verify_canonical_request(
        &self,
        ctx: &RequestContext<'_>,
        metadata: &Metadata,
        body: &[u8],
        secrets: &[TrustedSecret<'_>],
    ) -> Result<Verified, Rejection> {
        let (list, timestamp) = self
            .canonical_headers()
            .ok_or(Rejection::InvalidSignature)?;
        let url = ctx.signed_url().ok_or(Rejection::InvalidSignature)?;
        let millis = metadata
            .timestamp_millis
            .ok_or(bad(BadRequestReason::MissingTimestamp))?;
        let headers = signed_headers(ctx.headers, list, timestamp, millis)?;
        let signed = canonical_string(ctx.method.as_str(), &signed_path(&url), &headers, body);
        verify_hmac(self.algorithm, secrets, &[&signed], &metadata.signatures)
    }

    /// The provider's side: the canonical request of a POST with the content type, the list
    /// header and the timestamp signed; returns the list header's name and value and the
    /// signed string.
    pub(crate) fn sign_canonical_request(
        &self,
        url: &str,
        content_type: &str,
        millis: i64,
        body: &[u8],
    ) -> Option<(&'static str, String, Vec<u8>)> {
        let (list, timestamp) = self.canonical_headers()?;
        let mut names = ["content-type", list, timestamp];
        names.sort_unstable();
        let value = names.join(",");
        let headers = vec![
            ("content-type".to_owned(), content_type.to_owned()),
            (list.to_owned(), value.clone()),
            (timestamp.to_owned(), millis.to_string()),
        ];
        let signed = canonical_string("POST", &signed_path(url), &headers, body);
        Some((list, value, signed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    #[test]
    fn the_query_is_escaped_then_the_whole_path_uri_encoded() {
        assert_eq!(signed_path("https://h.example/a/b"), "/a/b");
        assert_eq!(signed_path("https://h.example"), "/");
        assert_eq!(
            signed_path("https://h.example:8443/p?x=1&y=a b"),
            "/p?x%253D1%2526y%253Da%2520b"
        );
        assert_eq!(signed_path("https://h/p?a=1?b=2"), "/p?a%253D1");
        assert_eq!(signed_path("https://h/caf\u{e9}"), "/caf%C3%A9");
        assert_eq!(signed_path("https://h/p?"), "/p");
    }

    #[test]
    fn listed_headers_are_signed_sorted_with_the_list_and_the_timestamp() {
        let mut h = HeaderMap::new();
        h.insert("x-topic", HeaderValue::from_static(" t1 "));
        h.insert("content-type", HeaderValue::from_static("application/json"));
        h.insert("x-unlisted", HeaderValue::from_static("u"));
        h.insert(
            "x-list",
            HeaderValue::from_static("x-topic,x-list,content-type"),
        );
        let got = signed_headers(&h, "x-list", "x-ts", 1234).unwrap();
        let s = String::from_utf8(canonical_string("POST", "/p", &got, b"{}")).unwrap();
        assert_eq!(
            s,
            "POST\n/p\ncontent-type:application/json;x-list:content-type,x-list,x-topic,x-ts;\
             x-topic:t1;x-ts:1234\n{}"
        );
        for list in [
            "x-topic,x-missing,x-list",
            "X-topic,x-list",
            "x-topic,,x-list",
        ] {
            let mut other = h.clone();
            other.insert("x-list", HeaderValue::from_str(list).unwrap());
            assert_eq!(
                signed_headers(&other, "x-list", "x-ts", 1234),
                Err(Rejection::InvalidSignature),
                "{list}"
            );
        }
        h.append("x-topic", HeaderValue::from_static("again"));
        assert_eq!(
            signed_headers(&h, "x-list", "x-ts", 1234),
            Err(Rejection::InvalidSignature)
        );
        h.remove("x-list");
        assert_eq!(
            signed_headers(&h, "x-list", "x-ts", 1234),
            Err(bad(BadRequestReason::MissingSignature))
        );
    }
}
