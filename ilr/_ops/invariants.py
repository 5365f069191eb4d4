"""The invariants registry: every invariant with a code check (docs/protocol.md §11), run over
real runs.

``INVARIANTS = {"Name": check_fn}``; each ``check_fn(snapshot) -> [violation]`` reads only the
``Snapshot`` (PostgreSQL's ilr.* tables, read once) and, where the rule needs it (``NEEDS``), the
target's ledger and access log passed in as evidence. A violation is plain data (a dict) naming the
rows that break the rule. A check whose evidence is missing returns [] and is reported as skipped by
``check_all``.

Evidence (all optional): {"ledger": [refund rows with effect_id, key, amount, source],
"access_log": [target request entries with method, path, key, t_wall, body],
"invocations": [{"workflow_id", "name", "at"}] (step-body starts),
"revokes": [{"grant_id", "returned": [effect_id], "returned_at": unix seconds}]}.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ilr import _codec as codec
from ilr._journal import receipts


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
        return [(eid, e) for eid, entries in self.journal.items() for e in receipts.send_entries(entries)]

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


def _v(**kw) -> dict:
    return {k: (v.isoformat() if hasattr(v, "isoformat") else v) for k, v in kw.items()}


# -- steps, claims, fencing ----------------------------------------------------------------------


def no_rerun_after_complete(s: Snapshot) -> list:
    """A step body never starts after its step row committed (evidence: invocations)."""
    inv = s.evidence.get("invocations")
    if inv is None:
        return []
    recorded = {(st["workflow_id"], st["name"]): st["ts"] for st in s.steps if st["kind"] == "step"}
    return [
        _v(workflow_id=i["workflow_id"], step=i["name"], started=i["at"], row_committed=recorded[key])
        for i in inv
        if (key := (i["workflow_id"], i["name"])) in recorded and i["at"] > recorded[key]
    ]


def step_result_unique(s: Snapshot) -> list:
    """At most one step row per (workflow_id, seq), never updated or deleted (the append-only
    trigger enabled, the primary key holding)."""
    out = []
    seen = set()
    for st in s.steps:
        key = (st["workflow_id"], st["seq"])
        if key in seen:
            out.append(_v(duplicate=list(key)))
        seen.add(key)
    if s.triggers.get("steps_append_only") not in ("O", "A"):
        out.append(_v(trigger="steps_append_only", state=s.triggers.get("steps_append_only", "missing")))
    return out


def fenced_writes(s: Snapshot) -> list:
    """Every worker write carried an epoch that was current at its commit: step rows and
    journal entries fall inside their epoch's claim window (late-commit CAS excepted)."""
    windows = s.claim_windows()
    out = []
    for st in s.steps:
        w = windows.get((st["workflow_id"], st["epoch"]))
        if w is None or not (w[0] <= st["ts"] < w[1]):
            out.append(_v(step=[st["workflow_id"], st["seq"]], epoch=st["epoch"], at=st["ts"], window=w))
    for eid, entries in s.journal.items():
        for e in entries:
            by: Any = e.get("by") or {}  # journal JSON: a missing id finds no window (a violation)
            if not by or e.get("via") == "late-commit" or e.get("kind") == "LATE_RESULT":
                continue
            w = windows.get((by.get("workflow_id"), by.get("epoch")))
            if w is None or not (w[0] <= e.get("ts", 0) < w[1]):
                out.append(_v(effect_id=eid, kind=e.get("kind"), by=by, ts=e.get("ts"), window=w))
    return out


def _takeovers_before_expiry(s: Snapshot) -> list:
    return [
        _v(
            workflow_id=c["workflow_id"],
            epoch=c["epoch"],
            owner=c["owner"],
            claimed_at=c["claimed_at"],
            previous_lease_expired_at=c["prev_lease_expires_at"],
        )
        for c in s.claims
        if c["prev_status"] == "running"
        and (c["prev_lease_expires_at"] is None or c["claimed_at"] < c["prev_lease_expires_at"])
    ]


