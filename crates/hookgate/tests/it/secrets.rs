//! Secrets that refresh and fail closed, through the real binary: `file:` secrets changed
//! (atomic rename, Kubernetes-style symlink swap), removed, made unreadable and too open;
//! `exec:` secrets with a timeout; `vault:` secrets from a stand-in that speaks Vault's KV v2
//! HTTP API over TLS; retirement with the source gone; failed reloads; the literal-secret rule;
//! `events list --secret-version`.

use std::net::SocketAddr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use base64::Engine;
use serde_json::Value;

use crate::support::*;

mod vault_stand_in;
use vault_stand_in::VaultStandIn;

const BODY: &[u8] = br#"{"type":"invoice.paid","data":{"id":"inv_secret_tests"}}"#;
/// Bound of every wait on the refresher (it looks every second; the contract is 10 s).
const REFRESH_DEADLINE: Duration = Duration::from_secs(15);

/// A Standard Webhooks secret made from `label`.
fn whsec(label: &str) -> String {
    format!(
        "whsec_{}",
        base64::engine::general_purpose::STANDARD.encode(format!("{label}-0123456789abcdef"))
    )
}

fn post(addr: SocketAddr, endpoint: &str, secret: &str, id: &str) -> RawResponse {
    let headers = signed_headers("standard_webhooks", secret, id, unix_now(), BODY);
    send_raw(
        addr,
        &build_request("POST", &format!("/webhooks/{endpoint}"), &headers, BODY),
    )
}

/// Writes a secret file only its owner may read (what the gateway accepts).
fn write_secret(path: &Path, value: &str) {
    std::fs::write(path, format!("{value}\n")).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600)).unwrap();
}

/// Replaces `path` atomically: a new file renamed over it (a new inode, no in-place write).
fn replace_by_rename(path: &Path, value: &str) {
    let tmp = path.with_extension("tmp");
    write_secret(&tmp, value);
    std::fs::rename(&tmp, path).unwrap();
}

fn problems(admin: SocketAddr) -> Vec<Value> {
    let r = get(admin, "/readyz");
    assert_eq!(
        r.status, 200,
        "secret problems never make /readyz 503: {}",
        r.body
    );
    r.json()["problems"].as_array().cloned().unwrap_or_default()
}

fn secret_problem(admin: SocketAddr, endpoint: &str) -> bool {
    problems(admin)
        .iter()
        .any(|p| p["kind"] == "no_usable_secret" && p["endpoint"] == endpoint)
}

fn secret_entry(version: &str, value: &str, extra: &str) -> String {
    format!(
        "{{ version = {}, value = {}{extra} }}",
        q(version),
        q(value)
    )
}

fn endpoint(id: &str, entries: &[String]) -> String {
    format!(
        "[[endpoints]]\nid = {}\nprovider = \"standard_webhooks\"\nsecrets = [{}]\n",
        q(id),
        entries.join(", ")
    )
}

async fn files(endpoints: &str, sections: &str) -> GatewayFiles {
    TestGateway::builder()
        .workers(0)
        .section(sections)
        .endpoints(endpoints)
        .write()
        .await
}

