//! User-defined provider packs through the real binary: `[[provider_packs]]` tables and
//! `provider_packs_dir` files verifying requests signed here with the packs' recipes (HMAC
//! over a template, tokens in a header / query / body field, Bearer and Basic credentials),
//! gzip bodies (good, bomb, undeclared or unknown encodings), a verified batch without events,
//! body-digest identities, bad definitions refused by `config check` and `serve` naming the
//! key, `providers list --config`, and `providers test` on captured requests.

use std::io::Write;
use std::path::Path;
use std::process::{Command, Output};
use std::time::Duration;

use base64::Engine;
use hmac::{Hmac, Mac};
use hookgate_store::EventFilter;
use serde_json::Value;
use sha2::Sha256;

use crate::support::*;

const HMAC_SECRET: &str = "acme-current-secret";
const HMAC_PREVIOUS: &str = "acme-previous-secret";
const BEARER: &str = "bearer-token-7f3a9c";
const QUERY_TOKEN: &str = "query-token-51be0d";
const BODY_TOKEN: &str = "body-token-c4d2e8";
const BASIC: &str = "hooks:pa55-w0rd";
const LINE_SECRET: &str = "line-channel-secret";

/// The HMAC-over-a-template pack (gzip declared) and the generic token packs, as tables.
const TABLE_PACKS: &str = r#"
[[provider_packs]]
id = "acme"
display_name = "Acme Billing"
scheme = "hmac"
content_types = ["application/json"]
content_encoding = ["gzip"]
secret_format = "utf8"
signature = { headers = ["X-Acme-Signature"], format = { plain = { prefix = "sha256=" } }, algorithm = "hmac-sha256", encoding = "hex", signed = "{ts}.{body}" }
timestamp = { from = ["header:X-Acme-Timestamp"], format = "unix_seconds", tolerance_seconds = 300 }
event_id = { from = ["json:/id"], signed = true }
event_type = { from = ["json:/type"], signed = true }
object_id = ["json:/data/id"]

[[provider_packs]]
id = "bearer_hooks"
display_name = "Bearer token sender"
scheme = "shared_token"
content_types = ["application/json"]
secret_format = "utf8"
signature = { headers = ["Authorization"], token_form = "bearer", encoding = "text" }
event_id = { from = ["json:/id"], signed = false }
replay_defence = "body_digest"

[[provider_packs]]
id = "basic_hooks"
display_name = "Basic credentials sender"
scheme = "shared_token"
content_types = ["application/json"]
secret_format = "utf8"
signature = { headers = ["Authorization"], token_form = "basic", encoding = "text" }
event_id = { from = ["json:/id"], signed = false }
replay_defence = "body_digest"

[[provider_packs]]
id = "query_hooks"
display_name = "Token in the query"
scheme = "shared_token"
content_types = ["application/json"]
secret_format = "utf8"
signature = { query_param = "token", encoding = "text" }
event_id = { from = ["json:/id"], signed = false }
replay_defence = "body_digest"

[[provider_packs]]
id = "body_hooks"
display_name = "Token in the body"
scheme = "shared_token"
content_types = ["application/json", "application/x-www-form-urlencoded"]
secret_format = "utf8"
signature = { body_field = "json:/auth/token", encoding = "text" }
event_id = { from = ["json:/id"], signed = false }
replay_defence = "body_digest"

[[provider_packs]]
id = "form_hooks"
display_name = "Token in a form field"
scheme = "shared_token"
content_types = ["application/x-www-form-urlencoded"]
secret_format = "utf8"
signature = { body_field = "form:token", encoding = "text" }
event_id = { from = ["json:/id"], signed = false }
replay_defence = "body_digest"
"#;

/// LINE-like batches (HMAC-SHA256 of the body, base64) and a pack that names no event id.
const DIR_PACKS: &[(&str, &str)] = &[
    (
        "line_like.json",
        r#"{
  "id": "line_like",
  "display_name": "LINE-like batches",
  "scheme": "hmac",
  "content_types": ["application/json"],
  "secret_format": "utf8",
  "signature": {"headers": ["X-Line-Signature"], "format": {"plain": {}}, "algorithm": "hmac-sha256", "encoding": "base64", "signed": "{body}"},
  "event_id": {"from": ["json:/webhookEventId"], "signed": true},
  "event_type": {"from": ["json:/type"], "signed": true},
  "batch": {"items": "/events"}
}"#,
    ),
    (
        "no_id.json",
        r#"{
  "id": "no_id",
  "display_name": "No event id",
  "scheme": "hmac",
  "content_types": ["application/json"],
  "secret_format": "utf8",
  "signature": {"headers": ["X-Signature"], "format": {"plain": {}}, "algorithm": "hmac-sha256", "encoding": "hex", "signed": "{body}"},
  "event_id": {"signed": true}
}"#,
    ),
    ("notes.txt", "not a pack: only *.json files are read"),
];

