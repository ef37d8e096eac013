//! Bearer tokens of the operator API: read once from their sources at start (and on
//! reload), kept only as SHA-256 digests, compared in constant time against every
//! configured token (no early exit, so timing does not tell which token nearly matched).
//!
//! A missing, malformed or unknown token is 401; a known token without the route's scope is
//! 403. Both are audited with `result = "denied"` by the caller ([`super::ApiState::authorize`]).

use axum::http::HeaderMap;
use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::config::admin::{MIN_TOKEN_BYTES, Scope, TokenConfig};
use crate::secrets::cache::SecretReader;

/// One token as the API holds it: never the value, only its digest.
pub struct ApiToken {
    pub name: String,
    pub scopes: Vec<Scope>,
    digest: [u8; 32],
}

impl std::fmt::Debug for ApiToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ApiToken")
            .field("name", &self.name)
            .field("scopes", &self.scopes)
            .finish_non_exhaustive()
    }
}

/// Every configured token.
#[derive(Debug, Default)]
pub struct ApiTokens(Vec<ApiToken>);

/// Why a request was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// No `Authorization: Bearer …`, a malformed one, or an unknown token: 401.
    Unauthenticated,
    /// A known token without the scope: 403.
    Forbidden,
}

impl ApiTokens {
    /// Reads each token's value from its source (`env:`, `file:`, `exec:`, `vault:`,
    /// literal); an error names the token's key.
    pub async fn read(configs: &[TokenConfig], reader: &SecretReader) -> anyhow::Result<Self> {
        let mut tokens = Vec::with_capacity(configs.len());
        for (i, t) in configs.iter().enumerate() {
            let (value, _) = reader
                .read(&t.source, &t.reference)
                .await
                .map_err(|e| anyhow::anyhow!("admin.tokens[{i}].value: {e}"))?;
            let value = value.expose().trim();
            if value.len() < MIN_TOKEN_BYTES {
                anyhow::bail!(
                    "admin.tokens[{i}].value: a token must be at least {MIN_TOKEN_BYTES} bytes long"
                );
            }
            if !value.bytes().all(|b| b.is_ascii_graphic()) {
                anyhow::bail!("admin.tokens[{i}].value: a token is printable ASCII without spaces");
            }
            tokens.push(ApiToken {
                name: t.name.clone(),
                scopes: t.scopes.clone(),
                digest: Sha256::digest(value.as_bytes()).into(),
            });
        }
        Ok(Self(tokens))
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }

    /// The token `presented` is, comparing its digest with every token's.
    fn find(&self, presented: &[u8]) -> Option<&ApiToken> {
        let digest: [u8; 32] = Sha256::digest(presented).into();
        let mut found = None;
        for token in &self.0 {
            let equal: bool = token.digest.ct_eq(&digest).into();
            if equal && found.is_none() {
                found = Some(token);
            }
        }
        found
    }

    /// Who calls, if they may use `scope`: `Ok(name)`, or the refusal with the token's
    /// name when it was known.
    pub fn authorize(
        &self,
        headers: &HeaderMap,
        scope: Scope,
    ) -> Result<&str, (Refusal, Option<&str>)> {
        let presented = bearer(headers).ok_or((Refusal::Unauthenticated, None))?;
        let token = self
            .find(presented)
            .ok_or((Refusal::Unauthenticated, None))?;
        if token.scopes.contains(&scope) {
            Ok(&token.name)
        } else {
            Err((Refusal::Forbidden, Some(&token.name)))
        }
    }
}

/// The token of `Authorization: Bearer <token>` (the scheme in any case; exactly one
/// header); `None` when missing or malformed.
fn bearer(headers: &HeaderMap) -> Option<&[u8]> {
    let mut values = headers.get_all(axum::http::header::AUTHORIZATION).iter();
    let value = values.next()?;
    if values.next().is_some() {
        return None;
    }
    let bytes = value.as_bytes();
    let (scheme, rest) = bytes.split_at_checked(7)?;
    if !scheme.eq_ignore_ascii_case(b"bearer ") {
        return None;
    }
    let token = rest.trim_ascii();
    if token.is_empty() || !token.iter().all(u8::is_ascii_graphic) {
        return None;
    }
    Some(token)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn tokens() -> ApiTokens {
        let t = |name: &str, value: &str, scopes: Vec<Scope>| ApiToken {
            name: name.into(),
            scopes,
            digest: Sha256::digest(value.as_bytes()).into(),
        };
        ApiTokens(vec![
            t("reader", "reader-token-0123456789", vec![Scope::Read]),
            t(
                "ops",
                "ops-token-0123456789abc",
                vec![Scope::Read, Scope::Operate],
            ),
        ])
    }

    fn with(value: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert("authorization", HeaderValue::from_str(value).unwrap());
        h
    }

    #[test]
    fn bearer_tokens_are_checked_for_scope() {
        let t = tokens();
        assert_eq!(
            t.authorize(&with("Bearer reader-token-0123456789"), Scope::Read),
            Ok("reader")
        );
        assert_eq!(
            t.authorize(&with("bearer ops-token-0123456789abc"), Scope::Operate),
            Ok("ops")
        );
        assert_eq!(
            t.authorize(&with("Bearer reader-token-0123456789"), Scope::Decrypt),
            Err((Refusal::Forbidden, Some("reader")))
        );
        for bad in [
            "Bearer nope-nope-nope-nope",
            "Basic reader-token-0123456789",
            "Bearer",
            "Bearer ",
            "reader-token-0123456789",
        ] {
            assert_eq!(
                t.authorize(&with(bad), Scope::Read),
                Err((Refusal::Unauthenticated, None)),
                "{bad}"
            );
        }
        assert_eq!(
            t.authorize(&HeaderMap::new(), Scope::Read),
            Err((Refusal::Unauthenticated, None))
        );
    }
}
