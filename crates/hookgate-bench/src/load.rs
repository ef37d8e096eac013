//! Sending: persistent HTTP/1.1 connections, one per worker, fed from one queue.
//!
//! Open loop: a dispatcher releases each request at its intended send time (`start + i/rate`;
//! burst copies share their event's instant) whether or not earlier ones were answered, and
//! latency is measured from that intended time, so a stalled gateway shows up as latency
//! instead of silently slowing the generator (no coordinated omission). Requests wait in the
//! queue when every connection is busy, and that wait is counted. Closed loop: each worker
//! sends its next request as soon as the previous one is answered.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use http_body_util::BodyExt;
use hyper::client::conn::http1::SendRequest;
use hyper_util::rt::TokioIo;
use tokio::sync::{Mutex, mpsc};

use crate::plan::{Job, Kind};

/// What one request came back as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Outcome {
    Accepted,
    Duplicate,
    Ignored,
    /// A 2xx whose body is none of the above (the ceiling sink's answer counts as accepted).
    OtherSuccess,
    RateLimited,
    Unavailable,
    Rejected4xx,
    /// 5xx other than 503, transport errors and timeouts.
    Error,
    /// Due (open loop) but still queued or not started at the hard deadline: never sent.
    NotSent,
}

impl Outcome {
    pub fn is_success(self) -> bool {
        matches!(
            self,
            Outcome::Accepted | Outcome::Duplicate | Outcome::Ignored | Outcome::OtherSuccess
        )
    }
}

/// One answered (or failed) request, kept for the store verification.
#[derive(Debug, Clone)]
pub struct Record {
    pub event: u32,
    pub kind: Kind,
    pub outcome: Outcome,
    /// The inbox id of a 2xx answer.
    pub inbox_id: Option<Box<str>>,
}

/// What the workers measured.
pub struct LoadResult {
    /// Latency of 2xx answers (acknowledgements), microseconds from the intended send time.
    pub ack_latency: Histogram<u64>,
    /// Latency of every HTTP answer, whatever its status.
    pub all_latency: Histogram<u64>,
    pub records: Vec<Record>,
    /// From the first intended send to the last answer.
    pub elapsed: Duration,
    /// Requests still queued or in flight at the hard deadline (never answered).
    pub unfinished: u64,
    pub first_error: Option<String>,
}

pub struct LoadOptions {
    pub target: SocketAddr,
    /// Path and query of the target.
    pub path: http::Uri,
    /// 0 = closed loop.
    pub rate: u64,
    pub connections: usize,
    pub duration: Duration,
    pub drain_timeout: Duration,
    pub request_timeout: Duration,
}

fn histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 600_000_000, 3).expect("valid histogram bounds")
}

struct Worker {
    ack: Histogram<u64>,
    all: Histogram<u64>,
    records: Vec<Record>,
    last_done: Option<Instant>,
    first_error: Option<String>,
}

type Queue = Arc<Mutex<mpsc::Receiver<(Job, Option<Instant>)>>>;