#[tokio::test]
async fn file_secret_replaced_by_rename_or_symlink_swap_verifies_without_sighup() {
    let (first, second, third) = (whsec("first"), whsec("second"), whsec("third"));
    let dir = tempfile::tempdir().unwrap();
    let renamed = dir.path().join("renamed.secret");
    write_secret(&renamed, &first);
    // Kubernetes' layout: `secret -> ..data/secret`, `..data -> ..v1`, swapped by renaming
    // a new `..data` link over the old one.
    let mounted = dir.path().join("mount");
    std::fs::create_dir_all(mounted.join("..v1")).unwrap();
    write_secret(&mounted.join("..v1/secret"), &first);
    std::os::unix::fs::symlink("..v1", mounted.join("..data")).unwrap();
    std::os::unix::fs::symlink("..data/secret", mounted.join("secret")).unwrap();
    let file_ref = |p: &Path| format!("file:{}", p.display());
    let endpoints = [
        endpoint("renamed", &[secret_entry("v1", &file_ref(&renamed), "")]),
        endpoint(
            "mounted",
            &[secret_entry("v1", &file_ref(&mounted.join("secret")), "")],
        ),
    ]
    .concat();
    let files = files(&endpoints, "").await;
    let p = files.serve(None);
    let addr = p.addr();
    for ep in ["renamed", "mounted"] {
        assert_eq!(post(addr, ep, &first, &format!("{ep}_1")).status, 200);
        assert_eq!(post(addr, ep, &second, &format!("{ep}_2")).status, 401);
    }

    replace_by_rename(&renamed, &second);
    std::fs::create_dir_all(mounted.join("..v2")).unwrap();
    write_secret(&mounted.join("..v2/secret"), &third);
    std::os::unix::fs::symlink("..v2", mounted.join("..data_tmp")).unwrap();
    std::fs::rename(mounted.join("..data_tmp"), mounted.join("..data")).unwrap();

    let mut n = 0;
    wait_until_blocking("the renamed file's new secret", REFRESH_DEADLINE, || {
        n += 1;
        post(addr, "renamed", &second, &format!("renamed_new_{n}")).status == 200
    });
    wait_until_blocking("the swapped symlink's new secret", REFRESH_DEADLINE, || {
        n += 1;
        post(addr, "mounted", &third, &format!("mounted_new_{n}")).status == 200
    });
    // The old value stopped verifying when the new one started (same version replaced).
    assert_eq!(post(addr, "renamed", &first, "renamed_old").status, 401);
    assert_eq!(post(addr, "mounted", &first, "mounted_old").status, 401);
    let logs = p.terminate();
    for value in [&first, &second, &third] {
        assert!(!logs.contains(value.as_str()), "a secret reached the logs");
    }
}

