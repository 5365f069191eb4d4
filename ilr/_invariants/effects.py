"""Invariants of gated effects: sends, commits, grants, premises, cancels (docs/protocol.md §11)."""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from ilr import _codec as codec
from ilr._invariants.snapshot import Snapshot, violation
from ilr._journal import history


def at_most_one_commit(s: Snapshot) -> list:
    out = [
        violation(effect_id=eid, commits=n)
        for eid, entries in s.journal.items()
        if (n := sum(1 for e in entries if e.get("kind") == "COMMITTED")) > 1
    ]
    if "one_commit" not in s.indexes:
        out.append(violation(index="one_commit", state="missing"))
    return out


def effect_at_most_once_tier12(s: Snapshot) -> list:
    """At tiers 1 and 2 the target applied each effect at most once (evidence: ledger)."""
    ledger = s.ledger_by_effect()
    if ledger is None:
        return []
    pruned = any(e.get("path") == "/admin/prune_keys" for e in s.evidence.get("access_log") or [])
    return [
        violation(effect_id=eid, tier=eff["tier"], applications=len(ledger.get(eid, [])))
        for eid, eff in s.effects.items()
        if eff["tier"] in (1, 2) and len(ledger.get(eid, [])) > 1 and not (eff["tier"] == 1 and pruned)
    ]


def tier3_never_resends(s: Snapshot) -> list:
    """At tier 3 at most one send per effect: effects.sends, and the target's access log."""
    out = [
        violation(effect_id=eid, sends=eff["sends"])
        for eid, eff in s.effects.items()
        if eff["tier"] == 3 and eff["sends"] > 1
    ]
    posts = s.posts_by_key()
    if posts is not None:
        out += [
            violation(effect_id=eid, requests=len(posts[eid]))
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
                out.append(violation(effect_id=eid, authorized_at=at, settle_deadline=settle_at, source="journal"))
        if posts is None:
            continue
        reqs = sorted((p for p in posts.get(eid, []) if p["t_wall"] >= auths[0][0]), key=lambda p: p["t_wall"])
        for prev, req in zip(reqs, reqs[1:]):
            prev_at, settle_at = [a for a in auths if a[0] <= prev["t_wall"]][-1]
            if req["t_wall"] <= settle_at and not _answered(refusals, prev_at, req["t_wall"]):
                out.append(
                    violation(
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
        sent = history.send_entries(entries)
        legacy = any(e.get("kind") == "COMMITTED" for e in sent)
        if not legacy and eff.get("sends") is not None and eff["sends"] != len(sent):
            out.append(violation(effect_id=eid, sends=eff["sends"], send_entries=len(sent)))
        dispatched = [e for e in entries if e.get("kind") == "DISPATCHED"]
        if posts is not None and dispatched:
            # A request before the first DISPATCHED was authorized by a dispatch this database
            # lost in a failover (no_overlapping_sends explains it); it is not this chain's.
            arrived = [p for p in posts.get(eid, []) if p["t_wall"] >= dispatched[0].get("ts", 0)]
            if len(arrived) > len(sent):
                out.append(violation(effect_id=eid, requests=len(arrived), send_entries=len(sent)))
    return out


def committed_implies_applied(s: Snapshot) -> list:
    ledger = s.ledger_by_effect()
    if ledger is None:
        return []
    return [
        violation(effect_id=eid)
        for eid, eff in s.effects.items()
        if eff["state"] == "committed" and not ledger.get(eid)
    ]


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
                out.append(violation(effect_id=eid, tier=tier, reason=e.get("reason")))
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
            out.append(violation(effect_id=eid, workflow_id=wf["id"], epoch=wf["epoch"]))
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
            out.append(violation(effect_id=eid, kind=e.get("kind"), by=by, ts=s.authorized_at(e), window=w))
    for eid, eff in s.effects.items():
        if eff["state"] == "dispatched" and (eff["dispatch_workflow_id"], eff["dispatch_epoch"]) not in windows:
            out.append(violation(effect_id=eid, dispatch_epoch=eff["dispatch_epoch"], problem="epoch never claimed"))
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
        ok, why = history.lease_live((checks or {}).get("lease"), at, payload)
        revoked_before = grant is not None and grant["revoked_ts"] is not None and grant["revoked_ts"] <= at
        if not ok or not (checks or {}).get("lease_live") or revoked_before:
            out.append(
                violation(effect_id=eid, kind=e.get("kind"), ts=e.get("ts"), why=why or "grant revoked before the send")
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
            out.append(violation(effect_id=eid, grant_id=grant["id"], authorized_at=at, revoked_at=grant["revoked_ts"]))
    posts = s.posts_by_key()
    for rv in s.evidence.get("revokes") or []:
        under = {eid for eid, eff in s.effects.items() if eff["grant_id"] == rv["grant_id"]}
        for eid in under - set(rv["returned"]):
            late = [p for p in (posts or {}).get(eid, []) if p["t_wall"] > rv["returned_at"]]
            if late:
                out.append(violation(effect_id=eid, grant_id=rv["grant_id"], requests_after_revoke=len(late)))
    return out


def no_send_on_stale_premise(s: Snapshot) -> list:
    return [
        violation(effect_id=eid, kind=e.get("kind"), violations=checks.get("violations"))
        for eid, e in s.sends()
        if (checks := _lease_of(s, eid, e)[0] or {}).get("violations")
    ]


def recovery_rechecks(s: Snapshot) -> list:
    """Every recovery resend was preceded by a grant check and a premise check that passed."""
    return [
        violation(effect_id=eid, via=e.get("via"), rechecked=e.get("rechecked"))
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
                out.append(violation(effect_id=eid, sent=e.get("effect"), bound=eff["payload"]))
    posts = s.posts_by_key()
    for eid, reqs in (posts or {}).items():
        eff = s.effects.get(eid)
        for r in reqs:
            body = r.get("body") or {}
            if eff and isinstance(body, dict) and body.get("amount") != eff["payload"].get("amount"):
                out.append(violation(effect_id=eid, sent_amount=body.get("amount"), bound=eff["payload"]))
    return out


def no_send_after_cancel(s: Snapshot) -> list:
    out = []
    for eid, e in s.sends():
        if e.get("compensation"):
            continue
        # ignore: typeshed's dict.get takes no None key; an entry without a workflow finds none here.
        wf = s.workflows.get((e.get("by") or {}).get("workflow_id"))  # type: ignore[arg-type]
        if wf and wf["cancel_ts"] is not None and e.get("ts", 0) >= wf["cancel_ts"] and e.get("kind") == "DISPATCHED":
            out.append(
                violation(effect_id=eid, workflow_id=wf["id"], dispatched_at=e.get("ts"), cancelled_at=wf["cancel_ts"])
            )
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
        violation(effect_id=r["effect_id"], workflow_id=r["workflow_id"], epoch=r["epoch"])
        for r in s.responses
        if (r["effect_id"], r["workflow_id"], r["epoch"]) not in written
        and (r["workflow_id"], r["epoch"]) not in in_flight
    ]