fn endpoints() -> String {
    [
        endpoint_toml(
            "acme",
            "acme",
            &[HMAC_SECRET, HMAC_PREVIOUS],
            "max_body_bytes = 4096",
        ),
        endpoint_toml("bearer", "bearer_hooks", &[BEARER], ""),
        endpoint_toml("basic", "basic_hooks", &[BASIC], ""),
        endpoint_toml("query", "query_hooks", &[QUERY_TOKEN], ""),
        endpoint_toml("body", "body_hooks", &[BODY_TOKEN], ""),
        endpoint_toml("form", "form_hooks", &[BODY_TOKEN], ""),
        endpoint_toml("line", "line_like", &[LINE_SECRET], ""),
        endpoint_toml("noid", "no_id", &[HMAC_SECRET], ""),
    ]
    .join("\n")
}

/// One gateway's files: the table packs, the dir packs and an endpoint for each.
async fn files() -> GatewayFiles {
    let files = TestGateway::builder()
        .log_level("debug")
        .section(TABLE_PACKS)
        .endpoints(&endpoints())
        .write()
        .await;
    // A top-level key goes before the first table.
    let text = std::fs::read_to_string(&files.config_path).unwrap();
    std::fs::write(
        &files.config_path,
        format!("provider_packs_dir = \"packs\"\n{text}"),
    )
    .unwrap();
    let dir = files.dir.path().join("packs");
    std::fs::create_dir(&dir).unwrap();
    for (name, text) in DIR_PACKS {
        std::fs::write(dir.join(name), text).unwrap();
    }
    files
}

