//! The `key_value` signature header (`t=…,v1=…,v1=…`, `ts=…;h1=…`), and its grouped form
//! (`group_separator`): senders that rotate secrets by sending one whole `t=…,v1=…` set per
//! secret, the sets separated (Persona: by a space). Every group's signatures are candidates;
//! the timestamp is the first group's, and a later group stamped with another time is skipped
//! (its signature covers a time this request does not carry), never trusted.

use super::Pack;
use crate::common::{MAX_SIGNATURE_ENTRIES, bad};
use crate::{BadRequestReason, Rejection};

/// The settings of a `key_value` format, borrowed from the compiled pack.
pub(crate) struct KeyValueFormat<'a> {
    pub(crate) pair_separator: &'static str,
    pub(crate) kv_separator: &'static str,
    pub(crate) signature_keys: &'a [&'static str],
    pub(crate) timestamp_key: Option<&'static str>,
    pub(crate) skip_undecodable: bool,
    pub(crate) group_separator: Option<&'static str>,
}

impl Pack {
    /// The candidates of a `key_value` header and its timestamp text.
    pub(crate) fn parse_key_value(
        &self,
        text: &str,
        format: &KeyValueFormat<'_>,
    ) -> Result<(Vec<Vec<u8>>, Option<String>), Rejection> {
        let malformed = bad(BadRequestReason::MalformedSignature);
        let groups: Vec<&str> = match format.group_separator {
            None => vec![text],
            Some(separator) => text.split(separator).filter(|g| !g.is_empty()).collect(),
        };
        if groups.is_empty() || groups.len() > MAX_SIGNATURE_ENTRIES {
            return Err(malformed);
        }
        let mut out = Vec::new();
        let mut first_timestamp: Option<&str> = None;
        for (index, group) in groups.into_iter().enumerate() {
            let (tags, timestamp) = self.parse_key_value_group(group, format)?;
            if index == 0 {
                first_timestamp = timestamp;
            } else if timestamp != first_timestamp {
                // signed for another time than the one this request is checked against
                continue;
            }
            out.extend(tags);
            if out.len() > MAX_SIGNATURE_ENTRIES {
                return Err(malformed);
            }
        }
        Ok((out, first_timestamp.map(str::to_owned)))
    }

    fn parse_key_value_group<'t>(
        &self,
        text: &'t str,
        format: &KeyValueFormat<'_>,
    ) -> Result<(Vec<Vec<u8>>, Option<&'t str>), Rejection> {
        let malformed = bad(BadRequestReason::MalformedSignature);
        let mut timestamp = None;
        let mut out = Vec::new();
        for (count, item) in text.split(format.pair_separator).enumerate() {
            if count >= MAX_SIGNATURE_ENTRIES {
                return Err(malformed);
            }
            let (key, value) = item.split_once(format.kv_separator).ok_or(malformed)?;
            if Some(key) == format.timestamp_key {
                if timestamp.replace(value).is_some() {
                    return Err(malformed);
                }
            } else if format.signature_keys.contains(&key) {
                match self.tag(value) {
                    Ok(tag) => out.push(tag),
                    Err(_) if format.skip_undecodable => {}
                    Err(e) => return Err(e),
                }
            }
        }
        if format.timestamp_key.is_some() && timestamp.is_none() {
            return Err(malformed);
        }
        Ok((out, timestamp))
    }
}

#[cfg(test)]
mod tests {
    use hmac::{Hmac, Mac};
    use http::{HeaderMap, HeaderValue};
    use sha2::Sha256;

    use super::*;
    use crate::pack::{PackSpec, RequestContext};
    use crate::{SecretMaterial, TrustedSecret};

    const NOW: i64 = 1_767_225_600;

    /// Persona's shape: `t=<unix>,v1=<hex HMAC-SHA256 of "<t>.<body>">`, sets separated by a
    /// space during a rotation.
    fn pack() -> Pack {
        let text = r#"{"id": "grouped", "display_name": "Grouped", "scheme": "hmac", "vectors": 0,
            "evidence": "experimental", "sources": ["https://example.com/"],
            "content_types": ["application/json"], "secret_format": "utf8",
            "signature": {"headers": ["Grouped-Signature"],
              "format": {"key_value": {"pair_separator": ",", "kv_separator": "=",
                "signature_keys": ["v1"], "timestamp_key": "t", "group_separator": " "}},
              "algorithm": "hmac-sha256", "encoding": "hex", "signed": "{ts}.{body}"},
            "timestamp": {"from": ["signature:t"], "format": "unix_seconds",
              "tolerance_seconds": 300},
            "event_id": {"from": ["json:/id"], "signed": true, "retries_keep_id": "yes"}}"#;
        PackSpec::from_json("packs.grouped", text)
            .and_then(|s| s.compile())
            .unwrap()
    }

    fn sig(secret: &str, t: i64, body: &[u8]) -> String {
        let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
        mac.update(format!("{t}.").as_bytes());
        mac.update(body);
        crate::common::encode_lower_hex(&mac.finalize().into_bytes())
    }

    /// The index of the configured secret that verified `header`, or the rejection.
    fn verify(header: &str, secrets: &[&str], body: &[u8]) -> Result<usize, Rejection> {
        let pack = pack();
        let mut headers = HeaderMap::new();
        headers.insert("grouped-signature", HeaderValue::from_str(header).unwrap());
        let ctx = RequestContext::post(&headers);
        let metadata = pack.parse_metadata(&ctx)?;
        let keys: Vec<SecretMaterial> = secrets
            .iter()
            .map(|s| SecretMaterial::new(s.as_bytes().to_vec()))
            .collect();
        let trusted: Vec<TrustedSecret<'_>> = keys
            .iter()
            .map(|key| TrustedSecret { version: "v", key })
            .collect();
        Ok(pack
            .verify(&ctx, &metadata, body, &trusted, NOW, None)?
            .matched_secret_index)
    }

    #[test]
    fn every_group_is_a_candidate_at_the_first_groups_time() {
        let body = br#"{"id":"evt_1"}"#;
        let t = NOW - 5;
        let (new, old) = (sig("new-secret", t, body), sig("old-secret", t, body));
        let rotating = format!("t={t},v1={old} t={t},v1={new}");
        assert_eq!(verify(&rotating, &["new-secret"], body), Ok(0));
        assert_eq!(
            verify(&rotating, &["old-secret"], body),
            Ok(0),
            "the old set's signature verifies with only the old secret configured"
        );
        assert_eq!(verify(&rotating, &["x", "old-secret"], body), Ok(1));
        assert_eq!(
            verify(&rotating, &["other-secret"], body),
            Err(Rejection::InvalidSignature)
        );
        let single = format!("t={t},v1={new}");
        assert_eq!(verify(&single, &["other", "new-secret"], body), Ok(1));
        // a later set stamped with another time is skipped, not trusted
        let other_time = format!("t={t},v1={old} t={},v1={new}", t + 1);
        assert_eq!(
            verify(&other_time, &["new-secret"], body),
            Err(Rejection::InvalidSignature)
        );
        // every set needs its timestamp
        let unstamped = format!("t={t},v1={old} v1={new}");
        assert_eq!(
            verify(&unstamped, &["new-secret"], body),
            Err(bad(BadRequestReason::MalformedSignature))
        );
        let many = vec![single.as_str(); MAX_SIGNATURE_ENTRIES + 1].join(" ");
        assert_eq!(
            verify(&many, &["new-secret"], body),
            Err(bad(BadRequestReason::MalformedSignature))
        );
    }
}
