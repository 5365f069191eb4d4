"""Statements the tests run on ilr.timelines and the catalog: reads of state the public API does not give, and the
rows they seed or tamper with on purpose."""

from __future__ import annotations

DELETE_TIMELINES = "delete from ilr.timelines"
"""Delete rows of ilr.timelines (``integration/test_failover_seen.new_timeline``)."""

SEED_TIMELINES_AN_HOUR_AGO = "insert into ilr.timelines (timeline_id, seen_at) values (%s, now() - interval '1 hour')"
"""Seed rows of ilr.timelines (``integration/test_failover_seen.new_timeline``)."""

SEED_TIMELINES = "insert into ilr.timelines (timeline_id, seen_at) values (%s, %s)"
"""Seed rows of ilr.timelines (``integration/test_failover_seen.new_timeline``)."""

TIMELINE_ID_SEEN_AT_OF_TIMELINES = "select timeline_id, seen_at from ilr.timelines"
"""Read ilr.timelines (``integration/test_failover_seen.new_timeline``)."""
