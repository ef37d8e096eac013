//! The traffic plan: body sizes, event ids, duplicates, and the signing producer.
//!
//! A producer thread builds and signs every request ahead of the sender (outside the timed
//! path) into a bounded channel that is filled before the clock starts. Bodies are the
//! provider's sample event (`examples/events/`) with the event id placed where the provider
//! carries it and a padding field sized from the body-size distribution; building one is two
//! copies, no JSON work. Duplicates are drawn from recently planned events: exact re-sends
//! (same bytes and headers), provider-style retries (same id, new timestamp and signature) and
//! bursts of concurrent copies of a new event.

use std::collections::VecDeque;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::{Context, bail};
use bytes::Bytes;
use hookgate_providers::pack::{Pack, SignTarget};
use hookgate_providers::{IdLocation, SignRequest};
use http::{HeaderMap, HeaderValue};
use rand::rngs::StdRng;
use rand::{Rng, SeedableRng};

use crate::Endpoint;

/// The body-size distribution.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum BodySize {
    /// ~10 KiB average: log-normal around 5 KiB, and a 0.5 % tail of 128 KiB – 1 MiB.
    Mixed,
    /// Every body this many bytes.
    Fixed(usize),
}

impl std::str::FromStr for BodySize {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let s = s.trim();
        if s.eq_ignore_ascii_case("mixed") {
            return Ok(BodySize::Mixed);
        }
        let lower = s.to_ascii_lowercase();
        let (digits, unit) = match lower.find(|c: char| !c.is_ascii_digit()) {
            Some(i) => lower.split_at(i),
            None => (lower.as_str(), ""),
        };
        let n: usize = digits
            .parse()
            .map_err(|_| format!("body size {s:?}: expected `mixed` or BYTES[KiB|MiB]"))?;
        let factor = match unit {
            "" | "b" => 1,
            "k" | "kb" | "kib" => 1024,
            "m" | "mb" | "mib" => 1024 * 1024,
            _ => return Err(format!("body size {s:?}: unknown unit {unit:?}")),
        };
        Ok(BodySize::Fixed(n * factor))
    }
}

impl BodySize {
    /// A target body size in bytes (before the cap).
    pub fn sample(self, rng: &mut StdRng) -> usize {
        match self {
            BodySize::Fixed(n) => n,
            BodySize::Mixed => {
                if rng.r#gen::<f64>() < 0.005 {
                    rng.gen_range(128 * 1024..=1024 * 1024)
                } else {
                    // Log-normal, median 5.5 KiB, sigma 0.8 (Box-Muller).
                    let u1: f64 = rng.r#gen::<f64>().max(f64::MIN_POSITIVE);
                    let u2: f64 = rng.r#gen();
                    let z = (-2.0 * u1.ln()).sqrt() * (2.0 * std::f64::consts::PI * u2).cos();
                    let v = 5632.0 * (0.8 * z).exp();
                    v.clamp(256.0, 128.0 * 1024.0) as usize
                }
            }
        }
    }
}

/// What the producer needs to know.
#[derive(Debug, Clone)]
pub struct PlanOptions {
    pub body_size: BodySize,
    /// Share of requests that repeat an earlier (or concurrent) event, 0..1.
    pub duplicates: f64,
    pub seed: u64,
    /// Exactly this many requests (open loop), or until the receiver is dropped.
    pub total: Option<u64>,
}

/// How a request relates to its logical event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// First copy of a new event.
    Original,
    /// Same bytes and headers as an earlier request.
    Resend,
    /// Same event, new timestamp and signature (how providers retry).
    Retry,
    /// A concurrent copy of the event just before it (sent at the same instant).
    Burst,
}

/// One signed request, shared between exact copies. The body is kept in three parts —
/// the head and tail of the sample event (one of them carrying the id) around a slice of the
/// run's shared padding — so planning far ahead costs about a kilobyte per request.
#[derive(Debug)]
pub struct Signed {
    pub headers: HeaderMap,
    pub body: [Bytes; 3],
}

