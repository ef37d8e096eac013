//! Built-in TLS: a real rustls handshake against a self-signed certificate made here.

use crate::support::*;

const NOW: i64 = 1_764_547_200;
const SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

#[tokio::test]
async fn webhook_over_builtin_tls() {
    let dir = tempfile::tempdir().unwrap();
    let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
    std::fs::write(dir.path().join("cert.pem"), cert.cert.pem()).unwrap();
    std::fs::write(dir.path().join("key.pem"), cert.key_pair.serialize_pem()).unwrap();
    let endpoints = endpoint_toml("sw", "standard_webhooks", &[SECRET], "");
    let tls = format!(
        "tls = {{ cert = {}, key = {} }}",
        q(&dir.path().join("cert.pem").display().to_string()),
        q(&dir.path().join("key.pem").display().to_string())
    );
    // A public address is allowed because TLS is on; the literal test secrets need --dev there.
    let mut gw = TestGateway::builder()
        .dev()
        .fixed_clock(NOW)
        .workers(0)
        .listen("0.0.0.0:0")
        .server(&tls)
        .endpoints(&endpoints)
        .start()
        .await;
    let port = gw.addr.port();

    let client = reqwest::Client::builder()
        .add_root_certificate(reqwest::Certificate::from_pem(cert.cert.pem().as_bytes()).unwrap())
        .resolve("localhost", ([127, 0, 0, 1], port).into())
        .https_only(true)
        .build()
        .unwrap();
    let body = br#"{"type":"invoice.paid","data":{"id":"inv_tls"}}"#;
    let mut request = client
        .post(format!("https://localhost:{port}/webhooks/sw"))
        .body(body.to_vec());
    for (k, v) in signed_headers("standard_webhooks", SECRET, "msg_tls", NOW, body) {
        request = request.header(k, v);
    }
    let response = request.send().await.unwrap();
    assert_eq!(response.status(), 200);
    let json: serde_json::Value = response.json().await.unwrap();
    assert_eq!(json["status"], "accepted");

    // Plain HTTP to the TLS port gets no webhook answer.
    let plain = reqwest::Client::new()
        .post(format!("http://127.0.0.1:{port}/webhooks/sw"))
        .body(body.to_vec())
        .send()
        .await;
    assert!(plain.is_err() || plain.unwrap().status() != 200);
    gw.stop().await;
}

/// A CA made here, and certificates it signs for `localhost`.
struct TestCa {
    cert: rcgen::Certificate,
    key: rcgen::KeyPair,
}

impl TestCa {
    fn new() -> TestCa {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        TestCa { cert, key }
    }

    /// A server certificate for `localhost`: (cert PEM, key PEM, cert DER).
    fn issue(&self) -> (String, String, Vec<u8>) {
        let params = rcgen::CertificateParams::new(vec!["localhost".to_owned()]).unwrap();
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.cert, &self.key).unwrap();
        (cert.pem(), key.serialize_pem(), cert.der().to_vec())
    }
}

/// Replaces `path` atomically (write aside, rename over), as deployment tools do.
fn replace_file(path: &std::path::Path, text: &str) {
    let aside = path.with_extension("new");
    std::fs::write(&aside, text).unwrap();
    std::fs::rename(&aside, path).unwrap();
}

type TlsStream = tokio_rustls::client::TlsStream<tokio::net::TcpStream>;

/// A TLS connection to the gateway that trusts `ca` only; returns it and the served
/// certificate (DER).
async fn connect_tls(addr: std::net::SocketAddr, ca: &TestCa) -> (TlsStream, Vec<u8>) {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.cert.der().clone()).unwrap();
    let config = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_root_certificates(roots)
    .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(std::sync::Arc::new(config));
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let name = rustls_pki_types::ServerName::try_from("localhost").unwrap();
    let stream = connector.connect(name, tcp).await.unwrap();
    let served = stream
        .get_ref()
        .1
        .peer_certificates()
        .and_then(|c| c.first())
        .map(|c| c.to_vec())
        .unwrap();
    (stream, served)
}

