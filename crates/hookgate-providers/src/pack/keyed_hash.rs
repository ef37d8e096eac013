//! Keyed plain hashes (not HMACs) and the endpoint option that picks a pack's algorithm.
//!
//! Some senders sign with a plain digest of the signed bytes and the secret concatenated:
//! `sha256-concat` = SHA-256(secret ‖ signed) (HubSpot v1), `sha1-concat-key-last` /
//! `sha256-concat-key-last` = HASH(signed ‖ secret) (Cloudinary: body, timestamp, API
//! secret). They are declared as `signature.algorithm` like the HMACs and compared the same
//! way, in constant time per secret. `signature.algorithm_option` lets the team pick the
//! algorithm per endpoint where the provider has an account setting for it (Cloudinary's
//! `signature_algorithm`): `{ "option": "<name>", "values": { "<value>": "<algorithm>", … } }`;
//! the option must be declared in the pack's `options`, an endpoint giving any other value is
//! refused at load, and without the option the pack's `algorithm` applies.

use serde::Deserialize;
use sha1::Sha1;
use sha2::{Digest, Sha256};

use super::syntax::{Paths, keep, pick};
use super::{Algorithm, OptionFormat, OptionRule, PackError};

/// The `algorithm` names and what they select.
pub(crate) const ALGORITHMS: &[(&str, Algorithm)] = &[
    ("hmac-sha1", Algorithm::Sha1),
    ("hmac-sha256", Algorithm::Sha256),
    ("hmac-sha512", Algorithm::Sha512),
    ("sha256-concat", Algorithm::PlainSha256),
    ("sha1-concat-key-last", Algorithm::PlainSha1KeyLast),
    ("sha256-concat-key-last", Algorithm::PlainSha256KeyLast),
];

/// `signature.algorithm_option` as written in a pack.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AlgorithmOptionSpec {
    /// The endpoint option (declared in `options`, format `text`) naming the algorithm.
    pub option: String,
    /// Option value → algorithm name.
    pub values: std::collections::BTreeMap<String, String>,
}

/// A validated `signature.algorithm_option`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct AlgorithmOption {
    pub(crate) option: &'static str,
    pub(crate) values: Vec<(&'static str, Algorithm)>,
    /// `must be one of a, b` (for the endpoint option error).
    pub(crate) expected: &'static str,
}

impl AlgorithmOption {
    /// The algorithm an endpoint's options select, else `default`.
    pub(crate) fn select(&self, value: Option<&str>, default: Algorithm) -> Algorithm {
        value
            .and_then(|v| self.values.iter().find(|(name, _)| *name == v))
            .map_or(default, |(_, alg)| *alg)
    }

    /// Whether an endpoint's value of the option is one the pack maps.
    pub(crate) fn accepts(&self, value: &str) -> bool {
        self.values.iter().any(|(name, _)| *name == value)
    }
}

/// Validates `signature.algorithm_option` against the pack's options (errors name the key).
pub(super) fn algorithm_option(
    paths: &Paths,
    spec: Option<&AlgorithmOptionSpec>,
    hmac_based: bool,
    options: &[OptionRule],
) -> Result<Option<AlgorithmOption>, PackError> {
    let Some(spec) = spec else {
        return Ok(None);
    };
    let field = "signature.algorithm_option";
    if !hmac_based {
        return Err(paths.err(
            field,
            "only HMAC and keyed-hash schemes choose an algorithm",
        ));
    }
    let declared = options.iter().find(|o| o.name == spec.option);
    match declared {
        None => {
            return Err(paths.err(
                &format!("{field}.option"),
                format!("{:?} is not declared in options", spec.option),
            ));
        }
        Some(o) if o.format != OptionFormat::Text || o.required => {
            return Err(paths.err(
                &format!("{field}.option"),
                format!("{:?} must be an optional text option", spec.option),
            ));
        }
        Some(_) => {}
    }
    if spec.values.is_empty() {
        return Err(paths.err(&format!("{field}.values"), "map at least one value"));
    }
    let mut values = Vec::new();
    for (value, name) in &spec.values {
        let at = format!("{field}.values.{value}");
        if value.trim().is_empty() {
            return Err(paths.err(&at, "a value must not be empty"));
        }
        values.push((
            keep(value),
            pick(paths, &at, "algorithm", name, ALGORITHMS)?,
        ));
    }
    let names: Vec<&str> = values.iter().map(|(v, _)| *v).collect();
    Ok(Some(AlgorithmOption {
        option: keep(&spec.option),
        expected: keep(&format!("must be one of {}", names.join(", "))),
        values,
    }))
}

impl super::Pack {
    /// The algorithm an endpoint verifies with: its `algorithm_option` value's, else the
    /// pack's.
    pub(crate) fn endpoint_algorithm(&self, options: &super::EndpointOptions) -> Algorithm {
        match &self.algorithm_option {
            Some(rule) => rule.select(options.get(rule.option), self.algorithm),
            None => self.algorithm,
        }
    }

