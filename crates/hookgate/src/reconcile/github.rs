//! GitHub (`github_deliveries`): the hook's deliveries since the run's start, and for each
//! delivery GUID that is not in the inbox and was never answered 2xx, one redelivery request
//! of its latest failed delivery, so the event arrives signed as any webhook (GitHub never
//! redelivers on its own).
//!
//! - `GET {api_base}/{hook}/deliveries?per_page=100`, newest first, then each `Link: <…>;
//!   rel="next"` — followed only on `api_base`'s origin (the key goes with it), else the run
//!   fails — until a delivery older than the start (or the last page).
//! - Per GUID (the `X-GitHub-Delivery` header, the github pack's event id): in the inbox →
//!   `already_present`; else any delivery answered 2xx → `answered` (a receiver took it —
//!   another instance, or a row retention removed: nothing is asked again); else `POST
//!   {api_base}/{hook}/deliveries/{id}/attempts` of its latest failed delivery (202) →
//!   `redelivered`; a 422 for it → `redelivery_refused` (reported, the run goes on). Oldest
//!   GUIDs first, so redeliveries arrive in about the order they were
//!   sent.

use std::collections::HashMap;

use serde::Deserialize;

use super::api::ApiError;
use super::provider::{MAX_PAGES, PAGE_SIZE, ProviderError, ProviderReport, ProviderRun};
use crate::config::EndpointConfig;
use crate::config::reconcile::EndpointReconcile;

/// The REST API version the client speaks (GitHub's `X-GitHub-Api-Version`).
const API_VERSION: &str = "2022-11-28";

const ACCEPT: &str = "application/vnd.github+json";

/// GitHub's answer to a redelivery request it will not carry out for that delivery
/// ("Validation failed"); any other non-2xx answer fails the run.
const REDELIVERY_REFUSED: u16 = 422;

/// One delivery as `GET …/hooks/{id}/deliveries` lists it (fields the run does not read are
/// ignored).
#[derive(Debug, Deserialize)]
struct Delivery {
    id: u64,
    guid: String,
    delivered_at: String,
    status_code: i64,
}

/// What the listing says of one GUID.
#[derive(Debug, Default)]
struct Guid {
    /// Some delivery of it was answered 2xx.
    answered: bool,
    /// Its latest failed delivery: (delivered at, unix ms; delivery id).
    latest_failed: Option<(i64, u64)>,
}

impl ProviderRun<'_> {
    pub(super) async fn github(
        &self,
        ep: &EndpointConfig,
        rc: &EndpointReconcile,
        report: &mut ProviderReport,
    ) -> Result<(), ProviderError> {
        let provider = ep.provider_id();
        let malformed = |what: &'static str, reason: String| ApiError::Malformed {
            provider,
            endpoint: ep.id.clone(),
            what,
            reason,
        };
        let hook = rc
            .hook
            .as_deref()
            .ok_or_else(|| malformed("list deliveries", "no reconcile.hook configured".into()))?;
        let base = url::Url::parse(&rc.api_base)
            .map_err(|_| malformed("list deliveries", "reconcile.api_base is not a URL".into()))?;
        let mut next = Some(format!(
            "{}/{hook}/deliveries?per_page={PAGE_SIZE}",
            rc.api_base
        ));
        // GUIDs in the order first listed (newest first), and what the listing says of each.
        let mut order: Vec<String> = Vec::new();
        let mut guids: HashMap<String, Guid> = HashMap::new();
        let mut pages = 0;
        while let Some(url) = next.take() {
            if pages == MAX_PAGES {
                report.more = true;
                break;
            }
            pages += 1;
            let answer = self
                .client
                .call(provider, &ep.id, "list deliveries", |http| {
                    github_request(http.get(&url), rc)
                })
                .await?;
            if answer.status != 200 {
                return Err(ApiError::Status {
                    provider,
                    endpoint: ep.id.clone(),
                    what: "list deliveries",
                    status: answer.status,
                }
                .into());
            }
            let page: Vec<Delivery> = serde_json::from_slice(&answer.body).map_err(|e| {
                malformed(
                    "list deliveries",
                    format!(
                        "not a delivery list (line {}, column {})",
                        e.line(),
                        e.column()
                    ),
                )
            })?;
            let mut reached_start = page.is_empty();
            for d in page {
                if d.guid.is_empty() || d.guid.len() > 512 || d.guid.chars().any(char::is_control) {
                    return Err(
                        malformed("list deliveries", "a delivery without a GUID".into()).into(),
                    );
                }
                let at = d
                    .delivered_at
                    .parse::<jiff::Timestamp>()
                    .map_err(|_| {
                        malformed(
                            "list deliveries",
                            format!("delivery {}: delivered_at", d.id),
                        )
                    })?
                    .as_millisecond();
                if at < report.from_ms {
                    // Newest first: everything after this one is older still.
                    reached_start = true;
                    continue;
                }
                let state = guids.entry(d.guid.clone()).or_insert_with(|| {
                    order.push(d.guid.clone());
                    Guid::default()
                });
                if (200..300).contains(&d.status_code) {
                    state.answered = true;
                } else if state.latest_failed.is_none_or(|latest| (at, d.id) > latest) {
                    state.latest_failed = Some((at, d.id));
                }
            }
            if reached_start {
                break;
            }
            next = next_link(&answer.headers, &base).map_err(|origin| ApiError::ForeignLink {
                provider,
                endpoint: ep.id.clone(),
                origin,
            })?;
        }
        for guid in order.iter().rev() {
            let state = &guids[guid];
            if self.already_present(ep, guid, report).await? {
                continue;
            }
            let Some((_, delivery_id)) = state.latest_failed.filter(|_| !state.answered) else {
                report.look(self.dry_run, guid, "answered", None);
                continue;
            };
            if !self.dry_run {
                let url = format!("{}/{hook}/deliveries/{delivery_id}/attempts", rc.api_base);
                let answer = self
                    .client
                    .call(provider, &ep.id, "redeliver", |http| {
                        github_request(http.post(&url), rc)
                    })
                    .await?;
                if answer.status == REDELIVERY_REFUSED {
                    // This delivery cannot be redelivered (GitHub keeps deliveries
                    // redeliverable for a few days): reported, and the others still asked for.
                    tracing::warn!(
                        endpoint = %ep.id,
                        guid = %guid,
                        delivery_id,
                        "GitHub refused to redeliver a delivery that never arrived (422)"
                    );
                    report.look(false, guid, "redelivery_refused", None);
                    continue;
                }
                if !(200..300).contains(&answer.status) {
                    return Err(ApiError::Status {
                        provider,
                        endpoint: ep.id.clone(),
                        what: "redeliver",
                        status: answer.status,
                    }
                    .into());
                }
            }
            report.look(self.dry_run, guid, "redelivered", None);
        }
        Ok(())
    }
}

