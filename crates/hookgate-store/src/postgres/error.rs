//! Classification of PostgreSQL failures into what the store does next and which
//! [`StoreError`] the caller sees (503 vs 500).
//!
//! Messages are built from the SQLSTATE and the server's primary message only, never its
//! DETAIL (which, for a unique violation, would quote key values), so no payload or
//! identifier bytes leak into errors.

use deadpool_postgres::PoolError;
use tokio_postgres::error::SqlState;

use crate::StoreError;

/// What a failed statement means for the transaction that ran it.
#[derive(Debug)]
pub(super) enum Failure {
    /// Deadlock or serialization failure: the server rolled back; run the whole batch again.
    Retry(String),
    /// The connection or the server is in trouble (down, shutting down, out of resources,
    /// timed out): every row of the batch gets this error.
    Fail(StoreError),
    /// The statement itself was refused (a value the database rejects): some row of the
    /// batch is bad; isolate it.
    Rejected(String),
}

/// A short, value-free description of `err`.
pub(super) fn describe(err: &tokio_postgres::Error) -> String {
    match err.as_db_error() {
        Some(db) => format!("{} {}: {}", db.severity(), db.code().code(), db.message()),
        // The driver's own message names only the step ("error performing TLS handshake");
        // its sources say why (an untrusted certificate, a refused connection).
        None => {
            let mut text = err.to_string();
            let mut source = std::error::Error::source(err);
            while let Some(cause) = source {
                text.push_str(": ");
                text.push_str(&cause.to_string());
                source = cause.source();
            }
            text
        }
    }
}

fn is_retryable(code: &SqlState) -> bool {
    *code == SqlState::T_R_DEADLOCK_DETECTED || *code == SqlState::T_R_SERIALIZATION_FAILURE
}

/// Whether the SQLSTATE says the server or the connection is in trouble rather than the
/// statement being wrong: connection exceptions (08), insufficient resources (53),
/// operator intervention incl. statement timeout and shutdown (57), system errors (58),
/// and a read-only transaction (25006: a standby after fail-over).
fn is_environmental(code: &SqlState) -> bool {
    let c = code.code();
    c.starts_with("08")
        || c.starts_with("53")
        || c.starts_with("57")
        || c.starts_with("58")
        || c == "25006"
        || c.starts_with("XX")
}

/// Classifies an error of a statement before COMMIT.
pub(super) fn classify(err: &tokio_postgres::Error) -> Failure {
    match err.code() {
        Some(code) if is_retryable(code) => Failure::Retry(describe(err)),
        Some(code) if is_environmental(code) => {
            Failure::Fail(StoreError::Unavailable(describe(err)))
        }
        Some(_) => Failure::Rejected(describe(err)),
        // No SQLSTATE: the connection closed, an I/O error, or a protocol error.
        None => Failure::Fail(StoreError::Unavailable(describe(err))),
    }
}

/// Classifies an error of COMMIT itself. A server-reported error means the transaction was
/// rolled back (known outcome); a connection that failed during COMMIT leaves it unknown.
pub(super) fn classify_commit(err: &tokio_postgres::Error) -> Failure {
    match err.code() {
        Some(code) if is_retryable(code) => Failure::Retry(describe(err)),
        Some(_) => Failure::Fail(StoreError::Unavailable(describe(err))),
        None => Failure::Fail(StoreError::CommitUnknown(describe(err))),
    }
}

/// Maps an error outside a write transaction (reads, pings, migrations).
pub(super) fn from_pg(err: &tokio_postgres::Error) -> StoreError {
    StoreError::Unavailable(describe(err))
}

/// Maps a failure to obtain a pooled connection: always 503, quickly.
pub(super) fn from_pool(err: PoolError) -> StoreError {
    match err {
        PoolError::Timeout(kind) => StoreError::Unavailable(format!(
            "no database connection available ({kind:?} timed out)"
        )),
        PoolError::Backend(e) => {
            StoreError::Unavailable(format!("cannot connect: {}", describe(&e)))
        }
        PoolError::Closed => StoreError::Unavailable("store is closed".into()),
        other => StoreError::Unavailable(other.to_string()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sqlstates_are_classified() {
        assert!(is_retryable(&SqlState::T_R_DEADLOCK_DETECTED));
        assert!(is_retryable(&SqlState::T_R_SERIALIZATION_FAILURE));
        assert!(is_environmental(&SqlState::ADMIN_SHUTDOWN));
        assert!(is_environmental(&SqlState::QUERY_CANCELED));
        assert!(is_environmental(&SqlState::TOO_MANY_CONNECTIONS));
        assert!(is_environmental(&SqlState::CONNECTION_FAILURE));
        assert!(!is_environmental(&SqlState::UNIQUE_VIOLATION));
        assert!(!is_environmental(&SqlState::CHARACTER_NOT_IN_REPERTOIRE));
    }
}
