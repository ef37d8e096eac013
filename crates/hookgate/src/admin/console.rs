//! The web console: a page and its assets, embedded in the binary and served by the admin
//! listener at `/console` (`/console/assets/*`). It is a client of the operator API
//! (`/api/v1/…`) and of `/metrics`, from the operator's browser: it never reads the store. The
//! token is typed into its login form, kept in the page's memory only and sent as
//! `Authorization: Bearer`; no cookie is ever set. Every answer carries a Content-Security-Policy
//! that allows only this origin's script and style files (no inline script, no eval), no
//! framing, no other origin.

use axum::Router;
use axum::extract::Path;
use axum::http::{HeaderMap, HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Redirect, Response};
use axum::routing::get;

/// What the console's answers are allowed to load: scripts, styles and API calls from this
/// origin only; no inline script, no plugins, no framing, forms post nowhere else.
pub const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'none'; \
     base-uri 'none'; frame-ancestors 'none'";

/// One embedded file: its name under `/console/assets/`, its media type, its bytes.
struct Asset {
    name: &'static str,
    content_type: &'static str,
    body: &'static str,
}

const PAGE: &str = include_str!("console/index.html");

const ASSETS: &[Asset] = &[
    Asset {
        name: "console.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("console/console.js"),
    },
    Asset {
        name: "dom.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("console/dom.js"),
    },
    Asset {
        name: "metrics.js",
        content_type: "text/javascript; charset=utf-8",
        body: include_str!("console/metrics.js"),
    },
    Asset {
        name: "console.css",
        content_type: "text/css; charset=utf-8",
        body: include_str!("console/console.css"),
    },
    Asset {
        name: "favicon.svg",
        content_type: "image/svg+xml",
        body: include_str!("console/favicon.svg"),
    },
];

/// The console's routes, merged into the admin router.
pub fn routes<S: Clone + Send + Sync + 'static>() -> Router<S> {
    Router::new()
        .route("/console", get(page))
        .route(
            "/console/",
            get(|| async { Redirect::permanent("/console") }),
        )
        .route("/console/assets/{name}", get(asset))
}

async fn page() -> Response {
    respond(StatusCode::OK, "text/html; charset=utf-8", PAGE)
}

async fn asset(Path(name): Path<String>) -> Response {
    match ASSETS.iter().find(|a| a.name == name) {
        Some(a) => respond(StatusCode::OK, a.content_type, a.body),
        None => respond(
            StatusCode::NOT_FOUND,
            "text/plain; charset=utf-8",
            "not found\n",
        ),
    }
}

fn respond(status: StatusCode, content_type: &'static str, body: &'static str) -> Response {
    let mut headers = HeaderMap::new();
    headers.insert(header::CONTENT_TYPE, HeaderValue::from_static(content_type));
    security_headers(&mut headers);
    (status, headers, body).into_response()
}

/// The headers every console answer carries.
pub fn security_headers(headers: &mut HeaderMap) {
    headers.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    headers.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    headers.insert(header::X_FRAME_OPTIONS, HeaderValue::from_static("DENY"));
    headers.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    // The assets are small and change with the binary: never serve a stale one after an upgrade.
    headers.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    headers.insert(
        HeaderName::from_static("cross-origin-opener-policy"),
        HeaderValue::from_static("same-origin"),
    );
    headers.insert(
        HeaderName::from_static("cross-origin-resource-policy"),
        HeaderValue::from_static("same-origin"),
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_loads_only_its_own_assets_and_has_no_inline_script() {
        let main = ASSETS.iter().find(|a| a.name == "console.js").unwrap().body;
        for a in ASSETS {
            assert!(
                PAGE.contains(&format!("/console/assets/{}", a.name))
                    || main.contains(&format!("from './{}'", a.name)),
                "{} is not referenced by the page or imported by console.js",
                a.name
            );
        }
        // Every module console.js imports is an asset served here.
        for (i, _) in main.match_indices("from './") {
            let name = &main[i + 8..i + 8 + main[i + 8..].find('\'').unwrap()];
            assert!(
                ASSETS.iter().any(|a| a.name == name),
                "{name} is not served"
            );
        }
        // Every <script> has a src (CSP forbids inline code; this keeps the page honest).
        for (i, _) in PAGE.match_indices("<script") {
            let tag = &PAGE[i..i + PAGE[i..].find('>').unwrap()];
            assert!(
                tag.contains(" src=\"/console/assets/"),
                "inline script: {tag}"
            );
        }
        // No inline event handler attribute (` onclick=` …) either.
        let bytes = PAGE.as_bytes();
        for (i, _) in PAGE.match_indices(" on") {
            let name_end = bytes[i + 3..]
                .iter()
                .position(|b| !b.is_ascii_lowercase())
                .map_or(bytes.len(), |n| i + 3 + n);
            assert!(
                name_end == i + 3 || bytes.get(name_end) != Some(&b'='),
                "inline event handler in the page: {}",
                &PAGE[i..name_end]
            );
        }
        assert!(!PAGE.contains("style=\""), "inline style in the page");
    }

    #[test]
    fn the_scripts_never_write_markup_from_data() {
        for js in ASSETS.iter().filter(|a| a.name.ends_with(".js")) {
            check_script(js.name, js.body);
        }
    }

    fn check_script(name: &str, js: &str) {
        for forbidden in [
            "innerHTML",
            "outerHTML",
            "insertAdjacentHTML",
            "document.write",
            "eval(",
            "new Function",
            "localStorage",
            "sessionStorage",
            "document.cookie",
        ] {
            assert!(!js.contains(forbidden), "{name} uses {forbidden}");
        }
    }
}