def lease_mutex(s: Snapshot) -> list:
    """Two workers never both hold a non-expired claim: every claim of a running workflow came
    after the holder's lease (renewals included) had expired."""
    return _takeovers_before_expiry(s)


def takeover_only_after_expiry(s: Snapshot) -> list:
    """Claiming a running workflow succeeds only when lease_expires_at <= now()."""
    return _takeovers_before_expiry(s)


# -- effects -------------------------------------------------------------------------------------


def at_most_one_commit(s: Snapshot) -> list:
    out = [
        _v(effect_id=eid, commits=n)
        for eid, entries in s.journal.items()
        if (n := sum(1 for e in entries if e.get("kind") == "COMMITTED")) > 1
    ]
    if "one_commit" not in s.indexes:
        out.append(_v(index="one_commit", state="missing"))
    return out


def effect_at_most_once_tier12(s: Snapshot) -> list:
    """At tiers 1 and 2 the target applied each effect at most once (evidence: ledger)."""
    ledger = s.ledger_by_effect()
    if ledger is None:
        return []
    pruned = any(e.get("path") == "/admin/prune_keys" for e in s.evidence.get("access_log") or [])
    return [
        _v(effect_id=eid, tier=eff["tier"], applications=len(ledger.get(eid, [])))
        for eid, eff in s.effects.items()
        if eff["tier"] in (1, 2) and len(ledger.get(eid, [])) > 1 and not (eff["tier"] == 1 and pruned)
    ]


def tier3_never_resends(s: Snapshot) -> list:
    """At tier 3 at most one send per effect: effects.sends, and the target's access log."""
    out = [
        _v(effect_id=eid, sends=eff["sends"]) for eid, eff in s.effects.items() if eff["tier"] == 3 and eff["sends"] > 1
    ]
    posts = s.posts_by_key()
    if posts is not None:
        out += [
            _v(effect_id=eid, requests=len(posts[eid]))
            for eid, eff in s.effects.items()
            if eff["tier"] == 3 and len(posts.get(eid, [])) > 1
        ]
    return out


def _settle_deadline(e: dict, dispatched: dict, authorized: float) -> float:
    # The time until which the request this entry authorized may still be in flight. A DISPATCHED
    # (and a resend entry that records one) carries its send_deadline; a resend's COMMITTED
    # does not, and T_resolve set it to its now() (rechecked.at) plus send_timeout, which is the
    # DISPATCHED's send_deadline less its ts (both from one now()). settle_margin is set only by
    # a DISPATCHED.
    margin = e.get("settle_margin", dispatched.get("settle_margin")) or 0
    deadline = e.get("send_deadline")
    if deadline is None:
        deadline = authorized + (dispatched.get("send_deadline") or 0) - dispatched.get("ts", 0)
    return deadline + margin


def _answered(refusals: list[float], start: float, end: float) -> bool:
    # A resolving REFUSED between a send's authorization and the next send recorded its answer.
    return any(start <= r <= end for r in refusals)


