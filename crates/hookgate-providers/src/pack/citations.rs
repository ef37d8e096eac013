//! The pack's `citations` (where each fact is confirmed) and the evidence rule they back:
//! `docs` and `sdk` packs cite every fact they declare, `sdk` packs at least one of them in an
//! official SDK's source; a pack that cannot is `experimental`.

use std::collections::BTreeMap;

use super::spec::{CitationsSpec, PackSpec};
use super::syntax::Paths;
use super::{Evidence, PackError};

/// One checked citation: a docs page or a file of an official SDK package.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Citation {
    Url,
    Sdk,
}

/// Classifies a citation value, or says what is wrong with it.
pub(crate) fn parse_citation(value: &str) -> Result<Citation, String> {
    if let Some(rest) = value.strip_prefix("https://") {
        let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
        if host.is_empty() || value.contains(char::is_whitespace) {
            return Err(format!("{value:?} is not an https URL with a host"));
        }
        return Ok(Citation::Url);
    }
    if let Some(rest) = value.strip_prefix("sdk:") {
        // <registry>/<package>@<version>:<path>; scoped npm packages contain a `/` and an `@`.
        let bad = || {
            format!(
                "{value:?} is not sdk:<registry>/<package>@<version>:<path> \
                 (e.g. sdk:npm/@octokit/webhooks-methods@5.1.0:src/node/verify.ts)"
            )
        };
        let (registry, rest) = rest.split_once('/').ok_or_else(bad)?;
        let at = rest
            .char_indices()
            .skip(1)
            .find(|(_, c)| *c == '@')
            .map(|(i, _)| i)
            .ok_or_else(bad)?;
        let (package, rest) = (&rest[..at], &rest[at + 1..]);
        let (version, path) = rest.split_once(':').ok_or_else(bad)?;
        let word = |s: &str| !s.is_empty() && !s.contains(char::is_whitespace);
        let registry_ok = registry
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-');
        if !(word(registry) && registry_ok && word(package) && word(version) && word(path))
            || version.contains('/')
            || path.starts_with('/')
        {
            return Err(bad());
        }
        return Ok(Citation::Sdk);
    }
    Err(format!(
        "{value:?} is neither an https:// URL nor an sdk:<registry>/<package>@<version>:<path> file"
    ))
}

/// Validates `citations` and applies the evidence rule; returns the citations by key.
pub(crate) fn check_citations(
    paths: &Paths,
    spec: &PackSpec,
    evidence: Evidence,
) -> Result<BTreeMap<&'static str, String>, PackError> {
    let empty = CitationsSpec::default();
    let citations = spec.citations.as_ref().unwrap_or(&empty);
    let mut out = BTreeMap::new();
    let mut sdk = 0;
    for (key, value) in citations.entries() {
        match parse_citation(value) {
            Ok(Citation::Sdk) => sdk += 1,
            Ok(Citation::Url) => {}
            Err(message) => return Err(paths.err(&format!("citations.{key}"), message)),
        }
        out.insert(key, value.to_owned());
    }
    // The facts this pack declares; each needs a citation unless the pack is experimental.
    let mut facts = vec!["signature", "secret_format", "content_types"];
    // A pack with no id location identified by its body digest declares no id fact; one
    // identified by its signature declares that the provider sends no id (a cited fact).
    if !spec.event_id.from.is_empty() || spec.event_id.fallback.as_deref() == Some("signature") {
        facts.push("event_id");
    }
    if spec.timestamp.is_some() {
        facts.push("timestamp");
    }
    if !spec.handshakes.is_empty() {
        facts.push("handshake");
    }
    if spec.redelivery_horizon_seconds.is_some() {
        facts.push("redelivery_horizon");
    }
    if !spec.api_version.is_empty() {
        facts.push("api_version");
    }
    for (key, _) in citations.entries() {
        if !facts.contains(&key) {
            return Err(paths.err(
                &format!("citations.{key}"),
                "cites a fact the pack does not declare",
            ));
        }
    }
    if evidence == Evidence::Experimental {
        return Ok(out);
    }
    let missing: Vec<&str> = facts
        .iter()
        .copied()
        .filter(|f| !out.contains_key(f))
        .collect();
    if !missing.is_empty() {
        return Err(paths.err(
            "citations",
            format!(
                "evidence {:?} needs a citation of every fact; missing: {} \
                 (cite them, or mark the pack \"experimental\")",
                evidence.as_str(),
                missing.join(", ")
            ),
        ));
    }
    if evidence == Evidence::Sdk && sdk == 0 {
        return Err(paths.err(
            "citations",
            "evidence \"sdk\" needs at least one sdk:<registry>/<package>@<version>:<path> \
             citation (otherwise the evidence is \"docs\")",
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn citation_values() {
        assert_eq!(
            parse_citation("https://docs.stripe.com/webhooks"),
            Ok(Citation::Url)
        );
        for good in [
            "sdk:npm/@octokit/webhooks-methods@5.1.0:src/node/verify.ts",
            "sdk:pypi/stripe@16.1.0:stripe/_webhook.py",
            "sdk:packagist/mollie/mollie-api-php@3.1.0:src/Webhooks/SignatureValidator.php",
        ] {
            assert_eq!(parse_citation(good), Ok(Citation::Sdk), "{good}");
        }
        for bad in [
            "http://docs.stripe.com",
            "https://",
            "https://a b",
            "docs.stripe.com",
            "sdk:stripe@16.1.0:x.py",
            "sdk:pypi/stripe:x.py",
            "sdk:pypi/stripe@16.1.0",
            "sdk:pypi/stripe@:x.py",
            "sdk:PyPI/stripe@1:x.py",
            "sdk:pypi/stripe@1:/abs.py",
        ] {
            assert!(parse_citation(bad).is_err(), "{bad}");
        }
    }
}
