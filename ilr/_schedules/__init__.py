"""Schedules: a workflow started per tick of a cron or interval spec (docs/protocol.md §5.8)."""
