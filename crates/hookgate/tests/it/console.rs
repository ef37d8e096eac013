//! The web console in a real browser: the real binary with tokens, signed webhooks, then the
//! distribution's headless Chromium driven by Playwright (`tests/browser/console.test.js`)
//! against the admin listener — sign in (a wrong token refused), filter, open an event, decrypt
//! it, replay it and see its status change — and finally the store, read directly, confirms
//! what the page showed. Needs Node.js, `/usr/bin/chromium` and `playwright-core` in
//! `tests/browser/node_modules` (`scripts/ensure-chromium.sh`, `scripts/ensure-playwright.sh`;
//! `scripts/test.sh` runs both): without them the test fails and says so, it never skips.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use hookgate_core::InboxStatus;

use crate::support::*;

const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const FORGED_SECRET: &str = "whsec_ZXhwaXJlZC1zZWNyZXQtZm9yLXRlc3RzLTEyMzQ=";
const ONCALL_TOKEN: &str = "hg_console_oncall_4b1f0c9e7d2a6b3f8e5c1a0d9b7e6f42";
const VIEWER_TOKEN: &str = "hg_console_viewer_9e2d7c4b1a0f3e6d5c8b7a6f4e3d2c1b";
const CHROMIUM: &str = "/usr/bin/chromium";
/// The whole browser session (launch included) ends within this, or the test fails.
const BROWSER_DEADLINE: Duration = Duration::from_secs(240);
/// Ignored events of the `bulk` endpoint, replayed by a job the page pauses and resumes.
const BULK: usize = 20;
const WAIT: Duration = Duration::from_secs(30);

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// What the browser test needs, each checked with the way to get it.
fn browser_prerequisites() -> PathBuf {
    let fix =
        "run scripts/ensure-chromium.sh and scripts/ensure-playwright.sh (scripts/test.sh does)";
    let node = Command::new("node").arg("--version").output();
    assert!(
        matches!(&node, Ok(o) if o.status.success()),
        "the console's browser test needs Node.js (`node` on PATH): {fix}"
    );
    assert!(
        Path::new(CHROMIUM).exists(),
        "the console's browser test needs {CHROMIUM} (Debian's chromium package): {fix}"
    );
    let browser_dir = repo_root().join("tests/browser");
    assert!(
        browser_dir
            .join("node_modules/playwright-core/package.json")
            .exists(),
        "the console's browser test needs playwright-core in {}: {fix}",
        browser_dir.join("node_modules").display()
    );
    browser_dir
}

/// What the destinations' receiver got: (path, `Idempotency-Key`) per request.
type Received = Arc<Mutex<Vec<(String, String)>>>;

/// The endpoints' HTTP destinations on one real socket: `/hook` answers 200; `/flaky` answers
/// 400 (a permanent failure) to its first request and 200 after. Keeps each request's path
/// and `Idempotency-Key`.
async fn receiver() -> (std::net::SocketAddr, Received) {
    use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let received: Received = Arc::default();
    let seen = received.clone();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut reader = tokio::io::BufReader::new(stream);
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    let path = line.split(' ').nth(1).unwrap_or("").to_owned();
                    let (mut key, mut length) = (String::new(), 0usize);
                    loop {
                        line.clear();
                        if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                            return;
                        }
                        let l = line.trim_end().to_ascii_lowercase();
                        if l.is_empty() {
                            break;
                        }
                        if let Some(v) = l.strip_prefix("content-length:") {
                            length = v.trim().parse().unwrap_or(0);
                        }
                        if l.starts_with("idempotency-key:") {
                            key = line.trim_end()["idempotency-key:".len()..]
                                .trim()
                                .to_owned();
                        }
                    }
                    let mut body = vec![0; length];
                    if reader.read_exact(&mut body).await.is_err() {
                        return;
                    }
                    let answer: &[u8] = {
                        let mut seen = seen.lock().unwrap();
                        let first_flaky = path == "/flaky" && !seen.iter().any(|(p, _)| *p == path);
                        seen.push((path, key));
                        if first_flaky {
                            b"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n"
                        } else {
                            b"HTTP/1.1 200 OK\r\ncontent-length: 0\r\n\r\n"
                        }
                    };
                    if reader.get_mut().write_all(answer).await.is_err() {
                        return;
                    }
                }
            });
        }
    });
    (addr, received)
}

