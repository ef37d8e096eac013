//! One webhook request, in the ingress order (ARCHITECTURE.md, "One request").
//!
//! route → method (the pack's) → HTTPS → flood protection → content type → bounded headers
//! and Content-Length → signature metadata (the request head only: headers, raw query, the
//! endpoint's `public_url` and options) → bounded body read → verify on the raw bytes (every
//! trusted secret, constant time) → freshness → parse the events or the handshake (answered,
//! never stored) → verified budget → replay digest → `commit.rs`: allow-list per event → seal
//! each row → commit the request's rows as one unit (group commit) → acknowledge.

use std::borrow::Cow;
use std::net::SocketAddr;
use std::time::Instant;

use bytes::{Bytes, BytesMut};
use hookgate_providers::TrustedSecret;
use hookgate_providers::pack::{BodyDecodeError, Delivery, ReplayDefence, RequestContext};
use hookgate_store::ReplayDigest;
use http::header::{CONTENT_LENGTH, CONTENT_TYPE};
use http::{HeaderMap, Request};
use http_body_util::BodyExt;

use super::commit::{self, RETRY_AFTER_OVERLOADED};
use super::limits::{ReadersFull, client_address, client_key, is_trusted};
use super::response::{Answer, HttpResponse};
use crate::state::{AppState, EndpointRuntime};
use crate::{telemetry, traces};
use tracing::Instrument as _;

/// How the connection reached us.
#[derive(Debug, Clone, Copy)]
pub struct ConnInfo {
    pub peer: SocketAddr,
    pub tls: bool,
}

const WEBHOOK_PREFIX: &str = "/webhooks/";
const RETRY_AFTER_UNAVAILABLE: u64 = 2;

/// Handles one request on the webhook listener.
pub async fn handle<B>(state: &AppState, conn: ConnInfo, request: Request<B>) -> HttpResponse
where
    B: http_body::Body<Data = Bytes>,
{
    let started = Instant::now();
    // When the provider sent it, as near as we know (a no-retry window starts here).
    let arrived_ms = state.clock.now_ms();
    let runtime = state.runtime.load_full();
    let endpoint = request
        .uri()
        .path()
        .strip_prefix(WEBHOOK_PREFIX)
        .and_then(|id| runtime.endpoints.get(id))
        .cloned();
    let (parts, body) = request.into_parts();
    let (endpoint_id, provider) = match &endpoint {
        Some(ep) => (ep.config.id.as_str(), ep.config.provider_id()),
        None => ("_unknown", "_unknown"),
    };
    // A root span: an incoming `traceparent` is the sender's claim, not trusted as a parent.
    let span = traces::request_span(endpoint_id, provider);
    // The body as read, for the rejection log's size and keyed digest (never stored).
    let mut seen: Option<Bytes> = None;
    let answer = match &endpoint {
        None => Answer::UnknownEndpoint,
        Some(ep) => {
            process(state, conn, ep, &parts, body, &mut seen)
                .instrument(span.clone())
                .await
        }
    };
    telemetry::request_answered(endpoint_id, provider, &answer, started.elapsed());
    if let Some(ep) = &endpoint
        && answer.refused_for_own_reasons()
        && ep
            .config
            .pack
            .reconcile()
            .is_some_and(|rule| !rule.api.provider_retries())
    {
        state
            .no_retry
            .note(&ep.config.id, arrived_ms, state.clock.now_ms());
    }
    let rejection = crate::rejections::cause_of(&answer);
    let traced = (!span.is_disabled()).then(|| {
        (
            answer.outcome(),
            rejection.and_then(|(_, reason)| reason),
            answer.acknowledged_id().map(str::to_owned),
        )
    });
    if let Some((cause, reason)) = rejection {
        state.rejections.record(crate::rejections::Rejected {
            at_ms: state.clock.now_ms(),
            endpoint: endpoint_id,
            cause,
            reason,
            headers: &parts.headers,
            body: seen.as_deref(),
            digest: &|body| runtime.keyring.digest(body),
        });
    }
    let response = answer.into_response();
    if let Some((verdict, reason, inbox_id)) = traced {
        let status = response.status().as_u16();
        traces::request_answered(&span, verdict, reason, inbox_id.as_deref(), status);
    }
    response
}

