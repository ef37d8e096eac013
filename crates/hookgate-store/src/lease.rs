//! What the inbox and the outbox share as leased tables: a worker that fails an attempt puts
//! its row back to wait (due again later) or marks it `FAILED` — only while it still holds
//! the lease. One statement, rendered for each backend's placeholder syntax.

/// A table whose rows workers lease.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum LeasedTable {
    Inbox,
    Outbox,
}

impl LeasedTable {
    /// The status a row has while it waits for (another) attempt.
    fn waiting(self) -> &'static str {
        match self {
            LeasedTable::Inbox => "RECEIVED",
            LeasedTable::Outbox => "PENDING",
        }
    }

    /// The status after a failed attempt: waiting again when it is retried, else `FAILED`.
    pub(crate) fn status_after_failure(self, retry_at_ms: Option<i64>) -> &'static str {
        match retry_at_ms {
            Some(_) => self.waiting(),
            None => "FAILED",
        }
    }

    /// The fenced failure statement. Parameters: 1 row id, 2 lease owner, 3 now (ms),
    /// 4 new status, 5 next attempt (ms or NULL), 6 bounded error. `placeholder(n)` renders
    /// the backend's n-th parameter (`?n` for SQLite, `$n` for PostgreSQL).
    pub(crate) fn fail_sql(self, placeholder: fn(u8) -> String) -> String {
        let (table, key) = match self {
            LeasedTable::Inbox => ("inbox", "inbox_id"),
            LeasedTable::Outbox => ("outbox", "outbox_id"),
        };
        let p = placeholder;
        format!(
            "UPDATE {table} SET status = {}, next_attempt_at = {}, last_error = {}, \
                 lease_owner = NULL, lease_until = NULL \
             WHERE {key} = {} AND status = '{}' AND lease_owner = {} AND lease_until > {}",
            p(4),
            p(5),
            p(6),
            p(1),
            self.waiting(),
            p(2),
            p(3),
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statements_name_their_table_key_and_waiting_status() {
        let sql = LeasedTable::Outbox.fail_sql(|n| format!("${n}"));
        assert!(sql.starts_with("UPDATE outbox SET status = $4"));
        assert!(sql.contains("WHERE outbox_id = $1 AND status = 'PENDING'"));
        let sql = LeasedTable::Inbox.fail_sql(|n| format!("?{n}"));
        assert!(sql.contains("WHERE inbox_id = ?1 AND status = 'RECEIVED' AND lease_owner = ?2"));
        assert_eq!(LeasedTable::Inbox.status_after_failure(Some(1)), "RECEIVED");
        assert_eq!(LeasedTable::Outbox.status_after_failure(None), "FAILED");
    }
}
