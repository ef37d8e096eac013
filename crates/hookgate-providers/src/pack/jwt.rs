//! `jwt_hmac`: the signature header carries a compact JWS (HS256/384/512) keyed with the
//! configured secret, whose claims bind the request — the issuer, the endpoint URL (as the
//! subject, or a hash claim) and a hash of the body — and bound its lifetime (`exp`, `nbf`,
//! with the provider's leeway). QStash, MessageBird and LiveKit sign this way.

use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use hmac::{Hmac, Mac};
use serde_json::{Map, Value};
use sha2::{Digest, Sha256, Sha384, Sha512};
use subtle::ConstantTimeEq;

use super::{Pack, RequestContext, primitives};
use crate::common::{self, bad};
use crate::{BadRequestReason, Rejection, SecretMaterial, TrustedSecret, Verified};

/// The JWS algorithms a pack may allow.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum JwtAlgorithm {
    Hs256,
    Hs384,
    Hs512,
}

impl JwtAlgorithm {
    pub(crate) fn parse(text: &str) -> Option<Self> {
        match text {
            "HS256" => Some(Self::Hs256),
            "HS384" => Some(Self::Hs384),
            "HS512" => Some(Self::Hs512),
            _ => None,
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Hs256 => "HS256",
            Self::Hs384 => "HS384",
            Self::Hs512 => "HS512",
        }
    }

    fn mac(self, key: &[u8], message: &[u8]) -> Vec<u8> {
        fn run<M: Mac + hmac::digest::KeyInit>(key: &[u8], message: &[u8]) -> Vec<u8> {
            let mut mac = <M as Mac>::new_from_slice(key).expect("HMAC takes any key length");
            mac.update(message);
            mac.finalize().into_bytes().to_vec()
        }
        match self {
            Self::Hs256 => run::<Hmac<Sha256>>(key, message),
            Self::Hs384 => run::<Hmac<Sha384>>(key, message),
            Self::Hs512 => run::<Hmac<Sha512>>(key, message),
        }
    }
}

/// How a hash claim is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum HashEncoding {
    Hex,
    Base64,
    /// Unpadded base64url; a padded claim is accepted too.
    Base64Url,
}

impl HashEncoding {
    fn encode(self, digest: &[u8]) -> String {
        match self {
            Self::Hex => common::encode_lower_hex(digest),
            Self::Base64 => STANDARD.encode(digest),
            Self::Base64Url => URL_SAFE_NO_PAD.encode(digest),
        }
    }

    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Hex => "hex",
            Self::Base64 => "base64",
            Self::Base64Url => "base64url",
        }
    }
}

/// A claim holding the SHA-256 of something signed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct HashClaim {
    pub(crate) claim: &'static str,
    pub(crate) encoding: HashEncoding,
}

/// The compiled `signature.jwt` of a pack.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct JwtRule {
    pub(crate) algorithms: Vec<JwtAlgorithm>,
    pub(crate) issuer: Option<&'static str>,
    /// `iss` is the key id of the secret (`key_id_and_secret`) that signs.
    pub(crate) issuer_is_key_id: bool,
    /// `sub` must be the signed URL (QStash).
    pub(crate) subject_is_url: bool,
    pub(crate) url_hash: Option<HashClaim>,
    pub(crate) body_hash: Option<HashClaim>,
    /// Claims that must be present (`exp`, `nbf`, …).
    pub(crate) required: Vec<&'static str>,
    pub(crate) leeway_seconds: u64,
}

impl JwtRule {
    /// What the token binds, in words (docs).
    pub(crate) fn describe(&self) -> String {
        let mut binds = Vec::new();
        if let Some(iss) = self.issuer {
            binds.push(format!("`iss` = `{iss}`"));
        }
        if self.issuer_is_key_id {
            binds.push("`iss` = the key id of the secret".to_owned());
        }
        if self.subject_is_url {
            binds.push("`sub` = `{url}`".to_owned());
        }
        if let Some(h) = self.url_hash {
            binds.push(format!(
                "`{}` = SHA-256 of `{{url}}` ({})",
                h.claim,
                h.encoding.as_str()
            ));
        }
        if let Some(h) = self.body_hash {
            binds.push(format!(
                "`{}` = SHA-256 of the body ({})",
                h.claim,
                h.encoding.as_str()
            ));
        }
        let required: Vec<String> = self.required.iter().map(|c| format!("`{c}`")).collect();
        format!(
            "the token's header and claims; the claims bind {}; required: {}; `exp`/`nbf` \
             checked with {} s leeway",
            binds.join(", "),
            if required.is_empty() {
                "none".to_owned()
            } else {
                required.join(", ")
            },
            self.leeway_seconds
        )
    }
}

