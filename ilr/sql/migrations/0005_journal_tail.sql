-- The chain's tail by index (issue 9). Every appender reads its effect's last entry
-- (journal.LAST_HASH_SQL: where effect_id = $1 order by seq desc limit 1), twice per gated
-- effect. Without this index the read is a scan of (effect_id, prev) plus a sort, and for a
-- prepared statement PostgreSQL kept choosing a fresh custom plan for it (119 of 302
-- executions in one worker session), each costing more than the read itself. On
-- (effect_id, seq) the read is one backward index step, and the generic plan is as cheap.
create index if not exists journal_tail on ilr.journal (effect_id, seq);
