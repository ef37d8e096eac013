//! What both backends' migrations share: the version check and the time they are recorded
//! at (`schema_migrations(version, applied_at)`). The statements and the locking differ.

use std::time::{SystemTime, UNIX_EPOCH};

use crate::StoreError;

/// A database at `current` may be migrated by a build whose newest version is `latest`
/// unless it was written by a newer build, which is refused rather than guessed at.
pub(crate) fn check_not_newer(current: i64, latest: i64) -> Result<(), StoreError> {
    if current > latest {
        return Err(StoreError::Config(format!(
            "database schema version {current} is newer than this build's {latest}"
        )));
    }
    Ok(())
}

/// `applied_at` of migrations applied now (unix ms).
pub(crate) fn applied_at_ms() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
}
