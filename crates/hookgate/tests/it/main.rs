//! One integration test binary for the gateway: real sockets, real SQLite, the real binary for
//! crash and signal tests.

mod support;

mod api;
#[cfg(feature = "bench")]
mod bench;
mod cli;
mod codings_and_token_handshakes;
mod console;
mod crash;
mod delivery;
mod deploy;
mod github_reconcile;
mod handshakes;
mod holds;
mod hostile;
mod ignored_redelivery;
mod jobs;
mod keys;
mod outbound;
mod pipeline;
mod postgres;
mod processing;
mod provider_reconcile;
mod providers;
#[cfg(feature = "rabbitmq")]
mod rabbitmq;
#[cfg(feature = "rabbitmq")]
mod rabbitmq_restart;
mod reconcile;
#[cfg(feature = "redis-stream")]
mod redis_stream;
mod rejections;
mod retention;
mod roles;
mod routing;
mod secrets;
mod send_keys;
mod sequences;
mod stage_faults;
mod store_url;
mod tls;
#[cfg(feature = "otlp")]
mod traces;
mod user_packs;
mod vectors;
