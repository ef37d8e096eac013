//! Helpers the pack engine shares: bounded header lookup with duplicate detection, strict
//! lower-case hex, content types, secret decoding, a tiny `application/x-www-form-urlencoded`
//! decoder, JSON accessors for envelope extraction and RFC 3339 timestamps.
//!
//! Every error is a [`Rejection`] reason code; none carries input bytes or key material.

use base64::Engine;
use base64::engine::DecodePaddingMode;
use base64::engine::general_purpose::{GeneralPurpose, GeneralPurposeConfig};
use http::{HeaderMap, HeaderName, HeaderValue};
use serde_json::Value;

use crate::{BadRequestReason, Rejection, SecretFormatError, SecretMaterial};

/// Longest signature-metadata header value we look at; longer ones are refused as malformed.
pub(crate) const MAX_HEADER_VALUE_LEN: usize = 4096;
/// Most signature entries (or `key=value` items) we accept in one signature header.
pub(crate) const MAX_SIGNATURE_ENTRIES: usize = 16;

pub(crate) fn bad(reason: BadRequestReason) -> Rejection {
    Rejection::BadRequest(reason)
}

// ---------------------------------------------------------------------------------------------
// Headers
// ---------------------------------------------------------------------------------------------

/// Refuses a request where any of `names` (the pack's signature headers) occurs more than
/// once: 400 `duplicated_signature`.
pub(crate) fn reject_duplicated(headers: &HeaderMap, names: &[&str]) -> Result<(), Rejection> {
    for name in names {
        if headers.get_all(*name).iter().nth(1).is_some() {
            return Err(bad(BadRequestReason::DuplicatedSignature));
        }
    }
    Ok(())
}

/// The text of a signature-metadata header: `Ok(None)` when absent. A second occurrence
/// answers `duplicated_signature`; a value over [`MAX_HEADER_VALUE_LEN`] or that is not
/// visible ASCII answers `malformed`.
pub(crate) fn signed_header<'h>(
    headers: &'h HeaderMap,
    name: &str,
    malformed: BadRequestReason,
) -> Result<Option<&'h str>, Rejection> {
    let mut values = headers.get_all(name).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err(bad(BadRequestReason::DuplicatedSignature));
    }
    if first.len() > MAX_HEADER_VALUE_LEN {
        return Err(bad(malformed));
    }
    first.to_str().map(Some).map_err(|_| bad(malformed))
}

/// Like [`signed_header`], trying `names` in order and using the first that is present.
pub(crate) fn signed_header_any<'h>(
    headers: &'h HeaderMap,
    names: &[&str],
    malformed: BadRequestReason,
) -> Result<Option<&'h str>, Rejection> {
    for name in names {
        if let Some(value) = signed_header(headers, name, malformed)? {
            return Ok(Some(value));
        }
    }
    Ok(None)
}

/// An unsigned informational header (delivery id, topic): the first of `names` present.
/// A second occurrence answers `duplicated_header`; an unreadable or oversized value counts as
/// absent (the caller then reports what is missing).
pub(crate) fn info_header(
    headers: &HeaderMap,
    names: &[&str],
) -> Result<Option<String>, Rejection> {
    for name in names {
        let mut values = headers.get_all(*name).iter();
        let Some(first) = values.next() else {
            continue;
        };
        if values.next().is_some() {
            return Err(bad(BadRequestReason::DuplicatedHeader));
        }
        if first.len() > MAX_HEADER_VALUE_LEN {
            return Ok(None);
        }
        return Ok(first
            .to_str()
            .ok()
            .filter(|s| !s.is_empty())
            .map(str::to_owned));
    }
    Ok(None)
}

/// Appends a header for `sign`; a value that cannot be a header value (control characters)
/// is left out rather than panicking, so the delivery is then refused for what is missing.
pub(crate) fn push_header(
    out: &mut Vec<(HeaderName, HeaderValue)>,
    name: &'static str,
    value: &str,
) {
    if let Ok(value) = HeaderValue::from_str(value) {
        out.push((HeaderName::from_static(name), value));
    }
}