/// Runs the load until the duration is over and the queue is drained (or the drain timeout).
pub async fn run(options: LoadOptions, mut plan: mpsc::Receiver<Job>) -> LoadResult {
    let options = Arc::new(options);
    // Open loop: every due request waits here for a free connection (the wait is latency).
    // Closed loop: a hand-off only.
    let capacity = if options.rate > 0 {
        1 << 22
    } else {
        options.connections
    };
    let (work_tx, work_rx) = mpsc::channel::<(Job, Option<Instant>)>(capacity);
    let queue: Queue = Arc::new(Mutex::new(work_rx));
    let start = Instant::now() + Duration::from_millis(20);
    let send_until = start + options.duration;
    let hard_deadline = send_until + options.drain_timeout;

    let mut workers = Vec::with_capacity(options.connections);
    for _ in 0..options.connections {
        let queue = queue.clone();
        let options = options.clone();
        workers.push(tokio::spawn(worker(
            options,
            queue,
            start,
            send_until,
            hard_deadline,
        )));
    }

    // Feed the queue: paced (open loop) or as fast as the workers take it (closed loop).
    let interval_ns = if options.rate > 0 {
        1e9 / options.rate as f64
    } else {
        0.0
    };
    tokio::time::sleep_until(start.into()).await;
    let mut slot: u64 = 0;
    let mut burst_at = start;
    while let Some(job) = plan.recv().await {
        let intended = if options.rate == 0 {
            if Instant::now() >= send_until {
                break;
            }
            None
        } else {
            let at = if job.kind == Kind::Burst {
                burst_at
            } else {
                start + Duration::from_nanos((slot as f64 * interval_ns) as u64)
            };
            slot += 1;
            if at >= send_until {
                break;
            }
            burst_at = at;
            if at > Instant::now() {
                tokio::time::sleep_until(at.into()).await;
            }
            Some(at)
        };
        // Closed loop: the workers stop taking at `send_until`, so never wait past it.
        match tokio::time::timeout_at(
            send_until.max(Instant::now()).into(),
            work_tx.send((job, intended)),
        )
        .await
        {
            Ok(Ok(())) => {}
            Ok(Err(_)) | Err(_) => break,
        }
    }
    drop(plan);
    drop(work_tx);

    let mut ack = histogram();
    let mut all = histogram();
    let mut records = Vec::new();
    let mut last_done = start;
    let mut first_error = None;
    for w in workers {
        if let Ok(w) = w.await {
            ack.add(&w.ack).expect("same histogram bounds");
            all.add(&w.all).expect("same histogram bounds");
            records.extend(w.records);
            if let Some(t) = w.last_done {
                last_done = last_done.max(t);
            }
            if first_error.is_none() {
                first_error = w.first_error;
            }
        }
    }
    // Open loop: whatever is still queued was due and never sent (the gateway did not keep
    // up within the drain timeout). Closed loop: leftovers were never due.
    if options.rate > 0 {
        let mut rx = queue.lock().await;
        while let Ok((job, _)) = rx.try_recv() {
            records.push(Record {
                event: job.event,
                kind: job.kind,
                outcome: Outcome::NotSent,
                inbox_id: None,
            });
        }
    }
    let unfinished = records
        .iter()
        .filter(|r| r.outcome == Outcome::NotSent)
        .count() as u64;
    LoadResult {
        ack_latency: ack,
        all_latency: all,
        records,
        elapsed: last_done.saturating_duration_since(start),
        unfinished,
        first_error,
    }
}

async fn worker(
    options: Arc<LoadOptions>,
    queue: Queue,
    start: Instant,
    send_until: Instant,
    hard_deadline: Instant,
) -> Worker {
    let mut w = Worker {
        ack: histogram(),
        all: histogram(),
        records: Vec::new(),
        last_done: None,
        first_error: None,
    };
    let mut conn: Option<SendRequest<PartsBody>> = None;
    loop {
        let next = {
            let mut rx = queue.lock().await;
            tokio::select! {
                next = rx.recv() => next,
                _ = tokio::time::sleep_until(hard_deadline.into()) => None,
            }
        };
        let Some((job, intended)) = next else { break };
        let now = Instant::now();
        if intended.is_none() && now >= send_until {
            break; // closed loop: time is up
        }
        if now >= hard_deadline {
            w.records.push(Record {
                event: job.event,
                kind: job.kind,
                outcome: Outcome::NotSent,
                inbox_id: None,
            });
            continue;
        }
        let intended = intended.unwrap_or(now).max(start);
        let budget = options
            .request_timeout
            .min(hard_deadline.saturating_duration_since(now));
        let result = tokio::time::timeout(budget, send(&options, &mut conn, &job)).await;
        let done = Instant::now();
        let micros = done.saturating_duration_since(intended).as_micros() as u64;
        let (outcome, inbox_id) = match result {
            Ok(Ok((outcome, id))) => {
                let _ = w.all.record(micros.max(1));
                if outcome.is_success() {
                    let _ = w.ack.record(micros.max(1));
                }
                (outcome, id)
            }
            Ok(Err(e)) => {
                conn = None;
                if w.first_error.is_none() {
                    w.first_error = Some(format!("{e:#}"));
                }
                (Outcome::Error, None)
            }
            Err(_) => {
                conn = None;
                if w.first_error.is_none() {
                    w.first_error = Some(format!("request timed out after {budget:?}"));
                }
                (Outcome::Error, None)
            }
        };
        w.last_done = Some(done);
        w.records.push(Record {
            event: job.event,
            kind: job.kind,
            outcome,
            inbox_id,
        });
    }
    w
}

