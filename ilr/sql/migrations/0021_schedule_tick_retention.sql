-- Pruned tick rows (docs/protocol.md §5.8): the worker's tick transaction deletes a schedule's
-- tick rows older than ILR_SCHEDULE_TICK_RETENTION (and than its catch-up window and its next
-- tick), a batch at a time; ticks_pruned_through is the newest tick it deleted, so that no tick
-- at or before it is recorded or started again (a backfill refuses it) and ilr_check tells a
-- pruned tick's run from one no tick row started.
alter table ilr.schedules add column if not exists ticks_pruned_through timestamptz;
