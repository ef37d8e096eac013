//! `{body_json}`: the raw body written as a JSON string literal, the way JavaScript's
//! `JSON.stringify` writes a string (Hygraph signs a JSON document that wraps the body as a
//! string). Quotes and backslashes are escaped, `\b \f \n \r \t` take their short forms, other
//! control characters `\u00XX` (lower-case hex); everything else — `/`, non-ASCII, U+2028 —
//! is written as it stands. A body that is not UTF-8 has no such encoding: it yields the empty
//! text, which no JSON string literal equals, and [`check_signable`] refuses it before any
//! signature is computed.

use super::Part;
use crate::Rejection;

/// A template signing `{body_json}` verifies no body that is not UTF-8 (its stand-in, the
/// empty text, is the same for every such body).
pub(crate) fn check_signable(template: &[Part], body: &[u8]) -> Result<(), Rejection> {
    if template.contains(&Part::BodyJson) && std::str::from_utf8(body).is_err() {
        return Err(Rejection::InvalidSignature);
    }
    Ok(())
}

/// The body as a quoted JSON string, or `""` (empty, not `"\"\""`) if it is not UTF-8.
pub(crate) fn json_string(body: &[u8]) -> String {
    let Ok(text) = std::str::from_utf8(body) else {
        return String::new();
    };
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{08}' => out.push_str("\\b"),
            '\u{0c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            c if u32::from(c) < 0x20 => {
                out.push_str(&format!("\\u{:04x}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::{check_signable, json_string};
    use crate::Rejection;
    use crate::pack::Part;
    use crate::pack::syntax::{Paths, template};

    fn parse(text: &str) -> Result<Vec<Part>, String> {
        let paths = Paths {
            root: "packs.x".to_owned(),
        };
        template(&paths, text).map_err(|e| e.to_string())
    }

    #[test]
    fn a_template_signs_a_json_document_with_doubled_braces() {
        let parts = parse(r#"{{"Body":{body_json},"T":{signature:t}}}"#).unwrap();
        assert_eq!(
            parts,
            vec![
                Part::Literal(b"{"),
                Part::Literal(br#""Body":"#),
                Part::BodyJson,
                Part::Literal(br#","T":"#),
                Part::SignatureItem("t"),
                Part::Literal(b"}"),
            ]
        );
        // {body_json} is the template's one body
        let err = parse("{body}{body_json}").unwrap_err();
        assert!(err.contains("packs.x.signature.signed"), "{err}");
        assert!(parse("{body_json}").is_ok());
    }

    #[test]
    fn escapes_like_json_stringify() {
        assert_eq!(json_string(b"{\"a\":1}"), r#""{\"a\":1}""#);
        assert_eq!(json_string(b"a\\b"), r#""a\\b""#);
        assert_eq!(json_string(b"\n\r\t\x08\x0c"), r#""\n\r\t\b\f""#);
        assert_eq!(json_string(b"\x01\x1f"), r#""\u0001\u001f""#);
        // not escaped by JSON.stringify
        assert_eq!(
            json_string("/ é ✓ \u{2028}".as_bytes()),
            "\"/ é ✓ \u{2028}\""
        );
        assert_eq!(json_string(b""), "\"\"");
    }

    #[test]
    fn a_body_that_is_not_utf8_has_no_encoding() {
        assert_eq!(json_string(b"\xff\xfe"), "");
        assert_ne!(json_string(b"\xff"), json_string("\u{fffd}".as_bytes()));
        let template = [Part::BodyJson];
        assert_eq!(
            check_signable(&template, b"\xff"),
            Err(Rejection::InvalidSignature)
        );
        assert_eq!(check_signable(&template, b"{}"), Ok(()));
        assert_eq!(check_signable(&[Part::Body], b"\xff"), Ok(()));
    }

    #[test]
    fn the_encoding_parses_back_to_the_body() {
        let body = "{\n  \"t\": \"Grüße \\\"aus\\\" Köln\u{7}\"\n}\n";
        let parsed: String = serde_json::from_str(&json_string(body.as_bytes())).unwrap();
        assert_eq!(parsed, body);
    }
}