impl Signed {
    pub fn body_len(&self) -> usize {
        self.body.iter().map(Bytes::len).sum()
    }
}

/// One request to send.
#[derive(Debug, Clone)]
pub struct Job {
    /// Sequence number of the logical event (its id is `prefix` + 10 digits).
    pub event: u32,
    pub kind: Kind,
    pub signed: Arc<Signed>,
}

/// Everything the producer builds requests from.
pub struct Planner {
    pack: &'static Pack,
    secret: Arc<hookgate_providers::SecretMaterial>,
    event_type: Option<String>,
    /// The id prefix of this run: ids are `prefix` + a 10-digit sequence number.
    pub prefix: String,
    template: Template,
    padding: Bytes,
    max_body: usize,
    host: HeaderValue,
}

/// The sample body split around its padding, with the id slot located.
struct Template {
    head: Vec<u8>,
    tail: Vec<u8>,
    /// (in tail?, offset) of the id placeholder: the provider's id field, or for header-id
    /// providers `hookgate_bench_event`, so that every event's body differs (providers that
    /// sign no id refuse a body already accepted under another id as a replay).
    id_slot: (bool, usize),
}

const PAD_MARK: &str = "@@HOOKGATE_BENCH_PADDING@@";
pub const SEQ_DIGITS: usize = 10;

/// The sample event of a provider the bench can sign for (`examples/events/`).
fn sample_body(provider: &str) -> Option<&'static str> {
    Some(match provider {
        "stripe" => include_str!("../../../examples/events/stripe.json"),
        "github" => include_str!("../../../examples/events/github.json"),
        "standard_webhooks" => include_str!("../../../examples/events/standard_webhooks.json"),
        "svix" => include_str!("../../../examples/events/svix.json"),
        "shopify" => include_str!("../../../examples/events/shopify.json"),
        "slack" => include_str!("../../../examples/events/slack.json"),
        _ => return None,
    })
}

/// The bench's event ids look like the provider's own.
fn id_style(provider: &str) -> &'static str {
    match provider {
        "stripe" => "evt_",
        "standard_webhooks" | "svix" => "msg_",
        "slack" => "Ev",
        _ => "",
    }
}

/// Event type for providers that carry it in a header.
fn header_event_type(provider: &str) -> Option<String> {
    match provider {
        "github" => Some("push".into()),
        "shopify" => Some("orders/create".into()),
        _ => None,
    }
}

