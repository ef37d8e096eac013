//! The deployment kit in `deploy/`: the systemd units pass `systemd-analyze verify` (with
//! `ExecStart` pointing at the binary this test run built) and their own `ExecStart`,
//! `ExecReload` and `KillSignal` drive the real binary; the alert rules pass `promtool check
//! rules` and `promtool test rules`, and each alert's tests fail when that alert's expression
//! or `for` is broken; the rules and the Grafana dashboard query only metrics that
//! `telemetry.rs` defines (and the dashboard shows every one), and a running gateway exports
//! every series the alerts watch.
//!
//! The tools come from Debian's `systemd` and `prometheus` packages; a missing one fails the
//! test, naming `scripts/ensure-deploy-tools.sh` (scripts/test.sh runs it first).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::Duration;

use crate::support::*;

const UNITS: [&str; 2] = ["hookgate.service", "hookgate-worker.service"];
const INSTALLED_BINARY: &str = "/usr/local/bin/hookgate";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn deploy(path: &str) -> PathBuf {
    repo().join("deploy").join(path)
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// Runs `tool args…`; a tool that is not installed fails the test with what to run.
fn run(tool: &str, args: &[&std::ffi::OsStr]) -> Output {
    match Command::new(tool).args(args).output() {
        Ok(out) => out,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => panic!(
            "{tool} is not installed: run scripts/ensure-deploy-tools.sh \
             (Debian's systemd and prometheus packages)"
        ),
        Err(e) => panic!("running {tool}: {e}"),
    }
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The unit's `Key=value` settings (comments and section headers left out), in order.
fn settings(unit: &str) -> Vec<(String, String)> {
    unit.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#') && !l.starts_with('['))
        .map(|l| {
            let (k, v) = l
                .split_once('=')
                .unwrap_or_else(|| panic!("not a setting: {l}"));
            (k.to_owned(), v.to_owned())
        })
        .collect()
}

fn setting<'a>(settings: &'a [(String, String)], key: &str) -> &'a str {
    let mut found = settings.iter().filter(|(k, _)| k == key);
    let (_, v) = found
        .next()
        .unwrap_or_else(|| panic!("the unit sets no {key}"));
    assert!(found.next().is_none(), "{key} is set twice");
    v
}

/// A unit with its `ExecStart` pointing at the binary this test run built, in `dir`.
fn installable(dir: &Path, name: &str) -> PathBuf {
    let unit = read(&deploy(&format!("systemd/{name}")));
    let exec = format!("ExecStart={INSTALLED_BINARY} ");
    assert!(
        unit.contains(&exec),
        "{name}: ExecStart is not {INSTALLED_BINARY}"
    );
    let path = dir.join(name);
    let built = format!("ExecStart={} ", binary().display());
    std::fs::write(&path, unit.replace(&exec, &built)).unwrap();
    path
}

fn verify(path: &Path) -> Output {
    run("systemd-analyze", &["verify".as_ref(), path.as_os_str()])
}

#[test]
fn systemd_units_pass_systemd_analyze_verify_and_security() {
    let dir = tempfile::tempdir().unwrap();
    for name in UNITS {
        let path = installable(dir.path(), name);
        // `verify` exits 0 on unknown keys and bad values (it only warns): any output fails.
        let out = verify(&path);
        assert!(
            out.status.success() && text(&out).trim().is_empty(),
            "systemd-analyze verify {name}:\n{}",
            text(&out)
        );
        // systemd's exposure score, 0 (locked down) to 10: at most 2.0 ("OK").
        let out = run(
            "systemd-analyze",
            &[
                "security".as_ref(),
                "--offline=yes".as_ref(),
                "--threshold=20".as_ref(),
                path.as_os_str(),
            ],
        );
        assert!(
            out.status.success(),
            "systemd-analyze security {name}:\n{}",
            text(&out)
        );

        let s = settings(&read(&path));
        for (key, value) in [
            ("NoNewPrivileges", "yes"),
            ("CapabilityBoundingSet", ""),
            ("AmbientCapabilities", ""),
            ("ProtectSystem", "strict"),
            ("ProtectHome", "yes"),
            ("PrivateTmp", "yes"),
            ("DynamicUser", "yes"),
            ("User", "hookgate"),
            ("StateDirectory", "hookgate"),
            ("KillSignal", "SIGTERM"),
            ("ExecReload", "/bin/kill -HUP $MAINPID"),
        ] {
            assert_eq!(setting(&s, key), value, "{name}: {key}");
        }
        // systemd escalates to SIGKILL after TimeoutStopSec: it must cover the drain
        // (in-flight requests, then the stages' bounded grace, then the secret refresher).
        let stop = setting(&s, "TimeoutStopSec");
        let stop = Duration::from_secs(stop.strip_suffix('s').unwrap().parse().unwrap());
        let drain = hookgate::ingress::DRAIN_TIMEOUT + Duration::from_secs(10 + 1);
        assert!(
            stop > drain,
            "{name}: TimeoutStopSec {stop:?} ≤ the drain {drain:?}"
        );
    }
}

