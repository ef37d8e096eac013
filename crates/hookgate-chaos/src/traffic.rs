//! Provider-style traffic: Stripe-signed events sent by concurrent senders; each event is sent
//! as one to three concurrent copies, each copy retried with a fresh timestamp and signature
//! until a 2xx (as Stripe does), and some events are sent once more after their 2xx. Every
//! answer is recorded per event id for the final checks.

use std::collections::{BTreeSet, HashMap};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU8, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use hookgate_providers::pack::{Pack, SignTarget};
use hookgate_providers::{SecretMaterial, SignRequest};
use http::{Request, StatusCode};
use http_body_util::Full;
use hyper_util::rt::TokioIo;
use rand::Rng;
use tokio::sync::watch;

/// What the providers have seen for one event id.
#[derive(Debug, Default, Clone)]
pub(crate) struct EventLedger {
    /// Requests sent for it (every attempt of every copy).
    pub(crate) attempts: u64,
    /// Answered 2xx at least once.
    pub(crate) acknowledged: bool,
    /// `accepted` answers (more than one is a violation: the second copy must be `duplicate`).
    pub(crate) accepted: u64,
    /// Inbox ids named by its 2xx answers (more than one is a violation).
    pub(crate) inbox_ids: BTreeSet<String>,
}

#[derive(Debug, Default, Clone, serde::Serialize)]
pub(crate) struct TrafficCounts {
    pub(crate) requests: u64,
    pub answered_2xx: u64,
    pub answered_503: u64,
    /// Connection refused/reset or no answer in time (the gateway was down or killed).
    pub(crate) connection_errors: u64,
    /// Any other status (a correctly signed, fresh request should never get one).
    pub(crate) unexpected_status: u64,
}

/// The traffic's phase: new events, then only finishing the events already started.
const RUNNING: u8 = 0;
const FINISHING: u8 = 1;
const STOPPED: u8 = 2;

pub(crate) struct Traffic {
    phase: AtomicU8,
    next_event: AtomicU64,
    run_id: String,
    secret: SecretMaterial,
    target: watch::Receiver<Option<SocketAddr>>,
    pub(crate) ledger: Mutex<HashMap<String, EventLedger>>,
    counts: Mutex<TrafficCounts>,
    unexpected_examples: Mutex<Vec<String>>,
}

impl Traffic {
    pub(crate) fn new(
        run_id: String,
        secret: &str,
        target: watch::Receiver<Option<SocketAddr>>,
    ) -> anyhow::Result<Arc<Traffic>> {
        let secret = stripe()
            .decode_secret(secret)
            .map_err(|e| anyhow::anyhow!("stripe secret: {e}"))?;
        Ok(Arc::new(Traffic {
            phase: AtomicU8::new(RUNNING),
            next_event: AtomicU64::new(0),
            run_id,
            secret,
            target,
            ledger: Mutex::new(HashMap::new()),
            counts: Mutex::new(TrafficCounts::default()),
            unexpected_examples: Mutex::new(Vec::new()),
        }))
    }

    /// Starts `senders` sender tasks; they end once [`Traffic::stop`] is called, or once
    /// [`Traffic::finish`] is and their current event is acknowledged.
    pub(crate) fn spawn(self: &Arc<Self>, senders: usize) -> Vec<tokio::task::JoinHandle<()>> {
        (0..senders)
            .map(|_| {
                let t = self.clone();
                tokio::spawn(async move { t.sender().await })
            })
            .collect()
    }

    /// No new events; events already started are retried until acknowledged.
    pub(crate) fn finish(&self) {
        let _ = self
            .phase
            .compare_exchange(RUNNING, FINISHING, Ordering::SeqCst, Ordering::SeqCst);
    }

    /// Gives up on unacknowledged events (the final deadline passed).
    pub(crate) fn stop(&self) {
        self.phase.store(STOPPED, Ordering::SeqCst);
    }

