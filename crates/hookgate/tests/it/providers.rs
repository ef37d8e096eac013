//! `hookgate providers list|show|docs` against the real binary: the listing covers every
//! built-in pack with the facts scripts rely on, and docs/providers.md is what the packs say.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use serde_json::Value;

use crate::support::*;

fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn providers(args: &[&str]) -> Output {
    Command::new(binary())
        .arg("providers")
        .args(args)
        .output()
        .expect("run hookgate providers")
}

fn stdout(out: &Output) -> String {
    assert!(
        out.status.success(),
        "status {:?}, stderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout.clone()).expect("UTF-8 output")
}

/// How many vectors `testdata/vectors/<id>.json` holds.
/// The vectors of `id` in its files (`<id>.json` and `<id>.generated.json`).
fn vector_count(id: &str) -> usize {
    hookgate_testkit::vectors::load(id).len()
}

#[test]
fn list_json_is_only_an_array_of_every_pack_with_its_vector_count() {
    let out = providers(&["list", "--json"]);
    let text = stdout(&out);
    // Only JSON on stdout: the whole output parses as one array.
    let list: Value = serde_json::from_str(&text).expect("stdout is one JSON document");
    let list = list.as_array().expect("a JSON array");
    let built_in = hookgate_providers::pack::builtin_packs().len();
    assert!(built_in >= 24);
    assert_eq!(list.len(), built_in);
    let mut ids = Vec::new();
    for pack in list {
        let id = pack["id"].as_str().expect("id");
        for field in ["display_name", "scheme"] {
            assert!(
                pack[field].as_str().is_some_and(|s| !s.is_empty()),
                "{id}: {field}"
            );
        }
        assert!(
            ["docs", "sdk", "experimental"].contains(&pack["evidence"].as_str().unwrap()),
            "{id}: evidence {}",
            pack["evidence"]
        );
        let sources = pack["sources"].as_array().expect("sources");
        assert!(!sources.is_empty(), "{id}: sources");
        assert!(
            sources
                .iter()
                .all(|s| s.as_str().is_some_and(|s| s.starts_with("https://"))),
            "{id}: sources are URLs"
        );
        let vectors = pack["vectors"].as_u64().expect("vectors is an integer");
        assert_eq!(vectors as usize, vector_count(id), "{id}: vectors");
        assert!(pack["id_signed"].is_boolean(), "{id}: id_signed");
        assert!(
            pack["timestamp_signed"].is_boolean(),
            "{id}: timestamp_signed"
        );
        assert!(
            ["yes", "no", "unknown"].contains(&pack["retries_keep_id"].as_str().unwrap()),
            "{id}: retries_keep_id"
        );
        ids.push(id.to_owned());
    }
    let mut sorted = ids.clone();
    sorted.sort();
    sorted.dedup();
    assert_eq!(sorted.len(), built_in, "ids are unique: {ids:?}");
    assert_eq!(sorted, ids, "listed by id");
    let stripe = list.iter().find(|p| p["id"] == "stripe").unwrap();
    assert_eq!(
        stripe["citations"]["signature"],
        "sdk:pypi/stripe@16.1.0:stripe/_webhook.py"
    );
    let github = list.iter().find(|p| p["id"] == "github").unwrap();
    assert_eq!(github["replay_defence"], "body_digest");
    assert_eq!(
        github["unauthenticated_headers"],
        serde_json::json!(["x-github-delivery", "x-github-event"])
    );
    let stripe = list.iter().find(|p| p["id"] == "stripe").unwrap();
    assert_eq!(stripe["tolerance_seconds"], 300);
    assert_eq!(stripe["max_future_seconds"], 300);
    let paypal = list.iter().find(|p| p["id"] == "paypal").unwrap();
    assert_eq!(paypal["options"][0]["name"], "webhook_id");
    assert_eq!(paypal["options"][0]["required"], true);
    assert!(out.stderr.is_empty(), "nothing on stderr");
}

#[test]
fn list_prints_an_aligned_table_of_every_pack() {
    let text = stdout(&providers(&["list"]));
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(
        lines.len(),
        1 + hookgate_providers::pack::builtin_packs().len(),
        "a header and one row per pack:\n{text}"
    );
    assert!(lines[0].starts_with("ID"), "{}", lines[0]);
    // Aligned: every column starts at the same offset as its header.
    let name_col = lines[0].find("NAME").unwrap();
    let vectors_col = lines[0].find("VECTORS").unwrap();
    let json: Value = serde_json::from_str(&stdout(&providers(&["list", "--json"]))).unwrap();
    for pack in json.as_array().unwrap() {
        let id = pack["id"].as_str().unwrap();
        let row = lines
            .iter()
            .find(|l| l.split_whitespace().next() == Some(id))
            .unwrap_or_else(|| panic!("{id} is listed:\n{text}"));
        assert_eq!(
            &row[name_col..name_col + pack["display_name"].as_str().unwrap().len()],
            pack["display_name"].as_str().unwrap(),
            "{row}"
        );
        assert_eq!(
            row[vectors_col..].trim(),
            pack["vectors"].to_string(),
            "{row}"
        );
        for field in ["scheme", "evidence"] {
            assert!(
                row.split_whitespace()
                    .any(|w| w == pack[field].as_str().unwrap()),
                "{row}: {field}"
            );
        }
    }
}

#[test]
fn show_stripe_states_what_it_verifies() {
    let text = stdout(&providers(&["show", "stripe"]));
    for fact in [
        "Stripe (stripe)",
        "stripe-signature",
        "`v1`",
        "`{ts}.{body}`",
        "HMAC-SHA256, hex",
        "verbatim",
        "default tolerance 300 s in the past, 300 s ahead",
        "body /id; signed: yes; retries and redeliveries keep it: yes",
        "Evidence:",
        "https://docs.stripe.com/webhooks#verify-events",
        "Known-answer vectors: 16",
        "provider = \"stripe\"",
    ] {
        assert!(text.contains(fact), "missing {fact:?} in:\n{text}");
    }
    let github = stdout(&providers(&["show", "github"]));
    for fact in [
        "header x-github-delivery, header x-github-event",
        "signed: no",
        "`body_digest`",
        "nothing time-based is signed",
    ] {
        assert!(github.contains(fact), "missing {fact:?} in:\n{github}");
    }
    let paypal = stdout(&providers(&["show", "paypal"]));
    assert!(paypal.contains("`webhook_id` (text, required)"), "{paypal}");
    assert!(paypal.contains("options = { webhook_id = "), "{paypal}");
    let twilio = stdout(&providers(&["show", "twilio"]));
    assert!(twilio.contains("public_url = \"https://"), "{twilio}");
}

#[test]
fn show_of_an_unknown_id_exits_2_listing_the_known_ones() {
    let out = providers(&["show", "strpe"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("unknown provider \"strpe\""), "{stderr}");
    for id in ["stripe", "github", "standard_webhooks", "twilio", "zoom"] {
        assert!(stderr.contains(id), "{id} in {stderr}");
    }
}

/// `providers docs --dir` writes the table and one page per pack; the repository's docs/ holds
/// exactly those (a page per provider, none left over), byte for byte.
#[test]
fn docs_provider_pages_are_generated_from_the_packs() {
    let out = tempfile::tempdir().unwrap();
    let written = providers(&["docs", "--dir", out.path().to_str().unwrap()]);
    assert!(written.status.success(), "{written:?}");
    assert_eq!(
        std::fs::read_to_string(out.path().join("providers.md")).unwrap(),
        stdout(&providers(&["docs"]))
    );
    let pages = |dir: &Path| -> Vec<(String, String)> {
        let mut pages: Vec<(String, String)> = std::fs::read_dir(dir)
            .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
            .map(|e| {
                let path = e.unwrap().path();
                let name = path.file_name().unwrap().to_str().unwrap().to_owned();
                (name, std::fs::read_to_string(&path).unwrap())
            })
            .collect();
        pages.sort();
        pages
    };
    let generated = pages(&out.path().join("providers"));
    let on_disk = pages(&repo_root().join("docs/providers"));
    let names = |p: &[(String, String)]| p.iter().map(|(n, _)| n.clone()).collect::<Vec<_>>();
    assert_eq!(
        names(&on_disk),
        names(&generated),
        "docs/providers/ holds one page per pack: regenerate with \
         `cargo run -p hookgate -- providers docs --dir docs`"
    );
    for ((name, want), (_, got)) in generated.iter().zip(&on_disk) {
        assert!(
            want == got,
            "docs/providers/{name} is stale: regenerate with \
             `cargo run -p hookgate -- providers docs --dir docs`"
        );
    }
    let json: Value = serde_json::from_str(&stdout(&providers(&["list", "--json"]))).unwrap();
    assert_eq!(generated.len(), json.as_array().unwrap().len());
    let stripe = &generated.iter().find(|(n, _)| n == "stripe.md").unwrap().1;
    for fact in [
        "| Secret format | `utf8`",
        "| Timestamp and tolerance | signature item t (unix seconds), signed; tolerance 300 s in the past, 300 s ahead | `sdk:pypi/stripe@16.1.0:stripe/_webhook.py` |",
        "retries and manual redeliveries keep it: yes",
        "| Retry horizon | 259200 s (3 days) | <https://docs.stripe.com/webhooks/process-undelivered-events> |",
        "| Handshake | none | — |",
    ] {
        assert!(stripe.contains(fact), "missing {fact:?} in:\n{stripe}");
    }
    // every page a table link points at exists
    let table = stdout(&providers(&["docs"]));
    for (name, _) in &generated {
        assert!(table.contains(&format!("(providers/{name})")), "{name}");
    }
}

#[test]
fn docs_providers_md_is_generated_from_the_packs() {
    let generated = stdout(&providers(&["docs"]));
    let path = repo_root().join("docs/providers.md");
    let on_disk = std::fs::read_to_string(&path).expect("docs/providers.md");
    assert!(
        generated == on_disk,
        "docs/providers.md is stale: regenerate it with \
         `cargo run -p hookgate -- providers docs > docs/providers.md`"
    );
    assert!(generated.contains("hookgate providers docs > docs/providers.md"));
    for pack in serde_json::from_str::<Value>(&stdout(&providers(&["list", "--json"])))
        .unwrap()
        .as_array()
        .unwrap()
    {
        let id = pack["id"].as_str().unwrap();
        assert!(
            generated.contains(&format!("provider = \"{id}\"")),
            "{id} configuration"
        );
    }
    // The general prose is part of the generated page.
    for prose in [
        "## Replays of unsigned ids",
        r#"{"status":"duplicate","id":"<the first row>"}"#,
        "## Adding a provider",
    ] {
        assert!(generated.contains(prose), "{prose}");
    }
}