async fn process<B>(
    state: &AppState,
    conn: ConnInfo,
    ep: &EndpointRuntime,
    parts: &http::request::Parts,
    body: B,
    seen: &mut Option<Bytes>,
) -> Answer
where
    B: http_body::Body<Data = Bytes>,
{
    let cfg = &ep.config;
    let server = &state.runtime.load().config.server;

    // 1. Method (POST, or one the pack declares a handshake on), HTTPS, flood protection.
    if !cfg.pack.accepts_method(&parts.method) {
        return Answer::MethodNotAllowed;
    }
    if !conn.tls && !server.trusted_proxies.is_empty() {
        if !is_trusted(conn.peer.ip(), &server.trusted_proxies) {
            return Answer::HttpsRequired;
        }
        match forwarded_proto(&parts.headers) {
            ForwardedProto::Https => {}
            ForwardedProto::Ambiguous => return Answer::BadRequest("ambiguous_forwarded_proto"),
            ForwardedProto::Absent | ForwardedProto::Other => return Answer::HttpsRequired,
        }
    }
    let client = client_key(client_address(
        conn.peer.ip(),
        &parts.headers,
        &server.trusted_proxies,
    ));
    if let Some(limiter) = &state.client_limiter
        && let Err(retry_after_secs) = limiter.check(client)
    {
        return Answer::RateLimited { retry_after_secs };
    }
    // Shed before reading and verifying the body while the commit queue already holds
    // `store.max_queue_wait_ms` of work: the CPU goes to requests that can be committed.
    if !state.store.admits() {
        return shed(
            state,
            &parts.headers,
            body,
            cfg.max_body_bytes,
            server.request_timeout,
        )
        .await;
    }

    let pack = cfg.pack;
    let headers = &parts.headers;
    let ctx = RequestContext {
        method: &parts.method,
        headers,
        raw_query: parts.uri.query(),
        public_url: cfg.public_url.as_deref(),
        options: &cfg.options,
    };

    // Content type and encoding (none, or one the pack declares), then bounded headers.
    if !pack.accepts_content_type(headers.get(CONTENT_TYPE))
        || !pack.accepts_content_encoding(headers)
    {
        return Answer::UnsupportedMediaType;
    }
    if let Err(reason) =
        check_header_bounds(headers, server.max_header_count, server.max_header_bytes)
    {
        return Answer::BadRequest(reason);
    }

    // 2–4. Signature metadata from the request head only; Content-Length before reading.
    let metadata = match pack.parse_metadata(&ctx) {
        Ok(m) => m,
        Err(rejection) => return rejection.into(),
    };
    match declared_length(headers) {
        Err(reason) => return Answer::BadRequest(reason),
        Ok(Some(len)) if len > cfg.max_body_bytes as u64 => return Answer::PayloadTooLarge,
        Ok(_) => {}
    }

    // 3. Bounded read under the body readers' caps (not the processing permit: a slow or
    // forged upload must not hold what verified traffic needs), at a minimum data rate. A
    // lying or missing Content-Length cannot make us read more.
    let body = {
        let _reader = match state.body_readers.try_enter(client) {
            Ok(slot) => slot,
            Err(ReadersFull::Client) => {
                return Answer::RateLimited {
                    retry_after_secs: 1,
                };
            }
            Err(ReadersFull::Global) => {
                return Answer::Overloaded {
                    retry_after_secs: RETRY_AFTER_OVERLOADED,
                };
            }
        };
        let read = read_bounded(
            body,
            cfg.max_body_bytes,
            Some(server.min_body_bytes_per_second),
        );
        match tokio::time::timeout(server.request_timeout, read).await {
            Err(_) | Ok(Err(BodyError::TooSlow)) => return Answer::RequestTimeout,
            Ok(Err(BodyError::TooLarge)) => return Answer::PayloadTooLarge,
            Ok(Err(BodyError::Transport)) => return Answer::BadRequest("body_read_failed"),
            Ok(Ok(bytes)) => bytes,
        }
    };
    *seen = Some(body.clone());
    // Bounded work in progress keeps latency bounded when the CPU is saturated: beyond
    // `max_in_flight`, answer at once (nothing verified, nothing written) instead of slowing
    // every request down. The body is already read, so the connection stays usable.
    let Ok(_permit) = state.in_flight.clone().try_acquire_owned() else {
        return Answer::Overloaded {
            retry_after_secs: RETRY_AFTER_OVERLOADED,
        };
    };
    // A declared `Content-Encoding` (gzip) is decoded under the permit, at most
    // `max_body_bytes` once decoded (a bomb stops there: 413); what is verified, parsed and
    // stored are the decoded bytes, which are what such providers sign.
    let body = match pack.decode_body(headers, &body, cfg.max_body_bytes) {
        Ok(Cow::Borrowed(_)) => body,
        Ok(Cow::Owned(decoded)) => Bytes::from(decoded),
        Err(BodyDecodeError::Unsupported) => return Answer::UnsupportedMediaType,
        Err(BodyDecodeError::TooLarge) => return Answer::PayloadTooLarge,
        Err(BodyDecodeError::Corrupt) => return Answer::BadRequest("undecodable_body"),
    };

    // 5–6. Verify against every usable secret version; fail closed when none is left.
    let now_ms = state.clock.now_ms();
    let now = now_ms.div_euclid(1000);
    // Trusted (not retired, not past not_after) and read within its max_age: one lock-free
    // load per version; a value replaced by the refresher stops verifying at once.
    let usable = ep.usable_secrets(now);
    let trusted: Vec<TrustedSecret<'_>> = usable
        .iter()
        .map(|(version, material)| TrustedSecret {
            version,
            key: material,
        })
        .collect();
    if trusted.is_empty() {
        telemetry::no_usable_secret(&cfg.id);
        return Answer::Unavailable {
            retry_after_secs: RETRY_AFTER_UNAVAILABLE,
        };
    }
    let verified = match pack.verify(&ctx, &metadata, &body, &trusted, now, cfg.tolerance_seconds) {
        Ok(v) => v,
        Err(rejection) => return rejection.into(),
    };
    let matched = trusted[verified.matched_secret_index];
    telemetry::secret_matched(&cfg.id, matched.version);

    // 7. Only now parse the verified bytes: a handshake, or the events (a batch: each item).
    let (mut events, provider_answer, replay_token) =
        match pack.extract(&ctx, &metadata, &body, Some(matched.key)) {
            Ok(Delivery::Handshake(answer)) => return Answer::Handshake(answer),
            Ok(Delivery::Events {
                events,
                answer,
                replay_key,
            }) => (events, answer, replay_key),
            Err(rejection) => return rejection.into(),
        };
    if let [envelope] = events.as_mut_slice()
        && (cfg.object_id_pointer.is_some()
            || cfg.object_version_pointer.is_some()
            || cfg.sequence.is_some())
    {
        object_from_pointers(cfg, &body, envelope);
    }
    // A batch may verify with no events (LINE's verify request): accepted, nothing stored.
    if (events.is_empty() && !pack.batched())
        || events
            .iter()
            .any(|e| e.event_id.is_empty() || e.event_id.len() > 512)
    {
        return Answer::BadRequest("missing_event_id");
    }
    if let Some(Err(retry_after_secs)) = ep.budget.as_ref().map(|b| b.check()) {
        return Answer::RateLimited { retry_after_secs };
    }
    // A verified batch without events (LINE's verify request): accepted, nothing stored.
    if events.is_empty() {
        let own = Answer::Batch { events: Vec::new() };
        return match provider_answer {
            Some(answer) => Answer::Provider {
                answer,
                of: Box::new(own),
            },
            None => own,
        };
    }

    // 8. Seal, insert the rows as one unit (group commit), commit, then acknowledge.
    let replay = cfg.replay_window_ms.and_then(|window_ms| {
        let key = &state.runtime.load().config.payload_keys.replay_key;
        let digest = match pack.replay_defence()? {
            ReplayDefence::BodyDigest => key.digest(&body),
            ReplayDefence::SignedToken => key.digest(replay_token.as_deref()?.as_bytes()),
        };
        Some(ReplayDigest { digest, window_ms })
    });
    commit::commit(
        state,
        cfg,
        commit::Verified {
            body: &body,
            events,
            matched_version: matched.version,
            received_at_ms: now_ms,
            replay,
            provider_answer,
        },
    )
    .await
}