    pub(crate) fn counts(&self) -> TrafficCounts {
        self.counts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn unexpected_examples(&self) -> Vec<String> {
        self.unexpected_examples
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    pub(crate) fn ledger(&self) -> HashMap<String, EventLedger> {
        self.ledger
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    async fn sender(self: Arc<Self>) {
        while self.phase.load(Ordering::SeqCst) == RUNNING {
            let n = self.next_event.fetch_add(1, Ordering::SeqCst);
            let event_id = format!("evt_chaos_{}_{n:08}", self.run_id);
            let body = Bytes::from(event_body(&event_id, n));
            let copies = {
                let mut rng = rand::thread_rng();
                match rng.gen_range(0..10) {
                    0..=6 => 1,
                    7 | 8 => 2,
                    _ => 3,
                }
            };
            let sends: Vec<_> = (0..copies)
                .map(|_| {
                    let t = self.clone();
                    let (id, body) = (event_id.clone(), body.clone());
                    tokio::spawn(async move { t.deliver_until_2xx(&id, &body).await })
                })
                .collect();
            let mut acked = false;
            for s in sends {
                acked |= s.await.unwrap_or(false);
            }
            // A provider that did not see our 2xx (or resends anyway) sends it once more.
            if acked && rand::thread_rng().gen_bool(0.1) {
                self.deliver_until_2xx(&event_id, &body).await;
            }
            let pause = rand::thread_rng().gen_range(0..20);
            tokio::time::sleep(Duration::from_millis(pause)).await;
        }
    }

    /// One copy: attempts with a fresh timestamp and signature until a 2xx (true) or stop.
    async fn deliver_until_2xx(&self, event_id: &str, body: &Bytes) -> bool {
        let mut backoff = Duration::from_millis(50);
        while self.phase.load(Ordering::SeqCst) != STOPPED {
            let target = *self.target.borrow();
            if let Some(addr) = target {
                let answer = self.attempt(addr, event_id, body).await;
                if self.record(event_id, answer) {
                    return true;
                }
            }
            let jitter = rand::thread_rng().gen_range(0..=backoff.as_millis() as u64);
            tokio::time::sleep(Duration::from_millis(jitter)).await;
            backoff = (backoff * 2).min(Duration::from_millis(800));
        }
        false
    }

    async fn attempt(&self, addr: SocketAddr, event_id: &str, body: &Bytes) -> Answer {
        let timestamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_secs() as i64)
            .unwrap_or(0);
        // Stripe signs headers only: the body goes out as it is.
        let headers = stripe()
            .sign_delivery(
                &self.secret,
                &SignRequest {
                    event_id,
                    event_type: Some(EVENT_TYPE),
                    timestamp,
                    body,
                },
                &SignTarget {
                    public_url: None,
                    options: None,
                },
            )
            .headers;
        let mut req = Request::post(format!("/webhooks/{}", crate::ENDPOINT))
            .header(http::header::HOST, addr.to_string());
        for (name, value) in headers {
            req = req.header(name, value);
        }
        let Ok(req) = req.body(Full::new(body.clone())) else {
            return Answer::Error;
        };
        match tokio::time::timeout(Duration::from_secs(5), send(addr, req)).await {
            Ok(Ok(answer)) => answer,
            _ => Answer::Error,
        }
    }

    /// Records one answer; true when it was a 2xx.
    fn record(&self, event_id: &str, answer: Answer) -> bool {
        {
            let mut c = self.counts.lock().unwrap_or_else(|e| e.into_inner());
            c.requests += 1;
            match &answer {
                Answer::Status { status, .. } if status.is_success() => c.answered_2xx += 1,
                Answer::Status { status, .. } if *status == StatusCode::SERVICE_UNAVAILABLE => {
                    c.answered_503 += 1;
                }
                Answer::Status { .. } => c.unexpected_status += 1,
                Answer::Error => c.connection_errors += 1,
            }
        }
        let mut ledger = self.ledger.lock().unwrap_or_else(|e| e.into_inner());
        let e = ledger.entry(event_id.to_owned()).or_default();
        e.attempts += 1;
        match answer {
            Answer::Status { status, body } if status.is_success() => {
                e.acknowledged = true;
                let v: serde_json::Value = serde_json::from_slice(&body).unwrap_or_default();
                if v["status"] == "accepted" {
                    e.accepted += 1;
                }
                if let Some(id) = v["id"].as_str() {
                    e.inbox_ids.insert(id.to_owned());
                }
                true
            }
            Answer::Status { status, body }
                if status != StatusCode::SERVICE_UNAVAILABLE
                    && status != StatusCode::REQUEST_TIMEOUT =>
            {
                let mut ex = self
                    .unexpected_examples
                    .lock()
                    .unwrap_or_else(|e| e.into_inner());
                if ex.len() < 5 {
                    ex.push(format!(
                        "{event_id}: {status} {}",
                        String::from_utf8_lossy(&body[..body.len().min(200)])
                    ));
                }
                false
            }
            _ => false,
        }
    }
}

enum Answer {
    Status { status: StatusCode, body: Bytes },
    Error,
}

/// One request on a fresh connection (a provider's retry rarely reuses one).
async fn send(addr: SocketAddr, req: Request<Full<Bytes>>) -> anyhow::Result<Answer> {
    let stream = tokio::net::TcpStream::connect(addr).await?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(conn);
    let resp = sender.send_request(req).await?;
    let status = resp.status();
    let body = crate::body::read_bounded(resp.into_body(), 64 << 10).await?;
    Ok(Answer::Status { status, body })
}

const EVENT_TYPE: &str = "payment_intent.succeeded";

fn event_body(event_id: &str, n: u64) -> Vec<u8> {
    serde_json::json!({
        "id": event_id,
        "object": "event",
        "api_version": "2024-06-20",
        "created": 1_764_547_200u64 + n,
        "type": EVENT_TYPE,
        "data": { "object": {
            "id": format!("pi_chaos_{n}"),
            "object": "payment_intent",
            "amount": 100 + n % 1000,
            "currency": "usd",
            "status": "succeeded"
        }},
        "livemode": false
    })
    .to_string()
    .into_bytes()
}

/// The built-in Stripe pack, whose retries keep the event id with a fresh signature.
fn stripe() -> &'static Pack {
    hookgate_providers::pack::builtin("stripe").expect("the stripe pack is built in")
}