def no_overlapping_sends(s: Snapshot) -> list:
    """No send starts while an earlier send of the same effect may still be in flight, for every
    pair of consecutive sends (spec/Runtime.tla: every send's prevSendSettled).

    A send is in flight from its authorization until its send_deadline + settle_margin, or until
    a resolving REFUSED records its answer (the effect back to proposed, after which a new
    DISPATCHED may send at once). Checked twice:

    - the journal: each send-authorizing entry (``Snapshot.sends``) commits after the previous
      one's settle deadline (T_resolve reads the effect settled under its row lock);
    - the access log (evidence, when given): each request arrives after the settle deadline of
      the authorization the request before it went out under (the latest one authorized at or
      before its arrival). Only requests that arrived after the first DISPATCHED are this
      journal's sends: a send leaves only after its T_dispatch committed. An earlier request was
      authorized by a dispatch this database does not hold (lost with a failed-over primary's
      WAL tail, ilr.failover), which the runtime waits out before a new first send
      (prove/harness/failover.py checks that).

    Returns:
        a violation per overlapping pair: ``authorized_at`` (journal) or ``send_at`` (access
        log), with the previous send's ``settle_deadline``.
    """
    posts = s.posts_by_key()
    by_effect: dict[str, list[dict]] = defaultdict(list)
    for eid, e in s.sends():
        by_effect[eid].append(e)
    out = []
    for eid, entries in s.journal.items():
        sends = {id(e) for e in by_effect.get(eid, [])}
        auths: list[tuple[float, float]] = []  # (authorized_at, settle deadline), chain order
        refusals: list[float] = []  # when a resolving REFUSED recorded the answer
        dispatched: dict | None = None
        for e in entries:
            if e.get("kind") == "DISPATCHED":
                dispatched = e
            if e.get("kind") == "REFUSED" and e.get("resolves"):
                refusals.append(e.get("ts", 0))
            at = s.authorized_at(e)
            # One authorizing transaction may leave two entries (a resend's entry before its
            # bytes and the COMMITTED its answer brings): the same time is the same authorization.
            if id(e) in sends and dispatched is not None and not any(a == at for a, _ in auths):
                auths.append((at, _settle_deadline(e, dispatched, at)))
        if not auths:
            continue
        auths.sort()
        for (prev_at, settle_at), (at, _) in zip(auths, auths[1:]):
            if at <= settle_at and not _answered(refusals, prev_at, at):
                out.append(_v(effect_id=eid, authorized_at=at, settle_deadline=settle_at, source="journal"))
        if posts is None:
            continue
        reqs = sorted((p for p in posts.get(eid, []) if p["t_wall"] >= auths[0][0]), key=lambda p: p["t_wall"])
        for prev, req in zip(reqs, reqs[1:]):
            prev_at, settle_at = [a for a in auths if a[0] <= prev["t_wall"]][-1]
            if req["t_wall"] <= settle_at and not _answered(refusals, prev_at, req["t_wall"]):
                out.append(
                    _v(
                        effect_id=eid,
                        send_at=req["t_wall"],
                        previous_send_at=prev["t_wall"],
                        settle_deadline=settle_at,
                        source="access_log",
                    )
                )
    return out


def every_send_journaled(s: Snapshot) -> list:
    """Every request on the wire is on the signed record: ``effects.sends`` equals the effect's
    send entries (DISPATCHED and RESENT, ``receipts.send_entries``), and the target received no
    more requests for the key after its first DISPATCHED than there are such entries (evidence:
    access_log, optional). An effect whose chain holds a resend COMMITTED with no RESENT (written
    before migration 0013) is judged by the access log only."""
    posts = s.posts_by_key()
    out = []
    for eid, eff in s.effects.items():
        entries = s.journal.get(eid, [])
        sent = receipts.send_entries(entries)
        legacy = any(e.get("kind") == "COMMITTED" for e in sent)
        if not legacy and eff.get("sends") is not None and eff["sends"] != len(sent):
            out.append(_v(effect_id=eid, sends=eff["sends"], send_entries=len(sent)))
        dispatched = [e for e in entries if e.get("kind") == "DISPATCHED"]
        if posts is not None and dispatched:
            # A request before the first DISPATCHED was authorized by a dispatch this database
            # lost in a failover (no_overlapping_sends explains it); it is not this chain's.
            arrived = [p for p in posts.get(eid, []) if p["t_wall"] >= dispatched[0].get("ts", 0)]
            if len(arrived) > len(sent):
                out.append(_v(effect_id=eid, requests=len(arrived), send_entries=len(sent)))
    return out


def committed_implies_applied(s: Snapshot) -> list:
    ledger = s.ledger_by_effect()
    if ledger is None:
        return []
    return [_v(effect_id=eid) for eid, eff in s.effects.items() if eff["state"] == "committed" and not ledger.get(eid)]


