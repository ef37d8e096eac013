//! Opening a store from its URL: the one place that knows which URL means which backend.

use std::sync::Arc;

use crate::postgres::{PostgresOptions, PostgresStore};
use crate::sqlite::SqliteStore;
use crate::{GroupCommitOptions, SharedStore, StoreError};

/// What [`open`] needs besides the URL (the `[store]` section of the config).
#[derive(Debug, Clone)]
pub struct OpenOptions {
    /// Most database connections (PostgreSQL; SQLite has one writer and a few readers).
    pub pool_size: usize,
    pub group_commit: GroupCommitOptions,
}

impl Default for OpenOptions {
    fn default() -> Self {
        Self {
            pool_size: PostgresOptions::default().pool_size,
            group_commit: GroupCommitOptions::default(),
        }
    }
}

/// Opens (and migrates) the backend named by `url`: `sqlite://path` is SQLite (see
/// [`SqliteStore::path_from_url`]); anything else is a PostgreSQL connection string, URL or
/// `key=value` form, optionally with `schema=NAME`.
pub async fn open(url: &str, options: OpenOptions) -> Result<SharedStore, StoreError> {
    if url.starts_with("sqlite://") {
        let store = SqliteStore::open_url(url, options.group_commit)?;
        Ok(Arc::new(store))
    } else {
        let options = PostgresOptions {
            pool_size: options.pool_size,
            group_commit: options.group_commit,
            ..PostgresOptions::default()
        };
        Ok(Arc::new(PostgresStore::connect(url, options).await?))
    }
}