    /// The endpoint option's rule, for [`super::Pack::check_options`].
    pub(crate) fn algorithm_option(&self) -> Option<&AlgorithmOption> {
        self.algorithm_option.as_ref()
    }
}

/// A keyed plain hash of `parts` into `out`; `false` (nothing written) for an HMAC.
pub(crate) fn plain_hash(
    algorithm: Algorithm,
    key: &[u8],
    parts: &[&[u8]],
    out: &mut [u8],
) -> bool {
    fn run<D: Digest>(key_first: bool, key: &[u8], parts: &[&[u8]], out: &mut [u8]) {
        let mut hasher = D::new();
        if key_first {
            hasher.update(key);
        }
        for part in parts {
            hasher.update(part);
        }
        if !key_first {
            hasher.update(key);
        }
        let digest = hasher.finalize();
        out[..digest.len()].copy_from_slice(&digest);
    }
    match algorithm {
        Algorithm::PlainSha256 => run::<Sha256>(true, key, parts, out),
        Algorithm::PlainSha1KeyLast => run::<Sha1>(false, key, parts, out),
        Algorithm::PlainSha256KeyLast => run::<Sha256>(false, key, parts, out),
        Algorithm::Sha1 | Algorithm::Sha256 | Algorithm::Sha512 => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn keyed_hashes_put_the_key_where_their_name_says() {
        // sha256("key" + "ab") and sha1("ab" + "key"), from the Python standard library
        let tag = Algorithm::PlainSha256.mac(b"key", &[b"a", b"b"]);
        assert_eq!(hex(&tag[..32]), hex(&Sha256::digest(b"keyab")), "key first");
        let tag = Algorithm::PlainSha1KeyLast.mac(b"key", &[b"a", b"b"]);
        assert_eq!(hex(&tag[..20]), hex(&Sha1::digest(b"abkey")));
        assert_eq!(Algorithm::PlainSha1KeyLast.tag_len(), 20);
        let tag = Algorithm::PlainSha256KeyLast.mac(b"key", &[b"ab"]);
        assert_eq!(hex(&tag[..32]), hex(&Sha256::digest(b"abkey")));
        // not an HMAC
        assert_ne!(
            Algorithm::PlainSha256.mac(b"key", &[b"ab"])[..32],
            Algorithm::Sha256.mac(b"key", &[b"ab"])[..32]
        );
    }

    fn rule(name: &'static str, required: bool, format: OptionFormat) -> OptionRule {
        OptionRule {
            name,
            required,
            format,
            description: "d",
        }
    }

    fn spec(option: &str, values: &[(&str, &str)]) -> AlgorithmOptionSpec {
        AlgorithmOptionSpec {
            option: option.to_owned(),
            values: values
                .iter()
                .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
                .collect(),
        }
    }

    #[test]
    fn the_option_is_validated_at_load_naming_the_key() {
        let paths = Paths {
            root: "packs.x".to_owned(),
        };
        let options = [rule("alg", false, OptionFormat::Text)];
        let err = |s: &AlgorithmOptionSpec, opts: &[OptionRule], hmac: bool| {
            algorithm_option(&paths, Some(s), hmac, opts)
                .unwrap_err()
                .to_string()
        };
        let good = spec(
            "alg",
            &[
                ("sha1", "sha1-concat-key-last"),
                ("sha256", "sha256-concat-key-last"),
            ],
        );
        let rule_ok = algorithm_option(&paths, Some(&good), true, &options)
            .unwrap()
            .unwrap();
        assert_eq!(rule_ok.expected, "must be one of sha1, sha256");
        assert_eq!(
            rule_ok.select(Some("sha256"), Algorithm::PlainSha1KeyLast),
            Algorithm::PlainSha256KeyLast
        );
        assert_eq!(
            rule_ok.select(None, Algorithm::PlainSha1KeyLast),
            Algorithm::PlainSha1KeyLast
        );
        assert!(rule_ok.accepts("sha1") && !rule_ok.accepts("md5"));
        let bad = spec("alg", &[("sha1", "md5")]);
        assert!(
            err(&bad, &options, true)
                .starts_with("packs.x.signature.algorithm_option.values.sha1:"),
            "{}",
            err(&bad, &options, true)
        );
        assert!(
            err(&spec("nope", &[("a", "hmac-sha1")]), &options, true)
                .starts_with("packs.x.signature.algorithm_option.option:")
        );
        let required = [rule("alg", true, OptionFormat::Text)];
        assert!(err(&good, &required, true).contains("optional text option"));
        assert!(
            err(&spec("alg", &[]), &options, true)
                .starts_with("packs.x.signature.algorithm_option.values:")
        );
        assert!(err(&good, &options, false).starts_with("packs.x.signature.algorithm_option:"));
        assert_eq!(
            algorithm_option(&paths, None, true, &options).unwrap(),
            None
        );
    }
}