fn hmac_hex(secret: &str, parts: &[&[u8]]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    for p in parts {
        mac.update(p);
    }
    mac.finalize()
        .into_bytes()
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

fn hmac_b64(secret: &str, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(body);
    base64::engine::general_purpose::STANDARD.encode(mac.finalize().into_bytes())
}

fn h(k: &str, v: &str) -> (String, String) {
    (k.to_owned(), v.to_owned())
}

fn acme_headers(secret: &str, ts: i64, body: &[u8]) -> Vec<(String, String)> {
    let sig = hmac_hex(secret, &[format!("{ts}.").as_bytes(), body]);
    vec![
        h("Content-Type", "application/json"),
        h("X-Acme-Timestamp", &ts.to_string()),
        h("X-Acme-Signature", &format!("sha256={sig}")),
    ]
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    enc.write_all(bytes).unwrap();
    enc.finish().unwrap()
}

fn post(
    addr: std::net::SocketAddr,
    path: &str,
    headers: &[(String, String)],
    body: &[u8],
) -> RawResponse {
    send_raw(addr, &build_request("POST", path, headers, body))
}

#[tokio::test]
async fn user_packs_verify_real_requests_over_http_through_the_binary() {
    let files = files().await;
    let gw = files.serve(None);
    let addr = gw.addr();
    let now = unix_now();

    // HMAC over a template: the current secret, then the previous one during rotation.
    let body = br#"{"id":"inv_1","type":"invoice.paid","data":{"id":"cus_9"}}"#;
    let r = post(
        addr,
        "/webhooks/acme",
        &acme_headers(HMAC_SECRET, now, body),
        body,
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["status"], "accepted");
    let body2 = br#"{"id":"inv_2","type":"invoice.paid","data":{"id":"cus_9"}}"#;
    let r = post(
        addr,
        "/webhooks/acme",
        &acme_headers(HMAC_PREVIOUS, now, body2),
        body2,
    );
    assert_eq!(r.status, 200, "previous secret: {}", r.body);
    // Wrong secret, one byte changed, stale.
    let r = post(
        addr,
        "/webhooks/acme",
        &acme_headers("wrong", now, body),
        body,
    );
    assert_eq!(
        (r.status, r.json()["error"].clone()),
        (401, "invalid_signature".into())
    );
    let tampered = br#"{"id":"inv_1","type":"invoice.paie","data":{"id":"cus_9"}}"#;
    let r = post(
        addr,
        "/webhooks/acme",
        &acme_headers(HMAC_SECRET, now, body),
        tampered,
    );
    assert_eq!(r.status, 401);
    let r = post(
        addr,
        "/webhooks/acme",
        &acme_headers(HMAC_SECRET, now - 301, body),
        body,
    );
    assert_eq!(
        (r.status, r.json()["error"].clone()),
        (401, "stale_timestamp".into())
    );

    // gzip: the decoded bytes are what is signed and verified.
    let body3 = br#"{"id":"inv_3","type":"invoice.paid","data":{"id":"cus_9"}}"#;
    let mut headers = acme_headers(HMAC_SECRET, now, body3);
    headers.push(h("Content-Encoding", "gzip"));
    let r = post(addr, "/webhooks/acme", &headers, &gzip(body3));
    assert_eq!(r.status, 200, "gzip: {}", r.body);
    // A bomb: 1 MiB of zeros in ~1 KiB, over max_body_bytes (4096) once decoded.
    let bomb = vec![b'0'; 1024 * 1024];
    let compressed = gzip(&bomb);
    assert!(compressed.len() < 4096);
    let mut headers = acme_headers(HMAC_SECRET, now, &bomb);
    headers.push(h("Content-Encoding", "gzip"));
    let r = post(addr, "/webhooks/acme", &headers, &compressed);
    assert_eq!(r.status, 413, "bomb: {}", r.body);
    // An encoding the pack does not declare, and gzip where the pack declares none.
    let mut headers = acme_headers(HMAC_SECRET, now, body3);
    headers.push(h("Content-Encoding", "br"));
    assert_eq!(post(addr, "/webhooks/acme", &headers, body3).status, 415);
    let token_body = br#"{"id":"b_1"}"#;
    let r = post(
        addr,
        "/webhooks/bearer",
        &[
            h("Content-Type", "application/json"),
            h("Authorization", &format!("Bearer {BEARER}")),
            h("Content-Encoding", "gzip"),
        ],
        &gzip(token_body),
    );
    assert_eq!(r.status, 415, "gzip undeclared: {}", r.body);

    // Bearer: good (scheme name in any case), wrong token, wrong scheme, missing header.
    let json = h("Content-Type", "application/json");
    let bearer = |value: &str, body: &[u8]| {
        post(
            addr,
            "/webhooks/bearer",
            &[json.clone(), h("Authorization", value)],
            body,
        )
    };
    assert_eq!(bearer(&format!("Bearer {BEARER}"), token_body).status, 200);
    assert_eq!(
        bearer(&format!("bearer {BEARER}"), br#"{"id":"b_2"}"#).status,
        200
    );
    assert_eq!(
        bearer("Bearer bearer-token-7f3a9d", br#"{"id":"b_3"}"#).status,
        401
    );
    assert_eq!(
        bearer("Bearer bearer-token-7f3a9c0", br#"{"id":"b_3"}"#).status,
        401
    );
    assert_eq!(
        bearer(&format!("Token {BEARER}"), br#"{"id":"b_3"}"#).status,
        400
    );
    let r = post(
        addr,
        "/webhooks/bearer",
        std::slice::from_ref(&json),
        br#"{"id":"b_3"}"#,
    );
    assert_eq!(r.json()["reason"], "missing_signature", "{}", r.body);

    // Basic: user:password from the secret; a wrong password or user is refused.
    let basic = |cred: &str, body: &[u8]| {
        let value = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode(cred)
        );
        post(
            addr,
            "/webhooks/basic",
            &[json.clone(), h("Authorization", &value)],
            body,
        )
    };
    assert_eq!(basic(BASIC, br#"{"id":"c_1"}"#).status, 200);
    assert_eq!(basic("hooks:pa55-w0rD", br#"{"id":"c_2"}"#).status, 401);
    assert_eq!(basic("hookz:pa55-w0rd", br#"{"id":"c_2"}"#).status, 401);
    assert_eq!(basic("hooks", br#"{"id":"c_2"}"#).status, 400, "no colon");

    // Query token: good, wrong, repeated.
    let query = |q: &str, body: &[u8]| {
        post(
            addr,
            &format!("/webhooks/query?{q}"),
            std::slice::from_ref(&json),
            body,
        )
    };
    assert_eq!(
        query(&format!("token={QUERY_TOKEN}"), br#"{"id":"q_1"}"#).status,
        200
    );
    assert_eq!(
        query("token=query-token-51be0e", br#"{"id":"q_2"}"#).status,
        401
    );
    let r = query(&format!("token={QUERY_TOKEN}&token=x"), br#"{"id":"q_2"}"#);
    assert_eq!(r.json()["reason"], "duplicated_signature", "{}", r.body);

    // Body field: a JSON pointer, and a form field.
    let body_ok = format!(r#"{{"id":"j_1","auth":{{"token":"{BODY_TOKEN}"}}}}"#);
    assert_eq!(
        post(
            addr,
            "/webhooks/body",
            std::slice::from_ref(&json),
            body_ok.as_bytes()
        )
        .status,
        200
    );
    let body_bad = br#"{"id":"j_2","auth":{"token":"body-token-c4d2e9"}}"#;
    assert_eq!(
        post(
            addr,
            "/webhooks/body",
            std::slice::from_ref(&json),
            body_bad
        )
        .status,
        401
    );
    let r = post(
        addr,
        "/webhooks/body",
        std::slice::from_ref(&json),
        br#"{"id":"j_2"}"#,
    );
    assert_eq!(r.json()["reason"], "missing_signature", "{}", r.body);
    let form = h("Content-Type", "application/x-www-form-urlencoded");
    let form_ok = format!("id=f_1&token={BODY_TOKEN}");
    assert_eq!(
        post(
            addr,
            "/webhooks/form",
            std::slice::from_ref(&form),
            form_ok.as_bytes()
        )
        .status,
        200
    );
    assert_eq!(
        post(addr, "/webhooks/form", &[form], b"id=f_2&token=nope").status,
        401
    );

    // A verified batch without events: accepted, nothing stored.
    let empty = br#"{"destination":"U123","events":[]}"#;
    let line = |body: &[u8]| {
        post(
            addr,
            "/webhooks/line",
            &[
                json.clone(),
                h("X-Line-Signature", &hmac_b64(LINE_SECRET, body)),
            ],
            body,
        )
    };
    let r = line(empty);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(
        r.json(),
        serde_json::json!({"status":"accepted","events":[]})
    );
    let two = br#"{"events":[{"webhookEventId":"01A","type":"message"},{"webhookEventId":"01B","type":"follow"}]}"#;
    let r = line(two);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["events"].as_array().unwrap().len(), 2);

    // No event id named: the body digest identifies it, so a redelivery is a duplicate.
    let noid = br#"{"what":"no id here"}"#;
    let noid_headers = [
        json.clone(),
        h("X-Signature", &hmac_hex(HMAC_SECRET, &[noid])),
    ];
    let r = post(addr, "/webhooks/noid", &noid_headers, noid);
    assert_eq!(
        (r.status, r.json()["status"].clone()),
        (200, "accepted".into()),
        "{}",
        r.body
    );
    let r = post(addr, "/webhooks/noid", &noid_headers, noid);
    assert_eq!(r.json()["status"], "duplicate", "{}", r.body);

    let logs = gw.terminate();
    for secret in [
        HMAC_SECRET,
        HMAC_PREVIOUS,
        BEARER,
        QUERY_TOKEN,
        BODY_TOKEN,
        BASIC,
        LINE_SECRET,
    ] {
        assert!(!logs.contains(secret), "a secret reached the logs:\n{logs}");
    }
    let store = files.open_store().await;
    let rows = store.list_events(&EventFilter::default()).await.unwrap();
    let by_endpoint = |e: &str| rows.iter().filter(|r| r.endpoint_id == e).count();
    assert_eq!(by_endpoint("acme"), 3);
    assert_eq!(by_endpoint("bearer"), 2);
    assert_eq!(by_endpoint("basic"), 1);
    assert_eq!(by_endpoint("query"), 1);
    assert_eq!((by_endpoint("body"), by_endpoint("form")), (1, 1));
    assert_eq!(by_endpoint("line"), 2, "the empty batch stored nothing");
    let noid_rows: Vec<_> = rows.iter().filter(|r| r.endpoint_id == "noid").collect();
    assert_eq!(noid_rows.len(), 1);
    let digest: String = {
        use sha2::Digest;
        Sha256::digest(noid)
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    };
    assert_eq!(noid_rows[0].provider_event_id, format!("sha256:{digest}"));
}

fn hookgate(args: &[&str]) -> Output {
    Command::new(binary())
        .args(args)
        .output()
        .expect("run hookgate")
}

fn text(out: &Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test]
async fn providers_list_and_show_include_the_configs_user_packs() {
    let files = files().await;
    let config = files.config_path.to_str().unwrap();
    let out = hookgate(&["providers", "list", "--json", "--config", config]);
    assert!(out.status.success(), "{:?}", text(&out));
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    let list = list.as_array().unwrap();
    let acme = list
        .iter()
        .find(|p| p["id"] == "acme")
        .expect("acme listed");
    assert_eq!(acme["origin"], "user");
    assert_eq!(acme["display_name"], "Acme Billing");
    assert_eq!(acme["scheme"], "hmac");
    assert_eq!(acme["evidence"], "experimental");
    assert_eq!(acme["vectors"], 0);
    assert_eq!(acme["content_encodings"], serde_json::json!(["gzip"]));
    assert!(acme["sources"].is_array());
    assert!(
        list.iter()
            .any(|p| p["id"] == "line_like" && p["origin"] == "user")
    );
    assert!(
        list.iter()
            .any(|p| p["id"] == "stripe" && p["origin"] == "builtin")
    );
    let (table, _) = text(&hookgate(&["providers", "list", "--config", config]));
    let row = table
        .lines()
        .find(|l| l.starts_with("query_hooks"))
        .expect("row");
    assert!(
        row.contains("user") && row.contains("experimental"),
        "{row}"
    );
    let (show, _) = text(&hookgate(&[
        "providers",
        "show",
        "basic_hooks",
        "--config",
        config,
    ]));
    assert!(show.contains("user pack"), "{show}");
    assert!(show.contains("Basic base64(user:password)"), "{show}");
    let out = hookgate(&["config", "check", "--config", config]);
    assert!(out.status.success(), "{:?}", text(&out));
    assert!(
        text(&out)
            .0
            .contains("# user provider pack \"line_like\" (LINE-like batches, scheme hmac)"),
        "{:?}",
        text(&out)
    );
    let (show, _) = text(&hookgate(&[
        "providers",
        "show",
        "acme",
        "--config",
        config,
    ]));
    assert!(show.contains("Content encodings:"), "{show}");
    // Without --config only the built-in packs are known.
    let out = hookgate(&["providers", "show", "acme"]);
    assert_eq!(out.status.code(), Some(2));
}

/// A config whose only extra is `extra` (pack definitions), for the refusal cases.
fn refused(dir: &Path, extra: &str, files: &[(&str, &str)]) -> (String, String) {
    let packs = dir.join("packs");
    let _ = std::fs::remove_dir_all(&packs);
    std::fs::create_dir(&packs).unwrap();
    for (name, text) in files {
        std::fs::write(packs.join(name), text).unwrap();
    }
    let config = dir.join("bad.toml");
    std::fs::write(
        &config,
        // `extra` first: its top-level keys must precede every table.
        format!(
            "{extra}\n[server]\nlisten = \"127.0.0.1:0\"\n[store]\nurl = \"sqlite://{}\"\n\
             [payload_encryption]\nactive = 1\nkeys = [{{ version = 1, key = \"{PAYLOAD_KEY}\" }}]\n",
            dir.join("db.sqlite").display()
        ),
    )
    .unwrap();
    let config = config.to_str().unwrap();
    let check = hookgate(&["config", "check", "--config", config]);
    assert!(!check.status.success(), "config check accepted: {extra}");
    let serve = hookgate(&["serve", "--config", config]);
    assert!(!serve.status.success(), "serve started: {extra}");
    (text(&check).1, text(&serve).1)
}

const GOOD_SIG: &str = r#"signature = { headers = ["X-Sig"], format = { plain = {} }, algorithm = "hmac-sha256", encoding = "hex", signed = "{body}" }"#;

fn table(id: &str, signature: &str, more: &str) -> String {
    format!(
        "[[provider_packs]]\nid = {}\ndisplay_name = \"X\"\nscheme = \"hmac\"\n\
         content_types = [\"application/json\"]\nsecret_format = \"utf8\"\n{signature}\n\
         event_id = {{ from = [\"json:/id\"], signed = true }}\n{more}\n",
        q(id)
    )
}

fn dir_pack(id: &str, encoding: &str) -> String {
    format!(
        r#"{{"id":"{id}","display_name":"D","scheme":"hmac","content_types":["application/json"],"secret_format":"utf8","signature":{{"headers":["X-Sig"],"format":{{"plain":{{}}}},"algorithm":"hmac-sha256","encoding":"{encoding}","signed":"{{body}}"}},"event_id":{{"from":["json:/id"],"signed":true}}}}"#
    )
}

#[test]
fn bad_pack_definitions_are_refused_at_start_up_naming_the_key() {
    let dir = tempfile::tempdir().unwrap();
    let dir = dir.path();
    let hexx = GOOD_SIG.replace("\"hex\"", "\"hexx\"");
    // (config text, dir files, the key named, the problem)
    type Case<'a> = (String, Vec<(&'a str, String)>, &'a str, &'a str);
    let cases: Vec<Case> = vec![
        (
            format!("{}{}", table("ok", GOOD_SIG, ""), table("two", &hexx, "")),
            vec![],
            "provider_packs[1].signature.encoding",
            "unknown encoding \"hexx\"",
        ),
        (
            table("stripe", GOOD_SIG, ""),
            vec![],
            "provider_packs[0].id",
            "built-in provider",
        ),
        (
            table("typo", &GOOD_SIG.replace("encoding =", "encodng ="), ""),
            vec![],
            "provider_packs[0].signature.encodng",
            "unknown field `encodng`",
        ),
        (
            table("br", GOOD_SIG, "content_encoding = [\"br\"]"),
            vec![],
            "provider_packs[0].content_encoding[0]",
            "unknown content encoding \"br\"",
        ),
        (
            table("twice", GOOD_SIG, "").replace(
                "scheme = \"hmac\"",
                "scheme = \"shared_token\"",
            )
            .replace(GOOD_SIG, r#"signature = { headers = ["X-Token"], query_param = "t", encoding = "text" }"#)
            .replace("signed = true", "signed = false"),
            vec![],
            "provider_packs[0].signature.headers",
            "exactly one place",
        ),
        (
            table("form", GOOD_SIG, "").replace(
                "scheme = \"hmac\"",
                "scheme = \"shared_token\"",
            )
            .replace(GOOD_SIG, r#"signature = { headers = ["Authorization"], token_form = "digest", encoding = "text" }"#)
            .replace("signed = true", "signed = false"),
            vec![],
            "provider_packs[0].signature.token_form",
            "unknown token form \"digest\"",
        ),
        (
            "provider_packs_dir = \"packs\"".to_owned(),
            vec![("broken.json", "{ not json".to_owned())],
            "provider_packs_dir[broken.json]",
            "not JSON",
        ),
        (
            "provider_packs_dir = \"packs\"".to_owned(),
            vec![("acme.json", dir_pack("acme", "hexx"))],
            "provider_packs_dir[acme.json].signature.encoding",
            "unknown encoding \"hexx\"",
        ),
        (
            format!("provider_packs_dir = \"packs\"\n{}", table("same", GOOD_SIG, "")),
            vec![("same.json", dir_pack("same", "hex"))],
            "provider_packs_dir[same.json].id",
            "duplicate provider pack id \"same\"",
        ),
        (
            "provider_packs_dir = \"missing\"".to_owned(),
            vec![],
            "provider_packs_dir",
            "cannot read",
        ),
        (
            format!(
                "{}{}",
                table("mine", GOOD_SIG, ""),
                endpoint_toml("e", "minee", &["s"], "")
            ),
            vec![],
            "endpoints[0].provider",
            "unknown provider \"minee\"",
        ),
    ];
    for (extra, dir_files, key, problem) in cases {
        let files: Vec<(&str, &str)> = dir_files.iter().map(|(n, t)| (*n, t.as_str())).collect();
        let (check, serve) = refused(dir, &extra, &files);
        for (what, stderr) in [("config check", &check), ("serve", &serve)] {
            assert!(
                stderr.contains(&format!("`{key}`")) && stderr.contains(problem),
                "{what} should name `{key}` ({problem}):\n{stderr}"
            );
        }
    }
}

/// `hookgate providers test` on one capture; (exit code, stdout).
fn providers_test(config: &Path, endpoint: &str, capture: &[u8], extra: &[&str]) -> (i32, String) {
    let file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(file.path(), capture).unwrap();
    let mut args = vec![
        "providers",
        "test",
        "--config",
        config.to_str().unwrap(),
        "--endpoint",
        endpoint,
        "--request",
        file.path().to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    let out = hookgate(&args);
    let (stdout, stderr) = text(&out);
    assert!(stderr.is_empty(), "stderr: {stderr}");
    (out.status.code().expect("exit code"), stdout)
}

/// The line of one step in the text output.
fn step<'a>(out: &'a str, name: &str) -> &'a str {
    out.lines()
        .find(|l| l.split_whitespace().next() == Some(name))
        .unwrap_or_else(|| panic!("no {name} step:\n{out}"))
}

#[tokio::test]
async fn providers_test_reports_each_step_of_captured_requests_without_secrets() {
    let files = TestGateway::builder()
        .section(TABLE_PACKS)
        .endpoints(&format!(
            "{}\n{}",
            endpoint_toml("acme", "acme", &[HMAC_SECRET, HMAC_PREVIOUS], ""),
            endpoint_toml("stripe", "stripe", &["whsec_test_secret_for_capture"], "")
        ))
        .write()
        .await;
    let config = files.config_path.as_path();
    let now = unix_now();
    // A body marker that must never be printed.
    let body =
        br#"{"id":"inv_77","type":"invoice.paid","data":{"id":"cus_9"},"note":"marker_q8z"}"#;
    let capture = |headers: &[(String, String)], body: &[u8]| {
        build_request("POST", "/webhooks/acme", headers, body)
    };
    let good = acme_headers(HMAC_SECRET, now, body);
    let signature = good[2].1.trim_start_matches("sha256=").to_owned();
    let mut outputs = Vec::new();

    // Verifies (CRLF as received); JSON for machines.
    let (code, out) = providers_test(config, "acme", &capture(&good, body), &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("result: verified"), "{out}");
    assert!(
        step(&out, "signature").contains("secret version \"v2\" matched"),
        "{out}"
    );
    assert!(
        step(&out, "extract").contains("1 event(s): id inv_77, type invoice.paid, object cus_9"),
        "{out}"
    );
    assert!(
        step(&out, "timestamp").contains("tolerance 300 s past"),
        "{out}"
    );
    assert!(
        step(&out, "signature_metadata").contains("x-acme-signature"),
        "{out}"
    );
    outputs.push(out);
    let (code, out) = providers_test(config, "acme", &capture(&good, body), &["--json"]);
    assert_eq!(code, 0);
    let doc: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(doc["verified"], true);
    assert_eq!(doc["provider"], "acme");
    assert_eq!(doc["user_pack"], true);
    let names: Vec<&str> = doc["steps"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["step"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "method",
            "content_type",
            "content_encoding",
            "signature_metadata",
            "signature",
            "timestamp",
            "extract"
        ]
    );
    outputs.push(out);

    // LF line endings and a gzip body.
    let mut gz_headers = acme_headers(HMAC_PREVIOUS, now, body);
    gz_headers.push(h("Content-Encoding", "gzip"));
    let crlf = capture(&gz_headers, &gzip(body));
    let split = crlf.windows(4).position(|w| w == b"\r\n\r\n").unwrap();
    let mut lf = String::from_utf8(crlf[..split].to_vec())
        .unwrap()
        .replace("\r\n", "\n")
        .into_bytes();
    lf.extend_from_slice(b"\n\n");
    lf.extend_from_slice(&crlf[split + 4..]);
    let (code, out) = providers_test(config, "acme", &lf, &[]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("secrets: v2 no_match, v1 matched"), "{out}");
    assert!(step(&out, "content_encoding").contains("gzip"), "{out}");
    outputs.push(out);

    // Fails at each step, exit code 1.
    let mut wrong_type = good.clone();
    wrong_type[0] = h("Content-Type", "text/plain");
    let mut missing = good.clone();
    missing.remove(2);
    let mut malformed = good.clone();
    malformed[2] = h("X-Acme-Signature", "sha256=zz");
    let stale = acme_headers(HMAC_SECRET, now - 3600, body);
    // (headers, the failing step, its verdict)
    type Case<'a> = (Vec<(String, String)>, &'a str, &'a str);
    let cases: Vec<Case> = vec![
        (wrong_type, "content_type", "FAIL unsupported_media_type"),
        (missing, "signature_metadata", "FAIL missing_signature"),
        (malformed, "signature_metadata", "FAIL malformed_signature"),
        (
            acme_headers("not-the-secret", now, body),
            "signature",
            "FAIL invalid_signature",
        ),
        (stale.clone(), "timestamp", "FAIL stale_timestamp"),
    ];
    for (headers, failing, verdict) in cases {
        let (code, out) = providers_test(config, "acme", &capture(&headers, body), &[]);
        assert_eq!(code, 1, "{out}");
        assert!(step(&out, failing).contains(verdict), "{failing}: {out}");
        assert!(out.contains("result: not verified"), "{out}");
        outputs.push(out);
    }
    let (_, out) = providers_test(
        config,
        "acme",
        &capture(&acme_headers("x", now, body), body),
        &[],
    );
    assert!(out.contains("secrets: v2 no_match, v1 no_match"), "{out}");
    // The stale capture verifies when judged at the time it was captured.
    let at = (now - 3600).to_string();
    let (code, out) = providers_test(config, "acme", &capture(&stale, body), &["--now", &at]);
    assert_eq!(code, 0, "{out}");
    assert!(step(&out, "timestamp").contains("signed 0 s ago"), "{out}");

    // Missing id (a built-in pack whose ids have no fallback).
    let no_id = br#"{"type":"invoice.paid","data":{"object":{}}}"#;
    let headers = signed_headers("stripe", "whsec_test_secret_for_capture", "", now, no_id);
    let (code, out) = providers_test(
        config,
        "stripe",
        &build_request("POST", "/webhooks/stripe", &headers, no_id),
        &[],
    );
    assert_eq!(code, 1, "{out}");
    assert!(
        step(&out, "extract").contains("FAIL missing_event_id"),
        "{out}"
    );
    outputs.push(out);

    for out in &outputs {
        for secret in [
            HMAC_SECRET,
            HMAC_PREVIOUS,
            "whsec_test_secret_for_capture",
            signature.as_str(),
            "marker_q8z",
        ] {
            assert!(!out.contains(secret), "{secret:?} printed:\n{out}");
        }
    }
}

#[tokio::test]
async fn user_packs_are_validated_again_on_reload() {
    let bearer_pack = |id: &str| {
        TABLE_PACKS
            .split("[[provider_packs]]")
            .find(|t| t.contains("id = \"bearer_hooks\""))
            .map(|t| format!("[[provider_packs]]{}", t.replace("bearer_hooks", id)))
            .unwrap()
    };
    let files = TestGateway::builder()
        .section(&bearer_pack("first"))
        .endpoints(&endpoint_toml("one", "first", &[BEARER], ""))
        .write()
        .await;
    let original = std::fs::read_to_string(&files.config_path).unwrap();
    let p = files.serve(None);
    let addr = p.addr();
    let send = |endpoint: &'static str, id: &'static str| {
        let body = format!(r#"{{"id":"{id}"}}"#);
        tokio::task::spawn_blocking(move || {
            post(
                addr,
                &format!("/webhooks/{endpoint}"),
                &[
                    h("Content-Type", "application/json"),
                    h("Authorization", &format!("Bearer {BEARER}")),
                ],
                body.as_bytes(),
            )
            .status
        })
    };
    assert_eq!(send("one", "r_1").await.unwrap(), 200);
    assert_eq!(send("two", "r_2").await.unwrap(), 404);

    // A second user pack and an endpoint on it appear on SIGHUP.
    let grown = format!(
        "{original}\n{}\n{}",
        bearer_pack("second"),
        endpoint_toml("two", "second", &[BEARER], "")
    );
    std::fs::write(&files.config_path, &grown).unwrap();
    p.signal("-HUP");
    wait_until(
        "the reloaded user pack",
        Duration::from_secs(10),
        || async { send("two", "r_3").await.unwrap() == 200 },
    )
    .await;

    // A bad pack on reload is refused naming the key; the running configuration stays.
    let broken = grown.replace("token_form = \"bearer\"", "token_form = \"digest\"");
    std::fs::write(&files.config_path, broken).unwrap();
    p.signal("-HUP");
    p.wait_for_log("reload failed");
    p.wait_for_log("provider_packs[0].signature.token_form");
    assert_eq!(send("one", "r_4").await.unwrap(), 200);
    assert_eq!(send("two", "r_5").await.unwrap(), 200);
}
