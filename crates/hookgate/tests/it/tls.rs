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