/// The most of a shed request's body that is read (and dropped) to keep its connection.
const SHED_DRAIN_LIMIT: u64 = 64 * 1024;

/// The 503 for a request shed under overload. A small declared body is read and dropped
/// first (neither verified nor kept): a response sent with the body unread makes hyper close
/// the connection, and under overload the clients' reconnects then cost more than the bytes
/// (handshakes, an overflowing accept queue, SYN retries of a second). A larger, undeclared
/// or slow body (or one over the endpoint's `max_body_bytes`) is not waited for; the
/// connection closes as before.
/// The drains together hold at most [`super::limits::SHED_DRAIN_BUDGET_BYTES`]; past it a
/// shed body is not drained.
async fn shed<B>(
    state: &AppState,
    headers: &HeaderMap,
    body: B,
    max_body_bytes: usize,
    timeout: std::time::Duration,
) -> Answer
where
    B: http_body::Body<Data = Bytes>,
{
    if let Ok(Some(len)) = declared_length(headers)
        && len <= SHED_DRAIN_LIMIT.min(max_body_bytes as u64)
    {
        let limit = usize::try_from(len).unwrap_or(0);
        if let Some(_reserved) = state.shed_drain.try_reserve(limit) {
            let drain = read_bounded(body, limit, None);
            let _ = tokio::time::timeout(timeout.min(SHED_DRAIN_TIMEOUT), drain).await;
        }
    }
    Answer::Overloaded {
        retry_after_secs: RETRY_AFTER_OVERLOADED,
    }
}

