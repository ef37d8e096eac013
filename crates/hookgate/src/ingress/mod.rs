//! The webhook listener: accept loop, optional TLS (rustls), HTTP/1.1 with bounded heads, and
//! graceful shutdown (stop accepting, let in-flight requests finish their commit and answer).
//!
//! The hot path is a plain hyper service rather than an axum router: it has one route, and
//! owning the body stream lets [`pipeline`] enforce the byte limit while reading.

mod commit;
pub mod limits;
pub mod pipeline;
pub mod response;
pub mod tls;

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;
use tokio::sync::{Semaphore, watch};
use tokio_rustls::TlsAcceptor;

use crate::config::ServerConfig;
use crate::state::AppState;
use pipeline::ConnInfo;

const TLS_HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);
/// In-flight requests get this long to finish after shutdown starts.
pub const DRAIN_TIMEOUT: Duration = Duration::from_secs(30);

fn http1_builder(server: &ServerConfig) -> hyper::server::conn::http1::Builder {
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(server.request_timeout)
        // hyper answers 431 itself past these; the pipeline then applies the configured limits.
        .max_headers(server.max_header_count.max(16) * 2)
        .max_buf_size((server.max_header_bytes * 2).max(16 * 1024))
        // A client that half-closes after sending still gets its answer.
        .half_close(true)
        .keep_alive(true);
    builder
}

/// Binds the webhook listener with an accept queue as deep as `max_connections` (the kernel
/// caps it at `net.core.somaxconn`). Tokio's default of 1,024 overflows when a few thousand
/// clients connect at once, and every dropped SYN costs its client a one-second retransmit.
pub fn bind(addr: std::net::SocketAddr, max_connections: usize) -> std::io::Result<TcpListener> {
    let socket = if addr.is_ipv4() {
        tokio::net::TcpSocket::new_v4()?
    } else {
        tokio::net::TcpSocket::new_v6()?
    };
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(u32::try_from(max_connections).unwrap_or(u32::MAX).max(1024))
}

/// Runs the accept loop until `shutdown` flips, then drains.
pub async fn serve(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    state: Arc<AppState>,
    server: ServerConfig,
    mut shutdown: watch::Receiver<bool>,
) {
    let graceful = GracefulShutdown::new();
    let builder = http1_builder(&server);
    // Memory stays bounded however many clients connect: past `max_connections` the next
    // connection is not accepted until one closes (it waits in the kernel's accept queue).
    let connections = Arc::new(Semaphore::new(server.max_connections));
    loop {
        let slot = tokio::select! {
            slot = connections.clone().acquire_owned() => match slot {
                Ok(slot) => slot,
                Err(_) => break,
            },
            _ = shutdown.changed() => break,
        };
        let (stream, peer) = tokio::select! {
            accepted = listener.accept() => match accepted {
                Ok(pair) => pair,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.changed() => break,
        };
        let _ = stream.set_nodelay(true);
        let state = state.clone();
        let builder = builder.clone();
        let watcher = graceful.watcher();
        let tls = tls.clone();
        tokio::spawn(async move {
            let _slot = slot;
            let conn = ConnInfo {
                peer,
                tls: tls.is_some(),
            };
            let service = service_fn(move |request| {
                let state = state.clone();
                async move { Ok::<_, Infallible>(pipeline::handle(&state, conn, request).await) }
            });
            match tls {
                None => {
                    let _ = watcher
                        .watch(builder.serve_connection(TokioIo::new(stream), service))
                        .await;
                }
                Some(acceptor) => {
                    let Ok(Ok(stream)) =
                        tokio::time::timeout(TLS_HANDSHAKE_TIMEOUT, acceptor.accept(stream)).await
                    else {
                        return;
                    };
                    let _ = watcher
                        .watch(builder.serve_connection(TokioIo::new(stream), service))
                        .await;
                }
            }
        });
    }
    drop(listener);
    tracing::info!("webhook listener closed; draining in-flight requests");
    if tokio::time::timeout(DRAIN_TIMEOUT, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!("drain timed out; remaining connections are dropped unanswered");
    }
}
