//! The HTTP destination: a server on 127.0.0.1 inside the runner (never killed) that records
//! every delivery's `Idempotency-Key` and the event id it came with, and refuses a share of
//! them with 503 so that the relay's retries are on the wire too.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;
use rand::Rng;

/// What arrived under one idempotency key.
#[derive(Debug, Clone, Default)]
pub(crate) struct KeyRecord {
    /// `X-Hookgate-Event-Id` of the first request with this key.
    pub(crate) event_id: String,
    /// Another request with this key named a different event (a violation).
    pub(crate) conflicting_event_id: bool,
    /// Requests with this key answered 2xx.
    pub(crate) accepted: u64,
    /// Requests with this key answered 503 on purpose.
    pub(crate) refused: u64,
}

#[derive(Debug, Default)]
pub(crate) struct Received {
    pub(crate) by_key: HashMap<String, KeyRecord>,
    /// Requests without an `Idempotency-Key` (a violation).
    pub(crate) without_key: u64,
}

#[derive(Clone)]
pub(crate) struct Receiver {
    pub(crate) addr: SocketAddr,
    state: Arc<Mutex<Received>>,
}

impl Receiver {
    /// Binds 127.0.0.1:0 and serves until the process ends. `refuse_share` of requests (0–1)
    /// are answered 503.
    pub(crate) async fn start(refuse_share: f64) -> anyhow::Result<Receiver> {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(Mutex::new(Received::default()));
        let shared = state.clone();
        tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    continue;
                };
                let state = shared.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req| {
                        handle(req, state.clone(), refuse_share)
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        });
        Ok(Receiver { addr, state })
    }

    pub(crate) fn snapshot(&self) -> Received {
        let s = self.state.lock().unwrap_or_else(|e| e.into_inner());
        Received {
            by_key: s.by_key.clone(),
            without_key: s.without_key,
        }
    }
}

async fn handle(
    req: Request<Incoming>,
    state: Arc<Mutex<Received>>,
    refuse_share: f64,
) -> Result<Response<Full<Bytes>>, Infallible> {
    let header = |name: &str| {
        req.headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let key = header("idempotency-key");
    let event_id = header("x-hookgate-event-id").unwrap_or_default();
    // Read the whole body before answering, as a consumer would.
    let _ = crate::body::read_bounded(req.into_body(), 4 << 20).await;
    let refuse = rand::thread_rng().gen_bool(refuse_share.clamp(0.0, 1.0));
    {
        let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
        match key {
            None => s.without_key += 1,
            Some(key) => {
                let r = s.by_key.entry(key).or_insert_with(|| KeyRecord {
                    event_id: event_id.clone(),
                    ..KeyRecord::default()
                });
                if r.event_id != event_id {
                    r.conflicting_event_id = true;
                }
                if refuse {
                    r.refused += 1;
                } else {
                    r.accepted += 1;
                }
            }
        }
    }
    let status = if refuse {
        StatusCode::SERVICE_UNAVAILABLE
    } else {
        StatusCode::OK
    };
    let mut resp = Response::new(Full::new(Bytes::new()));
    *resp.status_mut() = status;
    Ok(resp)
}