def ambiguous_only_when_unknowable(s: Snapshot) -> list:
    """AMBIGUOUS only at effective tier 3, or tier 1 with no lookup after a failed re-check,
    after the target rejected a resend (the first send's outcome stays unknown) or once the
    resend policy is spent, or at tier 1 or
    3 when a dispatch may have been lost in a failover (the entry's ``failover``, ilr.failover);
    never at tier 2, which a lookup answers."""
    out = []
    for eid, entries in s.journal.items():
        tier = s.effects.get(eid, {}).get("tier")
        for e in entries:
            if e.get("kind") != "AMBIGUOUS":
                continue
            rc = e.get("rechecked") or {}
            failed = (not rc.get("lease_live")) or bool(rc.get("violations"))
            tier3 = tier == 3 or "tier 3" in str(e.get("reason", ""))
            rejected_resend = tier == 1 and bool(e.get("rejected_resend"))
            # A tier-1 target with no lookup whose resend policy is spent: nothing more can be
            # learned without a person (docs/protocol.md §6.5).
            spent = tier == 1 and str(e.get("reason", "")).startswith("resend policy spent")
            lost_dispatch = tier in (1, 3) and bool(e.get("failover"))
            if tier == 2 or not (tier3 or (tier == 1 and failed) or rejected_resend or lost_dispatch or spent):
                out.append(_v(effect_id=eid, tier=tier, reason=e.get("reason")))
    return out


def effect_checkpoint_atomic(s: Snapshot) -> list:
    """No committed effect lacks its step row while its dispatching claim is still current."""
    out = []
    for eid, eff in s.effects.items():
        if eff["state"] != "committed" or not eff["dispatch_workflow_id"]:
            continue
        wf = s.workflows.get(eff["dispatch_workflow_id"])
        if wf is None or wf["epoch"] != eff["dispatch_epoch"] or wf["status"] != "running":
            continue
        if not any(st["workflow_id"] == wf["id"] and (st["fingerprint"] or "").startswith(eid + ":") for st in s.steps):
            out.append(_v(effect_id=eid, workflow_id=wf["id"], epoch=wf["epoch"]))
    return out


def send_requires_live_claim(s: Snapshot) -> list:
    """Every send follows a T_dispatch or T_resolve whose epoch was current (inside its claim
    window), and a dispatched effect's dispatch_epoch is a claimed epoch."""
    windows = s.claim_windows()
    out = []
    for eid, e in s.sends():
        by: Any = e.get("by") or {}  # journal JSON: a missing id finds no window (a violation)
        w = windows.get((by.get("workflow_id"), by.get("epoch")))
        if w is None or not (w[0] <= s.authorized_at(e) < w[1]):
            out.append(_v(effect_id=eid, kind=e.get("kind"), by=by, ts=s.authorized_at(e), window=w))
    for eid, eff in s.effects.items():
        if eff["state"] == "dispatched" and (eff["dispatch_workflow_id"], eff["dispatch_epoch"]) not in windows:
            out.append(_v(effect_id=eid, dispatch_epoch=eff["dispatch_epoch"], problem="epoch never claimed"))
    return out


def _lease_of(s: Snapshot, eid: str, e: dict) -> tuple[dict | None, dict | None]:
    checks = e.get("checks") if e.get("kind") == "DISPATCHED" else e.get("rechecked")
    eff = s.effects.get(eid) or {}
    grant_id = (checks or {}).get("lease", {}) or {}
    # ignore: typeshed's dict.get takes no None key; a send without a grant id finds no grant here.
    grant = (
        s.grants.get(grant_id.get("grant_id"))  # type: ignore[arg-type]
        if grant_id
        else s.grants.get(eff.get("grant_id"))  # type: ignore[arg-type]
    )
    return checks, grant


def no_send_under_revoked_grant(s: Snapshot) -> list:
    """At the commit before every send the grant was live and covered the payload: the recorded
    snapshot says so, and the grant's revoked_at was not yet committed."""
    out = []
    for eid, e in s.sends():
        checks, grant = _lease_of(s, eid, e)
        payload = s.effects.get(eid, {}).get("payload")
        at = s.authorized_at(e)
        ok, why = receipts._lease_live((checks or {}).get("lease"), at, payload)
        revoked_before = grant is not None and grant["revoked_ts"] is not None and grant["revoked_ts"] <= at
        if not ok or not (checks or {}).get("lease_live") or revoked_before:
            out.append(
                _v(effect_id=eid, kind=e.get("kind"), ts=e.get("ts"), why=why or "grant revoked before the send")
            )
    return out


