-- The operations figures (ilr._telemetry.figures, docs/guides/operations-page.md): two partial
-- indexes, so the stuck workflows and the ambiguous effects are index scans of the few rows that
-- need a person, not scans of the tables (manage.py bench_figures, results/figures_cost.md).
-- Keyed by the primary key, which no update changes: they add no column that an update writes,
-- so the updates that are HOT today (a heartbeat's lease, an effect's dispatch) stay HOT.
create index if not exists wf_stuck on ilr.workflows (id) where status = 'stuck';
create index if not exists effects_ambiguous on ilr.effects (effect_id)
  where state = 'ambiguous' and reconciled is null;
