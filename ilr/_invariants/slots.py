"""Invariants of concurrency keys (docs/protocol.md §5.4, §11), read from ilr.slots' history.

Times are the clock_timestamp() values the slot functions wrote under the key's lock, so the
intervals of one key are ordered as the lock ordered them; a claim's time is its transaction's
now(), and a workflow becomes claimable only at its acquired_at (migration 0016).
"""

from __future__ import annotations

from collections import defaultdict

from ilr._concurrency import QUEUE_KEY_PREFIX
from ilr._invariants.snapshot import Snapshot, violation
from ilr._statuses import ACTIVE

INF = float("inf")


def _by_key(s: Snapshot) -> dict[str, list[dict]]:
    out: dict[str, list[dict]] = defaultdict(list)
    for r in s.slots:
        out[r["key"]].append(r)
    return out


def slot_mutex(s: Snapshot) -> list:
    """At no time does a key have more holders than the limit of the one that joined them: the
    holding intervals [acquired_at, released_at) of a key, swept in time order (a release before
    an acquisition at the same instant)."""
    out = []
    for key, rows in _by_key(s).items():
        events = []
        for r in rows:
            if r["acquired_ts"] is None:
                continue
            events.append((r["acquired_ts"], 1, r))
            if r["released_ts"] is not None:
                events.append((r["released_ts"], 0, r))
        held: dict[int, dict] = {}
        for _, kind, r in sorted(events, key=lambda e: (e[0], e[1], e[2]["id"])):
            if kind == 0:
                held.pop(r["id"], None)
                continue
            held[r["id"]] = r
            if len(held) > r["slot_limit"]:
                out.append(
                    violation(
                        key=key,
                        limit=r["slot_limit"],
                        holders=sorted(h["workflow_id"] for h in held.values()),
                        at=r["acquired_at"],
                    )
                )
    return out


def _run_keys(wf: dict) -> list[str]:
    """The keys a workflow holds to run: its concurrency key, its limited or rated queue's key."""
    keys = [wf["concurrency_key"]] if wf.get("concurrency_key") is not None else []
    if wf.get("queue_limit") is not None:
        keys.append(QUEUE_KEY_PREFIX + wf["queue"])
    return keys


def no_run_without_slot(s: Snapshot) -> list:
    """Every worker claim of a workflow with a concurrency key or a limited or rated queue falls
    inside an interval in which the workflow held a slot of each of those keys, and not before
    the rates let it start (its ``not_before``); synthetic owners (``$``-named) excepted: a
    queued or rate-delayed workflow never starts early."""
    held: dict[tuple[str, str], list[tuple[float, float]]] = defaultdict(list)
    not_before: dict[str, float] = {}
    for r in s.slots:
        if r["acquired_ts"] is not None:
            end = r["released_ts"] if r["released_ts"] is not None else INF
            held[(r["workflow_id"], r["key"])].append((r["acquired_ts"], end))
        if r.get("not_before_ts") is not None:
            not_before[r["workflow_id"]] = max(not_before.get(r["workflow_id"], -INF), r["not_before_ts"])
    out = []
    for c in s.claims:
        wf = s.workflows.get(c["workflow_id"])
        if wf is None or str(c.get("owner") or "").startswith("$"):
            continue
        for key in _run_keys(wf):
            intervals = held.get((c["workflow_id"], key), [])
            if not any(a <= c["ts"] <= b for a, b in intervals):
                out.append(
                    violation(
                        workflow_id=c["workflow_id"],
                        epoch=c["epoch"],
                        owner=c["owner"],
                        claimed_at=c["claimed_at"],
                        key=key,
                        held=intervals,
                    )
                )
        if c["ts"] < not_before.get(c["workflow_id"], -INF):
            out.append(
                violation(workflow_id=c["workflow_id"], epoch=c["epoch"], claimed_at=c["claimed_at"], rate="early")
            )
    return out