fn sw_body(kind: &str, marker: &str) -> Vec<u8> {
    serde_json::json!({"type": kind, "data": {"id": "obj_1", "marker": marker}})
        .to_string()
        .into_bytes()
}

/// Posts one signed Standard Webhooks event; answers the inbox id and the answer's status.
async fn send(
    addr: std::net::SocketAddr,
    endpoint: &str,
    msg_id: &str,
    body: &[u8],
) -> (String, String) {
    let r = post_signed(
        addr,
        endpoint,
        "standard_webhooks",
        SW_SECRET,
        msg_id,
        unix_now(),
        body,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.body);
    let v = r.json();
    (
        v["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no id in {v}"))
            .to_owned(),
        v["status"].as_str().unwrap().to_owned(),
    )
}

/// Runs the Playwright script with `env`; answers its JSON report (panics with its output
/// when it fails or outlives [`BROWSER_DEADLINE`]).
fn run_browser(dir: &Path, env: &[(&str, String)]) -> serde_json::Value {
    let child = Command::new("node")
        .arg("console.test.js")
        .current_dir(dir)
        .envs(env.iter().map(|(k, v)| (k, v.as_str())))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("start node");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let output = match rx.recv_timeout(BROWSER_DEADLINE) {
        Ok(output) => output.expect("wait for node"),
        Err(_) => {
            let _ = Command::new("kill").args(["-9", &pid.to_string()]).status();
            panic!("the browser test did not finish within {BROWSER_DEADLINE:?}");
        }
    };
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let report: serde_json::Value = stdout
        .lines()
        .rev()
        .find_map(|l| serde_json::from_str(l).ok())
        .unwrap_or_else(|| {
            panic!(
                "the browser test printed no report ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
                output.status
            )
        });
    assert!(
        output.status.success() && report["ok"] == true,
        "the browser test failed ({}): {}\nreport: {report:#}\nstderr:\n{stderr}",
        output.status,
        report["error"]
    );
    report
}

