//! `--ceiling`: a built-in HTTP sink that reads the whole body and answers 200, on its own
//! runtime (two threads, like a separate gateway process), so the same traffic measures the
//! HTTP ceiling of this machine in the same run.

use std::convert::Infallible;
use std::net::SocketAddr;

use bytes::Bytes;
use http_body_util::Full;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;

const ANSWER: &[u8] = br#"{"status":"accepted","id":"ceiling-sink"}"#;

/// A running sink; dropping it stops its runtime.
pub struct Sink {
    pub addr: SocketAddr,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Drop for Sink {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

pub fn start() -> anyhow::Result<Sink> {
    let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
    listener.set_nonblocking(true)?;
    let addr = listener.local_addr()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("bench-sink")
        .enable_all()
        .build()?;
    let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
    let thread = std::thread::Builder::new()
        .name("bench-sink".into())
        .spawn(move || {
            runtime.block_on(async move {
                let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                    return;
                };
                loop {
                    let stream = tokio::select! {
                        accepted = listener.accept() => match accepted {
                            Ok((stream, _)) => stream,
                            Err(_) => continue,
                        },
                        _ = &mut stopped => break,
                    };
                    let _ = stream.set_nodelay(true);
                    tokio::spawn(async move {
                        let service = service_fn(
                            |request: http::Request<hyper::body::Incoming>| async move {
                                // Read every byte, keep none (the gateway reads into memory).
                                let _ = crate::load::read_capped(request.into_body(), 0).await;
                                let mut response =
                                    http::Response::new(Full::new(Bytes::from_static(ANSWER)));
                                response.headers_mut().insert(
                                    http::header::CONTENT_TYPE,
                                    http::HeaderValue::from_static("application/json"),
                                );
                                Ok::<_, Infallible>(response)
                            },
                        );
                        let _ = hyper::server::conn::http1::Builder::new()
                            .keep_alive(true)
                            .serve_connection(TokioIo::new(stream), service)
                            .await;
                    });
                }
            });
        })?;
    Ok(Sink {
        addr,
        stop: Some(stop),
        thread: Some(thread),
    })
}