// ---------------------------------------------------------------------------------------------
// Content types
// ---------------------------------------------------------------------------------------------

/// The media type of a `Content-Type` value without parameters, lower-cased.
pub(crate) fn media_type(content_type: &HeaderValue) -> Option<String> {
    let text = content_type.to_str().ok()?;
    let essence = text.split(';').next().unwrap_or("").trim();
    Some(essence.to_ascii_lowercase())
}

/// Whether the request's content type is one of `allowed`. An absent header is accepted (the
/// signature still has to verify); a present but different or unreadable one is not.
pub(crate) fn content_type_allowed(content_type: Option<&HeaderValue>, allowed: &[&str]) -> bool {
    match content_type {
        None => true,
        Some(value) => media_type(value).is_some_and(|m| allowed.contains(&m.as_str())),
    }
}

/// Whether the request declared `application/x-www-form-urlencoded`.
pub(crate) fn is_form(headers: &HeaderMap) -> bool {
    headers
        .get(http::header::CONTENT_TYPE)
        .and_then(media_type)
        .is_some_and(|m| m == FORM)
}

pub(crate) const JSON: &str = "application/json";
pub(crate) const FORM: &str = "application/x-www-form-urlencoded";

// ---------------------------------------------------------------------------------------------
// Secrets
// ---------------------------------------------------------------------------------------------

/// Key material that is the secret string's UTF-8 bytes, verbatim.
pub(crate) fn utf8_secret(secret: &str) -> Result<SecretMaterial, SecretFormatError> {
    if secret.is_empty() {
        return Err(SecretFormatError::Empty);
    }
    Ok(SecretMaterial::new(secret.as_bytes().to_vec()))
}

/// Standard base64, padding optional (as the Standard Webhooks / Svix libraries accept).
const BASE64_LENIENT_PADDING: GeneralPurpose = GeneralPurpose::new(
    &base64::alphabet::STANDARD,
    GeneralPurposeConfig::new().with_decode_padding_mode(DecodePaddingMode::Indifferent),
);

/// Key material of a `whsec_<base64>` secret (prefix optional): the decoded bytes.
pub(crate) fn whsec_base64_secret(secret: &str) -> Result<SecretMaterial, SecretFormatError> {
    let encoded = secret.strip_prefix("whsec_").unwrap_or(secret);
    if encoded.is_empty() {
        return Err(SecretFormatError::Empty);
    }
    let bytes =
        BASE64_LENIENT_PADDING
            .decode(encoded)
            .map_err(|_| SecretFormatError::Malformed {
                expected: "whsec_ followed by base64",
            })?;
    if bytes.is_empty() {
        return Err(SecretFormatError::Empty);
    }
    Ok(SecretMaterial::new(bytes))
}

// ---------------------------------------------------------------------------------------------
// Signatures
// ---------------------------------------------------------------------------------------------