def revoke_linearizable(s: Snapshot) -> list:
    """No send authorized after a revoke of its grant committed; and (evidence: revokes and
    the access log) no request after a revoke returned unless its effect was in the returned list."""
    out = []
    for eid, e in s.sends():
        _, grant = _lease_of(s, eid, e)
        at = s.authorized_at(e)
        if grant is not None and grant["revoked_ts"] is not None and at >= grant["revoked_ts"]:
            out.append(_v(effect_id=eid, grant_id=grant["id"], authorized_at=at, revoked_at=grant["revoked_ts"]))
    posts = s.posts_by_key()
    for rv in s.evidence.get("revokes") or []:
        under = {eid for eid, eff in s.effects.items() if eff["grant_id"] == rv["grant_id"]}
        for eid in under - set(rv["returned"]):
            late = [p for p in (posts or {}).get(eid, []) if p["t_wall"] > rv["returned_at"]]
            if late:
                out.append(_v(effect_id=eid, grant_id=rv["grant_id"], requests_after_revoke=len(late)))
    return out


def no_send_on_stale_premise(s: Snapshot) -> list:
    return [
        _v(effect_id=eid, kind=e.get("kind"), violations=checks.get("violations"))
        for eid, e in s.sends()
        if (checks := _lease_of(s, eid, e)[0] or {}).get("violations")
    ]


def recovery_rechecks(s: Snapshot) -> list:
    """Every recovery resend was preceded by a grant check and a premise check that passed."""
    return [
        _v(effect_id=eid, via=e.get("via"), rechecked=e.get("rechecked"))
        for eid, e in s.sends()
        if e.get("kind") == "COMMITTED"
        and not ((e.get("rechecked") or {}).get("lease_live") and not (e.get("rechecked") or {}).get("violations"))
    ]


def payload_bound(s: Snapshot) -> list:
    """Every sent payload equals the payload bound at the first PROPOSED."""
    out = []
    for eid, entries in s.journal.items():
        eff = s.effects.get(eid)
        if eff is None:
            continue
        for e in entries:
            if e.get("kind") == "DISPATCHED" and codec.payload_hash(e.get("effect")) != eff["payload_hash"]:
                out.append(_v(effect_id=eid, sent=e.get("effect"), bound=eff["payload"]))
    posts = s.posts_by_key()
    for eid, reqs in (posts or {}).items():
        eff = s.effects.get(eid)
        for r in reqs:
            body = r.get("body") or {}
            if eff and isinstance(body, dict) and body.get("amount") != eff["payload"].get("amount"):
                out.append(_v(effect_id=eid, sent_amount=body.get("amount"), bound=eff["payload"]))
    return out


def no_send_after_cancel(s: Snapshot) -> list:
    out = []
    for eid, e in s.sends():
        if e.get("compensation"):
            continue
        # ignore: typeshed's dict.get takes no None key; an entry without a workflow finds none here.
        wf = s.workflows.get((e.get("by") or {}).get("workflow_id"))  # type: ignore[arg-type]
        if wf and wf["cancel_ts"] is not None and e.get("ts", 0) >= wf["cancel_ts"] and e.get("kind") == "DISPATCHED":
            out.append(_v(effect_id=eid, workflow_id=wf["id"], dispatched_at=e.get("ts"), cancelled_at=wf["cancel_ts"]))
    return out


