//! hookgate, the binary's library half: configuration, ingress pipeline, admin listener,
//! processing workers, outbox relay, secrets, telemetry and the operator CLI. `main.rs` only
//! parses arguments and calls in here, so integration tests drive the same code over real
//! sockets.
//!
//! Principal types: [`config::Config`] (resolved configuration), [`app::Gateway`] (a running
//! gateway), [`state::AppState`] (what every request sees), [`ingress::pipeline::handle`] (one
//! request in the ingress order of ARCHITECTURE.md, "One request").

pub mod admin;
pub mod app;
pub mod cli;
pub mod config;
pub mod ingress;
pub mod no_retry;
pub mod reconcile;
pub mod rejections;
pub mod relay;
pub mod secrets;
pub mod stage;
pub mod state;
pub mod tasks;
pub mod telemetry;
pub mod traces;
pub mod worker;
