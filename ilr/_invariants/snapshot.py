"""What the invariant checks read: one snapshot of the ilr tables and the evidence (docs/protocol.md §11)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from ilr._journal import history
from ilr._queries.snapshot import (
    LOAD_SELECT_CLAIMS,
    LOAD_SELECT_EFFECTS,
    LOAD_SELECT_GRANTS,
    LOAD_SELECT_JOURNAL,
    LOAD_SELECT_RESPONSES,
    LOAD_SELECT_SCHEDULE_TICKS,
    LOAD_SELECT_SIGNALS,
    LOAD_SELECT_SLOTS,
    LOAD_SELECT_SQL,
    LOAD_SELECT_SQL_2,
    LOAD_SELECT_STEPS,
    LOAD_SELECT_UNTICKED_WORKFLOWS,
    LOAD_SELECT_WORKFLOWS,
    LOAD_SET_SQL,
)


@dataclass
class Snapshot:
    """Everything the checks read, loaded in one repeatable-read transaction."""

    workflows: dict[str, dict]
    steps: list[dict]
    claims: list[dict]
    signals: list[dict]
    grants: dict[str, dict]
    effects: dict[str, dict]
    journal: dict[str, list[dict]]
    bodies: dict[str, list[str]]
    responses: list[dict]
    triggers: dict[str, str]
    indexes: set[str]
    evidence: dict = field(default_factory=dict)
    slots: list[dict] = field(default_factory=list)
    """ilr.slots, every row (released ones too), with queued_ts, acquired_ts, released_ts."""
    schedule_ticks: list[dict] = field(default_factory=list)
    """ilr.schedule_ticks with scheduled_ts, started_ts, created_ts and ended_ts (LOAD_SELECT_SCHEDULE_TICKS)."""
    unticked: list[dict] = field(default_factory=list)
    """Ids of first runs named as a schedule's tick that no tick row started."""

    @classmethod
    def load(cls, conn, evidence: dict | None = None) -> Snapshot:
        nested = conn.info.transaction_status != 0  # inside a caller's transaction (tests): reuse it
        with conn.transaction():
            if not nested:
                conn.execute(LOAD_SET_SQL)
            q = lambda sql: conn.execute(sql).fetchall()  # noqa: E731
            workflows = {r["id"]: r for r in q(LOAD_SELECT_WORKFLOWS)}
            steps = q(LOAD_SELECT_STEPS)
            claims = q(LOAD_SELECT_CLAIMS)
            signals = q(LOAD_SELECT_SIGNALS)
            grants = {r["id"]: r for r in q(LOAD_SELECT_GRANTS)}
            effects = {r["effect_id"]: r for r in q(LOAD_SELECT_EFFECTS)}
            journal: dict[str, list[dict]] = defaultdict(list)
            bodies: dict[str, list[str]] = defaultdict(list)
            for r in q(LOAD_SELECT_JOURNAL):
                bodies[r["effect_id"]].append(r["body"])
                try:
                    journal[r["effect_id"]].append(json.loads(r["body"]))
                except ValueError:
                    journal[r["effect_id"]].append({"kind": "?", "unparseable": True})
            responses = q(LOAD_SELECT_RESPONSES)
            triggers = {r["tgname"]: r["tgenabled"] for r in q(LOAD_SELECT_SQL)}
            indexes = {r["indexname"] for r in q(LOAD_SELECT_SQL_2)}
            slots = q(LOAD_SELECT_SLOTS)
            ticks = q(LOAD_SELECT_SCHEDULE_TICKS)
            unticked = q(LOAD_SELECT_UNTICKED_WORKFLOWS)
        return cls(
            workflows,
            steps,
            claims,
            signals,
            grants,
            effects,
            dict(journal),
            dict(bodies),
            responses,
            triggers,
            indexes,
            evidence or {},
            slots,
            ticks,
            unticked,
        )

    # -- derived views ---------------------------------------------------------------------------

    def claim_windows(self) -> dict[tuple[str, int], tuple[float, float]]:
        """(workflow_id, epoch) -> (claimed_at, next claim's claimed_at or +inf), unix seconds."""
        windows = {}
        by_wf: dict[str, list[dict]] = defaultdict(list)
        for c in self.claims:
            by_wf[c["workflow_id"]].append(c)
        for wf, cs in by_wf.items():
            for i, c in enumerate(cs):
                end = cs[i + 1]["ts"] if i + 1 < len(cs) else float("inf")
                windows[(wf, c["epoch"])] = (c["ts"], end)
        return windows

    @staticmethod
    def authorized_at(e: dict) -> float:
        """When the transaction that authorized this send committed: a DISPATCHED or RESENT
        entry's ts, or the T_resolve time a resend's COMMITTED records in rechecked.at."""
        if e.get("kind") in ("DISPATCHED", "RESENT"):
            return e.get("ts", 0)
        return (e.get("rechecked") or {}).get("at", e.get("ts", 0))

    def sends(self) -> list[tuple[str, dict]]:
        """(effect_id, entry) for every entry that authorized a send: DISPATCHED and RESENT (and a
        resend COMMITTED of a journal older than RESENT), as ``receipts.send_entries``."""
        return [(eid, e) for eid, entries in self.journal.items() for e in history.send_entries(entries)]

    def ledger_by_effect(self) -> dict[str, list[dict]] | None:
        ledger = self.evidence.get("ledger")
        if ledger is None:
            return None
        out: dict[str, list[dict]] = defaultdict(list)
        for row in ledger:
            eid = row.get("effect_id") or row.get("key")
            if eid and row.get("source", "api") == "api":
                out[eid].append(row)
        return out

    def posts_by_key(self) -> dict[str, list[dict]] | None:
        log = self.evidence.get("access_log")
        if log is None:
            return None
        out: dict[str, list[dict]] = defaultdict(list)
        for e in log:
            if e.get("method") == "POST" and e.get("path") == "/refunds" and e.get("key"):
                out[e["key"]].append(e)
        return out


Check = Callable[[Snapshot], list]


def violation(**kw) -> dict:
    """A violation as plain data: the named rows and values, datetimes as ISO strings."""
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in kw.items()}
