//! Replay defence on PostgreSQL: the digest claims of an acceptance batch.
//!
//! Runs in the acceptance transaction after the inbox insert, on the rows inserted now that
//! carry a [`crate::ReplayDigest`] (a key already stored is a plain duplicate: a retry under
//! the same id wins over the digest). Batches without such rows run no statement here.
//!
//! 1. Per `(endpoint_id, digest)`, the earliest row by arrival claims it; later rows of the
//!    batch with that body are replays of whoever holds the claim.
//! 2. One `INSERT … ON CONFLICT (endpoint_id, digest) DO UPDATE … WHERE` the held claim has
//!    expired, in `(endpoint_id, digest)` order (batches lock claims in one order, after all
//!    their inbox keys: no lock cycle). A claim a concurrent transaction is inserting makes
//!    this wait for its outcome; `DO UPDATE` then judges (and locks) the committed claim, so
//!    two concurrent copies of one body cannot both win.
//! 3. Claims not won are read back (a new statement sees the winner's commit), and the rows
//!    that lost are deleted again before COMMIT: never visible, no work created.

use std::collections::HashMap;

use deadpool_postgres::Transaction;

use super::error::Failure;
use super::tx::Failed;
use crate::{Acceptance, NewInboxRow};

const CLAIM_SQL: &str = "\
INSERT INTO replay_digests (endpoint_id, digest, inbox_id, received_at, expires_at)
SELECT endpoint_id, digest, inbox_id, received_at, expires_at
FROM unnest($1::text[], $2::bytea[], $3::text[], $4::int8[], $5::int8[])
     WITH ORDINALITY AS t(endpoint_id, digest, inbox_id, received_at, expires_at, ord)
ORDER BY ord
ON CONFLICT (endpoint_id, digest) DO UPDATE
   SET inbox_id = EXCLUDED.inbox_id,
       received_at = EXCLUDED.received_at,
       expires_at = EXCLUDED.expires_at
 WHERE replay_digests.expires_at <= EXCLUDED.received_at
RETURNING endpoint_id, digest";

const CLAIMANTS_SQL: &str = "\
SELECT r.endpoint_id, r.digest, r.inbox_id
FROM replay_digests r
JOIN unnest($1::text[], $2::bytea[]) AS k(endpoint_id, digest)
  ON r.endpoint_id = k.endpoint_id AND r.digest = k.digest";

const UNDO_SQL: &str = "DELETE FROM inbox WHERE inbox_id = ANY($1::text[])";

type Claim = (String, Vec<u8>);

/// Settles the digest claims of `rows` (the batch's distinct rows, `out` their acceptances
/// so far, `arrival` their arrival positions): a row that loses becomes
/// [`Acceptance::ReplaySuspected`] and its inbox row is deleted.
pub(super) async fn settle(
    tx: &Transaction<'_>,
    rows: &[&NewInboxRow],
    arrival: &[usize],
    out: &mut [Acceptance],
) -> Result<(), Failed> {
    let mut candidates: Vec<usize> = (0..rows.len())
        .filter(|&i| {
            rows[i].replay_digest.is_some() && matches!(out[i], Acceptance::Accepted { .. })
        })
        .collect();
    if candidates.is_empty() {
        return Ok(());
    }
    let claim_of = |i: usize| {
        let digest = rows[i]
            .replay_digest
            .as_ref()
            .map_or(&[][..], |d| &d.digest[..]);
        (rows[i].endpoint_id.as_str(), digest)
    };
    candidates.sort_by(|&a, &b| {
        claim_of(a)
            .cmp(&claim_of(b))
            .then(arrival[a].cmp(&arrival[b]))
    });
    // The first row of each body claims it; `followers` are the rest, by their claimer.
    let mut claimers: Vec<usize> = Vec::new();
    let mut followers: Vec<(usize, usize)> = Vec::new();
    for &i in &candidates {
        match claimers.last() {
            Some(&c) if claim_of(c) == claim_of(i) => followers.push((i, c)),
            _ => claimers.push(i),
        }
    }

    let endpoints: Vec<&str> = claimers.iter().map(|&i| claim_of(i).0).collect();
    let digests: Vec<&[u8]> = claimers.iter().map(|&i| claim_of(i).1).collect();
    let ids: Vec<&str> = claimers
        .iter()
        .map(|&i| rows[i].inbox_id.as_str())
        .collect();
    let received: Vec<i64> = claimers.iter().map(|&i| rows[i].received_at_ms).collect();
    let expires: Vec<i64> = claimers
        .iter()
        .map(|&i| {
            let window = rows[i]
                .replay_digest
                .as_ref()
                .map_or(0, |d| d.window_ms.max(0));
            rows[i].received_at_ms.saturating_add(window)
        })
        .collect();
    let claim = tx.prepare_cached(CLAIM_SQL).await?;
    let won: std::collections::HashSet<Claim> = tx
        .query(&claim, &[&endpoints, &digests, &ids, &received, &expires])
        .await?
        .iter()
        .map(|r| (r.get::<_, String>(0), r.get::<_, Vec<u8>>(1)))
        .collect();
    let owned = |i: usize| (claim_of(i).0.to_owned(), claim_of(i).1.to_vec());
    let lost: Vec<usize> = claimers
        .iter()
        .copied()
        .filter(|&i| !won.contains(&owned(i)))
        .collect();

    let mut holders: HashMap<Claim, String> = HashMap::new();
    if !lost.is_empty() {
        let select = tx.prepare_cached(CLAIMANTS_SQL).await?;
        let e: Vec<&str> = lost.iter().map(|&i| claim_of(i).0).collect();
        let d: Vec<&[u8]> = lost.iter().map(|&i| claim_of(i).1).collect();
        for row in tx.query(&select, &[&e, &d]).await? {
            holders.insert((row.get(0), row.get(1)), row.get(2));
        }
    }
    let holder_of = |claimer: usize| -> Result<String, Failed> {
        if won.contains(&owned(claimer)) {
            return Ok(rows[claimer].inbox_id.clone());
        }
        holders.get(&owned(claimer)).cloned().ok_or_else(|| {
            // A claim cannot vanish inside our transaction (we hold its lock); be safe.
            Failed::Db(Failure::Retry("replay digest claim not found".into()))
        })
    };

    let mut undo: Vec<&str> = Vec::new();
    for (i, claimer) in lost
        .iter()
        .map(|&i| (i, i))
        .chain(followers.iter().copied())
    {
        out[i] = Acceptance::ReplaySuspected {
            inbox_id: holder_of(claimer)?,
        };
        undo.push(rows[i].inbox_id.as_str());
    }
    if !undo.is_empty() {
        let delete = tx.prepare_cached(UNDO_SQL).await?;
        let deleted = tx.execute(&delete, &[&undo]).await?;
        if deleted != undo.len() as u64 {
            return Err(Failed::Db(Failure::Retry(
                "a suspected replay's row was not found to undo".into(),
            )));
        }
    }
    Ok(())
}
