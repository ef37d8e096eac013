//! The rejection log, for both backends: a sample of rejected webhook requests (schema:
//! SQLite 10, PostgreSQL 11), written in batches by the binary's flusher from an in-memory
//! ring off the acceptance path, and read by `GET /api/v1/rejections`.
//!
//! An entry holds when, which endpoint, the cause (the answer's name: `invalid_signature`,
//! `stale_timestamp`, …), the header names with redacted values (JSON text, redacted by the
//! binary before it gets here), the body's size and keyed digest — never the body.
//! `rejection_counts` counts every rejection per minute, endpoint and cause, sampled or not.

use crate::StoreError;
use crate::rows::Columns;

/// One sampled rejection, as the flusher writes it.
#[derive(Clone, PartialEq, Eq)]
pub struct RejectionEntry {
    pub at_ms: i64,
    pub endpoint: String,
    pub cause: String,
    /// The detail of a `bad_request` (`missing_event_id`, …).
    pub reason: Option<String>,
    /// `[[name, redacted value], …]` as JSON text.
    pub headers_json: String,
    pub body_size: Option<u64>,
    /// Keyed digest of the body bytes, when the body was read.
    pub body_digest: Option<Vec<u8>>,
}

impl std::fmt::Debug for RejectionEntry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RejectionEntry")
            .field("at_ms", &self.at_ms)
            .field("endpoint", &self.endpoint)
            .field("cause", &self.cause)
            .field("body_size", &self.body_size)
            .finish_non_exhaustive()
    }
}

/// Rejections seen in one minute for one endpoint and cause (added to what is stored).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectionCount {
    /// Start of the minute, unix ms.
    pub minute_ms: i64,
    pub endpoint: String,
    pub cause: String,
    pub seen: u64,
}

/// A stored entry.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectionRecord {
    /// Increasing: the paging key.
    pub id: i64,
    pub entry: RejectionEntry,
}

/// Which entries a read is about; every given part must match.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RejectionQuery {
    pub endpoint: Option<String>,
    pub cause: Option<String>,
    /// `at >= since_ms`.
    pub since_ms: Option<i64>,
    /// `at < until_ms`.
    pub until_ms: Option<i64>,
    /// Entries older than this id (the previous page's last).
    pub before_id: Option<i64>,
    pub limit: u32,
}

/// Per-cause totals of a query.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RejectionCauseCount {
    pub cause: String,
    /// Rejections counted (every one, sampled or not).
    pub seen: u64,
    /// Entries kept in the log.
    pub logged: u64,
}

/// A bound parameter of a built statement.
#[derive(Debug, Clone)]
pub(crate) enum Param {
    Int(i64),
    Text(String),
}

/// `WHERE` clauses of a query with `$n` placeholders (SQLite reads them as `?n`), and their
/// parameters. `time` names the time column (`at` for entries, `minute` for counts); with
/// `page`, the `before_id` condition too.
pub(crate) fn conditions(q: &RejectionQuery, time: &str, page: bool) -> (String, Vec<Param>) {
    let mut clauses = Vec::new();
    let mut params = Vec::new();
    let mut push = |clause: &str, p: Param| {
        params.push(p);
        clauses.push(clause.replace('#', &format!("${}", params.len())));
    };
    if let Some(e) = &q.endpoint {
        push("endpoint = #", Param::Text(e.clone()));
    }
    if let Some(c) = &q.cause {
        push("cause = #", Param::Text(c.clone()));
    }
    if let Some(t) = q.since_ms {
        // A count's minute overlaps `since` when it ends after it.
        let (col, t) = if time == "minute" {
            ("minute > #", t - 60_000)
        } else {
            ("at >= #", t)
        };
        push(col, Param::Int(t));
    }
    if let Some(t) = q.until_ms {
        push(&format!("{time} < #"), Param::Int(t));
    }
    if page && let Some(id) = q.before_id {
        push("rejection_id < #", Param::Int(id));
    }
    let sql = if clauses.is_empty() {
        String::new()
    } else {
        format!(" WHERE {}", clauses.join(" AND "))
    };
    (sql, params)
}

pub(crate) const ENTRY_COLUMNS: &str =
    "rejection_id, at, endpoint, cause, reason, headers, body_size, body_digest";

pub(crate) fn list_sql(q: &RejectionQuery) -> (String, Vec<Param>) {
    let (where_sql, mut params) = conditions(q, "at", true);
    params.push(Param::Int(i64::from(q.limit)));
    let n = params.len();
    (
        format!(
            "SELECT {ENTRY_COLUMNS} FROM rejections{where_sql} \
             ORDER BY rejection_id DESC LIMIT ${n}"
        ),
        params,
    )
}

