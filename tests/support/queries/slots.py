"""Statements the tests run on ilr.slots: reads of state the public API does not give, and the rows they seed or
tamper with on purpose."""

from __future__ import annotations

ACQUIRED_RELEASED_OF_SLOTS_BY_KEY = (
    "select extract(epoch from acquired_at)::float8 as a, extract(epoch from released_at)::float8 as b "
    "from ilr.slots where key = 'queue:two_at_a_time' and acquired_at is not null"
)
"""Read ilr.slots (``faults/test_queues.test_three_workers_run_at_most_two_of_a_queue_at_once``)."""

NOT_BEFORE_OF_SLOTS_BY_KEY_WORKFLOW_ID = (
    "select extract(epoch from not_before)::float8 as t from ilr.slots "
    "where key = %s and workflow_id like %s and not_before is not null order by 1"
)
"""Read ilr.slots (``faults/test_queues.scheduled``)."""

SEED_SLOTS = (
    "insert into ilr.slots (key, workflow_id, slot_limit, slot_no, queued_at, acquired_at) values "
    "('acct:1', 'key-holder', 1, 0, now() - interval '50 s', now() - interval '50 s'), "
    "('acct:1', 'key-waiter', 1, null, now() - interval '45 s', null)"
)
"""Seed rows of ilr.slots (``support/ops_state.seed``)."""

SET_SLOTS_NOT_BEFORE_BY_WORKFLOW_ID = (
    "update ilr.slots set not_before = not_before - interval '10 s' where workflow_id = 'X1'"
)
"""Set columns on ilr.slots
(``integration/test_slot_races.test_the_sweep_and_the_holders_end_racing_admit_the_put_off_start_once``)."""

SET_SLOTS_QUEUED_AT_DEFERRED_UNTIL_BY_WORKFLOW_ID_KEY = (
    "update ilr.slots set queued_at = clock_timestamp() - interval '1 s', "
    "deferred_until = clock_timestamp() - interval '1 s' where workflow_id = 'X2' and key = %s"
)
"""Set columns on ilr.slots
(``integration/test_slot_races.test_the_sweep_and_the_holders_end_racing_admit_the_put_off_start_once``)."""

WORKFLOW_ID_ACQUIRED_OF_SLOTS_BY_KEY = (
    "select workflow_id, extract(epoch from acquired_at)::float8 as t from ilr.slots "
    "where key = 'queue:one_at_a_time_slow_per_key' and acquired_at is not null"
)
"""Read ilr.slots
(``faults/test_queues.test_a_start_put_off_by_its_keys_rate_leaves_the_queue_slot_to_another_key``)."""


def seed_slot(t: str, acq: str, rel: str, nb: str) -> str:
    """Seed a row of ilr.slots (limit 1) (``integration/test_invariants._slot``): ``t`` is the SQL of its
    queued_at, ``acq``/``rel``/``nb`` those of acquired_at, released_at and not_before."""
    return (
        "insert into ilr.slots (key, workflow_id, slot_limit, slot_no, queued_at, acquired_at, released_at, "
        f"released_why, not_before) values (%s, %s, 1, %s, {t}, {acq}, {rel}, "
        f"case when %s::float8 is null then null else 'completed' end, {nb})"
    )