/// The three parts of a compact JWS, decoded.
struct Token {
    signing_input: Vec<u8>,
    algorithm: JwtAlgorithm,
    claims: Map<String, Value>,
    signature: Vec<u8>,
}

fn decode_part(part: &str) -> Option<Vec<u8>> {
    URL_SAFE_NO_PAD.decode(part.trim_end_matches('=')).ok()
}

impl JwtRule {
    /// Parses the token's structure and checks its algorithm is allowed (400 otherwise):
    /// done from the head, before the body is read.
    fn parse(&self, token: &[u8]) -> Result<Token, Rejection> {
        let malformed = bad(BadRequestReason::MalformedSignature);
        let text = std::str::from_utf8(token).map_err(|_| malformed)?;
        let mut parts = text.split('.');
        let (Some(header), Some(payload), Some(signature), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(malformed);
        };
        let header_json: Value = serde_json::from_slice(&decode_part(header).ok_or(malformed)?)
            .map_err(|_| malformed)?;
        let algorithm = header_json
            .get("alg")
            .and_then(Value::as_str)
            .and_then(JwtAlgorithm::parse)
            .filter(|a| self.algorithms.contains(a))
            .ok_or(malformed)?;
        let claims = match serde_json::from_slice(&decode_part(payload).ok_or(malformed)?) {
            Ok(Value::Object(claims)) => claims,
            _ => return Err(malformed),
        };
        let signature = decode_part(signature)
            .filter(|s| !s.is_empty())
            .ok_or(malformed)?;
        Ok(Token {
            signing_input: text.as_bytes()[..header.len() + 1 + payload.len()].to_vec(),
            algorithm,
            claims,
            signature,
        })
    }
}

fn hash_matches(claim: Option<&Value>, rule: HashClaim, signed: &[u8]) -> bool {
    let Some(sent) = claim.and_then(Value::as_str) else {
        return false;
    };
    let expected = rule.encoding.encode(&Sha256::digest(signed));
    let sent = match rule.encoding {
        HashEncoding::Base64Url => sent.trim_end_matches('='),
        _ => sent,
    };
    bool::from(expected.as_bytes().ct_eq(sent.as_bytes()))
}

impl Pack {
    /// A structural check of the token in the signature header (`parse_metadata`).
    pub(crate) fn check_jwt_shape(&self, token: &[u8]) -> Result<(), Rejection> {
        match &self.jwt {
            Some(rule) => rule.parse(token).map(|_| ()),
            None => Ok(()),
        }
    }