/// Seen per cause (from the counts) and logged per cause (from the entries).
pub(crate) fn counts_sql(q: &RejectionQuery) -> (String, Vec<Param>, String, Vec<Param>) {
    let (seen_where, seen_params) = conditions(q, "minute", false);
    let (logged_where, logged_params) = conditions(q, "at", false);
    (
        format!(
            "SELECT cause, CAST(sum(seen) AS BIGINT) FROM rejection_counts{seen_where} GROUP BY cause ORDER BY cause"
        ),
        seen_params,
        format!(
            "SELECT cause, count(*) FROM rejections{logged_where} GROUP BY cause ORDER BY cause"
        ),
        logged_params,
    )
}

/// Joins the two per-cause reads.
pub(crate) fn merge_counts(
    seen: Vec<(String, i64)>,
    logged: Vec<(String, i64)>,
) -> Vec<RejectionCauseCount> {
    let mut out: Vec<RejectionCauseCount> = seen
        .into_iter()
        .map(|(cause, n)| RejectionCauseCount {
            cause,
            seen: u64::try_from(n).unwrap_or(0),
            logged: 0,
        })
        .collect();
    for (cause, n) in logged {
        let n = u64::try_from(n).unwrap_or(0);
        match out.iter_mut().find(|c| c.cause == cause) {
            Some(c) => c.logged = n,
            None => out.push(RejectionCauseCount {
                cause,
                seen: n,
                logged: n,
            }),
        }
    }
    out.sort_by(|a, b| a.cause.cmp(&b.cause));
    out
}

/// Parameters: at, endpoint, cause, reason, headers, body size, body digest.
pub(crate) const INSERT_ENTRY: &str = "INSERT INTO rejections (at, endpoint, cause, reason, \
     headers, body_size, body_digest) VALUES ($1, $2, $3, $4, $5, $6, $7)";

/// Parameters: minute, endpoint, cause, seen.
pub(crate) const ADD_COUNT: &str = "INSERT INTO rejection_counts (minute, endpoint, cause, seen) \
     VALUES ($1, $2, $3, $4) ON CONFLICT (minute, endpoint, cause) \
     DO UPDATE SET seen = rejection_counts.seen + excluded.seen";

/// Retention, one batch: entries older than `$1` or beyond the newest `$2`, at most `$3`.
pub(crate) const TRIM_ENTRIES: &str = "DELETE FROM rejections WHERE rejection_id IN \
     (SELECT rejection_id FROM rejections \
      WHERE at < $1 OR rejection_id <= coalesce((SELECT rejection_id FROM rejections \
          ORDER BY rejection_id DESC LIMIT 1 OFFSET $2), -1) \
      ORDER BY rejection_id LIMIT $3)";

/// Counts of minutes older than `$1`.
pub(crate) const TRIM_COUNTS: &str = "DELETE FROM rejection_counts WHERE minute < $1";

/// An entry row in [`ENTRY_COLUMNS`] order.
pub(crate) fn entry_record(r: &impl Columns) -> Result<RejectionRecord, StoreError> {
    Ok(RejectionRecord {
        id: r.int(0)?,
        entry: RejectionEntry {
            at_ms: r.int(1)?,
            endpoint: r.text(2)?,
            cause: r.text(3)?,
            reason: r.opt_text(4)?,
            headers_json: r.text(5)?,
            body_size: r.opt_int(6)?.map(|n| u64::try_from(n).unwrap_or(0)),
            body_digest: r.opt_blob(7)?,
        },
    })
}

/// SQLite's text of a `$n` statement.
pub(crate) fn sqlite_text(sql: &str) -> String {
    sql.replace('$', "?")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn conditions_number_their_parameters_in_order() {
        let q = RejectionQuery {
            endpoint: Some("ep".into()),
            since_ms: Some(120_000),
            before_id: Some(9),
            limit: 10,
            ..Default::default()
        };
        let (sql, params) = list_sql(&q);
        assert!(
            sql.contains("endpoint = $1 AND at >= $2 AND rejection_id < $3"),
            "{sql}"
        );
        assert!(sql.ends_with("LIMIT $4"), "{sql}");
        assert_eq!(params.len(), 4);
        let (seen, _, logged, _) = counts_sql(&q);
        assert!(seen.contains("minute > $2"), "{seen}");
        assert!(!logged.contains("rejection_id"), "{logged}");
    }
}
