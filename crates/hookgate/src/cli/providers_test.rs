//! `hookgate providers test --config FILE --endpoint ID --request FILE [--json] [--now S]`:
//! one captured request (the bytes as received: request line, headers, blank line, body;
//! CRLF or LF) through the endpoint's pack in the ingress order, by the engine's diagnostic
//! mode ([`Pack::trace`]). Prints each step's verdict, never a secret, a signature or the
//! body. Exit code 0 when the request verifies and yields events or a handshake, 1 when a
//! step refuses it, 2 when the request file or the endpoint cannot be used.

use std::io::{Read, Write};
use std::path::PathBuf;

use clap::Args;
use hookgate_providers::TrustedSecret;
use hookgate_providers::pack::{Pack, RequestContext, Trace};
use http::{HeaderMap, HeaderName, HeaderValue, Method};

use crate::config::Config;

#[derive(Debug, Args)]
pub struct TestArgs {
    #[arg(long, short)]
    pub config: PathBuf,
    /// The endpoint id whose pack, secrets and settings apply.
    #[arg(long)]
    pub endpoint: String,
    /// A captured raw HTTP/1.1 request.
    #[arg(long)]
    pub request: PathBuf,
    /// Print one JSON object instead of text.
    #[arg(long)]
    pub json: bool,
    /// Judge freshness (and which secret versions are trusted) at this unix time instead of
    /// now, for a request captured earlier.
    #[arg(long)]
    pub now: Option<i64>,
}

/// The largest request file read (the body limit of any endpoint is at most 64 MiB).
const MAX_REQUEST_FILE: u64 = 65 * 1024 * 1024;
const MAX_HEADERS: usize = 256;

/// A request as captured.
struct Captured {
    method: Method,
    target: String,
    headers: HeaderMap,
    body: Vec<u8>,
}

/// Parses the capture: request line, headers, blank line, then the body (as many bytes as
/// `Content-Length` says when it is present, else the rest of the file).
fn parse_capture(bytes: &[u8]) -> Result<Captured, String> {
    let mut slots = [httparse::EMPTY_HEADER; MAX_HEADERS];
    let mut request = httparse::Request::new(&mut slots);
    let head_len = match request.parse(bytes) {
        Ok(httparse::Status::Complete(n)) => n,
        Ok(httparse::Status::Partial) => {
            return Err("the request head does not end with a blank line".to_owned());
        }
        Err(e) => return Err(format!("not an HTTP/1.1 request head: {e}")),
    };
    let method = Method::from_bytes(request.method.unwrap_or("").as_bytes())
        .map_err(|_| "bad method".to_owned())?;
    let target = request.path.unwrap_or("/").to_owned();
    let mut headers = HeaderMap::new();
    for h in request.headers.iter() {
        let name = HeaderName::from_bytes(h.name.as_bytes())
            .map_err(|_| format!("bad header name {:?}", h.name))?;
        let value = HeaderValue::from_bytes(h.value)
            .map_err(|_| format!("bad value of header {}", h.name))?;
        headers.append(name, value);
    }
    if headers
        .get(http::header::TRANSFER_ENCODING)
        .is_some_and(|v| v.as_bytes().eq_ignore_ascii_case(b"chunked"))
    {
        return Err(
            "chunked bodies are not supported: capture the decoded body with a Content-Length"
                .to_owned(),
        );
    }
    let rest = &bytes[head_len..];
    let body = match headers.get(http::header::CONTENT_LENGTH) {
        Some(v) => {
            let len: usize = v
                .to_str()
                .ok()
                .and_then(|t| t.trim().parse().ok())
                .ok_or("malformed Content-Length")?;
            if rest.len() < len {
                return Err(format!(
                    "Content-Length says {len} bytes, the file holds {} after the head",
                    rest.len()
                ));
            }
            rest[..len].to_vec()
        }
        None => rest.to_vec(),
    };
    Ok(Captured {
        method,
        target,
        headers,
        body,
    })
}

