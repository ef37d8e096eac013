//! Admission to the commit queue: bounded acknowledgement latency under overload.
//!
//! A request that waits longer for its commit than it is worth is better answered with a
//! quick 503: under sustained overload an unbounded queue only turns every answer slow and
//! then into a provider-side timeout and retry. So the queue is judged by how long its rows
//! wait (their *sojourn*, as in CoDel), which needs no estimate of the store's speed:
//!
//! - when the batch worker takes a batch whose oldest row waited more than half of
//!   `max_queue_wait`, the queue is *overloaded*: [`Admission::is_open`] turns `false`, and
//!   new requests are answered 503 + `Retry-After` — by the ingress before it reads and
//!   verifies the body (so shed requests cost almost nothing), and by the store's `accept`;
//! - it opens again when a batch's oldest row waited less than a quarter of it, or when the
//!   worker finds the queue empty, and on its own `max_queue_wait` after it last closed: a
//!   closed gate keeps new rows out, so without that a batch worker that closed it just
//!   after another found the queue empty (PostgreSQL runs several) would leave it closed,
//!   and every request shed, for good;
//! - [`Admission::expired`] is the hard bound: a row that waited longer than
//!   `max_queue_wait` anyway (a sudden stall) is answered `Overloaded` when the worker takes
//!   it, without being written, so that 503 is truthful.
//!
//! Bursts are queued, not shed, as long as they drain within half of `max_queue_wait`.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::{Acceptance, NewInboxRow, StoreError};

/// What a queued unit's caller is answered: one acceptance per row, or the unit's error.
pub(crate) type UnitResult = Result<Vec<Acceptance>, StoreError>;

/// One request's rows, queued for a batch worker (either backend) as one unit: committed
/// together or not at all.
pub(crate) struct QueuedAcceptance {
    pub(crate) rows: Vec<NewInboxRow>,
    /// Answered only after the batch's commit (or its failure), or `Overloaded` when shed.
    pub(crate) reply: oneshot::Sender<UnitResult>,
    /// When it was queued: a row that waited longer than `max_queue_wait` is shed unwritten.
    pub(crate) enqueued_at: Instant,
    /// The span current when it was queued (the request's `ingress.request`, when traces
    /// are exported): the batch's `store.commit_batch` span links to it.
    pub(crate) origin: tracing::Span,
}

/// The `store.commit_batch` span of one group commit (docs/tracing.md): a root span, since a
/// batch serves many requests, with a link to each queued request's span. Disabled (free)
/// unless traces are exported. `outcome` is recorded by the caller.
pub(crate) fn commit_batch_span<'a>(
    backend: &'static str,
    units: impl Iterator<Item = &'a QueuedAcceptance>,
    commands: usize,
) -> tracing::Span {
    let span = tracing::info_span!(
        target: hookgate_core::TRACE_TARGET,
        parent: None,
        "store.commit_batch",
        hookgate.store.backend = backend,
        hookgate.batch.units = tracing::field::Empty,
        hookgate.batch.rows = tracing::field::Empty,
        hookgate.batch.commands = commands,
        hookgate.batch.outcome = tracing::field::Empty,
    );
    if span.is_disabled() {
        return span;
    }
    let (mut count, mut rows) = (0usize, 0usize);
    for unit in units {
        count += 1;
        rows += unit.rows.len();
        span.follows_from(&unit.origin);
    }
    span.record("hookgate.batch.units", count);
    span.record("hookgate.batch.rows", rows);
    span
}

/// The admission state of one store's acceptance queue.
#[derive(Debug)]
pub(crate) struct Admission {
    max_wait: Duration,
    overloaded: AtomicBool,
    /// When the gate last closed (or was confirmed closed), in ms since `origin`.
    closed_at_ms: AtomicU64,
    origin: Instant,
}

impl Admission {
    /// `max_wait` is the longest a row may wait for its batch.
    pub(crate) fn new(max_wait: Duration) -> Self {
        Self {
            max_wait,
            overloaded: AtomicBool::new(false),
            closed_at_ms: AtomicU64::new(0),
            origin: Instant::now(),
        }
    }

