//! One integration test binary for the gateway: real sockets, real SQLite, the real binary for
//! crash and signal tests.

mod support;

#[cfg(feature = "bench")]
mod bench;
mod cli;
mod crash;
mod delivery;
mod hostile;
mod outbound;
mod pipeline;
mod postgres;
mod processing;
mod providers;
mod roles;
mod secrets;
mod stage_faults;
mod tls;
mod vectors;
