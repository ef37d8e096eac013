//! Classification of SQLite failures into [`StoreError`] kinds (503 vs 500).
//!
//! Messages come from SQLite and rusqlite, which never include bound values, so no payload
//! or identifier bytes leak into errors.

use rusqlite::ErrorCode;

use crate::StoreError;

/// Maps a failure outside a commit. Disk full, I/O, busy, locking and open failures are
/// [`StoreError::Unavailable`] (the provider retries and the unique key converges); a
/// malformed database file or a value this build cannot read is [`StoreError::Corrupt`].
pub(super) fn from_sqlite(err: rusqlite::Error) -> StoreError {
    match &err {
        rusqlite::Error::SqliteFailure(e, _) => match e.code {
            ErrorCode::DatabaseCorrupt | ErrorCode::NotADatabase => {
                StoreError::Corrupt(err.to_string())
            }
            _ => StoreError::Unavailable(err.to_string()),
        },
        rusqlite::Error::FromSqlConversionFailure(..)
        | rusqlite::Error::IntegralValueOutOfRange(..)
        | rusqlite::Error::InvalidColumnType(..) => StoreError::Corrupt(err.to_string()),
        _ => StoreError::Unavailable(err.to_string()),
    }
}

/// Whether the error says the connection or the file is in trouble (as opposed to one
/// statement being refused), so the writer should start from a fresh connection.
pub(super) fn is_environmental(err: &rusqlite::Error) -> bool {
    matches!(
        err.sqlite_error_code(),
        Some(
            ErrorCode::SystemIoFailure
                | ErrorCode::DiskFull
                | ErrorCode::CannotOpen
                | ErrorCode::DatabaseCorrupt
                | ErrorCode::NotADatabase
                | ErrorCode::OutOfMemory
        )
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn failure(code: i32) -> rusqlite::Error {
        rusqlite::Error::SqliteFailure(rusqlite::ffi::Error::new(code), None)
    }

    #[test]
    fn disk_full_and_io_are_unavailable() {
        assert!(matches!(
            from_sqlite(failure(rusqlite::ffi::SQLITE_FULL)),
            StoreError::Unavailable(_)
        ));
        assert!(matches!(
            from_sqlite(failure(rusqlite::ffi::SQLITE_IOERR)),
            StoreError::Unavailable(_)
        ));
        assert!(matches!(
            from_sqlite(failure(rusqlite::ffi::SQLITE_BUSY)),
            StoreError::Unavailable(_)
        ));
        assert!(is_environmental(&failure(rusqlite::ffi::SQLITE_FULL)));
    }

    #[test]
    fn corruption_is_corrupt() {
        assert!(matches!(
            from_sqlite(failure(rusqlite::ffi::SQLITE_CORRUPT)),
            StoreError::Corrupt(_)
        ));
        assert!(matches!(
            from_sqlite(failure(rusqlite::ffi::SQLITE_NOTADB)),
            StoreError::Corrupt(_)
        ));
    }
}