    /// Whether new rows are admitted (cheap; checked before a body is read).
    pub(crate) fn is_open(&self) -> bool {
        !self.overloaded.load(Ordering::Relaxed)
            || self
                .now_ms()
                .saturating_sub(self.closed_at_ms.load(Ordering::Relaxed))
                > u64::try_from(self.max_wait.as_millis()).unwrap_or(u64::MAX)
    }

    fn now_ms(&self) -> u64 {
        u64::try_from(self.origin.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    fn close(&self) {
        self.closed_at_ms.store(self.now_ms(), Ordering::Relaxed);
        self.overloaded.store(true, Ordering::Relaxed);
    }

    /// Whether a row enqueued at `enqueued_at` waited too long to be committed now.
    pub(crate) fn expired(&self, enqueued_at: Instant) -> bool {
        enqueued_at.elapsed() > self.max_wait
    }

    /// A unit to queue now, stamped with the time, or `Overloaded` while the gate is closed.
    pub(crate) fn admit(
        &self,
        rows: Vec<NewInboxRow>,
        reply: oneshot::Sender<UnitResult>,
    ) -> Result<QueuedAcceptance, StoreError> {
        if !self.is_open() {
            return Err(StoreError::Overloaded);
        }
        Ok(QueuedAcceptance {
            rows,
            reply,
            enqueued_at: Instant::now(),
            origin: tracing::Span::current(),
        })
    }

    /// The batch worker took `queued` off the queue: `None` (answered `Overloaded`, never
    /// written) when it waited longer than `max_queue_wait`. A shed row also closes the gate,
    /// even when it leaves a batch with no acceptance to judge the queue by.
    pub(crate) fn keep_unless_expired(&self, queued: QueuedAcceptance) -> Option<QueuedAcceptance> {
        if !self.expired(queued.enqueued_at) {
            return Some(queued);
        }
        self.batch_taken(queued.enqueued_at);
        let _ = queued.reply.send(Err(StoreError::Overloaded));
        None
    }

    /// The batch worker took a batch whose oldest acceptance was enqueued at `oldest`.
    pub(crate) fn batch_taken(&self, oldest: Instant) {
        let waited = oldest.elapsed();
        if waited > self.max_wait / 2 {
            self.close();
        } else if waited < self.max_wait / 4 {
            self.overloaded.store(false, Ordering::Relaxed);
        }
    }

    /// The batch worker found the queue empty: nothing is waiting, so admit again.
    pub(crate) fn queue_empty(&self) {
        self.overloaded.store(false, Ordering::Relaxed);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ago(ms: u64) -> Instant {
        Instant::now()
            .checked_sub(Duration::from_millis(ms))
            .expect("clock far enough from its origin")
    }

    #[test]
    fn closes_when_rows_wait_half_the_budget_and_opens_below_a_quarter() {
        let admission = Admission::new(Duration::from_millis(100));
        assert!(admission.is_open());
        admission.batch_taken(ago(10));
        assert!(admission.is_open());
        admission.batch_taken(ago(60));
        assert!(
            !admission.is_open(),
            "oldest row waited over half the budget"
        );
        admission.batch_taken(ago(40));
        assert!(
            !admission.is_open(),
            "between a quarter and a half: unchanged"
        );
        admission.batch_taken(ago(10));
        assert!(admission.is_open());
    }

    #[test]
    fn an_empty_queue_always_opens() {
        let admission = Admission::new(Duration::from_millis(100));
        admission.batch_taken(ago(90));
        assert!(!admission.is_open());
        admission.queue_empty();
        assert!(admission.is_open());
    }

    #[test]
    fn rows_older_than_the_budget_are_expired() {
        let admission = Admission::new(Duration::from_millis(50));
        assert!(!admission.expired(Instant::now()));
        assert!(admission.expired(ago(60)));
    }

    #[test]
    fn a_closed_gate_reopens_on_its_own_after_max_wait() {
        let admission = Admission::new(Duration::from_millis(40));
        admission.batch_taken(ago(30));
        assert!(!admission.is_open());
        // No batch is taken and nobody finds the queue empty: it reopens anyway.
        std::thread::sleep(Duration::from_millis(60));
        assert!(admission.is_open());
        // A batch that still waited too long closes it again, for another max_wait.
        admission.batch_taken(ago(30));
        assert!(!admission.is_open());
    }
}
