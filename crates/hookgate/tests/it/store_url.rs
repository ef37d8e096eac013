//! `store.url` from `env:` / `file:`, and the URL's password (in the user info or as a
//! `?password=` parameter) never in logs, errors or `config check` output — through the real
//! binary against a real PostgreSQL.

use std::os::unix::fs::PermissionsExt;
use std::process::Command;

use crate::support::*;

const USERINFO_PASSWORD: &str = "S3cretPw-userinfo";
const QUERY_PASSWORD: &str = "S3cretPw-query";
const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";

fn assert_no_password(what: &str, text: &str) {
    assert!(
        !text.contains(USERINFO_PASSWORD) && !text.contains(QUERY_PASSWORD),
        "{what} shows the store URL's password:\n{text}"
    );
}

fn config_check(config: &std::path::Path, env: &[(&str, &str)]) -> std::process::Output {
    Command::new(binary())
        .args(["config", "check", "--config"])
        .arg(config)
        .envs(env.iter().copied())
        .output()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn store_url_from_env_and_file_keeps_its_password_out_of_every_output() {
    let db = hookgate_testkit::postgres().await;
    // The test clusters trust local connections, so the passwords are carried but not needed.
    let url = db.url().replacen(
        "postgres://postgres@",
        &format!("postgres://postgres:{USERINFO_PASSWORD}@"),
        1,
    );
    assert_ne!(
        url,
        db.url(),
        "the test database URL has an unexpected shape"
    );
    let url = format!("{url}?password={QUERY_PASSWORD}&sslmode=prefer");

    // env: — serve on it (debug logs), accept an event, stop.
    let files = TestGateway::builder()
        .store_url("env:HOOKGATE_TEST_STORE_URL")
        .log_level("debug")
        .workers(0)
        .endpoints(&endpoint_toml("sw", "standard_webhooks", &[SW_SECRET], ""))
        .write()
        .await;
    let env = [("HOOKGATE_TEST_STORE_URL", url.as_str())];
    let checked = config_check(&files.config_path, &env);
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    assert!(
        stdout.contains("# url read from env:HOOKGATE_TEST_STORE_URL"),
        "{stdout}"
    );
    assert!(stdout.contains("password=<redacted>"), "{stdout}");
    assert_no_password("config check", &stdout);
    assert_no_password(
        "config check's stderr",
        &String::from_utf8_lossy(&checked.stderr),
    );

    let gateway = files.serve_with_env(&env);
    let response = post_signed(
        gateway.addr(),
        "sw",
        "standard_webhooks",
        SW_SECRET,
        "msg_store_url",
        unix_now(),
        b"{\"type\":\"t\"}",
    )
    .await;
    assert_eq!(response.status, 200, "{response:?}");
    assert_no_password("serve's logs", &gateway.terminate());

    // file: — a database that is down: the start-up error names the key, not the password.
    let dead_port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let url_file = files.dir.path().join("store-url");
    std::fs::write(
        &url_file,
        format!(
            "postgres://postgres:{USERINFO_PASSWORD}@127.0.0.1:{dead_port}/x?password={QUERY_PASSWORD}\n"
        ),
    )
    .unwrap();
    std::fs::set_permissions(&url_file, std::fs::Permissions::from_mode(0o600)).unwrap();
    let text = std::fs::read_to_string(&files.config_path)
        .unwrap()
        .replace("\"env:HOOKGATE_TEST_STORE_URL\"", "\"file:store-url\"");
    std::fs::write(&files.config_path, text).unwrap();
    let checked = config_check(&files.config_path, &[]);
    let stdout = String::from_utf8_lossy(&checked.stdout);
    assert!(
        checked.status.success(),
        "{}",
        String::from_utf8_lossy(&checked.stderr)
    );
    assert!(stdout.contains("# url read from file:"), "{stdout}");
    assert_no_password("config check", &stdout);
    let served = Command::new(binary())
        .args(["serve", "--config"])
        .arg(&files.config_path)
        .env("HOOKGATE_LOG", "debug")
        .output()
        .unwrap();
    assert!(!served.status.success());
    let stderr = String::from_utf8_lossy(&served.stderr);
    assert!(stderr.contains("store.url"), "{stderr}");
    assert_no_password("serve's start-up error", &stderr);

    // A source that cannot be read is an error naming the key and the source.
    let text = std::fs::read_to_string(&files.config_path)
        .unwrap()
        .replace("\"file:store-url\"", "\"env:HOOKGATE_TEST_SURELY_UNSET\"");
    std::fs::write(&files.config_path, text).unwrap();
    let checked = config_check(&files.config_path, &[]);
    assert!(!checked.status.success());
    let stderr = String::from_utf8_lossy(&checked.stderr);
    assert!(
        stderr.contains("store.url") && stderr.contains("HOOKGATE_TEST_SURELY_UNSET"),
        "{stderr}"
    );
}
