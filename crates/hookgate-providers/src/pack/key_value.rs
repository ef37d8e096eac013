//! The `key_value` signature header (`t=…,v1=…,v1=…`, `ts=…;h1=…`), and its grouped form
//! (`group_separator`): senders that rotate secrets by sending one whole `t=…,v1=…` set per
//! secret, the sets separated (Persona: by a space). Every group's signatures are candidates;
//! the timestamp is the first group's, and a later group stamped with another time is skipped
//! (its signature covers a time this request does not carry), never trusted.

use http::HeaderMap;

use super::syntax::Paths;
use super::{Pack, PackError, Part, SignatureFormat};
use crate::common::{MAX_SIGNATURE_ENTRIES, bad, signed_header, signed_header_any};
use crate::{BadRequestReason, Rejection};

/// `{signature:<key>}` template parts: only with a `key_value` format, and never its
/// timestamp or signature keys (those have their own meaning).
pub(crate) fn check_signature_items(
    paths: &Paths,
    parts: &[Part],
    format: &SignatureFormat,
) -> Result<(), PackError> {
    for part in parts {
        let Part::SignatureItem(key) = part else {
            continue;
        };
        let fits = match format {
            SignatureFormat::KeyValue {
                signature_keys,
                timestamp_key,
                ..
            } => !signature_keys.contains(key) && *timestamp_key != Some(*key),
            _ => false,
        };
        if !fits {
            return Err(paths.err(
                "signature.signed",
                format!(
                    "{{signature:{key}}} names an item of a key_value signature header other \
                     than its signature and timestamp keys"
                ),
            ));
        }
    }
    Ok(())
}

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
    /// The values of the template's `{header:…}` and `{signature:…}` parts, in template
    /// order, from the request head (a missing one: 400 `missing_signature`).
    pub(crate) fn template_values(&self, headers: &HeaderMap) -> Result<Vec<String>, Rejection> {
        use BadRequestReason::{MalformedSignature, MissingSignature};
        let mut out = Vec::new();
        for part in &self.template {
            match part {
                Part::Header(name) => out.push(
                    signed_header(headers, name, MalformedSignature)?
                        .ok_or(bad(MissingSignature))?
                        .to_owned(),
                ),
                Part::SignatureItem(key) => out.push(self.signature_item(headers, key)?),
                _ => {}
            }
        }
        Ok(out)
    }

    /// Item `key` of the (first set of the) `key_value` signature header: exactly one,
    /// not empty.
    fn signature_item(&self, headers: &HeaderMap, key: &str) -> Result<String, Rejection> {
        let malformed = bad(BadRequestReason::MalformedSignature);
        let SignatureFormat::KeyValue {
            pair_separator,
            kv_separator,
            group_separator,
            ..
        } = &self.format
        else {
            return Err(malformed);
        };
        let text = signed_header_any(
            headers,
            self.signature_header_names,
            BadRequestReason::MalformedSignature,
        )?
        .ok_or(bad(BadRequestReason::MissingSignature))?;
        let group = match group_separator {
            Some(g) => text.split(*g).find(|s| !s.is_empty()).unwrap_or_default(),
            None => text,
        };
        let mut found = None;
        for item in group.split(*pair_separator) {
            if let Some((k, v)) = item.split_once(*kv_separator)
                && k == key
                && found.replace(v).is_some()
            {
                return Err(malformed);
            }
        }
        found
            .filter(|v| !v.is_empty())
            .map(str::to_owned)
            .ok_or(malformed)
    }

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
        let many = [single.as_str(); MAX_SIGNATURE_ENTRIES + 1].join(" ");
        assert_eq!(
            verify(&many, &["new-secret"], body),
            Err(bad(BadRequestReason::MalformedSignature))
        );
    }

    /// NMI's shape: `t=<nonce>,s=<hex HMAC-SHA256 of "<nonce>.<body>">`.
    fn nonce_pack(format: &str) -> Result<Pack, PackError> {
        let text = format!(
            r#"{{"id": "nonced", "display_name": "Nonced", "scheme": "hmac", "vectors": 0,
            "evidence": "experimental", "sources": ["https://example.com/"],
            "content_types": ["application/json"], "secret_format": "utf8",
            "signature": {{"headers": ["Webhook-Signature"], "format": {format},
              "algorithm": "hmac-sha256", "encoding": "hex", "signed": "{{signature:t}}.{{body}}"}},
            "event_id": {{"from": ["json:/id"], "signed": true, "retries_keep_id": "yes"}}}}"#
        );
        PackSpec::from_json("packs.nonced", &text).and_then(|s| s.compile())
    }

    #[test]
    fn a_signature_item_is_part_of_the_signed_bytes() {
        let kv = r#"{"key_value": {"pair_separator": ",", "kv_separator": "=", "signature_keys": ["s"]}}"#;
        let pack = nonce_pack(kv).unwrap();
        let body = br#"{"id":"evt_9"}"#;
        let mut mac = Hmac::<Sha256>::new_from_slice(b"signing-key").unwrap();
        mac.update(b"n0nce.");
        mac.update(body);
        let sig = crate::common::encode_lower_hex(&mac.finalize().into_bytes());
        let run = |header: &str| {
            let mut headers = HeaderMap::new();
            headers.insert("webhook-signature", HeaderValue::from_str(header).unwrap());
            let ctx = RequestContext::post(&headers);
            let metadata = pack.parse_metadata(&ctx)?;
            let key = SecretMaterial::new(b"signing-key".to_vec());
            let trusted = [TrustedSecret {
                version: "v",
                key: &key,
            }];
            pack.verify(&ctx, &metadata, body, &trusted, NOW, None)
                .map(|v| v.matched_secret_index)
        };
        assert_eq!(run(&format!("t=n0nce,s={sig}")), Ok(0));
        assert_eq!(
            run(&format!("s={sig},t=n0nce")),
            Ok(0),
            "items in any order"
        );
        assert_eq!(
            run(&format!("t=n0ncf,s={sig}")),
            Err(Rejection::InvalidSignature)
        );
        for bad_header in [
            format!("s={sig}"),
            format!("t=,s={sig}"),
            format!("t=a,t=b,s={sig}"),
        ] {
            assert_eq!(
                run(&bad_header),
                Err(bad(BadRequestReason::MalformedSignature)),
                "{bad_header}"
            );
        }
        // only a key_value format has items, and never its signature or timestamp keys
        let message = "packs.nonced.signature.signed: {signature:t} names an item of a key_value \
            signature header other than its signature and timestamp keys";
        assert_eq!(
            nonce_pack(r#"{"plain": {}}"#).unwrap_err().to_string(),
            message
        );
        let sig_key = r#"{"key_value": {"pair_separator": ",", "kv_separator": "=", "signature_keys": ["t"]}}"#;
        assert_eq!(nonce_pack(sig_key).unwrap_err().to_string(), message);
    }
}