#[test]
fn systemd_analyze_verify_catches_a_broken_unit() {
    // The check above is only as good as its failures: a typo and a missing binary show.
    let dir = tempfile::tempdir().unwrap();
    let path = installable(dir.path(), "hookgate.service");
    let good = read(&path);
    std::fs::write(
        &path,
        good.replace("ProtectSystem=strict", "ProtectSytem=strict"),
    )
    .unwrap();
    let out = verify(&path);
    assert!(text(&out).contains("ProtectSytem"), "{}", text(&out));
    std::fs::write(
        &path,
        good.replace(&binary().display().to_string(), "/nonexistent/bin/hookgate"),
    )
    .unwrap();
    let out = verify(&path);
    assert!(!out.status.success(), "{}", text(&out));
}

#[tokio::test]
async fn the_units_commands_start_reload_and_stop_the_real_binary() {
    for name in UNITS {
        let s = settings(&read(&deploy(&format!("systemd/{name}"))));
        let exec: Vec<&str> = setting(&s, "ExecStart").split(' ').collect();
        let (role, config_flag) = (exec[1], exec[2]);
        assert_eq!(exec[0], INSTALLED_BINARY);
        assert_eq!(config_flag, "--config", "{name}");
        assert_eq!(exec.len(), 4, "{name}: {exec:?}");
        let role = match role {
            "serve" => BinaryRole::Serve,
            "worker" => BinaryRole::Worker,
            other => panic!("{name}: ExecStart runs {other}"),
        };
        let files = TestGateway::builder()
            .endpoints(&endpoint_toml(
                "sw",
                "standard_webhooks",
                &["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
                "",
            ))
            .write()
            .await;
        let p = BinaryGateway::start(role, &files.config_path, None);
        assert!(p.admin.is_some(), "{name}: no admin listener");

        // ExecReload as systemd runs it, $MAINPID being the service's main process.
        let reload = setting(&s, "ExecReload").replace("$MAINPID", &p.pid().to_string());
        let argv: Vec<&str> = reload.split(' ').collect();
        let status = Command::new(argv[0]).args(&argv[1..]).status().unwrap();
        assert!(status.success(), "{name}: {reload}");
        p.wait_for_log("configuration reloaded");

        // KillSignal (SIGTERM) drains and exits 0.
        assert_eq!(setting(&s, "KillSignal"), "SIGTERM");
        let logs = p.terminate();
        assert!(logs.contains("hookgate stopped"), "{name}: {logs}");
    }
}

/// `pub const NAME: &str = "hookgate_…";` in telemetry.rs: every metric name there is.
fn defined_metrics() -> BTreeSet<String> {
    let src = read(&repo().join("crates/hookgate/src/telemetry.rs"));
    let defined: BTreeSet<String> = src
        .lines()
        .filter_map(|l| {
            l.trim()
                .strip_prefix("pub const ")?
                .split_once(": &str = \"")
        })
        .filter_map(|(_, rest)| rest.strip_suffix("\";"))
        .filter(|name| name.starts_with("hookgate_"))
        .map(str::to_owned)
        .collect();
    assert!(defined.len() > 20, "{defined:?}");
    defined
}

/// The `hookgate_…` names a PromQL expression reads, a histogram's `_bucket` / `_count` /
/// `_sum` series counted as the histogram.
fn queried_metrics(expr: &str, defined: &BTreeSet<String>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = expr;
    while let Some(at) = rest.find("hookgate_") {
        let tail = &rest[at..];
        let end = tail
            .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .unwrap_or(tail.len());
        let name = &tail[..end];
        let base = ["_bucket", "_count", "_sum"]
            .iter()
            .find_map(|s| name.strip_suffix(s).filter(|b| defined.contains(*b)))
            .unwrap_or(name);
        out.insert(base.to_owned());
        rest = &tail[end..];
    }
    out
}

/// Each rule of the rules file: (alert name, expr, for).
fn alert_rules() -> Vec<(String, String, Option<String>)> {
    let rules = read(&deploy("prometheus/hookgate-rules.yml"));
    let mut out: Vec<(String, String, Option<String>)> = Vec::new();
    for line in rules.lines().map(str::trim) {
        if let Some(name) = line.strip_prefix("- alert: ") {
            out.push((name.to_owned(), String::new(), None));
        } else if let Some(expr) = line.strip_prefix("expr: ") {
            out.last_mut().expect("expr before alert").1 = expr.to_owned();
        } else if let Some(hold) = line.strip_prefix("for: ") {
            out.last_mut().expect("for before alert").2 = Some(hold.to_owned());
        }
    }
    assert!(out.iter().all(|(_, e, _)| !e.is_empty()), "{out:?}");
    out
}

/// `promtool test rules` on the test file with `rules` as hookgate-rules.yml.
fn promtool_test(rules: &str) -> Output {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("hookgate-rules.yml"), rules).unwrap();
    let tests = dir.path().join("hookgate-rules.test.yml");
    std::fs::copy(deploy("prometheus/hookgate-rules.test.yml"), &tests).unwrap();
    run(
        "promtool",
        &["test".as_ref(), "rules".as_ref(), tests.as_os_str()],
    )
}

