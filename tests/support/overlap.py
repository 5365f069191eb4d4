"""Whether the critical step bodies of one key's workflows overlapped in time, read from what
they logged (``tests.support.flows_flow_control.critical``: "enter" and "leave")."""

from __future__ import annotations

from collections import defaultdict


def spans(rt) -> dict[str, tuple]:
    """Per workflow chain (the id before '#'), the first "enter" and the last "leave" of its
    critical bodies, by the database clock."""
    rows = (
        rt.connection()
        .execute(
            "select workflow_id, name, at from public.test_invocations where name in ('enter', 'leave') order by id"
        )
        .fetchall()
    )
    out: dict[str, tuple] = {}
    for r in rows:
        chain = r["workflow_id"].split("#")[0]
        lo, hi = out.get(chain, (r["at"], r["at"]))
        out[chain] = (min(lo, r["at"]), max(hi, r["at"]))
    return out


def assert_one_at_a_time(rt, key_of: dict[str, str]) -> dict[str, list[str]]:
    """Assert that no two workflows of one key ran their bodies at the same time; returns each
    key's workflows in the order they entered."""
    by_key: dict[str, list[tuple]] = defaultdict(list)
    for wf, (a, b) in spans(rt).items():
        if wf in key_of:
            by_key[key_of[wf]].append((a, b, wf))
    for key, items in by_key.items():
        items.sort()
        for (_, b1, w1), (a2, _, w2) in zip(items, items[1:], strict=False):
            assert a2 > b1, f"{key}: {w2} entered at {a2} before {w1} left at {b1}"
    return {key: [wf for _, _, wf in sorted(items)] for key, items in by_key.items()}
