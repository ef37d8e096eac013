//! A stand-in for HashiCorp Vault's KV version 2 HTTP API (no Vault server can be installed
//! here), over TLS with a certificate from a test CA made with rcgen. It answers what the
//! documented API answers for a read, `GET /v1/{mount}/data/{path}` with `X-Vault-Token`:
//! 200 with `{"data":{"data":{…},"metadata":{…}}}`, 403 `{"errors":["permission denied"]}` for
//! a wrong token, 404 `{"errors":[]}` for a path with no secret, and 503 `{"errors":["Vault is
//! sealed"]}` while sealed. Only reads exist: the test writes through [`VaultStandIn::put`].

use std::collections::HashMap;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use axum::Router;
use axum::extract::{Request, State};
use axum::http::StatusCode;
use axum::response::IntoResponse;
use serde_json::{Value, json};

/// One KV v2 secret: its current version number and fields.
type KvSecret = (u64, serde_json::Map<String, Value>);

#[derive(Default)]
struct Kv {
    /// `mount/path` → its current version.
    secrets: Mutex<HashMap<String, KvSecret>>,
    sealed: AtomicBool,
    reads: AtomicU64,
    token: String,
}

pub(crate) struct VaultStandIn {
    kv: Arc<Kv>,
    addr: SocketAddr,
    dir: tempfile::TempDir,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl VaultStandIn {
    /// Listens on 127.0.0.1 (a port of its own) and accepts `token` only.
    pub(crate) fn start(token: &str) -> VaultStandIn {
        let dir = tempfile::tempdir().unwrap();
        let ca_key = rcgen::KeyPair::generate().unwrap();
        let mut ca_params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "hookgate test Vault CA");
        let ca = ca_params.self_signed(&ca_key).unwrap();
        let leaf_key = rcgen::KeyPair::generate().unwrap();
        let leaf = rcgen::CertificateParams::new(vec!["localhost".into(), "127.0.0.1".into()])
            .unwrap()
            .signed_by(&leaf_key, &ca, &ca_key)
            .unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca.pem()).unwrap();
        std::fs::write(dir.path().join("cert.pem"), leaf.pem()).unwrap();
        std::fs::write(dir.path().join("key.pem"), leaf_key.serialize_pem()).unwrap();
        let acceptor = hookgate::ingress::tls_acceptor(
            &dir.path().join("cert.pem"),
            &dir.path().join("key.pem"),
        )
        .unwrap();

        let kv = Arc::new(Kv {
            token: token.to_owned(),
            ..Kv::default()
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let router = Router::new().fallback(read).with_state(kv.clone());
        // A runtime of its own, so tests may block while it answers.
        let thread = std::thread::spawn(move || {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            rt.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                loop {
                    let stream = tokio::select! {
                        accepted = listener.accept() => match accepted {
                            Ok((stream, _)) => stream,
                            Err(_) => continue,
                        },
                        _ = &mut stopped => return,
                    };
                    let acceptor = acceptor.clone();
                    let router = router.clone();
                    tokio::spawn(async move {
                        let Ok(tls) = acceptor.accept(stream).await else {
                            return;
                        };
                        let service = hyper_util::service::TowerToHyperService::new(router);
                        let _ = hyper::server::conn::http1::Builder::new()
                            .serve_connection(hyper_util::rt::TokioIo::new(tls), service)
                            .await;
                    });
                }
            });
        });
        VaultStandIn {
            kv,
            addr,
            dir,
            stop: Some(stop),
            thread: Some(thread),
        }
    }

    /// `https://127.0.0.1:PORT` (the certificate names that address).
    pub(crate) fn address(&self) -> String {
        format!("https://{}", self.addr)
    }

    /// The CA certificate that signed the server's certificate (for `[vault] ca_file`).
    pub(crate) fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }

    /// Writes a new version of `mount/path` with `field = value` (as `vault kv put` would).
    pub(crate) fn put(&self, mount: &str, path: &str, field: &str, value: &str) {
        let mut secrets = self.kv.secrets.lock().unwrap();
        let entry = secrets
            .entry(format!("{mount}/{path}"))
            .or_insert_with(|| (0, serde_json::Map::new()));
        entry.0 += 1;
        entry
            .1
            .insert(field.to_owned(), Value::String(value.to_owned()));
    }

    /// Seals (503 to every read) or unseals the stand-in.
    pub(crate) fn seal(&self, sealed: bool) {
        self.kv.sealed.store(sealed, Ordering::SeqCst);
    }

    /// Reads answered 200 so far.
    pub(crate) fn reads(&self) -> u64 {
        self.kv.reads.load(Ordering::SeqCst)
    }
}

impl Drop for VaultStandIn {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

fn errors(status: StatusCode, messages: &[&str]) -> axum::response::Response {
    (status, axum::Json(json!({ "errors": messages }))).into_response()
}

async fn read(State(kv): State<Arc<Kv>>, request: Request) -> axum::response::Response {
    if kv.sealed.load(Ordering::SeqCst) {
        return errors(StatusCode::SERVICE_UNAVAILABLE, &["Vault is sealed"]);
    }
    let token = request
        .headers()
        .get("x-vault-token")
        .and_then(|v| v.to_str().ok());
    if token != Some(kv.token.as_str()) {
        return errors(StatusCode::FORBIDDEN, &["permission denied"]);
    }
    if request.method() != axum::http::Method::GET {
        return errors(StatusCode::METHOD_NOT_ALLOWED, &["unsupported operation"]);
    }
    let Some((mount, path)) = request
        .uri()
        .path()
        .strip_prefix("/v1/")
        .and_then(|rest| rest.split_once("/data/"))
    else {
        return errors(StatusCode::NOT_FOUND, &[]);
    };
    let secrets = kv.secrets.lock().unwrap();
    let Some((version, fields)) = secrets.get(&format!("{mount}/{path}")) else {
        return errors(StatusCode::NOT_FOUND, &[]);
    };
    kv.reads.fetch_add(1, Ordering::SeqCst);
    axum::Json(json!({
        "request_id": "00000000-0000-0000-0000-000000000000",
        "lease_id": "",
        "renewable": false,
        "lease_duration": 0,
        "data": {
            "data": fields,
            "metadata": {
                "created_time": "2026-01-01T00:00:00.000000Z",
                "custom_metadata": null,
                "deletion_time": "",
                "destroyed": false,
                "version": version,
            },
        },
        "wrap_info": null,
        "warnings": null,
        "auth": null,
    }))
    .into_response()
}