    /// Verifies the token against every trusted secret, then its claims (401
    /// `invalid_signature`), then its lifetime (401 `stale_timestamp`).
    pub(crate) fn verify_jwt(
        &self,
        ctx: &RequestContext<'_>,
        candidates: &[Vec<u8>],
        body: &[u8],
        secrets: &[TrustedSecret<'_>],
        now: i64,
    ) -> Result<Verified, Rejection> {
        let rule = self.jwt.as_ref().ok_or(Rejection::InvalidSignature)?;
        let token = rule.parse(
            candidates
                .first()
                .ok_or(bad(BadRequestReason::MissingSignature))?,
        )?;
        // With `issuer_is_key_id`, the (not yet verified) `iss` only selects the key to try.
        let issuer = token.claims.get("iss").and_then(Value::as_str);
        let matched_secret_index = secrets
            .iter()
            .position(|secret| {
                let key = if rule.issuer_is_key_id {
                    match primitives::split_key_id(secret.key.expose()) {
                        Some((id, key)) if Some(id) == issuer.map(str::as_bytes) => key,
                        _ => return false,
                    }
                } else {
                    secret.key.expose()
                };
                let expected = token.algorithm.mac(key, &token.signing_input);
                bool::from(expected.ct_eq(token.signature.as_slice()))
            })
            .ok_or(Rejection::InvalidSignature)?;
        let claims = &token.claims;
        let text = |name: &str| claims.get(name).and_then(Value::as_str);
        let invalid = Err(Rejection::InvalidSignature);
        if rule.required.iter().any(|c| !claims.contains_key(*c)) {
            return invalid;
        }
        if rule.issuer.is_some_and(|iss| text("iss") != Some(iss)) {
            return invalid;
        }
        if rule.subject_is_url || rule.url_hash.is_some() {
            let Some(url) = ctx.signed_url() else {
                return invalid;
            };
            if rule.subject_is_url && text("sub") != Some(url.as_str()) {
                return invalid;
            }
            if let Some(hash) = rule.url_hash
                && !hash_matches(claims.get(hash.claim), hash, url.as_bytes())
            {
                return invalid;
            }
        }
        if let Some(hash) = rule.body_hash {
            // A hash claim without a body (or a body without one) binds nothing.
            let claim = claims.get(hash.claim);
            let ok = if body.is_empty() {
                claim.is_none() || hash_matches(claim, hash, body)
            } else {
                hash_matches(claim, hash, body)
            };
            if !ok {
                return invalid;
            }
        }
        let leeway = i64::try_from(rule.leeway_seconds).unwrap_or(i64::MAX);
        let number = |name: &str| claims.get(name).and_then(Value::as_f64);
        if let Some(exp) = number("exp")
            && exp <= (now.saturating_sub(leeway)) as f64
        {
            return Err(Rejection::StaleTimestamp);
        }
        if let Some(nbf) = number("nbf")
            && nbf > (now.saturating_add(leeway)) as f64
        {
            return Err(Rejection::StaleTimestamp);
        }
        Ok(Verified {
            matched_secret_index,
        })
    }

    /// A token as the provider would send it: valid from `timestamp` for five minutes.
    pub(crate) fn sign_jwt(
        &self,
        key: &SecretMaterial,
        url: Option<&str>,
        body: &[u8],
        timestamp: i64,
        event_id: &str,
    ) -> Option<String> {
        let rule = self.jwt.as_ref()?;
        let algorithm = *rule.algorithms.first()?;
        let mut claims = Map::new();
        if let Some(iss) = rule.issuer {
            claims.insert("iss".into(), Value::from(iss));
        }
        let key = if rule.issuer_is_key_id {
            let (id, key) = primitives::split_key_id(key.expose())?;
            claims.insert("iss".into(), Value::from(String::from_utf8_lossy(id)));
            key
        } else {
            key.expose()
        };
        if rule.subject_is_url {
            claims.insert("sub".into(), Value::from(url?));
        }
        if let Some(hash) = rule.url_hash {
            let digest = Sha256::digest(url?.as_bytes());
            claims.insert(
                hash.claim.into(),
                Value::from(hash.encoding.encode(&digest)),
            );
        }
        if let Some(hash) = rule.body_hash.filter(|_| !body.is_empty()) {
            let digest = Sha256::digest(body);
            claims.insert(
                hash.claim.into(),
                Value::from(hash.encoding.encode(&digest)),
            );
        }
        claims.insert("iat".into(), Value::from(timestamp));
        claims.insert("nbf".into(), Value::from(timestamp));
        claims.insert("exp".into(), Value::from(timestamp.saturating_add(300)));
        claims.insert("jti".into(), Value::from(event_id));
        let header = serde_json::json!({"alg": algorithm.as_str(), "typ": "JWT"});
        let input = format!(
            "{}.{}",
            URL_SAFE_NO_PAD.encode(header.to_string()),
            URL_SAFE_NO_PAD.encode(Value::Object(claims).to_string())
        );
        let signature = algorithm.mac(key, input.as_bytes());
        Some(format!("{input}.{}", URL_SAFE_NO_PAD.encode(signature)))
    }
}