fn ids(rows: &serde_json::Value) -> BTreeSet<String> {
    rows.as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_in_chromium_signs_in_filters_opens_decrypts_and_replays_an_event() {
    let browser_dir = browser_prerequisites();
    let (receiver, received) = receiver().await;
    let endpoint_extra = "allowed_event_types = [\"invoice.*\"]\ndestinations = [\"recv\"]";
    let crm_extra = "allowed_event_types = [\"invoice.*\"]\ndestinations = [\"flaky\"]";
    let files = TestGateway::builder()
        .worker_settings("poll_interval_ms = 20")
        .relay_settings("poll_interval_ms = 20")
        .destinations(&format!(
            "[[destinations]]\nid = \"recv\"\nkind = \"http\"\nurl = \"http://{receiver}/hook\"\n\
             timeout_ms = 2000\nallow_private_network = true\n\
             [[destinations]]\nid = \"flaky\"\nkind = \"http\"\nurl = \"http://{receiver}/flaky\"\n\
             timeout_ms = 2000\nallow_private_network = true\n"
        ))
        .admin_settings(&format!(
            "[[admin.tokens]]\nname = \"oncall\"\nscopes = [\"read\", \"decrypt\", \"operate\"]\nvalue = {}\n\
             [[admin.tokens]]\nname = \"viewer\"\nscopes = [\"read\"]\nvalue = {}\n",
            q(ONCALL_TOKEN),
            q(VIEWER_TOKEN)
        ))
        .endpoints(&endpoint_toml(
            "shop",
            "standard_webhooks",
            &[SW_SECRET],
            endpoint_extra,
        ))
        .endpoints(&endpoint_toml(
            "crm",
            "standard_webhooks",
            &[SW_SECRET],
            crm_extra,
        ))
        .endpoints(&endpoint_toml(
            "bulk",
            "standard_webhooks",
            &[SW_SECRET],
            endpoint_extra,
        ))
        // Slow bulk jobs (one event per batch, two a second), so the page can pause one.
        .section("[jobs]\nrate_per_second = 2\nbatch_size = 1")
        .write()
        .await;
    let gateway = files.serve(None);
    let addr = gateway.addr();
    let admin = gateway.admin.expect("admin listener");

    // First (so the oldest), twenty ignored events on `bulk` for a bulk job to replay; then
    // three processed invoices and two ignored events on `shop` (one whose type is markup, to
    // show that the page renders it as text), one of each on `crm`.
    let mut bulk = BTreeSet::new();
    for n in 0..BULK {
        let (id, answer) = send(
            addr,
            "bulk",
            &format!("msg_bulk_{n}"),
            &sw_body("user.deleted", "b"),
        )
        .await;
        assert_eq!(answer, "ignored");
        bulk.insert(id);
    }
    let mut processed = Vec::new();
    for n in 0..3 {
        let (id, answer) = send(
            addr,
            "shop",
            &format!("msg_paid_{n}"),
            &sw_body("invoice.paid", "p"),
        )
        .await;
        assert_eq!(answer, "accepted");
        processed.push(id);
    }
    let (target, answer) = send(
        addr,
        "shop",
        "msg_deleted",
        &sw_body("user.deleted", "console-replay-marker"),
    )
    .await;
    assert_eq!(answer, "ignored");
    let markup_type = "<img src=x id=injected onerror=alert(1)><b>bold</b>";
    let (markup, _) = send(addr, "shop", "msg_markup", &sw_body(markup_type, "m")).await;
    let (crm_ignored, _) = send(
        addr,
        "crm",
        "msg_crm_deleted",
        &sw_body("user.deleted", "c"),
    )
    .await;
    let (crm_paid, _) = send(addr, "crm", "msg_crm_paid", &sw_body("invoice.paid", "c")).await;

    let store = files.open_store().await;
    wait_until("the accepted events processed", WAIT, || {
        let store = store.clone();
        async move {
            let events = store.list_events(&Default::default()).await.unwrap();
            events.len() == 7 + BULK && events.iter().all(|e| e.status != InboxStatus::Received)
        }
    })
    .await;

    // `crm`'s invoice went to `flaky`, whose first answer is a permanent failure.
    wait_until("the crm invoice's delivery FAILED", WAIT, || async {
        let r = send_raw_async(
            admin,
            build_request(
                "GET",
                &format!("/api/v1/events/{crm_paid}"),
                &[("Authorization".into(), format!("Bearer {ONCALL_TOKEN}"))],
                b"",
            ),
        )
        .await;
        r.status == 200 && r.json()["deliveries"][0]["status"] == "FAILED"
    })
    .await;

    // A forged request (another secret) lands in the rejection log, off the acceptance path:
    // wait until the API lists it, so the page has it to show.
    let forged = post_signed(
        addr,
        "shop",
        "standard_webhooks",
        FORGED_SECRET,
        "msg_forged",
        unix_now(),
        &sw_body("invoice.paid", "forged"),
    )
    .await;
    assert_eq!(forged.status, 401, "{}", forged.body);
    let forged_signature = signed_headers(
        "standard_webhooks",
        FORGED_SECRET,
        "msg_forged",
        unix_now(),
        b"{}",
    )
    .into_iter()
    .find(|(k, _)| k.eq_ignore_ascii_case("webhook-signature"))
    .map(|(_, v)| v)
    .unwrap();
    wait_until("the forged request in the rejection log", WAIT, || async {
        let r = send_raw_async(
            admin,
            build_request(
                "GET",
                "/api/v1/rejections?endpoint=shop",
                &[("Authorization".into(), format!("Bearer {ONCALL_TOKEN}"))],
                b"",
            ),
        )
        .await;
        r.status == 200 && !r.json()["rejections"].as_array().unwrap().is_empty()
    })
    .await;

    // The page and its assets: security headers on each.
    let page = get(admin, "/console");
    assert_eq!(page.status, 200);
    let csp = page.header("content-security-policy").expect("a CSP");
    assert!(
        csp.contains("script-src 'self'") && !csp.contains("unsafe-inline"),
        "{csp}"
    );
    assert!(csp.contains("frame-ancestors 'none'"), "{csp}");
    assert_eq!(page.header("x-content-type-options"), Some("nosniff"));
    assert!(page.header("set-cookie").is_none());
    for (asset, media) in [
        ("console.js", "text/javascript"),
        ("dom.js", "text/javascript"),
        ("metrics.js", "text/javascript"),
        ("console.css", "text/css"),
        ("favicon.svg", "image/svg+xml"),
    ] {
        let r = get(admin, &format!("/console/assets/{asset}"));
        assert_eq!(r.status, 200, "{asset}");
        // With nosniff, a module script or stylesheet of another type would not load.
        assert!(
            r.header("content-type").unwrap().starts_with(media),
            "{asset}: {:?}",
            r.header("content-type")
        );
        assert_eq!(
            r.header("x-content-type-options"),
            Some("nosniff"),
            "{asset}"
        );
    }
    assert_eq!(get(admin, "/console/assets/../Cargo.toml").status, 404);

    let shots = tempfile::tempdir().unwrap();
    // HOOKGATE_CONSOLE_SCREENSHOT=docs/console.png (relative to the repository) keeps it.
    let screenshot = std::env::var("HOOKGATE_CONSOLE_SCREENSHOT")
        .map(|p| repo_root().join(p))
        .unwrap_or_else(|_| shots.path().join("console.png"));
    let env = vec![
        ("CONSOLE_URL", format!("http://{admin}/console")),
        ("CONSOLE_TOKEN", ONCALL_TOKEN.to_owned()),
        ("CONSOLE_READ_TOKEN", VIEWER_TOKEN.to_owned()),
        (
            "CONSOLE_BAD_TOKEN",
            "hg_console_unknown_0000000000000000".to_owned(),
        ),
        ("CONSOLE_ENDPOINT", "shop".to_owned()),
        ("CONSOLE_TARGET", target.clone()),
        ("CONSOLE_DESTINATION", "recv".to_owned()),
        ("CONSOLE_JOB_ENDPOINT", "crm".to_owned()),
        ("CONSOLE_BULK_ENDPOINT", "bulk".to_owned()),
        ("CONSOLE_FAILED_DELIVERY", crm_paid.clone()),
        ("CONSOLE_SCREENSHOT", screenshot.display().to_string()),
        ("CHROMIUM", CHROMIUM.to_owned()),
    ];
    let report = tokio::task::spawn_blocking(move || run_browser(&browser_dir, &env))
        .await
        .unwrap();

    // Nothing went wrong in the page: no script error, no CSP violation, no other origin.
    assert_eq!(
        report["browser_errors"],
        serde_json::json!([]),
        "{report:#}"
    );
    assert_eq!(report["requests"]["other_origin"], serde_json::json!([]));
    assert_eq!(
        report["requests"]["api_without_bearer"],
        serde_json::json!([])
    );
    assert_eq!(report["requests"]["with_cookie"], serde_json::json!([]));
    assert_eq!(report["cookies"], 0);
    assert_eq!(report["storage"], 0);
    assert_eq!(report["page_status"], 200);

    // The wrong token: refused, nothing shown.
    let refused = report["wrong_token_error"].as_str().unwrap();
    assert!(refused.contains("Token refused"), "{refused}");
    assert_eq!(report["wrong_token_nav_hidden"], true);
    assert_eq!(report["wrong_token_events_hidden"], true);
    // The read-only token: the page asks again after a reload, and the API's 403s are shown.
    let denied = report["read_only_replay"].as_str().unwrap();
    assert!(
        denied.contains("refused") && denied.contains("403"),
        "{denied}"
    );
    let no_decrypt = report["read_only_payload"].as_str().unwrap();
    assert!(no_decrypt.contains("no decrypt scope"), "{no_decrypt}");

    // The list: every event, the markup type as text and no element made of it.
    let all: BTreeSet<String> = [
        &processed[..],
        &[
            target.clone(),
            markup.clone(),
            crm_ignored.clone(),
            crm_paid.clone(),
        ],
    ]
    .concat()
    .into_iter()
    .chain(bulk.iter().cloned())
    .collect();
    assert_eq!(ids(&report["listed"]), all);
    assert_eq!(report["injected_elements"], 0);
    let listed_markup = report["listed"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["id"] == markup.as_str())
        .unwrap();
    assert_eq!(listed_markup["event_type"], markup_type);

    // Three at a time, each event once, newest first across pages.
    let pages = report["pages"].as_array().unwrap();
    let sizes: Vec<usize> = pages.iter().map(|p| p.as_array().unwrap().len()).collect();
    let expected: Vec<usize> = (0..all.len())
        .step_by(3)
        .map(|i| (all.len() - i).min(3))
        .collect();
    assert_eq!(sizes, expected, "{pages:#?}");
    let paged: Vec<String> = pages
        .iter()
        .flat_map(|p| p.as_array().unwrap().iter())
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    let listed: Vec<String> = report["listed"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(paged, listed, "pages in the order of the whole list");

    // The filter (IGNORED on `shop`) leaves exactly the two ignored events of `shop`.
    assert_eq!(
        ids(&report["filtered"]),
        BTreeSet::from([target.clone(), markup.clone()]),
        "{:#}",
        report["filtered"]
    );
    assert!(
        report["filtered"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["status"] == "IGNORED" && r["endpoint"] == "shop")
    );

    // The detail, the decrypted payload, the replay.
    assert_eq!(report["detail_id"], target.as_str());
    assert_eq!(report["status_before"], "IGNORED");
    assert!(
        report["payload"]
            .as_str()
            .unwrap()
            .contains("console-replay-marker"),
        "{}",
        report["payload"]
    );
    assert_eq!(report["status_after"], "PROCESSED");
    let result = report["operation_result"].as_str().unwrap();
    assert!(result.contains("from IGNORED to PROCESSED"), "{result}");
    assert!(ids(&report["processed_after"]).contains(&target));

    // Replayed, it was delivered once with its inbox id as the key; re-delivered with a fresh
    // key, the receiver got that key, which the page shows.
    let delivery = |at: &str| report[at].as_array().unwrap()[0].clone();
    let first = delivery("deliveries_after_replay");
    assert_eq!(first["destination"], "recv", "{first:#}");
    assert_eq!(first["status"], "DELIVERED", "{first:#}");
    assert_eq!(first["idempotency_key"], target.as_str());
    let again = delivery("deliveries_after_redeliver");
    assert_eq!(again["status"], "DELIVERED", "{again:#}");
    let fresh = again["idempotency_key"].as_str().unwrap().to_owned();
    assert_ne!(fresh, target);
    let received = received.lock().unwrap().clone();
    let to = |path: &str, key: &str| {
        received
            .iter()
            .filter(|(p, k)| p == path && k == key)
            .count()
    };
    assert_eq!(to("/hook", &target), 1, "{received:?}");
    assert_eq!(to("/hook", &fresh), 1, "{received:?}");

    // The FAILED delivery, retried from the page: FAILED, then DELIVERED on the second try.
    assert_eq!(report["retry_enabled"], true);
    let before = delivery("retry_before");
    assert_eq!(before["destination"], "flaky", "{before:#}");
    assert_eq!(before["status"], "FAILED", "{before:#}");
    let after = delivery("retry_after");
    assert_eq!(after["status"], "DELIVERED", "{after:#}");
    assert_eq!(to("/flaky", &crm_paid), 2, "{received:?}");

    // The bulk job: created from the page's filter (IGNORED on `crm`), followed to `done`.
    assert_eq!(
        ids(&report["job_filtered"]),
        BTreeSet::from([crm_ignored.clone()])
    );
    let shown_filter: serde_json::Value =
        serde_json::from_str(report["job_filter_shown"].as_str().unwrap()).unwrap();
    assert_eq!(
        shown_filter,
        serde_json::json!({"status": "ignored", "endpoint_id": "crm"})
    );
    assert_eq!(report["job_created_status"], 201);
    let job = &report["job_row"];
    assert_eq!(job["action"], "replay", "{job:#}");
    assert_eq!(job["state"], "done", "{job:#}");
    assert_eq!(job["counts"], "1 / 1 (0 failed)", "{job:#}");
    assert_eq!(job["progress_value"], job["progress_max"], "{job:#}");

    // The paused job: paused part-way, resumed, done with every event once.
    assert_eq!(ids(&report["bulk_filtered"]), bulk);
    let paused = &report["bulk_paused"];
    assert_eq!(paused["state"], "paused", "{paused:#}");
    let done_at_pause: usize = paused["counts"]
        .as_str()
        .unwrap()
        .split(' ')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert!(done_at_pause < BULK, "{paused:#}");
    let resumed = &report["bulk_done"];
    assert_eq!(resumed["state"], "done", "{resumed:#}");
    assert_eq!(
        resumed["counts"],
        format!("{BULK} / {BULK} (0 failed)"),
        "{resumed:#}"
    );

    // The rejection log: the forged request, its cause, header names without their values.
    let rejections = report["rejections"].as_array().unwrap();
    assert_eq!(rejections.len(), 1, "{rejections:#?}");
    let r = &rejections[0];
    assert_eq!(r["endpoint"], "shop");
    assert_eq!(r["cause"], "invalid_signature", "{r:#}");
    let headers = r["headers"].as_str().unwrap();
    assert!(headers.contains("webhook-signature"), "{headers}");
    let sig_value = forged_signature.split_once(',').map_or("", |(_, v)| v);
    assert!(
        !sig_value.is_empty() && !headers.contains(sig_value),
        "a signature value on the page: {headers}"
    );
    assert!(
        report["rejection_counts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c[0] == "invalid_signature" && c[1] == "1"),
        "{:#}",
        report["rejection_counts"]
    );

    // Live: the answers counted by `/metrics` (4 accepted, 3 ignored) and a latency.
    let live = &report["live"];
    assert_eq!(live["outcomes"]["accepted"], "4", "{live:#}");
    assert_eq!(
        live["outcomes"]["ignored"],
        (3 + BULK).to_string(),
        "{live:#}"
    );
    for q in ["ack_p50", "ack_p99"] {
        let shown = live[q].as_str().unwrap();
        assert!(
            shown.ends_with(" ms") || shown.ends_with(" s"),
            "{q}: {shown}"
        );
    }

    // The store confirms: the replayed event is PROCESSED, the others are as they were, and
    // the audit log holds the decrypt and the replay under the token's name, the viewer's
    // attempts refused.
    let row = store.get_event(&target).await.unwrap().unwrap();
    assert_eq!(row.status, InboxStatus::Processed);
    let other = store.get_event(&markup).await.unwrap().unwrap();
    assert_eq!(
        other.status,
        InboxStatus::Ignored,
        "only the replayed events changed"
    );
    let by_job = store.get_event(&crm_ignored).await.unwrap().unwrap();
    assert_eq!(by_job.status, InboxStatus::Processed, "the job replayed it");
    for id in &bulk {
        let row = store.get_event(id).await.unwrap().unwrap();
        assert_eq!(
            row.status,
            InboxStatus::Processed,
            "the paused job finished"
        );
    }
    let audit = store.audit_log(100).await.unwrap();
    let has = |actor: &str, action: &str, result: &str| {
        audit.iter().any(|a| {
            a.actor == actor && a.action == action && a.target == target && a.result == result
        })
    };
    assert!(has("oncall", "replay", "ok"), "{audit:#?}");
    assert!(has("oncall", "redeliver", "ok"), "{audit:#?}");
    assert!(
        audit.iter().any(|a| a.actor == "oncall"
            && a.action == "retry"
            && a.target == crm_paid
            && a.result == "ok"),
        "{audit:#?}"
    );
    assert!(has("oncall", "decrypt", "ok"), "{audit:#?}");
    assert!(
        has("viewer", "replay", "denied"),
        "the refused replay is audited: {audit:#?}"
    );
    assert!(
        has("viewer", "decrypt", "denied"),
        "the refused decrypt is audited: {audit:#?}"
    );

    assert!(
        audit
            .iter()
            .any(|a| a.actor == "oncall" && a.action == "job.create" && a.result == "ok"),
        "{audit:#?}"
    );
    for action in ["job.pause", "job.resume"] {
        assert!(
            audit
                .iter()
                .any(|a| a.actor == "oncall" && a.action == action && a.result == "ok"),
            "{action}: {audit:#?}"
        );
    }

    // The page's audit view shows the same entries the store holds.
    let shown = report["audit"].as_array().unwrap();
    for a in audit.iter().filter(|a| a.target == target) {
        assert!(
            shown.iter().any(|r| r["token"] == a.actor.as_str()
                && r["action"] == a.action.as_str()
                && r["target"] == target.as_str()
                && r["result"] == a.result.as_str()),
            "{a:?} not on the audit page: {shown:#?}"
        );
    }

    // The screenshot is a PNG.
    let png = std::fs::read(&screenshot).unwrap();
    assert!(
        png.starts_with(b"\x89PNG\r\n\x1a\n") && png.len() > 10_000,
        "{}",
        png.len()
    );

    let logs = tokio::task::spawn_blocking(move || gateway.terminate())
        .await
        .unwrap();
    for secret in [ONCALL_TOKEN, VIEWER_TOKEN] {
        assert!(!logs.contains(secret), "a token reached the logs");
    }
}
