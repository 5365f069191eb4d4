-- The trace context a workflow's spans descend from (docs/guides/telemetry.md, "The caller's
-- trace"): the W3C traceparent of the span that started it. rt.start writes its own
-- interlock.start span's (a child of the caller's current span, a Django request's); a child
-- workflow gets its parent's trace and its parent's workflow span; a continue-as-new successor
-- and a fork keep their predecessor's. Null: no span was recording at the start, and the
-- workflow's trace is its lineage root's derived one, as before. Durable, so every worker that
-- runs the workflow, after any crash, emits its spans in the same trace under the same parent.
alter table ilr.workflows add column if not exists trace_context text;