pub fn run(args: TestArgs) -> anyhow::Result<i32> {
    let config = Config::load(&args.config)?;
    let Some(endpoint) = config.endpoint(&args.endpoint) else {
        let known: Vec<&str> = config.endpoints.iter().map(|e| e.id.as_str()).collect();
        eprintln!(
            "error: no endpoint {:?} in {} (known: {})",
            args.endpoint,
            args.config.display(),
            known.join(", ")
        );
        return Ok(2);
    };
    let mut bytes = Vec::new();
    std::fs::File::open(&args.request)
        .and_then(|f| f.take(MAX_REQUEST_FILE).read_to_end(&mut bytes))
        .map_err(|e| anyhow::anyhow!("cannot read {}: {e}", args.request.display()))?;
    let captured = match parse_capture(&bytes) {
        Ok(c) => c,
        Err(problem) => {
            eprintln!("error: {}: {problem}", args.request.display());
            return Ok(2);
        }
    };
    let now = args
        .now
        .unwrap_or_else(|| jiff::Timestamp::now().as_second());
    let pack: &Pack = endpoint.pack;
    let raw_query = captured.target.split_once('?').map(|(_, q)| q);
    let ctx = RequestContext {
        method: &captured.method,
        headers: &captured.headers,
        raw_query,
        public_url: endpoint.public_url.as_deref(),
        options: &endpoint.options,
    };
    // Each trusted version is read from its source as the gateway reads it; one that cannot
    // be read is reported as unusable (never its value or the reason's details).
    let mut materials = Vec::new();
    let mut untrusted: Vec<(&str, &str)> = Vec::new();
    for s in &endpoint.secrets {
        if !s.trusted_at(now) {
            untrusted.push((
                s.version.as_str(),
                if s.retired { "retired" } else { "expired" },
            ));
            continue;
        }
        match super::send::secret_version_blocking(&config, endpoint, s) {
            Ok(material) => materials.push((s.version.as_str(), material)),
            Err(_) => untrusted.push((s.version.as_str(), "unreadable")),
        }
    }
    let trusted: Vec<TrustedSecret<'_>> = materials
        .iter()
        .map(|(version, material)| TrustedSecret {
            version,
            key: material,
        })
        .collect();
    let mut trace = pack.trace(
        &ctx,
        &captured.body,
        &trusted,
        &untrusted,
        now,
        endpoint.tolerance_seconds,
        endpoint.max_body_bytes,
    );
    let path_ok = captured
        .target
        .split('?')
        .next()
        .is_some_and(|p| p == format!("/webhooks/{}", endpoint.id));
    let mut out = std::io::stdout().lock();
    if args.json {
        let doc = serde_json::json!({
            "endpoint": endpoint.id,
            "provider": trace.provider,
            "user_pack": pack.user_defined(),
            "path_matches_endpoint": path_ok,
            "verified": trace.verified,
            "steps": trace.steps,
            "secrets": trace.secrets,
        });
        serde_json::to_writer_pretty(&mut out, &doc)?;
        writeln!(out)?;
    } else {
        out.write_all(text(&endpoint.id, pack, &mut trace, path_ok).as_bytes())?;
    }
    out.flush()?;
    Ok(if trace.verified { 0 } else { 1 })
}

fn text(endpoint: &str, pack: &Pack, trace: &mut Trace, path_ok: bool) -> String {
    let mut out = format!(
        "endpoint {endpoint}: provider {}{}\n",
        pack.id(),
        if pack.user_defined() {
            " (user pack)"
        } else {
            ""
        }
    );
    if !path_ok {
        out.push_str(&format!(
            "note: the request path is not /webhooks/{endpoint} (the gateway would answer 404)\n"
        ));
    }
    let width = trace.steps.iter().map(|s| s.step.len()).max().unwrap_or(0);
    for step in &trace.steps {
        let verdict = match (&step.reason, step.ok) {
            (_, true) => "ok".to_owned(),
            (Some(r), false) => format!("FAIL {r}"),
            (None, false) => "FAIL".to_owned(),
        };
        out.push_str(&format!(
            "{:<width$}  {verdict}: {}\n",
            step.step, step.detail
        ));
    }
    if !trace.secrets.is_empty() {
        let list: Vec<String> = trace
            .secrets
            .iter()
            .map(|s| format!("{} {}", s.version, s.verdict))
            .collect();
        out.push_str(&format!("secrets: {}\n", list.join(", ")));
    }
    out.push_str(if trace.verified {
        "result: verified\n"
    } else {
        "result: not verified\n"
    });
    out
}
