"""What the invariant checks read: one snapshot of the ilr tables and the evidence (docs/protocol.md §11)."""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field

from ilr._journal import history


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

    @classmethod
    def load(cls, conn, evidence: dict | None = None) -> Snapshot:
        nested = conn.info.transaction_status != 0  # inside a caller's transaction (tests): reuse it
        with conn.transaction():
            if not nested:
                conn.execute("set transaction isolation level repeatable read, read only")
            q = lambda sql: conn.execute(sql).fetchall()  # noqa: E731
            workflows = {
                r["id"]: r
                for r in q(
                    "select id, name, version, status, epoch, owner, cancel_requested_at, available_at, waiting, "
                    "error, forked_from, extract(epoch from cancel_requested_at)::float8 as cancel_ts "
                    "from ilr.workflows"
                )
            }
            steps = q(
                "select workflow_id, seq, name, kind, fingerprint, output, error, epoch, created_at, "
                "extract(epoch from created_at)::float8 as ts from ilr.steps order by workflow_id, seq"
            )
            claims = q(
                "select *, extract(epoch from claimed_at)::float8 as ts from ilr.claims order by workflow_id, epoch"
            )
            signals = q("select * from ilr.signals order by id")
            grants = {
                r["id"]: r for r in q("select *, extract(epoch from revoked_at)::float8 as revoked_ts from ilr.grants")
            }
            effects = {r["effect_id"]: r for r in q("select * from ilr.effects")}
            journal: dict[str, list[dict]] = defaultdict(list)
            bodies: dict[str, list[str]] = defaultdict(list)
            for r in q("select effect_id, body from ilr.journal order by seq"):
                bodies[r["effect_id"]].append(r["body"])
                try:
                    journal[r["effect_id"]].append(json.loads(r["body"]))
                except ValueError:
                    journal[r["effect_id"]].append({"kind": "?", "unparseable": True})
            responses = q("select * from ilr.responses order by id")
            triggers = {
                r["tgname"]: r["tgenabled"]
                for r in q(
                    "select tgname, tgenabled from pg_trigger t join pg_class c on c.oid = t.tgrelid "
                    "join pg_namespace n on n.oid = c.relnamespace where n.nspname = 'ilr' and not t.tgisinternal"
                )
            }
            indexes = {r["indexname"] for r in q("select indexname from pg_indexes where schemaname = 'ilr'")}
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
