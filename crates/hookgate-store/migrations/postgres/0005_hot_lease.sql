-- hookgate PostgreSQL schema, version 5: leases update the inbox row in place.
-- A lease writes only lease_owner, lease_until and attempt_count. While lease_until was a
-- column of `inbox_due`, every lease was a non-HOT update: a new row version on another page
-- and a new entry in each of the inbox's five indexes. The lease query's lease_until test is
-- a filter on the fetched row either way (an OR cannot be an index condition), so the index
-- loses nothing by leaving it out; with room kept free on each heap page (fillfactor 80),
-- PostgreSQL updates the leased row on its own page and touches no index.
-- Measured side by side (closed loop, workers on): ~6 % more acknowledgements/s.
DROP INDEX inbox_due;
CREATE INDEX inbox_due ON inbox (next_attempt_at NULLS FIRST) WHERE status = 'RECEIVED';
ALTER TABLE inbox SET (fillfactor = 80);
