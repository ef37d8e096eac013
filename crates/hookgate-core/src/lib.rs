//! Sans-I/O domain of hookgate.
//!
//! Nothing here performs I/O, spawns tasks or reads the clock: time and randomness are
//! arguments. The principal types are [`Envelope`] (what an adapter extracts from a verified
//! body), [`InboxStatus`] / [`Outcome`] / [`OutboxStatus`] (the status machine, spelled as
//! stored), and [`seal::Keyring`] (AEAD sealing of payloads at rest with the row identity as
//! associated data).

pub mod envelope;
pub mod failpoint;
pub mod retry;
pub mod seal;
pub mod status;

pub use envelope::{Envelope, RowIdentity};
pub use status::{EventSource, InboxStatus, OutboxStatus, Outcome};

/// The `tracing` target of the spans exported as OpenTelemetry traces (`ingress.request`,
/// `store.commit_batch`, `worker.attempt`, `relay.delivery`; docs/tracing.md). Only the
/// exporter's layer enables it: logs never show these spans, and without `[tracing]` no
/// subscriber is interested, so they cost nothing.
pub const TRACE_TARGET: &str = "hookgate::traces";
