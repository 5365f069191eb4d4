-- HOT lease renewal (issue 9). Every fenced write and every heartbeat renews lease_expires_at.
-- While an index holds that column, each renewal is a non-HOT update: a new entry in every
-- index of the table. Indexing the running rows by id instead (a partial index, as small as
-- the set of running workflows) leaves lease_expires_at, updated_at and takeovers unindexed,
-- so renewals can be HOT updates, and fillfactor 80 keeps room on the page for the new
-- version. The claim's lapsed-lease branch and the claim's step read scan the running rows
-- through wf_running and filter on lease_expires_at; there are at most a few per worker slot.
drop index if exists ilr.wf_leased;
create index if not exists wf_running on ilr.workflows (id) where status = 'running';
alter table ilr.workflows set (fillfactor = 80);