fn nibble(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

/// Strict lower-case hex decoding (providers emit lower case; official verifiers compare the
/// string exactly, so upper case is not a valid encoding).
pub(crate) fn decode_lower_hex(text: &str) -> Option<Vec<u8>> {
    let pairs = text.as_bytes().chunks_exact(2);
    if !pairs.remainder().is_empty() {
        return None;
    }
    pairs
        .map(|pair| Some((nibble(pair[0])? << 4) | nibble(pair[1])?))
        .collect()
}

pub(crate) fn encode_lower_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Timestamps and freshness
// ---------------------------------------------------------------------------------------------

/// Decimal unix seconds (digits only, at most 18 of them), else `malformed_timestamp`.
pub(crate) fn parse_unix_seconds(text: &str) -> Result<i64, Rejection> {
    let malformed = bad(BadRequestReason::MalformedTimestamp);
    if text.is_empty() || text.len() > 18 || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(malformed);
    }
    text.parse().map_err(|_| malformed)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(year: i64, month: i64, day: i64) -> i64 {
    let y = if month <= 2 { year - 1 } else { year };
    let era = if y >= 0 { y } else { y - 399 } / 400;
    let yoe = y - era * 400;
    let mp = if month > 2 { month - 3 } else { month + 9 };
    let doy = (153 * mp + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = if z >= 0 { z } else { z - 146_096 } / 146_097;
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let day = doy - (153 * mp + 2) / 5 + 1;
    let month = if mp < 10 { mp + 3 } else { mp - 9 };
    let year = yoe + era * 400 + i64::from(month <= 2);
    (year, month, day)
}

/// Unix seconds of an RFC 3339 date-time (`2025-12-31T23:59:40.123456789Z`, `…+01:00`).
pub(crate) fn parse_rfc3339(text: &str) -> Option<i64> {
    let b = text.as_bytes();
    let num = |range: std::ops::Range<usize>| -> Option<i64> {
        let digits = b.get(range)?;
        if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
            return None;
        }
        std::str::from_utf8(digits).ok()?.parse().ok()
    };
    if b.len() < 20 || b[4] != b'-' || b[7] != b'-' || b[13] != b':' || b[16] != b':' {
        return None;
    }
    if !matches!(b[10], b'T' | b't' | b' ') {
        return None;
    }
    let (year, month, day) = (num(0..4)?, num(5..7)?, num(8..10)?);
    let (hour, minute, second) = (num(11..13)?, num(14..16)?, num(17..19)?);
    if !(1..=12).contains(&month)
        || !(1..=31).contains(&day)
        || hour > 23
        || minute > 59
        || second > 60
    {
        return None;
    }
    let mut rest = &b[19..];
    if rest.first() == Some(&b'.') {
        let digits = rest[1..].iter().take_while(|c| c.is_ascii_digit()).count();
        if digits == 0 {
            return None;
        }
        rest = &rest[1 + digits..];
    }
    let offset = match rest {
        [b'Z' | b'z'] => 0,
        [sign @ (b'+' | b'-'), h1, h2, b':', m1, m2] => {
            let all = [*h1, *h2, *m1, *m2];
            if !all.iter().all(u8::is_ascii_digit) {
                return None;
            }
            let hours = i64::from((h1 - b'0') * 10 + (h2 - b'0'));
            let minutes = i64::from((m1 - b'0') * 10 + (m2 - b'0'));
            let total = hours * 3600 + minutes * 60;
            if *sign == b'+' { total } else { -total }
        }
        _ => return None,
    };
    let days = days_from_civil(year, month, day);
    Some(days * 86_400 + hour * 3600 + minute * 60 + second - offset)
}

/// `YYYY-MM-DDTHH:MM:SSZ` for unix seconds.
pub(crate) fn format_rfc3339(unix: i64) -> String {
    let (days, secs) = (unix.div_euclid(86_400), unix.rem_euclid(86_400));
    let (year, month, day) = civil_from_days(days);
    format!(
        "{year:04}-{month:02}-{day:02}T{:02}:{:02}:{:02}Z",
        secs / 3600,
        secs % 3600 / 60,
        secs % 60
    )
}

// ---------------------------------------------------------------------------------------------
// Bodies: JSON accessors and form decoding (only ever on verified bytes)
// ---------------------------------------------------------------------------------------------

/// Parses verified bytes as JSON, else `unparseable_envelope`.
pub(crate) fn parse_json(bytes: &[u8]) -> Result<Value, Rejection> {
    serde_json::from_slice(bytes).map_err(|_| bad(BadRequestReason::UnparseableEnvelope))
}

/// The value at a JSON pointer (RFC 6901), as `Value::pointer` finds it, without allocating:
/// `Value::pointer` unescapes every token into a new `String`, on every request, for every
/// pointer a pack reads. Tokens with an escape (`~0`, `~1`) take serde_json's own path.
pub(crate) fn json_at<'v>(value: &'v Value, pointer: &str) -> Option<&'v Value> {
    if pointer.is_empty() {
        return Some(value);
    }
    if pointer.contains('~') {
        return value.pointer(pointer);
    }
    pointer
        .strip_prefix('/')?
        .split('/')
        .try_fold(value, |target, token| match target {
            Value::Object(map) => map.get(token),
            Value::Array(list) => array_index(token).and_then(|i| list.get(i)),
            _ => None,
        })
}