#[tokio::test]
async fn removed_or_unreadable_file_serves_cached_value_until_max_age_then_503() {
    let secret = whsec("cached");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sw.secret");
    write_secret(&path, &secret);
    let entry = secret_entry(
        "v1",
        &format!("file:{}", path.display()),
        ", refresh_seconds = 1, max_age_seconds = 6",
    );
    let files = files(&endpoint("sw", &[entry]), "").await;
    let p = files.serve(None);
    let (addr, admin) = (p.addr(), p.admin.unwrap());
    assert_eq!(post(addr, "sw", &secret, "evt_before").status, 200);
    assert_eq!(
        metric(admin, "hookgate_endpoint_secret_usable{endpoint=\"sw\"}"),
        Some(1.0)
    );
    assert!(!secret_problem(admin, "sw"));
    let age = metric(
        admin,
        "hookgate_secret_age_seconds{endpoint=\"sw\",version=\"v1\"}",
    );
    assert!(age.is_some_and(|a| (0.0..6.0).contains(&a)), "{age:?}");

    // Removed: the cached value keeps serving (the last read was at most a second ago)…
    std::fs::remove_file(&path).unwrap();
    assert_eq!(post(addr, "sw", &secret, "evt_cached").status, 200);
    p.wait_for_log("secret refresh failed");
    // …until max_age after the last successful read: then 503, never open.
    let mut n = 0;
    wait_until_blocking("the cached value to expire", REFRESH_DEADLINE, || {
        n += 1;
        post(addr, "sw", &secret, &format!("evt_expiring_{n}")).status == 503
    });
    let refused = post(addr, "sw", &secret, "evt_refused");
    assert_eq!(refused.status, 503);
    assert_eq!(refused.json()["error"], "unavailable");
    assert!(
        refused.header("retry-after").is_some(),
        "{:?}",
        refused.headers
    );
    assert!(secret_problem(admin, "sw"), "{:?}", problems(admin));
    // The gauge is set by the refresher's next pass (each second).
    wait_until_blocking("the usable gauge to drop", REFRESH_DEADLINE, || {
        metric(admin, "hookgate_endpoint_secret_usable{endpoint=\"sw\"}") == Some(0.0)
    });
    assert!(
        metric(
            admin,
            "hookgate_secret_refresh_failures_total{endpoint=\"sw\"}"
        )
        .unwrap()
            >= 1.0
    );

    // Unreadable (a directory where the file was: the process runs as root here, which
    // ignores mode bits, so an unreadable path is one that cannot be read as a file).
    std::fs::create_dir(&path).unwrap();
    p.wait_for_log("not a regular file");
    assert_eq!(post(addr, "sw", &secret, "evt_dir").status, 503);
    std::fs::remove_dir(&path).unwrap();

    // Back, but readable by everyone: refused with a warning, still 503.
    std::fs::write(&path, format!("{secret}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644)).unwrap();
    p.wait_for_log("readable by its group or by everyone (mode 0644)");
    assert_eq!(post(addr, "sw", &secret, "evt_open").status, 503);

    // Owner-only again: read within the deadline, no SIGHUP.
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    wait_until_blocking("the fixed file to be read", REFRESH_DEADLINE, || {
        n += 1;
        post(addr, "sw", &secret, &format!("evt_back_{n}")).status == 200
    });
    assert!(!secret_problem(admin, "sw"));
    p.terminate();
}

#[tokio::test]
async fn gateway_starts_with_a_group_readable_secret_refused_and_serves_once_fixed() {
    let secret = whsec("group-readable");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sw.secret");
    std::fs::write(&path, &secret).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o640)).unwrap();
    let other = whsec("other-endpoint");
    let endpoints = [
        endpoint(
            "sw",
            &[secret_entry("v1", &format!("file:{}", path.display()), "")],
        ),
        endpoint_toml("fine", "standard_webhooks", &[&other], ""),
    ]
    .concat();
    let files = files(&endpoints, "").await;
    let p = files.serve(None);
    let (addr, admin) = (p.addr(), p.admin.unwrap());
    p.wait_for_log("readable by its group or by everyone (mode 0640): refused");
    assert_eq!(post(addr, "sw", &secret, "evt_1").status, 503);
    assert_eq!(
        post(addr, "fine", &other, "evt_2").status,
        200,
        "other endpoints work"
    );
    assert!(secret_problem(admin, "sw"));
    assert!(!secret_problem(admin, "fine"));
    assert_eq!(
        metric(admin, "hookgate_endpoint_secret_usable{endpoint=\"sw\"}"),
        Some(0.0)
    );

    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o400)).unwrap();
    let mut n = 0;
    wait_until_blocking("the fixed file to be read", REFRESH_DEADLINE, || {
        n += 1;
        post(addr, "sw", &secret, &format!("evt_fixed_{n}")).status == 200
    });
    assert!(!secret_problem(admin, "sw"));
    wait_until_blocking("the usable gauge to rise", REFRESH_DEADLINE, || {
        metric(admin, "hookgate_endpoint_secret_usable{endpoint=\"sw\"}") == Some(1.0)
    });
    p.terminate();
}

fn script(dir: &Path, name: &str, body: &str) -> PathBuf {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/sh\n{body}\n")).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o700)).unwrap();
    path
}