/// Sends one signed webhook on an open keep-alive connection and reads its answer's status.
async fn post_keep_alive(stream: &mut TlsStream, event_id: &str) -> u16 {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body = format!("{{\"type\":\"invoice.paid\",\"data\":{{\"id\":\"{event_id}\"}}}}");
    let mut request = format!(
        "POST /webhooks/sw HTTP/1.1\r\nHost: localhost\r\nContent-Length: {}\r\n",
        body.len()
    );
    for (k, v) in signed_headers(
        "standard_webhooks",
        SECRET,
        event_id,
        unix_now(),
        body.as_bytes(),
    ) {
        request.push_str(&format!("{k}: {v}\r\n"));
    }
    request.push_str("\r\n");
    request.push_str(&body);
    stream.write_all(request.as_bytes()).await.unwrap();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    let response = tokio::time::timeout(std::time::Duration::from_secs(20), async {
        loop {
            let n = stream.read(&mut buf).await.unwrap();
            assert!(n > 0, "the gateway closed the keep-alive connection");
            got.extend_from_slice(&buf[..n]);
            let text = String::from_utf8_lossy(&got).to_string();
            if let Some((head, rest)) = text.split_once("\r\n\r\n") {
                let length: usize = head
                    .lines()
                    .find_map(|l| {
                        l.to_ascii_lowercase()
                            .strip_prefix("content-length:")
                            .map(|v| v.trim().parse().unwrap())
                    })
                    .unwrap_or(0);
                if rest.len() >= length {
                    return head.to_owned();
                }
            }
        }
    })
    .await
    .expect("an answer on the keep-alive connection");
    assert!(
        !response.to_ascii_lowercase().contains("connection: close"),
        "{response}"
    );
    response.split(' ').nth(1).unwrap().parse().unwrap()
}

fn tls_reloads(admin: std::net::SocketAddr, result: &str) -> u64 {
    let needle = format!("hookgate_tls_certificate_reloads_total{{result=\"{result}\"}} ");
    get(admin, "/metrics")
        .body
        .lines()
        .find_map(|l| l.strip_prefix(needle.as_str()))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// The served certificate changes once its files are replaced (atomic renames), with no
/// restart and no SIGHUP; a connection opened before keeps working; an unusable replacement
/// is counted and the previous certificate stays; SIGHUP reads the files at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn certificate_reloads_without_dropping_connections() {
    let ca = TestCa::new();
    let (cert_a, key_a, der_a) = ca.issue();
    let (cert_b, key_b, der_b) = ca.issue();
    let (cert_c, key_c, der_c) = ca.issue();
    let dir = tempfile::tempdir().unwrap();
    let (cert_path, key_path) = (dir.path().join("cert.pem"), dir.path().join("key.pem"));
    std::fs::write(&cert_path, &cert_a).unwrap();
    std::fs::write(&key_path, &key_a).unwrap();
    let files = TestGateway::builder()
        .workers(0)
        .server(&format!(
            "tls = {{ cert = {}, key = {} }}",
            q(&cert_path.display().to_string()),
            q(&key_path.display().to_string())
        ))
        .endpoints(&endpoint_toml("sw", "standard_webhooks", &[SECRET], ""))
        .write()
        .await;
    let gateway = files.serve(None);
    let (addr, admin) = (gateway.addr(), gateway.admin.unwrap());

    let (mut kept, served) = connect_tls(addr, &ca).await;
    assert_eq!(served, der_a);
    assert_eq!(post_keep_alive(&mut kept, "msg_before").await, 200);

    // Key first, then certificate: in between the pair does not match and is refused.
    replace_file(&key_path, &key_b);
    replace_file(&cert_path, &cert_b);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let (_, served) = connect_tls(addr, &ca).await;
        if served == der_b {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the new certificate was not served within 30 s"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    assert!(tls_reloads(admin, "reloaded") >= 1);
    // The connection opened under the old certificate still serves requests.
    assert_eq!(post_keep_alive(&mut kept, "msg_after_reload").await, 200);
    assert_eq!(
        kept.get_ref().1.peer_certificates().unwrap()[0].to_vec(),
        der_a
    );

    // An unusable certificate: counted, logged, the previous one stays.
    let failed_before = tls_reloads(admin, "failed");
    replace_file(
        &cert_path,
        "-----BEGIN CERTIFICATE-----\nnot a certificate\n-----END CERTIFICATE-----\n",
    );
    wait_until_blocking(
        "the bad certificate counted",
        std::time::Duration::from_secs(30),
        || tls_reloads(admin, "failed") > failed_before,
    );
    let (mut fresh, served) = connect_tls(addr, &ca).await;
    assert_eq!(
        served, der_b,
        "the previous certificate stays after a bad one"
    );
    assert_eq!(post_keep_alive(&mut fresh, "msg_after_bad").await, 200);

    // SIGHUP re-reads the files (here at once; the poll would too, a little later).
    replace_file(&key_path, &key_c);
    replace_file(&cert_path, &cert_c);
    gateway.signal("-HUP");
    gateway.wait_for_log("configuration reloaded");
    let (_, served) = connect_tls(addr, &ca).await;
    assert_eq!(served, der_c);
    assert_eq!(post_keep_alive(&mut kept, "msg_after_hup").await, 200);
    let logs = gateway.terminate();
    assert!(logs.contains("still serving the previous one"), "{logs}");
    assert!(!logs.contains("PRIVATE KEY"), "key material logged");
}
