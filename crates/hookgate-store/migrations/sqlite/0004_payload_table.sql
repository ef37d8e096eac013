-- hookgate SQLite schema, version 4: the sealed payload moves out of `inbox` into its own table.
-- SQLite stores a row as one record; a ~10 KiB payload spills into a chain of overflow pages.
-- Any UPDATE that changes the record's size (a lease fills `lease_owner`/`lease_until`,
-- completion sets `status`, `outcome`, `processed_at`) rewrites the whole record, overflow
-- pages included — into the WAL, then again at checkpoint — so each payload was written about
-- three times, and reading any column stored after `payload` walked its overflow chain.
-- Now the payload is written once, at acceptance, in the same savepoint as its inbox row, and
-- status updates rewrite only the small inbox record. DESIGN.md §4 allows this ("payload
-- (sealed) or payload_ref"); readers LEFT JOIN it, and the lease query never touches it.
--
-- A payload purged by retention has no row here (so `payload` is NOT NULL): migrated rows
-- whose payload was already NULL get none. A rowid table, not WITHOUT ROWID: large blobs
-- belong in rowid tables, where they do not bloat the key's B-tree pages.
--
-- PostgreSQL is not changed: TOAST keeps an unchanged out-of-line payload (`STORAGE
-- EXTERNAL`) out of row rewrites — an UPDATE copies only the pointer.
--
-- Dropping the column rewrites the inbox table once, inside the migration transaction; the
-- pages it frees are reused by new rows (`VACUUM` returns them to the file system).
CREATE TABLE inbox_payload (
    inbox_id TEXT NOT NULL PRIMARY KEY REFERENCES inbox (inbox_id),
    -- Sealed (`nonce || ciphertext`), never plaintext.
    payload  BLOB NOT NULL
) STRICT;

INSERT INTO inbox_payload (inbox_id, payload)
    SELECT inbox_id, payload FROM inbox WHERE payload IS NOT NULL;

ALTER TABLE inbox DROP COLUMN payload;
