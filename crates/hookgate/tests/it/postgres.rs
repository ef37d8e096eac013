//! The real binary on PostgreSQL (issue 3's proofs): several `hookgate serve` processes on one
//! database, a storm of copies of one event, a mixed run with duplicates, a database outage
//! with recovery and no gateway restart, and a crash after commit before the response.
//!
//! Each test has a database of its own (`hookgate_testkit::postgres()`: `DATABASE_URL` or a
//! throwaway cluster shared by this test process); the outage test stops and starts a
//! cluster of its own (`throwaway_cluster()`). The gateways use the real clock, so requests
//! are signed with the current time.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Barrier, Mutex};
use std::time::{Duration, Instant};

use hookgate_store::postgres::{PostgresOptions, PostgresStore};
use hookgate_store::{InboxStore, InspectStore};

use crate::support::*;

const SW_SECRET: &str = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw";
const STRIPE_SECRET: &str = "whsec_test_postgres_proof_secret";

/// The providers' give-up time: every answer must arrive well before it.
const PROVIDER_TIMEOUT: Duration = Duration::from_secs(2);

fn endpoints() -> String {
    [
        endpoint_toml("sw", "standard_webhooks", &[SW_SECRET], ""),
        endpoint_toml("stripe", "stripe", &[STRIPE_SECRET], ""),
    ]
    .concat()
}

/// The endpoint each provider is configured on.
fn endpoint_of(provider: &str) -> &'static str {
    match provider {
        "standard_webhooks" => "sw",
        "stripe" => "stripe",
        other => panic!("no endpoint for {other}"),
    }
}

