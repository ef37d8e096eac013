//! `signature_versions`: older signature generations a provider still sends, chosen by a
//! version header, verified when the request carries none of the pack's own signature
//! headers. HubSpot sends `X-HubSpot-Signature` with `X-HubSpot-Signature-Version: v1`
//! (SHA-256 of secret + body) or `v2` (+ method + URI), without a timestamp, beside or instead
//! of its v3 signature; v3 wins when present.
//!
//! Declared as data: `{ "header": "<version header>", "versions": { "<value>": <signature
//! block> } }`. Each version compiles as the pack itself with that `signature` block and no
//! `timestamp` (errors name `signature_versions.versions.<value>…`); a request naming a version
//! the pack does not list verifies nothing. `send` signs only the pack's own generation.

use std::collections::BTreeMap;

use serde::Deserialize;

use super::spec::{PackSpec, SignatureSpec};
use super::syntax::{Paths, header_name, keep};
use super::{Pack, PackError, RequestContext};
use crate::Rejection;
use crate::common::info_header;

/// `signature_versions` as written in a pack.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SignatureVersionsSpec {
    /// The header naming the generation (`X-HubSpot-Signature-Version`).
    pub header: String,
    /// Header value → that generation's `signature` block.
    pub versions: BTreeMap<String, SignatureSpec>,
}

/// The compiled generations.
#[derive(Debug)]
pub(crate) struct SignatureVersions {
    header: &'static str,
    versions: Vec<(&'static str, Pack)>,
}

/// Compiles `spec.signature_versions`, each generation as the pack with its signature block.
pub(super) fn compile(
    paths: &Paths,
    spec: &PackSpec,
    user: bool,
) -> Result<Option<SignatureVersions>, PackError> {
    let Some(sv) = &spec.signature_versions else {
        return Ok(None);
    };
    let field = "signature_versions";
    let header = header_name(paths, &format!("{field}.header"), &sv.header)?;
    if sv.versions.is_empty() {
        return Err(paths.err(&format!("{field}.versions"), "list at least one version"));
    }
    let mut versions = Vec::new();
    for (value, signature) in &sv.versions {
        let at = format!("{field}.versions.{value}");
        if value.trim().is_empty() {
            return Err(paths.err(&at, "a version must not be empty"));
        }
        let mut one = spec.clone();
        one.signature = signature.clone();
        one.timestamp = None;
        one.signature_versions = None;
        if let Some(c) = one.citations.as_mut() {
            c.timestamp = None;
        }
        let pack = one.compile_nested(&format!("{}.{at}", paths.root), user)?;
        versions.push((keep(value), pack));
    }
    Ok(Some(SignatureVersions { header, versions }))
}

impl Pack {
    /// The older generation a request is signed with: none of the pack's own signature
    /// headers and a version header present. `Err` for a version the pack does not list.
    pub(crate) fn signature_version(
        &self,
        ctx: &RequestContext<'_>,
    ) -> Result<Option<&Pack>, Rejection> {
        let Some(sv) = &self.signature_versions else {
            return Ok(None);
        };
        if self
            .signature_header_names
            .iter()
            .any(|name| ctx.headers.contains_key(*name))
        {
            return Ok(None);
        }
        let Some(version) = info_header(ctx.headers, &[sv.header])? else {
            return Ok(None);
        };
        sv.versions
            .iter()
            .find(|(value, _)| *value == version)
            .map(|(_, pack)| Some(pack))
            .ok_or(Rejection::InvalidSignature)
    }
}