#[tokio::test]
async fn exec_secret_is_its_commands_output_bounded_by_a_timeout() {
    let secret = whsec("from-a-command");
    let dir = tempfile::tempdir().unwrap();
    let value = dir.path().join("value");
    write_secret(&value, &secret);
    // Arguments split on spaces, no shell: `$2` is the second word as written.
    let good = script(
        dir.path(),
        "get-secret",
        "test \"$1\" = --path || exit 9\ncat \"$2\"",
    );
    let slow = script(dir.path(), "slow-secret", "sleep 30\ncat \"$1\"");
    let leaky = script(
        dir.path(),
        "leaky-secret",
        &format!("echo 'token {secret}' >&2\nexit 3"),
    );
    let endpoints = [
        endpoint(
            "exec",
            &[secret_entry(
                "v1",
                &format!("exec:{} --path {}", good.display(), value.display()),
                "",
            )],
        ),
        endpoint(
            "slow",
            &[secret_entry(
                "v1",
                &format!("exec:{} {}", slow.display(), value.display()),
                "",
            )],
        ),
        endpoint(
            "leaky",
            &[secret_entry("v1", &format!("exec:{}", leaky.display()), "")],
        ),
    ]
    .concat();
    let files = files(&endpoints, "[secrets]\nexec_timeout_ms = 500\n").await;
    let p = files.serve(None);
    let (addr, admin) = (p.addr(), p.admin.unwrap());
    assert_eq!(post(addr, "exec", &secret, "evt_exec").status, 200);
    assert_eq!(post(addr, "exec", &whsec("wrong"), "evt_wrong").status, 401);
    p.wait_for_log("did not finish within 500 ms (secrets.exec_timeout_ms): killed");
    assert_eq!(post(addr, "slow", &secret, "evt_slow").status, 503);
    p.wait_for_log("exited with status 3");
    assert_eq!(post(addr, "leaky", &secret, "evt_leaky").status, 503);
    assert!(secret_problem(admin, "slow"));
    assert!(secret_problem(admin, "leaky"));
    assert!(!secret_problem(admin, "exec"));
    let logs = p.terminate();
    assert!(
        logs.contains("bytes on standard error, not shown"),
        "stderr is reported by length"
    );
    assert!(!logs.contains(&secret), "a secret reached the logs");
}

#[tokio::test]
async fn vault_secret_rotates_and_serves_from_cache_until_max_age_when_vault_is_down() {
    let token = "hvs.test-token-never-logged-0123456789";
    let (first, second) = (whsec("vault-first"), whsec("vault-second"));
    let vault = VaultStandIn::start(token);
    vault.put("secret", "hookgate/sw", "signing", &first);
    let entry = secret_entry(
        "v1",
        "vault:secret/hookgate/sw#signing",
        ", refresh_seconds = 1, max_age_seconds = 6",
    );
    let endpoints = [
        endpoint("sw", &[entry]),
        endpoint(
            "nofield",
            &[secret_entry("v1", "vault:secret/hookgate/sw#other", "")],
        ),
    ]
    .concat();
    let section = format!(
        "[vault]\naddress = {}\ntoken = \"env:HOOKGATE_TEST_VAULT_TOKEN\"\nca_file = {}\n",
        q(&vault.address()),
        q(&vault.ca_file().display().to_string())
    );
    let files = files(&endpoints, &section).await;
    let p = files.serve_with_env(&[("HOOKGATE_TEST_VAULT_TOKEN", token)]);
    let (addr, admin) = (p.addr(), p.admin.unwrap());
    assert_eq!(post(addr, "sw", &first, "evt_v1").status, 200);
    assert!(vault.reads() >= 1);
    p.wait_for_log("the secret has no field \\\"other\\\"");
    assert!(secret_problem(admin, "nofield"));

    // Rotated in Vault: the new value verifies, the old stops, no SIGHUP.
    vault.put("secret", "hookgate/sw", "signing", &second);
    let mut n = 0;
    wait_until_blocking("the rotated Vault secret", REFRESH_DEADLINE, || {
        n += 1;
        post(addr, "sw", &second, &format!("evt_rotated_{n}")).status == 200
    });
    assert_eq!(post(addr, "sw", &first, "evt_old").status, 401);

    // Vault sealed: the cached value serves until max_age, then 503.
    vault.seal(true);
    p.wait_for_log("503: Vault is sealed or in maintenance");
    wait_until_blocking(
        "the cached Vault secret to expire",
        REFRESH_DEADLINE,
        || {
            n += 1;
            post(addr, "sw", &second, &format!("evt_sealed_{n}")).status == 503
        },
    );
    assert!(secret_problem(admin, "sw"));
    assert!(
        metric(
            admin,
            "hookgate_secret_refresh_failures_total{endpoint=\"sw\"}"
        )
        .unwrap()
            >= 1.0
    );

    // Unsealed: read again.
    vault.seal(false);
    wait_until_blocking("Vault to be read again", REFRESH_DEADLINE, || {
        n += 1;
        post(addr, "sw", &second, &format!("evt_unsealed_{n}")).status == 200
    });
    assert!(!secret_problem(admin, "sw"));
    let logs = p.terminate();
    assert!(!logs.contains(token), "the Vault token reached the logs");
    assert!(!logs.contains(&second), "a secret reached the logs");
}