def rate_respected(s: Snapshot) -> list:
    """No key started more workflows in a period than its rate allows: for each start of a rated
    queue (``rate``) or of a concurrency key under its queue's ``per_key_rate``, the starts of
    that key whose not_before falls in [its not_before, + period) number at most the rate's n."""
    by_key: dict[str, list[float]] = defaultdict(list)
    rated = []
    for r in s.slots:
        if r.get("not_before_ts") is None:
            continue
        by_key[r["key"]].append(r["not_before_ts"])
        wf = s.workflows.get(r["workflow_id"]) or {}
        rates = wf.get("queue_rates") or {}
        rate = rates.get("rate") if r["key"].startswith(QUEUE_KEY_PREFIX) else rates.get("per_key_rate")
        if rate:
            rated.append((r, rate))
    out = []
    for r, (n, period) in rated:
        t = r["not_before_ts"]
        inside = sum(1 for x in by_key[r["key"]] if t <= x < t + period)
        if inside > n:
            out.append(violation(key=r["key"], workflow_id=r["workflow_id"], starts=inside, rate=[n, period], from_=t))
    return out


def slot_released_at_end(s: Snapshot) -> list:
    """No live slot row (held or queued) belongs to a workflow that completed, failed, was
    cancelled or continued: the end released it, the successor carried it (a stuck workflow
    keeps its slots until it is resumed and ends)."""
    out = []
    for r in s.slots:
        if r["released_at"] is not None:
            continue
        wf = s.workflows.get(r["workflow_id"])
        status = wf["status"] if wf else None
        if status not in ACTIVE and status != "stuck":
            out.append(violation(key=r["key"], workflow_id=r["workflow_id"], status=status, slot_no=r["slot_no"]))
    return out


def no_stranded_waiter(s: Snapshot) -> list:
    """No workflow waits on a key while a slot it fits is free (a release admits the first
    waiter in its own transaction); a waiter of a queue's key that its key's rate put off
    (``deferred_until`` set, migration 0018) holds no slot on purpose until the sweep finds its
    turn come, and is not counted. And no workflow waits for a key (``waiting.kind`` "slot" or
    "lock", or "rate" naming a key: put off) without a live row queued for it, which no release
    or sweep would ever admit."""
    out = []
    queued = {(r["workflow_id"], r["key"]) for r in s.slots if r["released_at"] is None and r["slot_no"] is None}
    for wf in s.workflows.values():
        w = wf.get("waiting") or {}
        keyed = w.get("kind") in ("slot", "lock") or (w.get("kind") == "rate" and "key" in w)
        if wf["status"] in ("pending", "sleeping") and keyed:
            if (wf["id"], w.get("key")) not in queued:
                out.append(violation(key=w.get("key"), workflow_id=wf["id"], waiting=w, row="none"))
    for key, rows in _by_key(s).items():
        live = [r for r in rows if r["released_at"] is None]
        taken = {r["slot_no"] for r in live if r["slot_no"] is not None}
        for w in (r for r in live if r["slot_no"] is None and r.get("deferred_until") is None):
            free = [n for n in range(w["slot_limit"]) if n not in taken]
            if free:
                out.append(violation(key=key, workflow_id=w["workflow_id"], free_slots=free))
    return out


def slot_fifo(s: Snapshot) -> list:
    """Waiters are admitted in order: when a waiter took slot n, no waiter of the same key that
    fit slot n and was still queued then came before it (a higher priority, or the same priority
    and an earlier queued_at)."""
    out = []
    for key, rows in _by_key(s).items():
        admitted = [r for r in rows if r["acquired_ts"] is not None and r["acquired_ts"] > r["queued_ts"]]
        for b in admitted:
            t = b["acquired_ts"]
            for a in rows:
                if a["id"] == b["id"] or a["queued_ts"] >= t or a["slot_limit"] <= b["slot_no"]:
                    continue
                queued_then = (a["acquired_ts"] is None or a["acquired_ts"] > t) and (
                    a["released_ts"] is None or a["released_ts"] > t
                )
                ahead = a["priority"] > b["priority"] or (
                    a["priority"] == b["priority"] and (a["queued_ts"], a["id"]) < (b["queued_ts"], b["id"])
                )
                if queued_then and ahead:
                    out.append(
                        violation(key=key, admitted=b["workflow_id"], passed_over=a["workflow_id"], at=b["acquired_at"])
                    )
    return out