impl Planner {
    pub fn new(endpoint: &Endpoint, run_id: &str, host: &str) -> anyhow::Result<Planner> {
        let pack = endpoint.pack;
        let provider = pack.id();
        let sample = sample_body(provider).with_context(|| {
            format!(
                "the bench has no sample event for provider {provider} (it signs stripe, github, \
                 standard_webhooks, svix, shopify and slack traffic)"
            )
        })?;
        let secret = endpoint.signing_secret.clone().with_context(|| {
            format!(
                "endpoint {} has no trusted secret to sign with",
                endpoint.id
            )
        })?;
        let prefix = format!("{}hgb{run_id}_", id_style(provider));
        let placeholder = "#".repeat(prefix.len() + SEQ_DIGITS);

        let mut value: serde_json::Value =
            serde_json::from_str(sample).context("sample event is JSON")?;
        match pack.id_location() {
            IdLocation::BodyPointer(pointer) => {
                let slot = value
                    .pointer_mut(pointer)
                    .with_context(|| format!("sample event has no {pointer}"))?;
                *slot = serde_json::Value::String(placeholder.clone());
            }
            // The id is the body's signature or digest: a unique body field makes it unique.
            IdLocation::Header(_) | IdLocation::Signature | IdLocation::BodyDigest => {
                let Some(object) = value.as_object_mut() else {
                    bail!("sample event is not a JSON object");
                };
                object.insert(
                    "hookgate_bench_event".into(),
                    serde_json::Value::String(placeholder.clone()),
                );
            }
        }
        let event_type = value
            .get("type")
            .and_then(|t| t.as_str())
            .map(str::to_owned)
            .or_else(|| header_event_type(provider));
        let Some(object) = value.as_object_mut() else {
            bail!("sample event is not a JSON object");
        };
        object.insert(
            "hookgate_bench_padding".into(),
            serde_json::Value::String(PAD_MARK.into()),
        );
        let text = serde_json::to_string(&value)?;
        let at = text.find(PAD_MARK).context("padding mark")?;
        let head = text.as_bytes()[..at].to_vec();
        let tail = text.as_bytes()[at + PAD_MARK.len()..].to_vec();
        let find = |hay: &[u8]| {
            hay.windows(placeholder.len())
                .position(|w| w == placeholder.as_bytes())
        };
        let id_slot = match (find(&head), find(&tail)) {
            (Some(i), _) => (false, i),
            (None, Some(i)) => (true, i),
            _ => bail!("id placeholder not found in the template"),
        };
        let mut rng = StdRng::seed_from_u64(0x5eed);
        let padding: Bytes = (0..endpoint.max_body_bytes.max(1024))
            .map(|_| b'a' + rng.gen_range(0..26u8))
            .collect::<Vec<u8>>()
            .into();
        Ok(Planner {
            pack,
            secret,
            event_type,
            prefix,
            template: Template {
                head,
                tail,
                id_slot,
            },
            padding,
            max_body: endpoint.max_body_bytes,
            host: HeaderValue::from_str(host).context("target host is not a header value")?,
        })
    }

    pub fn event_id(&self, seq: u32) -> String {
        format!("{}{seq:0width$}", self.prefix, width = SEQ_DIGITS)
    }

    /// The body of event `seq` at about `size` bytes (capped at the endpoint's limit), as
    /// head, padding and tail.
    fn body(&self, seq: u32, size: usize) -> [Bytes; 3] {
        let t = &self.template;
        let fixed = t.head.len() + t.tail.len();
        let size = size.min(self.max_body).max(fixed);
        let pad = (size - fixed).min(self.padding.len());
        let mut head = t.head.clone();
        let mut tail = t.tail.clone();
        let (in_tail, offset) = t.id_slot;
        let id = self.event_id(seq);
        let part = if in_tail { &mut tail } else { &mut head };
        part[offset..offset + id.len()].copy_from_slice(id.as_bytes());
        [
            Bytes::from(head),
            self.padding.slice(..pad),
            Bytes::from(tail),
        ]
    }

    /// Signs `body` (contiguous in `scratch`) with the attempt `timestamp`.
    fn sign(&self, seq: u32, body: [Bytes; 3], timestamp: i64, scratch: &mut Vec<u8>) -> Signed {
        scratch.clear();
        for part in &body {
            scratch.extend_from_slice(part);
        }
        let id = self.event_id(seq);
        // The six sample providers sign headers only: the body is sent as planned.
        let pairs = self
            .pack
            .sign_delivery(
                &self.secret,
                &SignRequest {
                    event_id: &id,
                    event_type: self.event_type.as_deref(),
                    timestamp,
                    body: scratch,
                },
                &SignTarget::default(),
            )
            .headers;
        let mut headers = HeaderMap::with_capacity(pairs.len() + 1);
        headers.insert(http::header::HOST, self.host.clone());
        for (name, value) in pairs {
            headers.append(name, value);
        }
        Signed { headers, body }
    }
}

/// Counts of what the producer planned.
#[derive(Debug, Default)]
pub struct Produced {
    pub requests: AtomicU64,
    pub bytes: AtomicU64,
}