/// How long a shed request's small body is waited for.
const SHED_DRAIN_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(1);

/// Header count and size limits (hyper also bounds the whole head).
fn check_header_bounds(
    headers: &HeaderMap,
    max_count: usize,
    max_bytes: usize,
) -> Result<(), &'static str> {
    if headers.len() > max_count {
        return Err("too_many_headers");
    }
    let total: usize = headers
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum();
    if total > max_bytes {
        return Err("headers_too_large");
    }
    Ok(())
}

fn declared_length(headers: &HeaderMap) -> Result<Option<u64>, &'static str> {
    let mut values = headers.get_all(CONTENT_LENGTH).iter();
    let Some(first) = values.next() else {
        return Ok(None);
    };
    if values.next().is_some() {
        return Err("duplicated_content_length");
    }
    first
        .to_str()
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .map(Some)
        .ok_or("malformed_content_length")
}

/// What `X-Forwarded-Proto` says, over every header line and comma-separated value: exactly
/// one value is accepted, since a proxy that appends would otherwise let the client's own
/// value through.
enum ForwardedProto {
    Absent,
    Https,
    Other,
    Ambiguous,
}

fn forwarded_proto(headers: &HeaderMap) -> ForwardedProto {
    let mut values = headers
        .get_all("x-forwarded-proto")
        .iter()
        .flat_map(|v| v.as_bytes().split(|b| *b == b','))
        .map(<[u8]>::trim_ascii)
        .filter(|v| !v.is_empty());
    match (values.next(), values.next()) {
        (None, _) => ForwardedProto::Absent,
        (Some(_), Some(_)) => ForwardedProto::Ambiguous,
        (Some(v), None) if v.eq_ignore_ascii_case(b"https") => ForwardedProto::Https,
        (Some(_), None) => ForwardedProto::Other,
    }
}

enum BodyError {
    TooLarge,
    /// Below the minimum data rate after the first second.
    TooSlow,
    Transport,
}