async fn connect(target: SocketAddr) -> anyhow::Result<SendRequest<PartsBody>> {
    let stream = tokio::net::TcpStream::connect(target).await?;
    stream.set_nodelay(true)?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(stream)).await?;
    tokio::spawn(async move {
        let _ = connection.await;
    });
    Ok(sender)
}

async fn send(
    options: &LoadOptions,
    conn: &mut Option<SendRequest<PartsBody>>,
    job: &Job,
) -> anyhow::Result<(Outcome, Option<Box<str>>)> {
    if conn.as_ref().is_none_or(|c| c.is_closed()) {
        *conn = Some(connect(options.target).await?);
    }
    let mut sender = conn.take().expect("connected above");
    if sender.ready().await.is_err() {
        // The server closed an idle keep-alive connection: nothing was sent yet, reconnect.
        sender = connect(options.target).await?;
        sender.ready().await?;
    }
    let sender = conn.insert(sender);
    let mut request = http::Request::new(PartsBody::new(job.signed.body.clone()));
    *request.method_mut() = http::Method::POST;
    *request.uri_mut() = options.path.clone();
    *request.headers_mut() = job.signed.headers.clone();
    let response = sender.send_request(request).await?;
    let status = response.status();
    let body = read_capped(response.into_body(), MAX_ANSWER_BYTES).await?;
    Ok(classify(status, &body))
}

/// The gateway's answers are a few dozen bytes; anything longer is cut off (and then does
/// not parse as an acknowledgement).
const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// Reads a body, keeping at most `limit` bytes and draining the rest.
pub(crate) async fn read_capped<B>(body: B, limit: usize) -> anyhow::Result<Bytes>
where
    B: http_body::Body<Data = Bytes>,
    B::Error: std::error::Error + Send + Sync + 'static,
{
    let mut body = std::pin::pin!(body);
    let mut kept = bytes::BytesMut::new();
    while let Some(frame) = body.frame().await {
        if let Ok(data) = frame?.into_data() {
            let room = limit.saturating_sub(kept.len());
            kept.extend_from_slice(&data[..data.len().min(room)]);
        }
    }
    Ok(kept.freeze())
}

#[derive(serde::Deserialize)]
struct AckBody<'a> {
    #[serde(borrow)]
    status: Option<&'a str>,
    #[serde(borrow)]
    id: Option<&'a str>,
}

pub(crate) fn classify(status: http::StatusCode, body: &[u8]) -> (Outcome, Option<Box<str>>) {
    match status.as_u16() {
        200..=299 => {
            let parsed: Option<AckBody<'_>> = serde_json::from_slice(body).ok();
            let id = parsed.as_ref().and_then(|b| b.id).map(Box::from);
            let outcome = match parsed.as_ref().and_then(|b| b.status) {
                Some("accepted") => Outcome::Accepted,
                Some("duplicate") => Outcome::Duplicate,
                Some("ignored") => Outcome::Ignored,
                _ => Outcome::OtherSuccess,
            };
            (outcome, id)
        }
        429 => (Outcome::RateLimited, None),
        503 => (Outcome::Unavailable, None),
        400..=499 => (Outcome::Rejected4xx, None),
        _ => (Outcome::Error, None),
    }
}

/// A request body sent from its parts (written with one vectored write), with an exact
/// length so hyper sends `Content-Length`.
pub struct PartsBody {
    parts: [Bytes; 3],
    next: usize,
    remaining: u64,
}

impl PartsBody {
    pub fn new(parts: [Bytes; 3]) -> Self {
        let remaining = parts.iter().map(|p| p.len() as u64).sum();
        Self {
            parts,
            next: 0,
            remaining,
        }
    }
}

impl http_body::Body for PartsBody {
    type Data = Bytes;
    type Error = std::convert::Infallible;

    fn poll_frame(
        self: std::pin::Pin<&mut Self>,
        _cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Option<Result<http_body::Frame<Bytes>, Self::Error>>> {
        let this = self.get_mut();
        while this.next < this.parts.len() {
            let part = std::mem::take(&mut this.parts[this.next]);
            this.next += 1;
            if !part.is_empty() {
                this.remaining -= part.len() as u64;
                return std::task::Poll::Ready(Some(Ok(http_body::Frame::data(part))));
            }
        }
        std::task::Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        self.remaining == 0
    }

    fn size_hint(&self) -> http_body::SizeHint {
        http_body::SizeHint::with_exact(self.remaining)
    }
}
