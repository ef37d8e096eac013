//! One integration test binary for the gateway: real sockets, real SQLite, the real binary for
//! crash and signal tests.

mod support;

mod cli;
mod crash;
mod pipeline;
mod postgres;
mod tls;
mod vectors;