/// Runs the producer on the current thread until `total` requests are planned or the
/// receiver is gone.
pub fn produce(
    planner: &Planner,
    options: &PlanOptions,
    tx: tokio::sync::mpsc::Sender<Job>,
    produced: &Produced,
) {
    const RECENT: usize = 1024;
    let mut rng = StdRng::seed_from_u64(options.seed);
    let mut recent: VecDeque<(u32, Arc<Signed>, i64)> = VecDeque::with_capacity(RECENT);
    let mut next_event: u32 = 0;
    let mut planned: u64 = 0;
    let mut pending: VecDeque<Job> = VecDeque::new();
    let total = options.total.unwrap_or(u64::MAX);
    let mut scratch = Vec::new();
    while planned < total {
        if pending.is_empty() {
            let now = jiff::Timestamp::now().as_second();
            let duplicate = !recent.is_empty() && rng.r#gen::<f64>() < options.duplicates;
            let choice: f64 = rng.r#gen();
            if duplicate && choice < 0.4 {
                let (event, signed, _) = &recent[rng.gen_range(0..recent.len())];
                pending.push_back(Job {
                    event: *event,
                    kind: Kind::Resend,
                    signed: signed.clone(),
                });
            } else if duplicate && choice < 0.8 {
                let i = rng.gen_range(0..recent.len());
                let (event, signed, ts) = &mut recent[i];
                // A later attempt: a new timestamp, hence a new signature.
                *ts += 1;
                let again = Arc::new(planner.sign(*event, signed.body.clone(), *ts, &mut scratch));
                pending.push_back(Job {
                    event: *event,
                    kind: Kind::Retry,
                    signed: again,
                });
            } else {
                let event = next_event;
                next_event += 1;
                let body = planner.body(event, options.body_size.sample(&mut rng));
                let signed = Arc::new(planner.sign(event, body, now, &mut scratch));
                pending.push_back(Job {
                    event,
                    kind: Kind::Original,
                    signed: signed.clone(),
                });
                if duplicate {
                    for _ in 1..rng.gen_range(2..=8) {
                        pending.push_back(Job {
                            event,
                            kind: Kind::Burst,
                            signed: signed.clone(),
                        });
                    }
                }
                if recent.len() == RECENT {
                    recent.pop_front();
                }
                recent.push_back((event, signed, now));
            }
        }
        let Some(job) = pending.pop_front() else {
            continue;
        };
        // Full: wait until three quarters have been sent, then refill, so a run that stays
        // within the plan signs nothing while it is timed.
        if tx.capacity() == 0 {
            let free = tx.max_capacity() * 3 / 4;
            while tx.capacity() < free.max(1) && !tx.is_closed() {
                std::thread::sleep(std::time::Duration::from_millis(5));
            }
        }
        let size = job.signed.body_len() as u64;
        if tx.blocking_send(job).is_err() {
            return;
        }
        planned += 1;
        produced.requests.fetch_add(1, Ordering::Relaxed);
        produced.bytes.fetch_add(size, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn body_size_parses() {
        assert_eq!("mixed".parse::<BodySize>().unwrap(), BodySize::Mixed);
        assert_eq!("10KiB".parse::<BodySize>().unwrap(), BodySize::Fixed(10240));
        assert_eq!("512".parse::<BodySize>().unwrap(), BodySize::Fixed(512));
        assert_eq!("1m".parse::<BodySize>().unwrap(), BodySize::Fixed(1 << 20));
        assert!("ten".parse::<BodySize>().is_err());
    }

    #[test]
    fn mixed_sizes_average_about_ten_kib() {
        let mut rng = StdRng::seed_from_u64(7);
        let n = 400_000;
        let sizes: Vec<usize> = (0..n).map(|_| BodySize::Mixed.sample(&mut rng)).collect();
        let mean = sizes.iter().sum::<usize>() as f64 / n as f64;
        assert!((9.0 * 1024.0..11.0 * 1024.0).contains(&mean), "mean {mean}");
        assert!(sizes.iter().any(|&s| s > 512 * 1024));
        assert!(sizes.iter().all(|&s| s <= 1024 * 1024));
    }
}
