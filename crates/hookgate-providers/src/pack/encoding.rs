//! Content codings a pack declares (`content_encoding = ["gzip"]`): the provider signs the
//! decoded body, so it is decoded — within the endpoint's body limit, counted after
//! decoding — before verification. Any other `Content-Encoding` is refused (415).

use std::borrow::Cow;
use std::io::Read;

use http::HeaderMap;
use http::header::CONTENT_ENCODING;

use super::Pack;

/// Why a coded body could not be decoded. Carries no body bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum DecodeError {
    /// 415: a coding the provider does not apply.
    #[error("unsupported content encoding")]
    Unsupported,
    /// 413: more than the body limit once decoded.
    #[error("decoded body over the limit")]
    TooLarge,
    /// 400 `undecodable_body`: the coded bytes are corrupt.
    #[error("body does not decode")]
    Corrupt,
}

/// What a request's `Content-Encoding` asks for.
enum Coding {
    Identity,
    Gzip,
}

impl Pack {
    fn coding(&self, headers: &HeaderMap) -> Result<Coding, DecodeError> {
        let mut values = headers.get_all(CONTENT_ENCODING).iter();
        let Some(value) = values.next() else {
            return Ok(Coding::Identity);
        };
        if values.next().is_some() {
            return Err(DecodeError::Unsupported);
        }
        let text = value
            .to_str()
            .map_err(|_| DecodeError::Unsupported)?
            .trim()
            .to_ascii_lowercase();
        match text.as_str() {
            "" | "identity" => Ok(Coding::Identity),
            "gzip" | "x-gzip" if self.content_encodings.contains(&"gzip") => Ok(Coding::Gzip),
            _ => Err(DecodeError::Unsupported),
        }
    }

    /// Whether the request's `Content-Encoding` is one this provider applies (else 415),
    /// checked from the head before the body is read.
    pub fn accepts_content_encoding(&self, headers: &HeaderMap) -> bool {
        self.coding(headers).is_ok()
    }

    /// The body the provider signed: decoded when the request is gzip-coded, at most
    /// `max_bytes` after decoding. An identity body is returned as is.
    pub fn decoded_body<'b>(
        &self,
        headers: &HeaderMap,
        body: &'b [u8],
        max_bytes: usize,
    ) -> Result<Cow<'b, [u8]>, DecodeError> {
        match self.coding(headers)? {
            Coding::Identity => Ok(Cow::Borrowed(body)),
            Coding::Gzip => {
                let limit = u64::try_from(max_bytes)
                    .unwrap_or(u64::MAX)
                    .saturating_add(1);
                let mut out = Vec::new();
                flate2::read::GzDecoder::new(body)
                    .take(limit)
                    .read_to_end(&mut out)
                    .map_err(|_| DecodeError::Corrupt)?;
                if out.len() > max_bytes {
                    return Err(DecodeError::TooLarge);
                }
                Ok(Cow::Owned(out))
            }
        }
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
            .decoded_body(&coded("gzip"), &zipped, body.len())
            .unwrap();
        assert_eq!(&*decoded, body);
        assert_eq!(
            pack.decoded_body(&coded("gzip"), &zipped, body.len() - 1),
            Err(DecodeError::TooLarge)
        );
        // a small coded body that decodes far past the limit stops at the limit
        let bomb = gzip(&vec![b'a'; 1 << 20]);
        assert!(bomb.len() < 4096);
        assert_eq!(
            pack.decoded_body(&coded("gzip"), &bomb, 64 * 1024),
            Err(DecodeError::TooLarge)
        );
        assert_eq!(
            pack.decoded_body(&coded("gzip"), b"not gzip", 1024),
            Err(DecodeError::Corrupt)
        );
        let plain = pack.decoded_body(&HeaderMap::new(), body, 1024).unwrap();
        assert!(matches!(plain, Cow::Borrowed(_)));
    }

    #[test]
    fn other_codings_and_undeclared_gzip_are_refused() {
        let (stream, stripe) = (pack(true), pack(false));
        assert!(stream.accepts_content_encoding(&coded("gzip")));
        assert!(stream.accepts_content_encoding(&coded("identity")));
        assert!(stream.accepts_content_encoding(&HeaderMap::new()));
        assert!(!stream.accepts_content_encoding(&coded("br")));
        assert!(!stream.accepts_content_encoding(&coded("gzip, br")));
        assert!(!stripe.accepts_content_encoding(&coded("gzip")));
        assert!(stripe.accepts_content_encoding(&HeaderMap::new()));
    }
}