def late_result_preserved(s: Snapshot) -> list:
    """Every response the sender logged is in the journal: as its COMMITTED, or as LATE_RESULT."""
    written = set()
    for eid, entries in s.journal.items():
        for e in entries:
            by = e.get("by") or {}
            if e.get("kind") in ("COMMITTED", "LATE_RESULT"):
                written.add((eid, by.get("workflow_id"), by.get("epoch")))
    # A response whose sender still holds its claim may be between its log write and T_commit:
    # a worker's claim (running) or an orphan recovery's (owner $recovery, the status ended).
    in_flight = {
        (wf["id"], wf["epoch"])
        for wf in s.workflows.values()
        if wf["status"] == "running" or wf["owner"] == "$recovery"
    }
    return [
        _v(effect_id=r["effect_id"], workflow_id=r["workflow_id"], epoch=r["epoch"])
        for r in s.responses
        if (r["effect_id"], r["workflow_id"], r["epoch"]) not in written
        and (r["workflow_id"], r["epoch"]) not in in_flight
    ]


def receipt_chain_linear(s: Snapshot) -> list:
    """Per effect one chain (prev links and positions) and verify() reports the chain intact
    (signatures are not this check's: it runs with no trusted key)."""
    out = []
    for eid, bodies in s.bodies.items():
        v = receipts.verify({"effect_id": eid, "entries": bodies}, trusted_keys={})
        if not v["chain_intact"]:
            out.append(_v(effect_id=eid, problems=v["problems"]))
    return out


def receipt_complete(s: Snapshot) -> list:
    """Every effect's row agrees with its chain: its head (head_hash, head_n) is the chain's
    last entry and length, so no entry was deleted from the end, and its state is the state the
    signed entries say (``receipts.chain_state``); a RECONCILED entry's by, applied and evidence
    are the row's ``reconciled``."""
    out = []
    for eid, eff in s.effects.items():
        entries = s.journal.get(eid, [])
        last = entries[-1].get("hash") if entries else None
        if entries and (eff.get("head_hash"), eff.get("head_n")) != (last, len(entries)):
            out.append(
                _v(effect_id=eid, head=[eff.get("head_hash"), eff.get("head_n")], chain_ends=[last, len(entries)])
            )
        if entries and eff["state"] != receipts.chain_state(entries):
            out.append(_v(effect_id=eid, state=eff["state"], chain_state=receipts.chain_state(entries)))
        signed = receipts.chain_reconciled(entries)
        row = eff.get("reconciled")
        row = json.loads(row) if isinstance(row, str) else row
        if signed is not None and (
            not isinstance(row, dict) or any(row.get(k) != signed[k] for k in ("by", "applied", "evidence"))
        ):
            out.append(_v(effect_id=eid, reconciled=row, signed=signed))
    return out


def receipt_truthful(s: Snapshot) -> list:
    """verify()'s happened and happened_once match the ledger; "unknown" exactly when the
    effect is ambiguous or still dispatched (evidence: ledger)."""
    ledger = s.ledger_by_effect()
    if ledger is None:
        return []
    out = []
    for eid, bodies in s.bodies.items():
        eff = s.effects.get(eid)
        if eff is None:
            continue
        v = receipts.verify({"effect_id": eid, "entries": bodies})
        apps = len(ledger.get(eid, []))
        unknown = eff["state"] in ("ambiguous", "dispatched")
        if (
            (v["happened"] == "unknown") != unknown
            or (v["happened"] is True and apps == 0)
            or (v["happened"] is False and apps > 0)
            or (v["happened_once"] is True and apps != 1)
        ):
            out.append(
                _v(
                    effect_id=eid,
                    happened=v["happened"],
                    happened_once=v["happened_once"],
                    applications=apps,
                    state=eff["state"],
                )
            )
    return out


# -- timers and signals ----------------------------------------------------------------------------


def _timer_until(st: dict) -> str | None:
    # The deadline a step's timer fired at, as the suspend transaction recorded it
    # (docs/protocol.md §5.1, §5.3): a sleep's output, a signal wait's SignalTimeout error, a
    # child wait's timeout outcome. None when no timer fired (a consumed signal, an ended child).
    out, err = st["output"], st["error"]
    if st["kind"] == "sleep" and isinstance(out, dict):
        return out.get("until")
    if st["kind"] == "signal" and isinstance(err, dict) and err.get("type") == "SignalTimeout":
        return err.get("until")
    if st["kind"] == "child" and isinstance(out, dict) and out.get("status") == "timeout":
        return out.get("until")
    return None