/// One delivery attempt of event `id`, signed at `timestamp` as the provider would: Standard
/// Webhooks carries the id in `webhook-id`, Stripe in the body's `id`. A retry keeps the id
/// and gets a fresh timestamp and signature.
fn delivery(provider: &str, id: &str, timestamp: i64) -> Vec<u8> {
    let (secret, body) = match provider {
        "standard_webhooks" => (
            SW_SECRET,
            r#"{"type":"invoice.paid","data":{"id":"inv_1"}}"#.to_owned(),
        ),
        "stripe" => (
            STRIPE_SECRET,
            format!(r#"{{"id":"{id}","type":"invoice.paid","data":{{"object":{{"id":"in_1"}}}}}}"#),
        ),
        other => panic!("no delivery for {other}"),
    };
    let headers = signed_headers(provider, secret, id, timestamp, body.as_bytes());
    build_request(
        "POST",
        &format!("/webhooks/{}", endpoint_of(provider)),
        &headers,
        body.as_bytes(),
    )
}

/// Several gateways on one store URL, started at once (so their migrations race too).
struct Fleet {
    procs: Vec<BinaryGateway>,
    _files: Vec<GatewayFiles>,
}

impl Fleet {
    async fn start(store_url: &str, n: usize) -> Fleet {
        let mut files = Vec::new();
        for _ in 0..n {
            files.push(gateway(store_url).write().await);
        }
        let mut procs: Vec<BinaryGateway> = files
            .iter()
            .map(|f| BinaryGateway::launch(BinaryRole::Serve, &f.config_path, None))
            .collect();
        for p in &mut procs {
            p.wait_listening();
        }
        Fleet {
            procs,
            _files: files,
        }
    }

    fn addrs(&self) -> Vec<SocketAddr> {
        self.procs.iter().map(|p| p.addr()).collect()
    }

    fn stop(self) {
        for p in self.procs {
            p.terminate();
        }
    }
}

/// The real binary on `store_url` with this file's endpoints (workers at their defaults).
fn gateway(store_url: &str) -> GatewayBuilder {
    TestGateway::builder()
        .store_url(store_url)
        .endpoints(&endpoints())
}

async fn open_store(url: &str) -> PostgresStore {
    PostgresStore::connect(url, PostgresOptions::default())
        .await
        .expect("connect to the test database")
}

/// `(status field, id field)` of a 200 answer.
fn answer_of(r: &RawResponse) -> (String, String) {
    let v = r.json();
    (
        v["status"].as_str().unwrap_or_default().to_owned(),
        v["id"].as_str().unwrap_or_default().to_owned(),
    )
}

/// An answer and how long it took to arrive.
type Timed = (RawResponse, Duration);

/// Sends every request on its own connection and thread, all released at once.
fn send_all_at_once(requests: Vec<(SocketAddr, Vec<u8>)>) -> Vec<Timed> {
    let barrier = Arc::new(Barrier::new(requests.len()));
    let handles: Vec<_> = requests
        .into_iter()
        .map(|(addr, bytes)| {
            let barrier = Arc::clone(&barrier);
            std::thread::spawn(move || {
                barrier.wait();
                let started = Instant::now();
                let r = send_raw(addr, &bytes);
                (r, started.elapsed())
            })
        })
        .collect();
    handles.into_iter().map(|h| h.join().unwrap()).collect()
}

/// A fixed permutation of `0..n` (xorshift Fisher–Yates): reproducible, well mixed.
fn shuffled(n: usize, mut seed: u64) -> Vec<usize> {
    let mut v: Vec<usize> = (0..n).collect();
    for i in (1..n).rev() {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        let j = (seed % (i as u64 + 1)) as usize;
        v.swap(i, j);
    }
    v
}

/// Three processes, one database, 300 concurrent copies of one event (a quarter of them
/// provider retries with a fresh timestamp and signature), for Standard Webhooks and Stripe:
/// one row, every answer 200, one `accepted`, the same id everywhere.
#[tokio::test]
async fn three_gateways_300_concurrent_copies_give_one_row() {
    let db = hookgate_testkit::postgres().await;
    let fleet = Fleet::start(db.url(), 3).await;
    let addrs = fleet.addrs();
    let started = Instant::now();
    for (round, provider) in ["standard_webhooks", "stripe"].into_iter().enumerate() {
        let id = format!("evt_storm_{round}");
        let first_sent = unix_now() - 40;
        let requests: Vec<(SocketAddr, Vec<u8>)> = (0..300)
            .map(|i| {
                let ts = if i % 4 == 3 {
                    first_sent + 1 + (i as i64 % 30)
                } else {
                    first_sent
                };
                (addrs[i % addrs.len()], delivery(provider, &id, ts))
            })
            .collect();
        let t = Instant::now();
        let answers = send_all_at_once(requests);
        let storm = t.elapsed();

        let mut statuses = BTreeMap::<String, usize>::new();
        let mut ids = BTreeSet::new();
        let mut slowest = Duration::ZERO;
        for (r, elapsed) in &answers {
            assert_eq!(r.status, 200, "{provider}: {}", r.body);
            let (status, inbox_id) = answer_of(r);
            *statuses.entry(status).or_default() += 1;
            ids.insert(inbox_id);
            slowest = slowest.max(*elapsed);
        }
        assert_eq!(
            statuses.get("accepted"),
            Some(&1),
            "{provider}: {statuses:?}"
        );
        assert_eq!(
            statuses.get("duplicate"),
            Some(&299),
            "{provider}: {statuses:?}"
        );
        assert_eq!(ids.len(), 1, "{provider}: more than one id: {ids:?}");
        eprintln!(
            "{provider}: 300 copies over 3 gateways in {storm:?}, slowest answer {slowest:?}"
        );

        let store = open_store(db.url()).await;
        assert_eq!(store.count_inbox().await.unwrap(), round as u64 + 1);
        let rows = store
            .list_events(&hookgate_store::EventFilter {
                endpoint_id: Some(endpoint_of(provider).to_owned()),
                ..Default::default()
            })
            .await
            .unwrap();
        assert_eq!(rows.len(), 1, "{provider}: {rows:?}");
        assert_eq!(&rows[0].provider_event_id, &id);
        assert!(
            ids.contains(&rows[0].inbox_id),
            "the answered id is the row's"
        );
        store.close().await;
    }
    fleet.stop();
    eprintln!("storm test: {:?}", started.elapsed());
}

/// Thousands of distinct events plus 10 % duplicates (retries with a fresh signature, mostly
/// on another gateway, some concurrent with their first copy), 64 in flight across three
/// processes: every answer 200, one `accepted` per event, and the inbox holds exactly the
/// distinct set.
#[tokio::test]
async fn three_gateways_mixed_run_stores_exactly_the_distinct_set() {
    const PER_PROVIDER: usize = 1500;
    const IN_FLIGHT: usize = 64;
    let providers = ["standard_webhooks", "stripe"];
    let db = hookgate_testkit::postgres().await;
    let fleet = Fleet::start(db.url(), 3).await;
    let addrs = fleet.addrs();

    // (provider, event id, is a duplicate copy)
    let mut sends: Vec<(&'static str, String, bool)> = Vec::new();
    for provider in providers {
        for i in 0..PER_PROVIDER {
            let id = format!("evt_mix_{provider}_{i:05}");
            if i % 10 == 0 {
                sends.push((provider, id.clone(), true));
            }
            sends.push((provider, id, false));
        }
    }
    let order = shuffled(sends.len(), 0x9e37_79b9_7f4a_7c15);
    let sends = Arc::new(sends);
    let order = Arc::new(order);
    let next = Arc::new(AtomicUsize::new(0));
    let results: Arc<Mutex<Vec<Option<Timed>>>> = Arc::new(Mutex::new(vec![None; sends.len()]));

    let t = Instant::now();
    let workers: Vec<_> = (0..IN_FLIGHT)
        .map(|_| {
            let (sends, order, next, results, addrs) = (
                Arc::clone(&sends),
                Arc::clone(&order),
                Arc::clone(&next),
                Arc::clone(&results),
                addrs.clone(),
            );
            std::thread::spawn(move || {
                loop {
                    let k = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&i) = order.get(k) else { return };
                    let (provider, id, dup) = &sends[i];
                    // A duplicate is the provider's retry: a fresh timestamp and signature.
                    let ts = unix_now() - if *dup { 5 } else { 20 };
                    let bytes = delivery(provider, id, ts);
                    let started = Instant::now();
                    let r = send_raw(addrs[k % addrs.len()], &bytes);
                    let elapsed = started.elapsed();
                    results.lock().unwrap()[i] = Some((r, elapsed));
                }
            })
        })
        .collect();
    for w in workers {
        w.join().unwrap();
    }
    let run = t.elapsed();

    let results = std::mem::take(&mut *results.lock().unwrap());
    let mut per_key: BTreeMap<(&str, &str), Vec<(String, String)>> = BTreeMap::new();
    let mut slowest = Duration::ZERO;
    for ((provider, id, _), result) in sends.iter().zip(results) {
        let (r, elapsed) = result.expect("every request was sent");
        assert_eq!(r.status, 200, "{provider} {id}: {}", r.body);
        slowest = slowest.max(elapsed);
        per_key
            .entry((provider, id.as_str()))
            .or_default()
            .push(answer_of(&r));
    }
    assert_eq!(per_key.len(), providers.len() * PER_PROVIDER);
    for ((provider, id), answers) in &per_key {
        let accepted = answers.iter().filter(|(s, _)| s == "accepted").count();
        let duplicate = answers.iter().filter(|(s, _)| s == "duplicate").count();
        assert_eq!(accepted, 1, "{provider} {id}: {answers:?}");
        assert_eq!(
            accepted + duplicate,
            answers.len(),
            "{provider} {id}: {answers:?}"
        );
        assert!(
            answers.iter().all(|(_, i)| *i == answers[0].1),
            "{provider} {id}: different ids: {answers:?}"
        );
    }
    eprintln!(
        "mixed run: {} requests ({} distinct) over 3 gateways, {IN_FLIGHT} in flight, in {run:?}, slowest answer {slowest:?}",
        sends.len(),
        per_key.len()
    );

    let store = open_store(db.url()).await;
    assert_eq!(
        store.count_inbox().await.unwrap(),
        (providers.len() * PER_PROVIDER) as u64,
        "nothing twice"
    );
    for provider in providers {
        let expected: Vec<String> = (0..PER_PROVIDER)
            .map(|i| format!("evt_mix_{provider}_{i:05}"))
            .collect();
        let stored = store
            .distinct_event_ids(endpoint_of(provider))
            .await
            .unwrap();
        assert_eq!(stored, expected, "{provider}: exactly the distinct set");
    }
    store.close().await;
    fleet.stop();
}

/// One attempt in the outage test.
#[derive(Debug, Clone)]
struct Attempt {
    id: String,
    status: u16,
    elapsed: Duration,
    retry_after: bool,
    error: Option<String>,
    /// `accepted` / `duplicate` of a 200.
    answer: Option<String>,
}

fn attempt(addr: SocketAddr, id: &str) -> Attempt {
    let bytes = delivery("standard_webhooks", id, unix_now());
    let started = Instant::now();
    let r = send_raw(addr, &bytes);
    let elapsed = started.elapsed();
    let answer = (r.status == 200).then(|| answer_of(&r).0);
    let error = (r.status != 200).then(|| {
        serde_json::from_str::<serde_json::Value>(&r.body)
            .ok()
            .and_then(|v| v["error"].as_str().map(str::to_owned))
            .unwrap_or_else(|| r.body.clone())
    });
    Attempt {
        id: id.to_owned(),
        status: r.status,
        elapsed,
        retry_after: r.header("retry-after").is_some(),
        error,
        answer,
    }
}

/// Polls `GET /readyz` until it answers `want` (each probe must answer within the bound).
fn wait_readyz(admin: SocketAddr, want: u16, within: Duration) -> Duration {
    let started = Instant::now();
    wait_until_blocking(&format!("/readyz to answer {want}"), within, || {
        let t = Instant::now();
        let r = get(admin, "/readyz");
        assert!(
            t.elapsed() < PROVIDER_TIMEOUT,
            "/readyz took {:?}",
            t.elapsed()
        );
        r.status == want
    });
    started.elapsed()
}

/// Waits (bounded) until `at_least` attempts that started after `since` got `status`.
fn wait_attempts(
    attempts: &Mutex<Vec<(Instant, Attempt)>>,
    since: Instant,
    status: u16,
    at_least: usize,
) {
    wait_until_blocking(
        &format!("{at_least} answers {status} after {since:?}"),
        Duration::from_secs(30),
        || {
            attempts
                .lock()
                .unwrap()
                .iter()
                .filter(|(t, a)| *t - a.elapsed >= since && a.status == status)
                .count()
                >= at_least
        },
    );
}

/// The database goes away mid-run and comes back: while it is down every request gets 503 +
/// Retry-After within 2 s and `/readyz` says 503; once it is back, without restarting the
/// gateway, `/readyz` is 200 again and the provider's retries converge: every event is stored
/// exactly once.
#[tokio::test]
async fn database_outage_gives_fast_503_and_recovers_without_restart() {
    const SENDERS: usize = 4;
    let cluster = hookgate_testkit::throwaway_cluster();
    let url = cluster.create_database("hookgate_outage").await;
    let files = gateway(&url).write().await;
    let gateway = files.serve(None);
    let (addr, admin) = (gateway.addr(), gateway.admin.unwrap());
    assert_eq!(get(admin, "/readyz").status, 200);

    // Providers keep sending new events throughout, from a few connections at a time.
    let began = Instant::now();
    let stop_sending = Arc::new(AtomicBool::new(false));
    let attempts = Arc::new(Mutex::new(Vec::<(Instant, Attempt)>::new()));
    let senders: Vec<_> = (0..SENDERS)
        .map(|s| {
            let (stop_sending, attempts) = (Arc::clone(&stop_sending), Arc::clone(&attempts));
            std::thread::spawn(move || {
                let mut n = 0;
                while !stop_sending.load(Ordering::Relaxed) {
                    let a = attempt(addr, &format!("evt_outage_{s}_{n:05}"));
                    attempts.lock().unwrap().push((Instant::now(), a));
                    n += 1;
                    // Pacing, not synchronisation: the providers' steady trickle of events.
                    std::thread::sleep(Duration::from_millis(20));
                }
            })
        })
        .collect();

    // Traffic flows before the outage.
    wait_attempts(&attempts, began, 200, 50);
    let stopping = Instant::now();
    cluster.stop();
    let stopped = Instant::now();
    eprintln!("outage: cluster stopped in {:?}", stopped - stopping);
    let readyz_down = wait_readyz(admin, 503, Duration::from_secs(5));
    // The behaviour under test: the database stays down for a while (3 s), long enough for
    // every pooled connection to break; what the test then checks is observed below.
    std::thread::sleep(Duration::from_secs(3));
    let restarting = Instant::now();
    cluster.start();
    let restarted = Instant::now();
    eprintln!("outage: cluster down for {:?}", restarted - stopped);
    // The senders run on until the gateway has committed again on its own.
    wait_attempts(&attempts, restarted, 200, 1);
    stop_sending.store(true, Ordering::Relaxed);
    for s in senders {
        s.join().unwrap();
    }
    let readyz_up = wait_readyz(admin, 200, Duration::from_secs(15));

    let attempts = std::mem::take(&mut *attempts.lock().unwrap());
    let mut all: Vec<Attempt> = attempts.iter().map(|(_, a)| a.clone()).collect();
    let before = attempts.iter().filter(|(t, _)| *t < stopping).count();
    let while_down: Vec<&Attempt> = attempts
        .iter()
        .filter(|(t, a)| *t - a.elapsed >= stopped && *t <= restarting)
        .map(|(_, a)| a)
        .collect();
    assert!(before > 0, "no request before the outage");
    assert!(
        attempts
            .iter()
            .filter(|(t, _)| *t < stopping)
            .all(|(_, a)| a.status == 200),
        "requests before the outage must succeed"
    );
    assert!(
        !while_down.is_empty(),
        "no request while the database was down"
    );
    for a in &while_down {
        assert_eq!(a.status, 503, "while down: {a:?}");
    }
    let unavailable = all.iter().filter(|a| a.status == 503).count();
    // How soon after the restart the gateway committed again, on its own.
    let recovered_after = attempts
        .iter()
        .filter(|(t, a)| *t - a.elapsed >= restarted && a.status == 200)
        .map(|(t, a)| (*t - a.elapsed) - restarted)
        .min();

    // The provider's retries, without restarting the gateway: fresh timestamp and signature.
    let mut ids: Vec<String> = all.iter().map(|a| a.id.clone()).collect();
    ids.sort();
    ids.dedup();
    let mut pending: Vec<String> = all
        .iter()
        .filter(|a| a.status != 200)
        .map(|a| a.id.clone())
        .collect();
    let retrying = Instant::now();
    let mut retry_answers = BTreeMap::<String, usize>::new();
    let mut retries = 0;
    while !pending.is_empty() {
        assert!(
            retrying.elapsed() < Duration::from_secs(30),
            "{} events still not acknowledged after 30 s of retries",
            pending.len()
        );
        let mut still = Vec::new();
        for id in pending {
            let a = attempt(addr, &id);
            retries += 1;
            if let Some(answer) = &a.answer {
                *retry_answers.entry(answer.clone()).or_default() += 1;
            } else {
                still.push(id);
            }
            all.push(a);
        }
        pending = still;
        if !pending.is_empty() {
            // Pacing, not synchronisation: the provider's retry interval.
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    for a in &all {
        assert!(
            a.status == 200 || a.status == 503,
            "only 200 or 503 are acceptable here: {a:?}"
        );
        assert!(
            a.elapsed < PROVIDER_TIMEOUT,
            "an answer took {:?} (bound {PROVIDER_TIMEOUT:?}): {a:?}",
            a.elapsed
        );
        if a.status == 503 {
            assert!(a.retry_after, "503 without Retry-After: {a:?}");
            assert_eq!(a.error.as_deref(), Some("unavailable"), "{a:?}");
        }
    }
    let slowest = all.iter().map(|a| a.elapsed).max().unwrap_or_default();
    let slowest_503 = all
        .iter()
        .filter(|a| a.status == 503)
        .map(|a| a.elapsed)
        .max()
        .unwrap_or_default();

    // Every acknowledged event (all of them, after the retries) is stored exactly once.
    let store = open_store(&url).await;
    assert_eq!(store.count_inbox().await.unwrap(), ids.len() as u64);
    assert_eq!(store.distinct_event_ids("sw").await.unwrap(), ids);
    store.close().await;
    // Each event was acknowledged exactly once: by its first attempt, or by the retry that
    // converged (`accepted` if the first commit never landed, `duplicate` if it had).
    for id in &ids {
        let acks = all
            .iter()
            .filter(|a| &a.id == id && a.status == 200)
            .count();
        assert_eq!(acks, 1, "{id} acknowledged {acks} times");
    }
    eprintln!(
        "outage: {} events, {} attempts ({before} before the outage, {} while down, {unavailable} answered 503), \
         readyz 503 {readyz_down:?} after the stop; first commit {recovered_after:?} after the restart, \
         readyz 200 {readyz_up:?} after the senders stopped; retries converged in {:?}; \
         slowest answer {slowest:?}, slowest 503 {slowest_503:?}; {retries} retries, converged as {retry_answers:?}",
        ids.len(),
        all.len(),
        while_down.len(),
        retrying.elapsed()
    );
    gateway.terminate();
    drop(files);
    drop(cluster);
}

/// A gateway started while its database is down keeps trying (a warning per attempt) and
/// serves once the database comes up, within `store.startup_wait_seconds`; one whose wait runs
/// out exits non-zero and says why.
#[tokio::test]
async fn serve_waits_for_a_database_that_starts_late() {
    let cluster = hookgate_testkit::throwaway_cluster();
    let url = cluster.create_database("hookgate_late").await;
    cluster.stop();

    let files = gateway(&url)
        .store_settings("startup_wait_seconds = 25")
        .write()
        .await;
    let mut waiting = BinaryGateway::launch(BinaryRole::Serve, &files.config_path, None);
    waiting.wait_for_log("store not reachable yet; trying again");
    cluster.start();
    waiting.wait_listening();
    let r = send_raw(
        waiting.addr(),
        &delivery("standard_webhooks", "evt_late", unix_now()),
    );
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["status"], "accepted");
    let logs = waiting.terminate();
    assert!(logs.contains("store reachable; starting"), "{logs}");

    cluster.stop();
    let files = gateway(&url)
        .store_settings("startup_wait_seconds = 1")
        .write()
        .await;
    let mut giving_up = BinaryGateway::launch(BinaryRole::Serve, &files.config_path, None);
    let status = giving_up.wait_exit();
    let logs = giving_up.take_logs();
    assert!(!status.success(), "{status:?}: {logs}");
    assert!(
        logs.contains("within store.startup_wait_seconds = 1"),
        "names the setting: {logs}"
    );
    drop(cluster);
}

/// Sends on a fresh connection; `None` when the connection closed without an answer.
#[cfg(feature = "failpoints")]
fn try_send(addr: SocketAddr, bytes: &[u8]) -> Option<RawResponse> {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let _ = s.write_all(bytes);
    let mut buf = Vec::new();
    let _ = s.read_to_end(&mut buf);
    (!buf.is_empty()).then(|| parse_response(&buf))
}

/// Kill the process after the inbox commit but before the response; restart without the
/// failpoint; the provider's retry gets 200 `duplicate`, and there is one row.
#[cfg(feature = "failpoints")]
#[tokio::test]
async fn crash_after_commit_before_response_on_postgres() {
    let files = TestGateway::builder()
        .backend(Backend::Postgres)
        .endpoints(&endpoints())
        .write()
        .await;
    let db_url = files.store_url.clone();
    let mut p = files.serve(Some("ingress.after_commit_before_response=abort"));
    let addr = p.addr();
    let first = delivery("standard_webhooks", "evt_crash", unix_now() - 10);
    let answer = try_send(addr, &first);
    assert!(answer.is_none(), "got an answer: {answer:?}");
    let status = p.wait_exit();
    assert!(
        !status.success(),
        "the process must have aborted: {status:?}"
    );
    drop(p);

    let store = open_store(&db_url).await;
    assert_eq!(
        store.count_inbox().await.unwrap(),
        1,
        "committed before the crash"
    );
    store.close().await;

    let p = files.serve(None);
    let retry = delivery("standard_webhooks", "evt_crash", unix_now());
    let r = send_raw(p.addr(), &retry);
    assert_eq!(r.status, 200, "{}", r.body);
    assert_eq!(r.json()["status"], "duplicate");
    p.terminate();

    let store = open_store(&db_url).await;
    assert_eq!(store.count_inbox().await.unwrap(), 1);
    assert_eq!(
        store.distinct_event_ids("sw").await.unwrap(),
        vec!["evt_crash".to_owned()]
    );
    store.close().await;
}

#[cfg(not(feature = "failpoints"))]
#[test]
fn postgres_crash_test_needs_failpoints() {
    panic!(
        "the PostgreSQL crash test needs the failpoints build: run `cargo test --workspace --features hookgate/failpoints`"
    );
}