/// GitHub's REST headers: the key as a bearer token, its media type and API version (the
/// client adds the `User-Agent` GitHub requires).
fn github_request(
    request: reqwest::RequestBuilder,
    rc: &EndpointReconcile,
) -> reqwest::RequestBuilder {
    request
        .bearer_auth(rc.api_key.expose())
        .header("accept", ACCEPT)
        .header("x-github-api-version", API_VERSION)
}

/// The `rel="next"` target of the answer's `Link` headers, if any; `Err(origin)` when it leads
/// off `base`'s origin (scheme, host, port) or carries credentials: the key is never sent
/// there.
pub(super) fn next_link(
    headers: &http::HeaderMap,
    base: &url::Url,
) -> Result<Option<String>, String> {
    for value in headers.get_all("link") {
        let Ok(value) = value.to_str() else {
            continue;
        };
        for link in value.split(',') {
            let link = link.trim();
            let Some((target, params)) =
                link.strip_prefix('<').and_then(|rest| rest.split_once('>'))
            else {
                continue;
            };
            let is_next = params.split(';').any(|p| {
                let Some((name, v)) = p.split_once('=') else {
                    return false;
                };
                name.trim().eq_ignore_ascii_case("rel")
                    && v.trim()
                        .trim_matches('"')
                        .split_ascii_whitespace()
                        .any(|r| r.eq_ignore_ascii_case("next"))
            });
            if !is_next {
                continue;
            }
            let Ok(url) = base.join(target.trim()) else {
                return Err("an unparsable URL".into());
            };
            if url.origin() != base.origin()
                || !url.username().is_empty()
                || url.password().is_some()
            {
                let mut origin = url.origin().ascii_serialization();
                origin.truncate(200);
                return Err(origin);
            }
            return Ok(Some(url.into()));
        }
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn links(values: &[&str]) -> http::HeaderMap {
        let mut h = http::HeaderMap::new();
        for v in values {
            h.append("link", v.parse().unwrap());
        }
        h
    }

    #[test]
    fn next_links_are_followed_only_on_the_api_origin() {
        let base = url::Url::parse("https://api.github.com").unwrap();
        let next = "https://api.github.com/repos/o/r/hooks/1/deliveries?cursor=v1_12&per_page=100";
        assert_eq!(
            next_link(&links(&[&format!("<{next}>; rel=\"next\"")]), &base),
            Ok(Some(next.to_owned()))
        );
        assert_eq!(
            next_link(
                &links(&[&format!(
                    "<https://api.github.com/x?cursor=1>; rel=\"prev\", <{next}>; rel=\"next\""
                )]),
                &base
            ),
            Ok(Some(next.to_owned()))
        );
        assert_eq!(
            next_link(&links(&["<https://api.github.com/x>; rel=\"prev\""]), &base),
            Ok(None)
        );
        assert_eq!(next_link(&http::HeaderMap::new(), &base), Ok(None));
        for foreign in [
            "<https://evil.example/deliveries?cursor=1>; rel=\"next\"",
            "<http://api.github.com/deliveries?cursor=1>; rel=\"next\"",
            "<https://api.github.com:8443/deliveries?cursor=1>; rel=\"next\"",
            "<https://user:pw@api.github.com/deliveries?cursor=1>; rel=\"next\"",
            "<//evil.example/deliveries>; rel=next",
        ] {
            assert!(next_link(&links(&[foreign]), &base).is_err(), "{foreign}");
        }
        let local = url::Url::parse("http://127.0.0.1:4000").unwrap();
        assert_eq!(
            next_link(
                &links(&["</repos/o/r/hooks/1/deliveries?cursor=2>; rel=\"next\""]),
                &local
            ),
            Ok(Some(
                "http://127.0.0.1:4000/repos/o/r/hooks/1/deliveries?cursor=2".into()
            ))
        );
        assert!(next_link(&links(&["<http://127.0.0.1:4001/d>; rel=\"next\""]), &local).is_err());
    }
}