/// The grace before the minimum data rate applies.
const MIN_RATE_GRACE: std::time::Duration = std::time::Duration::from_secs(1);

/// Reads at most `limit` bytes, aborting as soon as the stream goes past it, or — with
/// `min_bytes_per_second` — as soon as, after the first second, fewer bytes have arrived
/// than that rate gives for the time spent.
async fn read_bounded<B>(
    body: B,
    limit: usize,
    min_bytes_per_second: Option<u64>,
) -> Result<Bytes, BodyError>
where
    B: http_body::Body<Data = Bytes>,
{
    let started = tokio::time::Instant::now();
    let mut body = std::pin::pin!(body);
    let mut buf = BytesMut::new();
    loop {
        let next = match min_bytes_per_second {
            None => body.frame().await,
            Some(rate) => {
                // The next frame must come while what has arrived still meets the rate.
                let earned = std::time::Duration::from_secs_f64(buf.len() as f64 / rate as f64);
                let due = started + earned.max(MIN_RATE_GRACE);
                tokio::time::timeout_at(due, body.frame())
                    .await
                    .map_err(|_| BodyError::TooSlow)?
            }
        };
        let Some(frame) = next else { break };
        let frame = frame.map_err(|_| BodyError::Transport)?;
        if let Ok(data) = frame.into_data() {
            if buf.len() + data.len() > limit {
                return Err(BodyError::TooLarge);
            }
            if buf.is_empty() && buf.capacity() == 0 {
                // Common case: one frame is the whole body; avoid copying.
                let next_is_end = body.is_end_stream();
                if next_is_end {
                    return Ok(data);
                }
                buf.reserve(data.len() * 2);
            }
            buf.extend_from_slice(&data);
        }
    }
    Ok(buf.freeze())
}

/// Object id and version from the endpoint's JSON pointers into the verified body (Standard
/// Webhooks endpoints, whose envelope carries neither; the version orders events, since arrival
/// order is not event order). A configured pointer that finds nothing usable leaves the field
/// empty (an event without a version skips the gate) rather than refusing the event.
pub(crate) fn object_from_pointers(
    cfg: &crate::config::EndpointConfig,
    body: &[u8],
    envelope: &mut hookgate_core::Envelope,
) {
    let Ok(json) = serde_json::from_slice::<serde_json::Value>(body) else {
        if cfg.object_version_pointer.is_some() {
            telemetry::event_unversioned(&cfg.id);
        }
        if cfg.sequence.is_some() {
            telemetry::event_unsequenced(&cfg.id);
        }
        return;
    };
    if let Some(pointer) = &cfg.object_id_pointer {
        envelope.object_id = match json.pointer(pointer) {
            Some(serde_json::Value::String(s)) if !s.is_empty() && s.len() <= 512 => {
                Some(s.clone())
            }
            Some(serde_json::Value::Number(n)) => Some(n.to_string()),
            _ => None,
        };
    }
    if let Some(pointer) = &cfg.object_version_pointer {
        envelope.object_version = match json.pointer(pointer) {
            Some(serde_json::Value::Number(n)) => n.as_i64(),
            Some(serde_json::Value::String(s)) => s.parse::<i64>().ok(),
            _ => None,
        };
        if envelope.object_version.is_none() {
            telemetry::event_unversioned(&cfg.id);
        }
    }
    if envelope.object_version.is_some() && envelope.object_id.is_none() {
        tracing::debug!(endpoint = %cfg.id, "object version without an object id; the gate is skipped");
        envelope.object_version = None;
    }
    if let Some(sequencing) = &cfg.sequence {
        // The same integer forms as the version; without an object there is no order.
        envelope.sequence = match json.pointer(&sequencing.pointer) {
            Some(serde_json::Value::Number(n)) => n.as_i64(),
            Some(serde_json::Value::String(s)) => s.parse::<i64>().ok(),
            _ => None,
        }
        .filter(|_| envelope.object_id.is_some());
        if envelope.sequence.is_none() {
            telemetry::event_unsequenced(&cfg.id);
        }
    }
}