def timer_not_early(s: Snapshot, conn=None) -> list:
    """A timer's step is recorded only at database time >= its recorded until: a sleep, a
    signal wait that timed out, a child wait that timed out (spec/Signals.tla TimerNotEarly
    covers the sleep and the wait's timeout alike)."""
    import datetime as dt

    out = []
    for st in s.steps:
        if until_text := _timer_until(st):
            until = dt.datetime.fromisoformat(until_text)
            if st["created_at"] < until:
                out.append(
                    _v(
                        workflow_id=st["workflow_id"],
                        seq=st["seq"],
                        kind=st["kind"],
                        recorded=st["created_at"],
                        until=until,
                    )
                )
    return out


def signal_exactly_once_consumed(s: Snapshot) -> list:
    """Each consumed signal is consumed by one wait, whose ``signal`` step records its payload
    and no error (a timeout's row carries a SignalTimeout error and a NULL output, which a
    JSON-null payload would otherwise equal)."""
    steps = {(st["workflow_id"], st["seq"]): st for st in s.steps}
    out = []
    consumed: defaultdict[tuple[str, int], int] = defaultdict(int)
    for sig in s.signals:
        if sig["consumed_seq"] is None:
            continue
        consumed[(sig["workflow_id"], sig["consumed_seq"])] += 1
        st = steps.get((sig["workflow_id"], sig["consumed_seq"]))
        if st is None or st["kind"] != "signal" or st["output"] != sig["payload"] or st["error"] is not None:
            out.append(
                _v(
                    signal_id=sig["id"],
                    workflow_id=sig["workflow_id"],
                    seq=sig["consumed_seq"],
                    step_output=st and st["output"],
                    payload=sig["payload"],
                )
            )
    out += [_v(workflow_id=k[0], seq=k[1], consumed_by=n) for k, n in consumed.items() if n > 1]
    return out


def no_lost_wakeup(s: Snapshot) -> list:
    """No workflow sleeps forever while an unconsumed signal it waits on exists."""
    import datetime as dt

    pending = {(sig["workflow_id"], sig["name"]) for sig in s.signals if sig["consumed_seq"] is None}
    out = []
    for wf in s.workflows.values():
        w = wf["waiting"] or {}
        forever = wf["available_at"] is not None and wf["available_at"].year == dt.MAXYEAR
        if (
            wf["status"] == "sleeping"
            and forever
            and w.get("kind") == "signal"
            and (wf["id"], w.get("signal")) in pending
        ):
            out.append(_v(workflow_id=wf["id"], waiting=w))
    return out


# -- versions, determinism, forks ------------------------------------------------------------------


def version_pinned(s: Snapshot) -> list:
    """Every claim (so every step) of a workflow ran on a worker registered for its version:
    claims between two ``$migrate`` claims share one version, and the claims since the last
    migration match the workflow's current version. $recovery and $fork claims run no code."""
    out = []
    by_wf: dict[str, list[dict]] = defaultdict(list)
    for c in s.claims:
        if c["workflow_id"] in s.workflows and c["owner"] not in ("$recovery", "$fork"):
            by_wf[c["workflow_id"]].append(c)
    for wf_id, claims in by_wf.items():
        segments: list[list[dict]] = [[]]
        for c in claims:
            if c["owner"] == "$migrate":
                segments.append([c])
            else:
                segments[-1].append(c)
        for i, seg in enumerate(segments):
            expected = s.workflows[wf_id]["version"] if i == len(segments) - 1 else (seg[0]["version"] if seg else None)
            for c in seg:
                if expected is not None and c["version"] != expected:
                    out.append(
                        _v(workflow_id=wf_id, epoch=c["epoch"], claimed_version=c["version"], expected_version=expected)
                    )
    return out