#[tokio::test]
async fn vault_token_refused_is_a_failure_not_a_secret() {
    let vault = VaultStandIn::start("hvs.right-token");
    vault.put("secret", "sw", "signing", &whsec("unread"));
    let section = format!(
        "[vault]\naddress = {}\ntoken = \"file:token\"\nca_file = {}\n",
        q(&vault.address()),
        q(&vault.ca_file().display().to_string())
    );
    let files = files(
        &endpoint("sw", &[secret_entry("v1", "vault:secret/sw#signing", "")]),
        &section,
    )
    .await;
    write_secret(&files.dir.path().join("token"), "hvs.wrong-token");
    let p = files.serve(None);
    p.wait_for_log("403 permission denied");
    assert_eq!(post(p.addr(), "sw", &whsec("unread"), "evt").status, 503);
    p.terminate();
}

#[tokio::test]
async fn retirement_wins_when_the_retired_source_is_gone_and_failed_reloads_show() {
    let (old, new) = (whsec("compromised"), whsec("successor"));
    let dir = tempfile::tempdir().unwrap();
    let old_path = dir.path().join("old.secret");
    let new_path = dir.path().join("new.secret");
    write_secret(&old_path, &old);
    write_secret(&new_path, &new);
    let entries = |retired: bool| {
        vec![
            secret_entry("v2", &format!("file:{}", new_path.display()), ""),
            secret_entry(
                "v1",
                &format!("file:{}", old_path.display()),
                if retired { ", retired = true" } else { "" },
            ),
        ]
    };
    let builder = TestGateway::builder()
        .workers(0)
        .endpoints(&endpoint("sw", &entries(false)));
    let files = builder.write().await;
    let p = files.serve(None);
    let (addr, admin) = (p.addr(), p.admin.unwrap());
    assert_eq!(post(addr, "sw", &old, "evt_old_1").status, 200);
    assert_eq!(post(addr, "sw", &old, "evt_old_2").status, 200);
    assert_eq!(post(addr, "sw", &new, "evt_new_1").status, 200);

    // Emergency: the leaked secret's file is gone already, and v1 is retired.
    std::fs::remove_file(&old_path).unwrap();
    let retired = TestGateway::builder()
        .workers(0)
        .endpoints(&endpoint("sw", &entries(true)))
        .render(&files.store_url);
    std::fs::write(&files.config_path, &retired).unwrap();
    p.signal("-HUP");
    p.wait_for_log("configuration reloaded");
    assert_eq!(post(addr, "sw", &old, "evt_old_3").status, 401, "retired");
    assert_eq!(
        post(addr, "sw", &new, "evt_new_2").status,
        200,
        "others keep working"
    );
    assert!(problems(admin).is_empty(), "{:?}", problems(admin));

    // What the leaked version let in: the runbook's first step.
    let listed = Command::new(binary())
        .args([
            "events",
            "list",
            "--json",
            "--secret-version",
            "v1",
            "--config",
        ])
        .arg(&files.config_path)
        .output()
        .unwrap();
    assert!(
        listed.status.success(),
        "{}",
        String::from_utf8_lossy(&listed.stderr)
    );
    let mut ids: Vec<String> = String::from_utf8(listed.stdout)
        .unwrap()
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).unwrap();
            assert_eq!(v["matched_secret_version"], "v1");
            v["provider_event_id"].as_str().unwrap().to_owned()
        })
        .collect();
    ids.sort();
    assert_eq!(ids, ["evt_old_1", "evt_old_2"]);

    // A reload that fails keeps the running configuration, is counted and shown until a
    // reload succeeds.
    assert_eq!(
        metric(admin, "hookgate_config_reload_failures_total"),
        Some(0.0)
    );
    assert_eq!(
        metric(admin, "hookgate_config_last_reload_successful"),
        Some(1.0)
    );
    std::fs::write(&files.config_path, "this is = not [valid").unwrap();
    p.signal("-HUP");
    p.wait_for_log("reload failed");
    assert_eq!(
        metric(admin, "hookgate_config_reload_failures_total"),
        Some(1.0)
    );
    assert_eq!(
        metric(admin, "hookgate_config_last_reload_successful"),
        Some(0.0),
        "the alert's signal stays down until a reload succeeds"
    );
    let shown = problems(admin);
    assert!(
        shown.iter().any(|p| p["kind"] == "config_reload_failed"
            && p["reason"].as_str().unwrap().contains("config error")),
        "{shown:?}"
    );
    assert_eq!(post(addr, "sw", &new, "evt_new_3").status, 200);
    assert_eq!(post(addr, "sw", &old, "evt_old_4").status, 401);
    std::fs::write(&files.config_path, &retired).unwrap();
    p.signal("-HUP");
    wait_until_blocking(
        "a good reload to clear the problem",
        REFRESH_DEADLINE,
        || problems(admin).is_empty(),
    );
    assert_eq!(
        metric(admin, "hookgate_config_last_reload_successful"),
        Some(1.0)
    );
    let logs = p.terminate();
    assert!(
        !logs.contains(&old) && !logs.contains(&new),
        "a secret reached the logs"
    );
}