/// An RFC 6901 array index: decimal digits, no sign, no leading zero (as serde_json reads it).
fn array_index(token: &str) -> Option<usize> {
    if token.starts_with('+') || (token.starts_with('0') && token.len() > 1) {
        return None;
    }
    token.parse().ok()
}

/// An identifier at a JSON pointer: a non-empty string, or an integer rendered in decimal.
pub(crate) fn id_at(value: &Value, pointer: &str) -> Option<String> {
    match json_at(value, pointer)? {
        Value::String(s) if !s.is_empty() => Some(s.clone()),
        Value::Number(n) if n.is_i64() || n.is_u64() => Some(n.to_string()),
        _ => None,
    }
}

/// A created-at at a JSON pointer, as unix seconds: integer seconds (values above 10^11 are
/// taken as milliseconds), a decimal string of those, or an RFC 3339 string.
pub(crate) fn time_at(value: &Value, pointer: &str) -> Option<i64> {
    let seconds = |n: i64| if n > 100_000_000_000 { n / 1000 } else { n };
    match json_at(value, pointer)? {
        Value::Number(n) => n.as_i64().map(seconds),
        Value::String(s) => match s.parse::<i64>() {
            Ok(n) => Some(seconds(n)),
            Err(_) => parse_rfc3339(s),
        },
        _ => None,
    }
}

fn hex_value(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        b'A'..=b'F' => Some(c - b'A' + 10),
        _ => None,
    }
}

/// `application/x-www-form-urlencoded` decoding of one name or value: `+` is a space, `%XX` a
/// byte; an invalid `%` sequence is kept literally (as browsers and the `url` crate do).
pub(crate) fn form_decode(raw: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raw.len());
    let mut i = 0;
    while i < raw.len() {
        match raw[i] {
            b'+' => out.push(b' '),
            b'%' => {
                let hi = raw.get(i + 1).copied().and_then(hex_value);
                let lo = raw.get(i + 2).copied().and_then(hex_value);
                if let (Some(hi), Some(lo)) = (hi, lo) {
                    out.push((hi << 4) | lo);
                    i += 2;
                } else {
                    out.push(b'%');
                }
            }
            other => out.push(other),
        }
        i += 1;
    }
    out
}