def non_determinism_loud(s: Snapshot) -> list:
    """A workflow stuck on NonDeterminism ran nothing at or past the mismatching seq in that run."""
    out = []
    for wf in s.workflows.values():
        err = wf["error"] or {}
        if wf["status"] != "stuck" or err.get("type") != "NonDeterminism":
            continue
        ran = [
            st["seq"]
            for st in s.steps
            if st["workflow_id"] == wf["id"] and st["seq"] >= err.get("seq", 0) and st["epoch"] >= wf["epoch"]
        ]
        if ran:
            out.append(_v(workflow_id=wf["id"], mismatch_seq=err.get("seq"), recorded_after=ran))
    return out


def fork_never_resends(s: Snapshot) -> list:
    """Nothing dispatches an effect after it committed (a fork reaching a committed effect gets
    DUPLICATE_IGNORED and sends nothing)."""
    out = []
    for eid, entries in s.journal.items():
        committed = False
        for e in entries:
            if e.get("kind") == "COMMITTED":
                committed = True
            elif e.get("kind") == "DISPATCHED" and committed:
                out.append(_v(effect_id=eid, by=e.get("by")))
    return out


INVARIANTS: dict[str, Check] = {
    "NoRerunAfterComplete": no_rerun_after_complete,
    "StepResultUnique": step_result_unique,
    "FencedWrites": fenced_writes,
    "LeaseMutex": lease_mutex,
    "TakeoverOnlyAfterExpiry": takeover_only_after_expiry,
    "AtMostOneCommit": at_most_one_commit,
    "EffectAtMostOnceTier12": effect_at_most_once_tier12,
    "Tier3NeverResends": tier3_never_resends,
    "NoOverlappingSends": no_overlapping_sends,
    "CommittedImpliesApplied": committed_implies_applied,
    "AmbiguousOnlyWhenUnknowable": ambiguous_only_when_unknowable,
    "EffectCheckpointAtomic": effect_checkpoint_atomic,
    "SendRequiresLiveClaim": send_requires_live_claim,
    "NoSendUnderRevokedGrant": no_send_under_revoked_grant,
    "RevokeLinearizable": revoke_linearizable,
    "NoSendOnStalePremise": no_send_on_stale_premise,
    "RecoveryRechecks": recovery_rechecks,
    "PayloadBound": payload_bound,
    "NoSendAfterCancel": no_send_after_cancel,
    "LateResultPreserved": late_result_preserved,
    "ReceiptChainLinear": receipt_chain_linear,
    "ReceiptComplete": receipt_complete,
    "EverySendJournaled": every_send_journaled,
    "ReceiptTruthful": receipt_truthful,
    "TimerNotEarly": timer_not_early,
    "SignalExactlyOnceConsumed": signal_exactly_once_consumed,
    "NoLostWakeup": no_lost_wakeup,
    "VersionPinned": version_pinned,
    "NonDeterminismLoud": non_determinism_loud,
    "ForkNeverResends": fork_never_resends,
}
"""Every invariant with a code check (docs/protocol.md §11), by its exact name."""

NEEDS = {
    "NoRerunAfterComplete": "invocations",
    "EffectAtMostOnceTier12": "ledger",
    "CommittedImpliesApplied": "ledger",
    "ReceiptTruthful": "ledger",
}


def check_all(conn, evidence: dict | None = None, names=None) -> dict[str, Any]:
    """Run the registry over a database.

    Returns:
        {name: [violation, ...] or "skipped: no <evidence>"}; an empty list means held.
    """
    return check_snapshot(Snapshot.load(conn, evidence), names)


def check_snapshot(snap: Snapshot, names=None) -> dict[str, Any]:
    """Run the registry over a loaded snapshot (its ``evidence`` set by the caller, e.g. read
    after the snapshot so every effect committed in it has its ledger row).

    Returns:
        as ``check_all``.
    """
    out: dict[str, Any] = {}
    for name, check in INVARIANTS.items():
        if names and name not in names:
            continue
        need = NEEDS.get(name)
        if need and snap.evidence.get(need) is None:
            out[name] = f"skipped: no {need}"
            continue
        out[name] = check(snap)
    return out


def violations(results: dict[str, Any]) -> dict[str, list]:
    """Only the violated invariants of a check_all result."""
    return {k: v for k, v in results.items() if isinstance(v, list) and v}