#[tokio::test]
async fn literal_secret_on_a_public_listener_is_refused_without_dev() {
    let files = TestGateway::builder()
        .workers(0)
        .listen("0.0.0.0:0")
        .server("trusted_proxies = [\"10.0.0.1\"]")
        .endpoints(&endpoint_toml(
            "sw",
            "standard_webhooks",
            &[&whsec("literal")],
            "",
        ))
        .write()
        .await;
    let refused = Command::new(binary())
        .args(["serve", "--config"])
        .arg(&files.config_path)
        .output()
        .unwrap();
    assert!(!refused.status.success());
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("is a literal secret"), "{stderr}");
    assert!(stderr.contains("not a loopback address"), "{stderr}");
    assert!(stderr.contains("--dev"), "{stderr}");

    let mut dev = BinaryGateway::launch_with_args(
        BinaryRole::Serve,
        &files.config_path,
        None,
        &[],
        &["--dev"],
    );
    dev.wait_listening();
    dev.terminate();
}

#[tokio::test]
async fn a_worker_verifies_no_webhook_and_reads_no_endpoint_secret() {
    let files = TestGateway::builder()
        .endpoints(&endpoint(
            "sw",
            &[secret_entry("v1", "exec:/nonexistent/get-secret", "")],
        ))
        .write()
        .await;
    let p = BinaryGateway::start(BinaryRole::Worker, &files.config_path, None);
    // /readyz answers only once start-up (where a serve process reads its secrets) is done.
    assert!(problems(p.admin.unwrap()).is_empty());
    let logs = p.terminate();
    assert!(!logs.contains("secret refresh failed"), "{logs}");
}

#[tokio::test]
async fn config_check_warns_about_expiring_and_unreadable_secrets() {
    let soon = jiff::Timestamp::now().as_second() + 2 * 86_400;
    let soon = jiff::Timestamp::from_second(soon).unwrap().to_string();
    let entries = [
        secret_entry("v2", "file:missing.secret", ""),
        secret_entry(
            "v1",
            &whsec("expiring"),
            &format!(", not_after = {}", q(&soon)),
        ),
    ];
    let files = files(&endpoint("sw", &entries), "").await;
    let out = Command::new(binary())
        .args(["config", "check", "--config"])
        .arg(&files.config_path)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("endpoints[0].secrets[1] (version \"v1\") expires at"),
        "{stderr}"
    );
    assert!(
        stderr.contains("endpoints[0].secrets[0] (version \"v2\") cannot be read now"),
        "{stderr}"
    );
    assert!(!stderr.contains(&whsec("expiring")), "a secret was printed");
}
