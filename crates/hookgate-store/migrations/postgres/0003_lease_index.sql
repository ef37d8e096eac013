-- hookgate PostgreSQL schema, version 3: an index in the lease query's own order.
-- Leasing orders due RECEIVED rows by `next_attempt_at NULLS FIRST` (rows never attempted have
-- none). The version 1 index is ASC NULLS LAST, so every lease sorted the whole backlog; with
-- this one the LIMIT stops after the first due rows whatever the backlog.
DROP INDEX inbox_due;
CREATE INDEX inbox_due ON inbox (next_attempt_at NULLS FIRST, lease_until) WHERE status = 'RECEIVED';