/// The decoded value of the first form field called `name`.
pub(crate) fn form_field(body: &[u8], name: &str) -> Option<Vec<u8>> {
    body.split(|&b| b == b'&').find_map(|pair| {
        let (key, value) = match pair.iter().position(|&b| b == b'=') {
            Some(eq) => (&pair[..eq], &pair[eq + 1..]),
            None => (pair, &pair[pair.len()..]),
        };
        (form_decode(key) == name.as_bytes()).then(|| form_decode(value))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::Metadata;
    use http::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.append(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    #[test]
    fn json_at_finds_what_value_pointer_finds() {
        let doc: Value = serde_json::json!({
            "id": "evt_1", "": {"x": 1}, "a/b": 2, "m~n": 3, "list": [10, {"k": "v"}],
            "data": {"object": {"id": "pi_1", "n": null}}
        });
        for pointer in [
            "",
            "/",
            "/id",
            "/data/object/id",
            "/data/object/n",
            "/data/missing",
            "/list/0",
            "/list/1/k",
            "/list/2",
            "/list/01",
            "/list/+1",
            "/list/-",
            "/list/x",
            "/a~1b",
            "/m~0n",
            "//x",
            "id",
            "/id/deeper",
            "/list/1/k/z",
        ] {
            assert_eq!(
                json_at(&doc, pointer),
                doc.pointer(pointer),
                "pointer {pointer:?}"
            );
        }
    }

    const DUP: Rejection = Rejection::BadRequest(BadRequestReason::DuplicatedSignature);
    const MALFORMED: Rejection = Rejection::BadRequest(BadRequestReason::MalformedSignature);

    #[test]
    fn duplicates_of_signature_headers_are_refused_case_insensitively() {
        let map = headers(&[
            ("x-sig", "a"),
            ("X-Sig", "b"),
            ("other", "1"),
            ("other", "2"),
        ]);
        assert_eq!(reject_duplicated(&map, &["x-sig"]), Err(DUP));
        assert_eq!(reject_duplicated(&map, &["x-missing", "x-sig"]), Err(DUP));
        // a duplicated header that carries no signature metadata is not our business here
        assert_eq!(reject_duplicated(&map, &["x-missing"]), Ok(()));
        assert_eq!(
            signed_header(&map, "x-sig", BadRequestReason::MalformedSignature),
            Err(DUP)
        );
        assert_eq!(
            signed_header(&map, "x-none", BadRequestReason::MalformedSignature),
            Ok(None)
        );
        assert_eq!(
            info_header(&map, &["other"]),
            Err(Rejection::BadRequest(BadRequestReason::DuplicatedHeader))
        );
        assert_eq!(
            info_header(&map, &["none", "x-sig"]).ok(),
            None,
            "duplicated x-sig"
        );
    }

    #[test]
    fn signed_header_bounds_length_and_charset() {
        let at_limit = "a".repeat(MAX_HEADER_VALUE_LEN);
        let over = "a".repeat(MAX_HEADER_VALUE_LEN + 1);
        let map = headers(&[("at", &at_limit), ("over", &over)]);
        assert_eq!(
            signed_header(&map, "at", BadRequestReason::MalformedSignature),
            Ok(Some(at_limit.as_str()))
        );
        assert_eq!(
            signed_header(&map, "over", BadRequestReason::MalformedSignature),
            Err(MALFORMED)
        );
        let mut map = HeaderMap::new();
        map.insert("bin", HeaderValue::from_bytes(b"caf\xc3\xa9").unwrap());
        assert_eq!(
            signed_header(&map, "bin", BadRequestReason::MalformedTimestamp),
            Err(Rejection::BadRequest(BadRequestReason::MalformedTimestamp))
        );
        // oversized informational headers count as absent
        let map = headers(&[("id", &over)]);
        assert_eq!(info_header(&map, &["id"]), Ok(None));
    }

    #[test]
    fn signed_header_any_prefers_earlier_names() {
        let map = headers(&[("svix-id", "a"), ("webhook-id", "b")]);
        let got = signed_header_any(
            &map,
            &["svix-id", "webhook-id"],
            BadRequestReason::MissingId,
        );
        assert_eq!(got, Ok(Some("a")));
        let map = headers(&[("webhook-id", "b")]);
        let got = signed_header_any(
            &map,
            &["svix-id", "webhook-id"],
            BadRequestReason::MissingId,
        );
        assert_eq!(got, Ok(Some("b")));
    }

    #[test]
    fn secrets_decode_per_format() {
        assert_eq!(utf8_secret("").unwrap_err(), SecretFormatError::Empty);
        assert_eq!(utf8_secret("whsec_x").unwrap().expose(), b"whsec_x");
        let key = whsec_base64_secret("whsec_AQID").unwrap();
        assert_eq!(key.expose(), &[1, 2, 3]);
        assert_eq!(whsec_base64_secret("AQID").unwrap().expose(), &[1, 2, 3]);
        assert_eq!(
            whsec_base64_secret("AQI").unwrap().expose(),
            &[1, 2],
            "padding optional"
        );
        assert_eq!(
            whsec_base64_secret("whsec_").unwrap_err(),
            SecretFormatError::Empty
        );
        assert!(matches!(
            whsec_base64_secret("whsec_***"),
            Err(SecretFormatError::Malformed { .. })
        ));
        // the error never carries the secret
        let err = whsec_base64_secret("whsec_s3cr3t!")
            .unwrap_err()
            .to_string();
        assert!(!err.contains("s3cr3t"));
    }

    #[test]
    fn unix_seconds_are_digits_only() {
        assert_eq!(parse_unix_seconds("1767225600"), Ok(1_767_225_600));
        let malformed = Err(bad(BadRequestReason::MalformedTimestamp));
        for text in ["", "-1", "+1", " 1", "1.5", "1e9", "0x10", &"9".repeat(19)] {
            assert_eq!(parse_unix_seconds(text), malformed, "{text:?}");
        }
    }

    #[test]
    fn rfc3339_round_trip() {
        assert_eq!(parse_rfc3339("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            parse_rfc3339("2025-12-31T23:59:40.123456789Z"),
            Some(1_767_225_580)
        );
        assert_eq!(
            parse_rfc3339("2026-01-01T01:00:00+01:00"),
            Some(1_767_225_600)
        );
        assert_eq!(
            parse_rfc3339("2000-02-29T12:00:00-00:30"),
            Some(951_827_400)
        );
        assert_eq!(parse_rfc3339("2025-13-01T00:00:00Z"), None);
        assert_eq!(parse_rfc3339("2025-12-31T23:59:40"), None);
        assert_eq!(parse_rfc3339("2025-12-31T23:59:40.Z"), None);
        for t in [0, 951_827_400, 1_767_225_600, -86_401, 4_102_444_800] {
            assert_eq!(parse_rfc3339(&format_rfc3339(t)), Some(t), "{t}");
        }
        assert_eq!(format_rfc3339(1_767_225_600), "2026-01-01T00:00:00Z");
    }

    #[test]
    fn json_accessors() {
        let v: Value = serde_json::from_str(
            r#"{"id":"evt_1","n":42,"e":"","ms":1767225600123,"s":"2026-01-01T00:00:00Z","d":"17"}"#,
        )
        .unwrap();
        assert_eq!(id_at(&v, "/id").as_deref(), Some("evt_1"));
        assert_eq!(id_at(&v, "/e"), None);
        assert_eq!(id_at(&v, "/n").as_deref(), Some("42"));
        assert_eq!(time_at(&v, "/ms"), Some(1_767_225_600));
        assert_eq!(time_at(&v, "/n"), Some(42));
        assert_eq!(time_at(&v, "/s"), Some(1_767_225_600));
        assert_eq!(time_at(&v, "/d"), Some(17));
        assert_eq!(
            parse_json(b"{"),
            Err(bad(BadRequestReason::UnparseableEnvelope))
        );
    }

    #[test]
    fn form_decoding() {
        assert_eq!(form_decode(b"a+b%20c%7B%zz%"), b"a b c{%zz%");
        let body = b"x=1&payload=%7B%22a%22%3A%22b+c%22%7D&payload=second&flag";
        assert_eq!(form_field(body, "payload").unwrap(), br#"{"a":"b c"}"#);
        assert_eq!(form_field(body, "flag").unwrap(), b"");
        assert_eq!(form_field(body, "missing"), None);
    }

    #[test]
    fn metadata_debug_redacts_signatures() {
        let md = Metadata {
            signatures: vec![vec![0xab; 32]],
            ..Metadata::default()
        };
        let text = format!("{md:?}");
        assert!(text.contains("<1 redacted>"), "{text}");
        assert!(!text.contains("171"), "{text}"); // 0xab = 171
    }

    #[test]
    fn content_types() {
        let json = HeaderValue::from_static("Application/JSON; charset=utf-8");
        assert!(content_type_allowed(Some(&json), &[JSON]));
        assert!(!content_type_allowed(Some(&json), &[FORM]));
        assert!(content_type_allowed(None, &[JSON]));
        assert!(!content_type_allowed(
            Some(&HeaderValue::from_static("text/plain")),
            &[JSON, FORM]
        ));
    }
}
