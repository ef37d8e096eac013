//! hookgate-store's integration tests, in one binary: the conformance suite (run on both
//! backends), then what is specific to SQLite and to PostgreSQL, and the commit failpoint
//! (built with `--features failpoints`).

#[macro_use]
mod conformance;
mod postgres;
mod postgres_tls;
mod sqlite;
#[cfg(feature = "failpoints")]
mod sqlite_failpoint;