#[test]
fn alert_rules_pass_promtool_and_each_alert_is_tested_both_ways() {
    let rules_path = deploy("prometheus/hookgate-rules.yml");
    let out = run(
        "promtool",
        &["check".as_ref(), "rules".as_ref(), rules_path.as_os_str()],
    );
    assert!(
        out.status.success(),
        "promtool check rules:\n{}",
        text(&out)
    );
    let rules = read(&rules_path);
    let out = promtool_test(&rules);
    assert!(out.status.success(), "promtool test rules:\n{}", text(&out));

    // The durable state the alerts must watch.
    use hookgate::telemetry as t;
    let alerts = alert_rules();
    let defined = defined_metrics();
    let watched: BTreeSet<String> = alerts
        .iter()
        .flat_map(|(_, e, _)| queried_metrics(e, &defined))
        .collect();
    for metric in [
        t::INBOX_OLDEST_AGE,
        t::INBOX_FAILED,
        t::OUTBOX_OLDEST_AGE,
        t::OUTBOX_FAILED,
        t::ENDPOINT_SECRET_USABLE,
        t::BACKGROUND_STAGE_UP,
        t::CONFIG_LAST_RELOAD_OK,
    ] {
        assert!(watched.contains(metric), "no alert watches {metric}");
    }

    // Every alert's tests fail when it never fires, when it always fires, and (with a `for`)
    // when it fires at once: the test file proves it fires on its series and not otherwise.
    let tests = read(&deploy("prometheus/hookgate-rules.test.yml"));
    for (name, expr, hold) in &alerts {
        assert!(
            tests.contains(&format!("alertname: {name}\n")),
            "{name} has no test"
        );
        let mut broken = vec![
            (
                "never fires",
                rules.replace(&format!("expr: {expr}\n"), "expr: vector(0) > 1\n"),
            ),
            (
                "always fires",
                rules.replace(&format!("expr: {expr}\n"), "expr: vector(1)\n"),
            ),
        ];
        if let Some(hold) = hold.as_deref().filter(|h| *h != "0m") {
            let from = format!("expr: {expr}\n        for: {hold}\n");
            assert!(rules.contains(&from), "{name}: layout of expr/for");
            broken.push((
                "fires without waiting its `for`",
                rules.replace(&from, &format!("expr: {expr}\n        for: 0m\n")),
            ));
        }
        for (how, mutated) in broken {
            assert_ne!(mutated, rules, "{name}: the mutation changed nothing");
            let out = promtool_test(&mutated);
            assert!(
                !out.status.success(),
                "{name} {how}, yet promtool test rules passed"
            );
        }
    }
}

#[test]
fn rules_and_dashboard_query_only_metrics_that_telemetry_defines() {
    let defined = defined_metrics();
    for (name, expr, _) in alert_rules() {
        let queried = queried_metrics(&expr, &defined);
        assert!(!queried.is_empty(), "{name} reads no hookgate metric");
        for m in &queried {
            assert!(
                defined.contains(m),
                "alert {name} reads {m}, not in telemetry.rs"
            );
        }
    }

    let path = deploy("grafana/hookgate-dashboard.json");
    let dashboard: serde_json::Value = serde_json::from_str(&read(&path))
        .unwrap_or_else(|e| panic!("{} is not JSON: {e}", path.display()));
    assert_eq!(dashboard["uid"], "hookgate");
    let panels = dashboard["panels"].as_array().expect("panels");
    let mut shown = BTreeSet::new();
    for panel in panels {
        for target in panel["targets"].as_array().into_iter().flatten() {
            let expr = target["expr"].as_str().expect("a target's expr");
            let queried = queried_metrics(expr, &defined);
            assert!(!queried.is_empty(), "{}: {expr}", panel["title"]);
            for m in &queried {
                assert!(
                    defined.contains(m),
                    "panel {} reads {m}, not in telemetry.rs",
                    panel["title"]
                );
            }
            shown.extend(queried);
        }
    }
    let missing: Vec<_> = defined.difference(&shown).collect();
    assert!(
        missing.is_empty(),
        "metrics of telemetry.rs on no panel of {}: {missing:?}",
        path.display()
    );
}

#[tokio::test]
async fn a_running_gateway_exports_every_series_the_alerts_watch() {
    let defined = defined_metrics();
    let files = TestGateway::builder()
        .endpoints(&endpoint_toml(
            "sw",
            "standard_webhooks",
            &["whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"],
            "",
        ))
        .write()
        .await;
    let p = files.serve(None);
    let admin = p.admin.expect("admin listener");
    let watched: BTreeSet<String> = alert_rules()
        .iter()
        .flat_map(|(_, e, _)| queried_metrics(e, &defined))
        .collect();
    // The secret gauges come from the refresher's first pass: wait for them, bounded.
    wait_until_blocking(
        "every watched series on /metrics",
        Duration::from_secs(20),
        || {
            let body = get(admin, "/metrics").body;
            watched.iter().all(|m| {
                body.lines().any(|l| {
                    l.strip_prefix(m.as_str())
                        .is_some_and(|rest| rest.starts_with(['{', ' ']))
                })
            })
        },
    );
    p.terminate();
}
