"""Gated effects: submit, T_dispatch, send, T_commit, late results, recovery (docs/protocol.md §6).

The shape of one effect:

    premises read ─ t0 ─ T_dispatch ─ send (watchdog) ─ T_commit
                         (fenced)                        (fenced; else the late-result CAS)

and, after a crash or an unknown outcome, once database now() > send_deadline + settle_margin:

    re-check (outside) ─ t0 ─ T_resolve (fenced) ─ [resend ─ T_commit] or a resolving entry

Lock order in every transaction here: workflow row (the fence), then effect row, then grant
row. The late-result transaction locks only the effect row.
"""

from __future__ import annotations

import datetime as dt
import functools
import inspect
import json
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from dataclasses import fields as dataclass_fields
from typing import Any

import psycopg

from ilr import codec, db, failover, journal, killpoints, store
from ilr.batch import Batch
from ilr.errors import Fenced, InterlockError, InvalidInput, Suspend, TargetRejected
from ilr.receipts import IDEMPOTENT_RESEND_VIA
from ilr.retry import RetryPolicy
from ilr.targets import DEDUP_MARGIN, attr, check_target
from ilr.watchdog import WATCHDOG_EXIT_CODE, Watchdog  # noqa: F401 - re-exported

log = logging.getLogger("ilr.effects")

STATUSES = (
    "COMMITTED", "COMMITTED_BY_RETRY", "COMMITTED_ON_QUERY", "REAPPLIED_AFTER_QUERY", "DUPLICATE_IGNORED",
    "AMBIGUOUS", "REFUSED:conflicting_payload", "REFUSED:cancelled", "REFUSED:lease", "REFUSED:stale_premise",
    "REFUSED:lease_at_recovery", "REFUSED:stale_premise_at_recovery", "REFUSED:target",
)
"""EffectResult statuses (docs/protocol.md §6.1). There is no in-flight status: the workflow
suspends instead."""

LOOKUP_RETRY = RetryPolicy()
"""How an effect waits out a target it cannot read (its premises before a send; its premises or
its lookup during recovery): Temporal's defaults, 1 s doubling to 100 s, without end
(docs/protocol.md §6.7). Before a send nothing has happened yet; during recovery the
outcome stays unknown. Either way the runtime writes nothing and tries again later, as a failed
activity attempt would be retried."""


@dataclass(frozen=True)
class EffectResult:
    """The recorded outcome of ``ctx.effect``.

    Attributes:
        status: one of STATUSES.
        effect_id: ``"eff_" + sha256(canonical({"request_id": key}))[:32]``.
        result: the target's response when the effect committed by a send, else None.
    """

    status: str
    effect_id: str
    result: Any = None

    @property
    def committed(self) -> bool:
        return self.status.startswith("COMMITTED") or self.status in ("REAPPLIED_AFTER_QUERY", "DUPLICATE_IGNORED")

    @property
    def refused(self) -> bool:
        return self.status.startswith("REFUSED")


class LookupFailed(Exception):
    """The target could not be read (validate_premises or query raised), before a send or during
    recovery; nothing was written. ``__cause__`` is the target's exception."""

    def __init__(self, effect_id: str, exc: BaseException):
        self.effect_id = effect_id
        self.error = f"{type(exc).__name__}: {exc}"[:500]
        super().__init__(f"reading the target for {effect_id} failed: {self.error}")


class EffectRefused(InterlockError):
    """``raise_on_refusal=True`` and the effect was refused. Attributes: result (EffectResult)."""

    code = "ILR-022"

    def __init__(self, result: EffectResult):
        self.result = result
        super().__init__(f"effect {result.effect_id} refused: {result.status}")


# -- the recovery decision (docs/protocol.md §6.5): one pure function ----------------------------

def effective_tier(tier: int, window_passed: bool, queryable: bool) -> int:
    """Tier 1 past dedup_window - DEDUP_MARGIN becomes tier 2 when queryable, else tier 3."""
    if tier == 1 and window_passed:
        return 2 if queryable else 3
    return tier


def needs_query(tier: int, window_passed: bool, queryable: bool, stale: bool) -> bool:
    """Whether recovery must call target.query before T_resolve: at (effective) tier 2, and
    at tier 1 when the re-check failed and a lookup exists."""
    eff = effective_tier(tier, window_passed, queryable)
    return eff == 2 or (eff == 1 and stale and queryable)


def recovery_decision(*, tier: int, window_passed: bool, queryable: bool, stale: bool,
                      found: bool | None) -> str:
    """The recovery action for a dispatched effect whose send outcome is unknown.

    Args:
        tier: the target's tier (1, 2, 3).
        window_passed: now() - first_dispatched_at > dedup_window - DEDUP_MARGIN.
        queryable: the target has a truthful lookup.
        stale: the grant is not live or a premise changed (the re-check failed).
        found: the lookup's answer, or None when no lookup ran.

    Returns:
        "ambiguous" (AMBIGUOUS), "resend" (tier 1, COMMITTED_BY_RETRY), "commit_on_query"
        (COMMITTED_ON_QUERY), "refuse" (REFUSED:*_at_recovery), "reapply"
        (REAPPLIED_AFTER_QUERY), or "query" when a lookup is needed but did not run.
    """
    eff = effective_tier(tier, window_passed, queryable)
    if eff == 3:
        return "ambiguous"
    if eff == 1 and not stale:
        return "resend"
    if eff == 1 and not queryable:
        return "ambiguous"
    if found is None:
        return "query"
    if found:
        return "commit_on_query"
    return "refuse" if stale else "reapply"


# -- helpers -----------------------------------------------------------------------------------

def _ts(now) -> float:
    return now.timestamp()


def _lease_snapshot(grant: dict | None, action: str, payload: Any, ph: str) -> tuple[bool, dict | None]:
    """(allowed, snapshot) for a grant row read FOR SHARE in this transaction (docs/protocol.md
    §6.2, check 8)."""
    if grant is None:
        return False, None
    amount = payload.get("amount") if isinstance(payload, dict) else None
    action_matches = grant["action"] == action
    allowed = (grant["revoked_at"] is None and grant["live_now"] and action_matches
               and (grant["max_cents"] is None or (isinstance(amount, int) and amount <= grant["max_cents"]))
               and (grant["payload_hash"] is None or grant["payload_hash"] == ph))
    snapshot = {
        "grant_id": grant["id"], "principal": grant["principal"], "action": grant["action"],
        "action_matches": action_matches, "max_cents": grant["max_cents"], "payload_hash": grant["payload_hash"],
        "expires_at": grant["expires_at"].isoformat() if grant["expires_at"] else None,
        "expires_at_ts": grant["expires_at"].timestamp() if grant["expires_at"] else None,
        "revoked": grant["revoked_at"].isoformat() if grant["revoked_at"] else None,
        "granted_by": grant["granted_by"],
    }
    return bool(allowed), snapshot


GRANT_FOR_SHARE = """
select id, principal, action, max_cents, payload_hash, granted_by, expires_at, revoked_at,
       (expires_at is null or expires_at > now()) as live_now
  from ilr.grants where id = %s for share
"""


def _accepts_timeout(apply: Callable) -> bool:
    """Whether a target's apply() takes a ``timeout`` keyword (seconds left before the local
    deadline); see EffectTarget. Read once per function, not on every send."""
    fn = getattr(apply, "__func__", apply)
    try:
        return _takes_timeout(fn)
    except TypeError:  # an unhashable callable: read its signature each time
        return _takes_timeout.__wrapped__(fn)


@functools.lru_cache(maxsize=256)
def _takes_timeout(fn: Callable) -> bool:
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return "timeout" in params


# -- one ctx.effect call -------------------------------------------------------------------------

class EffectCall:
    """One ``ctx.effect`` call at the frontier (or replayed). See ``WorkflowContext.effect``."""

    def __init__(self, ctx, target, key: str, payload: Any, premises: Any, grant: str | None, name: str | None,
                 local_premises: Iterable[Callable], compensation: bool, decision: dict | None = None):
        if not isinstance(key, str) or not key:
            raise InvalidInput("key", "an effect needs a non-empty idempotency key string")
        # Plain JSON and at most MAX_JSON_BYTES each: the three are stored and sealed into the
        # journal; the decision's fields are encoded before T_dispatch reads the fence.
        self.payload_text = codec.dumps(payload, "payload")
        if isinstance(payload, dict) and "amount" in payload:
            codec.check_cents(payload["amount"], "payload.amount")
        codec.dumps(premises, "premises")
        codec.dumps(decision, "decision")
        if grant is not None and not isinstance(grant, str):
            raise InvalidInput("grant", "a grant is a grant id string or None")
        check_target(target)
        self.ctx = ctx
        self.run = ctx._run
        self.target = target
        self.target_name = attr(target, "name")
        self.action = attr(target, "action")
        self.key = key
        self.payload = payload
        self.premises = premises
        self.grant = grant
        self.name = name or f"effect:{self.target_name}"
        self.local_premises = tuple(local_premises)
        self.compensation = compensation
        self.decision = decision
        self.effect_id = codec.effect_id_for({"request_id": key})
        self.payload_hash = codec.payload_hash(payload)
        self.fingerprint = f"{self.effect_id}:{self.payload_hash}"
        self.send_timeout = attr(target, "send_timeout")
        self.settle_margin = attr(target, "settle_margin")
        self.premise_max_age = attr(target, "premise_max_age")
        self.queryable = attr(target, "queryable")
        self.dedup_window = attr(target, "dedup_window")

    @property
    def conn(self):
        """The run's connection for the next transaction (``WorkflowContext._conn``): one that
        died while idle, during a send say, is replaced first, so the answer in hand commits on
        a fresh session (the fence is the row's epoch and lease, not the session)."""
        return self.ctx._conn

    # -- entry ----------------------------------------------------------------------------

    def execute(self) -> EffectResult:
        seq = self.ctx._next_seq()
        row = self.ctx._replay(seq, "effect", self.name, self.fingerprint)
        if row is not None:
            return EffectResult(**row["output"])
        self.ctx._frontier(seq, "effect", self.name)
        self.seq = seq
        # The pre-read looks for an open dispatch to recover. A claim that follows no crash
        # (takeovers 0) and no unsettled send of its own cannot have left one, so its first
        # pass goes straight to T_dispatch: that reads the same row under its lock and, if
        # anyone's send is open, writes nothing and reroutes here (_Reroute). The rule keeps
        # every outcome; it saves a round trip on the common path (issue 9).
        waiting = self.run.waiting or {}
        pre_read = self.run.takeovers > 0 or waiting.get("kind") == "effect"
        while True:
            eff = self.conn.execute(
                "select state, payload_hash, dispatch_workflow_id, dispatch_epoch from ilr.effects "
                "where effect_id = %s",
                (self.effect_id,)).fetchone() if pre_read else None
            pre_read = True
            if eff is not None and eff["state"] == "dispatched":
                # An unresolved send exists (ours from a crashed claim, or another workflow's).
                # Ours with the same payload: its recovery outcome is this call's status. Anyone
                # else's, or another payload: resolve it without taking its status, then go
                # round; the next pass returns DUPLICATE_IGNORED or refuses (docs/protocol.md
                # §6.8).
                take = eff["dispatch_workflow_id"] == self.run.workflow_id and eff["payload_hash"] == self.payload_hash
                try:
                    result = self._recover(take_status=take)
                except LookupFailed as exc:
                    self._suspend_for_lookup(exc)
                if take and result is not None:
                    return result
                continue
            try:
                return self._submit()
            except _Reroute:
                continue  # another claim dispatched it meanwhile: go round to the recovery path
            except LookupFailed as exc:
                self._suspend_for_lookup(exc)  # the premises could not be read; nothing was sent

    # -- submit path ------------------------------------------------------------------------

    def _external_violations(self) -> tuple[list[str], float]:
        """(violations, monotonic read time) of the external premises.

        Raises:
            LookupFailed: validate_premises raised (nothing was written).
        """
        validate = getattr(self.target, "validate_premises", None)
        try:
            violations = (list(validate(self.premises, self.effect_id))
                          if (validate and self.premises is not None) else [])
        except Exception as exc:  # noqa: BLE001 - any failure to read the target
            raise LookupFailed(self.effect_id, exc) from exc
        return violations, time.monotonic()

    def _submit(self) -> EffectResult:
        # After a failover this first send may repeat one whose T_dispatch was lost with the old
        # primary's WAL tail (ilr.failover, rule 3): wait out that send, look it up where a lookup
        # exists, and let T_dispatch decide with the answer. No run is suspect without a switch:
        # the normal path pays one attribute test.
        lost = None
        switch = failover.suspect(self.run)
        if switch is not None:
            lost = self._lost_dispatch(switch)
            if lost["found"] or lost["decision"] == "ambiguous":
                result = self._t_dispatch([], lost=lost)  # nothing will be sent: no premise read
                # With such a ``lost``, every path of T_dispatch records a status (step 6b at the latest).
                assert result is not None
                return result
        # (a) external premises, outside any transaction (A3: true as read at read time).
        violations, read_t = self._external_violations()
        # (b) kill point, then the stopwatch. Past premise_max_age since the read: read again.
        killpoints.hit("effect_before_dispatch")
        t0 = time.monotonic()
        while t0 - read_t > self.premise_max_age:
            violations, read_t = self._external_violations()
            t0 = time.monotonic()
        # (c) T_dispatch.
        outcome = self._t_dispatch(violations, lost=lost)
        if outcome is not None:
            return outcome
        killpoints.hit("effect_after_dispatch")
        # (d) send, inside the remaining local time (the stopwatch began before T_dispatch).
        sent = self._send(t0, via="first-send", status="COMMITTED", rechecked=None, payload=self.payload)
        assert sent is not None  # only a rejected idempotent resend returns None, never a first send
        return sent

    def _lost_dispatch(self, switch: dict) -> dict:
        """Decide a first send that may repeat a dispatch lost in a failover (ilr.failover).

        Before a lookup or a send, database time must be past ``switch["at"] + send_timeout +
        settle_margin``: the lost send started before the old primary died, so it has landed by
        then or never will (A2). Earlier, the workflow is released until then.

        Returns:
            {"decision": "query" | "send" | "ambiguous", "found": bool | None, "fields": the
            entry field recorded with the outcome}.

        Raises:
            Suspend: too early (released until the lost send has settled).
            LookupFailed: the lookup raised; nothing was written.
        """
        decision = failover.decision(self.target.tier, bool(self.queryable), self.dedup_window)
        found = None
        if decision != "ambiguous":
            until = switch["at"] + dt.timedelta(seconds=self.send_timeout + self.settle_margin)
            if self.conn.execute("select now() < %s as early", (until,)).fetchone()["early"]:
                self._release_until("%(until)s::timestamptz", {"until": until})
        if decision == "query":
            try:
                found = bool(self.target.query(self.effect_id, self.payload))
            except Exception as exc:  # noqa: BLE001 - any failure to read the target
                raise LookupFailed(self.effect_id, exc) from exc
        fields = {"timeline": switch["timeline"], "seen_at": switch["at"].timestamp(), "decision": decision,
                  "found": found}
        return {"decision": decision, "found": found, "fields": fields}

    def _t_dispatch(self, violations: list[str], lost: dict | None = None) -> EffectResult | None:
        """T_dispatch (docs/protocol.md §6.2). Returns a recorded refusal or duplicate, or None
        when the send is authorized (DISPATCHED committed).

        ``lost`` (from ``_lost_dispatch``): this first send may repeat a dispatch lost in a
        failover. Found by the lookup: COMMITTED via recovery-query, nothing sent. Decision
        "ambiguous": AMBIGUOUS, nothing sent. Decision "send" (tier 1, no lookup): a refusal
        before the send is AMBIGUOUS instead, since the lost send may have applied. Either
        way only after the payload and terminal-state checks.

        One Batch: two round trips and one commit. The first sends every read in lock order
        (workflow row by the fence, effect row, grant row) and the chain's tail; the server
        runs them one after another, each with a snapshot taken after the lock before it was
        granted, so the tail and the grant are read under the locks exactly as if each waited
        for the one before. A fence that matched nothing rolls the whole transaction back
        (nothing commits). The second sends one statement that inserts the journal entries
        and updates the effect row, and the Sync that commits.
        """
        run = self.run
        conn = self.conn
        t_fence = time.monotonic()
        with Batch(conn) as cur:
            fence_cur = db.send_fence(cur, run.workflow_id, run.epoch, run.lease_ttl)
            # 1. the effect row, created by the first proposer, locked and read in one statement:
            # the insert holds its new row; on a conflict the no-op update waits for the row's
            # lock and returns its latest version (as SELECT ... FOR UPDATE would).
            eff_cur = cur.execute(
                "insert into ilr.effects (effect_id, workflow_id, target, tier, payload, payload_hash) "
                "values (%s, %s, %s, %s, %s::jsonb, %s) "
                "on conflict (effect_id) do update set effect_id = excluded.effect_id returning *",
                (self.effect_id, run.workflow_id, self.target_name, self.target.tier, self.payload_text,
                 self.payload_hash))
            tail_cur = cur.execute(journal.LAST_HASH_SQL, (self.effect_id,))
            # 8 (read now, used below). The grant, FOR SHARE: a concurrent revoke waits for this
            # commit, and a revoke that committed first is seen here (RevokeLinearizable,
            # NoSendUnderRevokedGrant).
            grant_cur = cur.execute(GRANT_FOR_SHARE, (self.grant,)) if self.grant else None
            # While the reads are on the wire: encode the entries' fields that do not depend on them.
            cur.send()
            proposed = journal.Encoded(self._proposed_fields())
            dispatched = journal.Encoded({
                "effect": self.payload, "lease": self.grant, "premises": self.premises, "by": self._by(),
                "settle_margin": self.settle_margin, **({"compensation": True} if self.compensation else {})})
            fence = db.fenced(fence_cur.fetchone(), run.workflow_id, run.epoch)
            eff = eff_cur.fetchone()
            assert eff is not None  # insert ... on conflict do update ... returning: always one row
            tail = tail_cur.fetchone()
            grant = grant_cur.fetchone() if grant_cur is not None else None
            chain = journal.Chain(self.effect_id, tail["hash"] if tail else None)
            # One INSERT for this transaction's entries, when the block ends (Chain.batched).
            with chain.batched(cur):
                ts = _ts(fence["now"])
                cancelled = fence["cancel_requested_at"] is not None
                if cancelled:
                    run.cancel_requested = True  # delivered as Cancelled at the next frontier call
                # 3. an open dispatch by another claim: write nothing; wait out its settle time.
                if eff["state"] == "dispatched":
                    raise _Reroute()
                # 4. the payload is bound at the first proposal.
                if eff["payload_hash"] != self.payload_hash:
                    chain.append(cur, "PROPOSED", ts, self._proposed_fields())
                    chain.append(cur, "REFUSED", ts, {
                        "reason": "payload differs from recorded decision", "recorded": eff["payload"],
                        "offered": self.payload})
                    return self._record_in(cur, "REFUSED:conflicting_payload")
                # 5. already resolved for good.
                if eff["state"] == "ambiguous":
                    return self._record_in(cur, "AMBIGUOUS")
                if eff["state"] == "committed":
                    return self._record_in(cur, "DUPLICATE_IGNORED")
                # 6. PROPOSED
                chain.append(cur, "PROPOSED", ts, proposed)
                # 6b. a dispatch lost in a failover may have applied (ilr.failover): what the
                # lookup found, or AMBIGUOUS where nothing can be learned; before any refusal,
                # which would claim that nothing happened.
                if lost is not None and (lost["found"] or lost["decision"] == "ambiguous"):
                    if lost["found"]:
                        chain.append(cur, "COMMITTED", ts, {"via": "recovery-query", "found": True,
                                                            "failover": lost["fields"], "by": self._by()})
                        chain.also("update ilr.effects set state = 'committed' where effect_id = %s", (self.effect_id,))
                        return self._record_in(cur, "COMMITTED_ON_QUERY")
                    return self._lost_ambiguous(chain, cur, ts, lost, "tier 3: a dispatch of this effect may have "
                                                "been lost in a failover, and nothing can be learned after a send")

                def refuse(fields: dict, status: str) -> EffectResult:
                    if lost is not None and lost["decision"] == "send":
                        return self._lost_ambiguous(chain, cur, ts, lost, (
                            f"refused before a send ({status}), but a dispatch of this effect may have been lost in "
                            "a failover and its send may have applied; the target has no lookup"), refusal=fields)
                    chain.append(cur, "REFUSED", ts, fields)
                    return self._record_in(cur, status)

                # 7. cancel (NoSendAfterCancel): compensation sends are the only ones allowed.
                if cancelled and not self.compensation:
                    return refuse({"reason": "cancelled", "resolves": True}, "REFUSED:cancelled")
                # 8. the grant read above under FOR SHARE.
                allowed, snapshot = _lease_snapshot(grant, self.action, self.payload, self.payload_hash)
                checks: dict[str, Any] = {"lease_live": allowed, "lease": snapshot}
                if not allowed:
                    return refuse({"reason": "lease not live, or it does not cover this effect", "checks": checks,
                                   "resolves": True}, "REFUSED:lease")
                # 9. AUTHORIZED
                chain.append(cur, "AUTHORIZED", ts, {"lease": self.grant})
                # 10. local (SQL) premises at the commit, plus the external ones at their read.
                all_violations = list(violations)
                for premise in self.local_premises:
                    all_violations.extend(premise(cur) or [])
                checks["violations"] = all_violations
                if all_violations:
                    return refuse({"reason": all_violations, "checks": checks, "resolves": True},
                                  "REFUSED:stale_premise")
                # 11-12. DISPATCHED and the durable send deadline: now() of this transaction (the
                # fence's) plus send_timeout, computed once so the row and the entry hold one value.
                deadline_at = fence["now"] + dt.timedelta(seconds=self.send_timeout)
                # In the same statement as the entries' INSERT (Chain.also).
                chain.also(
                    "update ilr.effects set state = 'dispatched', grant_id = %s, dispatch_workflow_id = %s, "
                    "dispatch_epoch = %s, first_dispatched_at = coalesce(first_dispatched_at, now()), "
                    "send_deadline = %s, settle_margin = make_interval(secs => %s), "
                    "sends = sends + 1 where effect_id = %s",
                    (self.grant, run.workflow_id, run.epoch, deadline_at, self.settle_margin, self.effect_id))
                chain.append(cur, "DISPATCHED", ts, dispatched.merged({
                    "checks": checks, "send_deadline": deadline_at.timestamp(),
                    **({"failover": lost["fields"]} if lost is not None else {})}))
        run.renewed(t_fence, None)
        return None

    def _lost_ambiguous(self, chain, cur, ts: float, lost: dict, reason: str, refusal: dict | None = None):
        """Inside T_dispatch's batch: AMBIGUOUS for a first send that may repeat a dispatch lost
        in a failover and cannot be looked up (``_t_dispatch``)."""
        chain.append(cur, "AMBIGUOUS", ts, {"reason": reason, "failover": lost["fields"], "by": self._by(),
                                            **({"refusal": refusal} if refusal is not None else {})})
        chain.also("update ilr.effects set state = 'ambiguous' where effect_id = %s", (self.effect_id,))
        return self._record_in(cur, "AMBIGUOUS")

    def _by(self) -> dict:
        """The writer of an entry: this claim (SendRequiresLiveClaim, FencedWrites read it)."""
        return {"workflow_id": self.run.workflow_id, "epoch": self.run.epoch}

    def _proposed_fields(self) -> dict:
        return {"agent": self.run.name, "lease": self.grant, "premises": self.premises, "effect": self.payload,
                "decision": self.decision}

    def _record_in(self, cur, status: str, result: Any = None, *, reset_takeovers: bool = True,
                   execute=None) -> EffectResult:
        """Insert this call's step row inside the caller's fenced transaction (and reset
        takeovers, unless the caller's fence already did). ``execute``: run the insert with
        it instead of ``cur.execute`` (``Chain.also``)."""
        out = EffectResult(status, self.effect_id, result)
        # asdict(out) without its deep copy of the result, which is encoded at once anyway.
        output = {f.name: getattr(out, f.name) for f in dataclass_fields(out)}
        store._insert_step(cur, self.run, self.seq, "effect", self.name, json.dumps(output),
                           fingerprint=self.fingerprint, reset_takeovers=reset_takeovers, execute=execute)
        return out

    # -- send and commit --------------------------------------------------------------------

    def _send(self, t0: float, *, via: str, status: str, rechecked: dict | None, payload: Any,
              take_status: bool = True) -> EffectResult | None:
        """Send ``payload`` and commit the answer; see the module docstring. None only when
        the target rejected an idempotent resend and the effect was resolved meanwhile
        (``_resolve_rejected_resend``: the caller goes round).

        A recovery passes the payload of the DISPATCHED entry: the bytes bound to the key at the
        first PROPOSED, whatever this replay offers (PayloadBound).
        """
        remaining = self.send_timeout - (time.monotonic() - t0)
        if remaining <= 0:
            # The local deadline passed before a byte left: skip the send; recovery resolves it.
            self._suspend_until_settled()
        self.run.require_local_lease()
        try:
            with Watchdog(remaining, self.effect_id):
                result = self.target.apply(self.effect_id, payload, **self._timeout_kwargs(remaining))
        except TargetRejected as exc:
            if via == IDEMPOTENT_RESEND_VIA:
                return self._resolve_rejected_resend(str(exc), payload, rechecked, take_status)
            return self._refuse_after_send(str(exc), take_status)
        except Exception as exc:  # noqa: BLE001 - timeout, reset, 5xx: the outcome is unknown
            # (g) write nothing; no immediate lookup or resend: wait until send_deadline +
            # settle_margin and let recovery decide (the fix for timeout-then-lookup duplicates).
            log.warning("send of %s failed with an unknown outcome: %s", self.effect_id, exc)
            self._suspend_until_settled()
        # Seconds from the stopwatch start to the answer, on the local monotonic clock: a late
        # result's arrival is judged by this, not by when a fenced-out sender got to journal it.
        self.received_in = time.monotonic() - t0
        killpoints.hit("effect_after_send" if via == "first-send" else "resolve_after_send")
        return self._t_commit(result, via=via, status=status, rechecked=rechecked, take_status=take_status)

    def _timeout_kwargs(self, remaining: float) -> dict:
        """``{"timeout": seconds}`` for a target whose apply() takes one, else ``{}``.

        The socket should give up a little before the watchdog fires (a tenth of the time
        left, at most 0.25 s before), so a slow answer ends this send as an unknown outcome
        instead of ending the whole worker; the watchdog stays the bound on what a socket
        timeout cannot bound (a trickle of bytes, a blocked resolver).
        """
        if not _accepts_timeout(self.target.apply):
            return {}
        return {"timeout": max(0.001, remaining - min(0.25, remaining / 10))}

    def _response_log(self, result: Any) -> tuple[str, tuple]:
        """The sender's own response log (LateResultPreserved): one statement, committed as its
        own transaction just before T_commit, in T_commit's first round trip.

        Its own transaction, so it survives a T_commit that rolls back or never runs (a fenced
        or killed sender). Committed asynchronously (synchronous_commit off): visible at once
        and durable against a worker crash; a PostgreSQL crash within the WAL writer's delay can
        lose the row, and then loses T_commit with it (WAL is replayed in order), so the check
        can miss an obligation then but never reports a false one. It saves a WAL flush on
        every send.
        """
        # set_config(..., true) sets synchronous_commit for this transaction only.
        return ("with async as (select set_config('synchronous_commit', 'off', true)) "
                "insert into ilr.responses (effect_id, workflow_id, epoch, result) "
                "select %s::text, %s::text, %s::bigint, %s::jsonb from async",
                (self.effect_id, self.run.workflow_id, self.run.epoch, json.dumps(result, default=str)))

    def _t_commit(self, result: Any, *, via: str, status: str, rechecked: dict | None,
                  take_status: bool) -> EffectResult:
        """The response log, then (e) COMMITTED plus the step row in one fenced transaction
        (EffectCheckpointAtomic); fenced out, (f) the late-result compare-and-set.

        One Batch: the response log's transaction, then T_commit's fence, the effect row lock
        and the chain's tail in one round trip; in the next, one statement that inserts the
        entry and the step row, and the Sync that commits. The log must not block the commit:
        when that batch fails, for a reason other than the fence, T_commit runs again alone.
        """
        try:
            try:
                out = self._commit_pipeline(result, via=via, status=status, rechecked=rechecked,
                                            take_status=take_status, with_log=True)
            except psycopg.Error as exc:
                log.warning("response log and T_commit of %s failed (%s); T_commit alone", self.effect_id, exc)
                if db.is_connection_fault(exc) and self._committed_by_us():
                    # The connection died after COMMIT was sent and the commit landed: the
                    # outcome, read back on a fresh connection, is the answer already in hand.
                    out = None
                else:
                    out = self._commit_pipeline(result, via=via, status=status, rechecked=rechecked,
                                                take_status=take_status, with_log=False)
        except Fenced:
            self._late_result(result)
            raise
        killpoints.hit("effect_after_commit")
        return out or EffectResult(status, self.effect_id, result)

    def _committed_by_us(self) -> bool:
        """Whether this claim's T_commit committed (read on a fresh connection after a fault):
        the effect is committed and its dispatch is this (workflow, epoch)'s. Under this claim's
        fence nobody else resolves a send dispatched by it, so that state is ours."""
        row = self.conn.execute(
            "select state = 'committed' and dispatch_workflow_id = %s and dispatch_epoch = %s as ours "
            "from ilr.effects where effect_id = %s", (self.run.workflow_id, self.run.epoch, self.effect_id)).fetchone()
        return bool(row and row["ours"])

    def _commit_pipeline(self, result: Any, *, via: str, status: str, rechecked: dict | None,
                         take_status: bool, with_log: bool) -> EffectResult | None:
        run = self.run
        conn = self.conn
        t_fence = time.monotonic()
        with Batch(conn, before=[self._response_log(result)] if with_log else ()) as cur:
            # A recorded step ends a crash loop (docs/protocol.md §3.4): the fence resets takeovers
            # when this transaction records the step row.
            fence_cur = db.send_fence(cur, run.workflow_id, run.epoch, run.lease_ttl, reset_takeovers=take_status)
            # The effect row lock every appender takes first, taken by the update this
            # transaction makes anyway.
            cur.execute("update ilr.effects set state = 'committed' where effect_id = %s", (self.effect_id,))
            tail_cur = cur.execute(journal.LAST_HASH_SQL, (self.effect_id,))
            # While the reads are on the wire: encode the entry's fields (none depends on them).
            cur.send()
            fields: dict[str, Any] = {"via": via, "result": result, "by": self._by()}
            if rechecked is not None:
                fields["rechecked"] = rechecked
            committed = journal.Encoded(fields)
            fence = db.fenced(fence_cur.fetchone(), run.workflow_id, run.epoch)
            tail = tail_cur.fetchone()
            # The entry and the step row in one statement (Chain.also).
            chain = journal.Chain(self.effect_id, tail["hash"] if tail else None)
            with chain.batched(cur):
                chain.append(cur, "COMMITTED", _ts(fence["now"]), committed)
                out = (self._record_in(cur, status, result, reset_takeovers=False, execute=chain.also)
                       if take_status else None)
        run.renewed(t_fence, fence["cancel_requested_at"])
        return out

    def _late_result(self, result: Any) -> None:
        """(f) The sender was fenced out after its send: never drop the response.

        Locks only the effect row. Still dispatched by this sender's (workflow, epoch): the
        compare-and-set commit, the one FencedWrites exception. Otherwise someone else resolved
        (or resent) it: append LATE_RESULT and keep it in effects.late_result.
        """
        run = self.run
        late_sql = ("select state, dispatch_workflow_id, dispatch_epoch, now() as now, "
                    "extract(epoch from send_deadline + settle_margin)::float8 as settle_deadline "
                    "from ilr.effects where effect_id = %s for update")
        with self.conn.transaction():
            cur = self.conn.cursor()
            eff = cur.execute(late_sql, (self.effect_id,)).fetchone()
            if eff is None:
                # No effect row: its T_dispatch was lost with a failed-over primary's WAL tail
                # (ilr.failover), and this sender reconnected to the promoted standby. The answer
                # is the evidence that the send applied: keep it as a LATE_RESULT of a new
                # 'proposed' row (the first proposer's, as T_dispatch would create it), unless the
                # workflow itself was lost too.
                cur.execute(
                    "insert into ilr.effects (effect_id, workflow_id, target, tier, payload, payload_hash) "
                    "select %s, %s, %s, %s, %s::jsonb, %s where exists (select 1 from ilr.workflows where id = %s) "
                    "on conflict (effect_id) do nothing",
                    (self.effect_id, run.workflow_id, self.target_name, self.target.tier, self.payload_text,
                     self.payload_hash, run.workflow_id))
                eff = cur.execute(late_sql, (self.effect_id,)).fetchone()
                if eff is None:
                    log.warning("late result of %s: neither the effect nor workflow %s is on this database; "
                                "not journaled: %s", self.effect_id, run.workflow_id, result)
                    return
            ts = _ts(eff["now"])
            if (eff["state"] == "dispatched" and eff["dispatch_workflow_id"] == run.workflow_id
                    and eff["dispatch_epoch"] == run.epoch):
                journal.append(cur, self.effect_id, "COMMITTED", ts, {"via": "late-commit", "result": result,
                                                                      "by": self._by()})
                cur.execute("update ilr.effects set state = 'committed' where effect_id = %s", (self.effect_id,))
            else:
                journal.append(cur, self.effect_id, "LATE_RESULT", ts, {
                    "result": result, "by": {"workflow_id": run.workflow_id, "epoch": run.epoch},
                    "settle_deadline": eff["settle_deadline"], "received_in_s": round(self.received_in, 6),
                    "send_timeout": self.send_timeout, "settle_margin": self.settle_margin})
                cur.execute("update ilr.effects set late_result = %s::jsonb where effect_id = %s",
                            (json.dumps({"result": result, "at": ts, "by": run.workflow_id, "epoch": run.epoch},
                                        default=str), self.effect_id))

    def _refuse_after_send(self, reason: str, take_status: bool) -> EffectResult:
        """(g) a definite no from the target: a resolving REFUSED, fenced; the effect returns
        to proposed (nothing was applied)."""
        run = self.run
        with self.conn.transaction():
            cur = self.conn.cursor()
            fence = db.fence(cur, run.workflow_id, run.epoch, run.lease_ttl)
            cur.execute("select 1 from ilr.effects where effect_id = %s for update", (self.effect_id,))
            journal.append(cur, self.effect_id, "REFUSED", _ts(fence["now"]), {
                "reason": "target rejected", "detail": reason[:1000], "resolves": True})
            cur.execute("update ilr.effects set state = 'proposed' where effect_id = %s", (self.effect_id,))
            out = self._record_in(cur, "REFUSED:target") if take_status else None
        return out or EffectResult("REFUSED:target", self.effect_id)

    def _resolve_rejected_resend(self, reason: str, payload: Any, rechecked: dict | None,
                                 take_status: bool) -> EffectResult | None:
        """The target refused a tier-1 resend: resolve the effect by what a lookup says.

        The refusal speaks of the resend only. The first send's answer never arrived, so it may
        have been applied; a target whose stored key has lapsed, or that reads the resend as a
        conflict, refuses the resend of an applied effect. So a rejected resend never returns
        the effect to proposed on its own word: a queryable target is looked up (found:
        COMMITTED_ON_QUERY; not found: REFUSED:target, nothing applied), any other is AMBIGUOUS
        for a person to reconcile. The lookup runs outside the transaction, as in recovery; the
        first send settled before this resend was authorized, so the lookup sees its outcome.

        Returns:
            The resolution (None when the effect was resolved meanwhile: the caller goes round).

        Raises:
            LookupFailed: the lookup raised; nothing was written (the effect stays dispatched).
            Fenced: the claim was lost.
        """
        found = None
        if self.queryable:
            try:
                found = bool(self.target.query(self.effect_id, payload))
            except Exception as exc:  # noqa: BLE001 - any failure to read the target
                raise LookupFailed(self.effect_id, exc) from exc
        run = self.run
        rejected = {"via": IDEMPOTENT_RESEND_VIA, "detail": reason[:1000]}
        with self.conn.transaction():
            cur = self.conn.cursor()
            fence = db.fence(cur, run.workflow_id, run.epoch, run.lease_ttl)
            ts = _ts(fence["now"])
            locked = cur.execute("select state from ilr.effects where effect_id = %s for update",
                                 (self.effect_id,)).fetchone()
            if locked["state"] != "dispatched":
                return None
            if found is None:
                return self._resolve_in(cur, "AMBIGUOUS", ts, {
                    "reason": "the target rejected a resend and has no lookup: the first send may have applied",
                    "rejected_resend": rejected, "rechecked": rechecked, "by": self._by()},
                    "ambiguous", "AMBIGUOUS", take_status)
            if found:
                return self._resolve_in(cur, "COMMITTED", ts, {
                    "via": "recovery-query", "found": True, "rejected_resend": rejected, "rechecked": rechecked,
                    "by": self._by()}, "committed", "COMMITTED_ON_QUERY", take_status)
            return self._resolve_in(cur, "REFUSED", ts, {
                "reason": "target rejected", "detail": reason[:1000], "found": False, "resolves": True,
                "by": self._by()}, "proposed", "REFUSED:target", take_status)

    def _suspend_until_settled(self) -> None:
        """Release the workflow until send_deadline + settle_margin (no effect or journal write)."""
        self._release_until("(select send_deadline + settle_margin from ilr.effects where effect_id = %(eid)s)", {})

    def _suspend_for_lookup(self, failed: LookupFailed) -> None:
        """Release the workflow until the next read of the target (LOOKUP_RETRY), writing
        nothing to the effect or its journal: before a send nothing was dispatched; in recovery
        the effect stays dispatched with its outcome unknown. The next claim goes round this
        call again (``waiting.kind`` is "effect"). ``waiting`` carries the attempt and the
        target's error, for describe() and the admin.

        Raises:
            Suspend: released. Fenced: the claim was lost meanwhile.
        """
        waiting = self.run.waiting or {}
        attempt = (waiting.get("lookup_attempt") or 0) + 1 if waiting.get("effect_id") == self.effect_id else 1
        delay = LOOKUP_RETRY.interval(attempt)
        log.warning("%s (attempt %d); workflow %s retries in %.0f s", failed, attempt, self.run.workflow_id, delay)
        self._release_until("now() + make_interval(secs => %(delay)s)",
                            {"delay": delay, "attempt": attempt, "error": failed.error},
                            "jsonb_build_object('lookup_attempt', %(attempt)s::int, 'lookup_error', %(error)s::text)")

    def _release_until(self, until_sql: str, params: dict, more_waiting_sql: str = "'{}'::jsonb") -> None:
        """Release the workflow, fenced, until the database time ``until_sql`` gives (an SQL
        expression over ``params`` and %(eid)s), with ``waiting = {seq, kind: "effect",
        effect_id, until}`` plus the jsonb object ``more_waiting_sql`` gives. Writes nothing to
        the effect or its journal.

        Raises:
            Suspend: released. Fenced: the claim was lost meanwhile.
        """
        run = self.run
        row = self.conn.execute(
            "update ilr.workflows w set status = 'pending', owner = null, lease_expires_at = null, "
            "available_at = t.until, updated_at = now(), "
            "waiting = jsonb_build_object('seq', %(seq)s, 'kind', 'effect', 'effect_id', %(eid)s::text, "
            f"'until', to_jsonb(t.until)) || {more_waiting_sql} "
            f"from (select {until_sql} as until) t where w.id = %(wf)s and w.epoch = %(epoch)s "
            "and w.status = 'running' and w.lease_expires_at > now() returning w.id",
            {**params, "seq": self.seq, "eid": self.effect_id, "wf": run.workflow_id, "epoch": run.epoch}).fetchone()
        if row is None:
            raise Fenced(f"workflow {run.workflow_id}: lost its claim while waiting on {self.effect_id}")
        run.released = True
        self.ctx.suspended = True
        raise Suspend()

    # -- recovery path -------------------------------------------------------------------------

    def _recover(self, take_status: bool) -> EffectResult | None:
        """Resolve a dispatched effect whose outcome is unknown (docs/protocol.md §6.5); None
        when it was resolved meanwhile (the caller goes round).

        Raises:
            LookupFailed: the re-check of premises or the lookup raised; nothing was written.
            Suspend: not settled yet (the workflow was released until send_deadline +
                settle_margin).
        """
        force_query = False
        while True:
            # (a) a short read: nothing may query or resend before send_deadline + settle_margin.
            eff = self.conn.execute(
                "select e.*, now() > e.send_deadline + e.settle_margin as settled, "
                "extract(epoch from now() - e.first_dispatched_at)::float8 as age "
                "from ilr.effects e where effect_id = %s", (self.effect_id,)).fetchone()
            if eff["state"] != "dispatched":
                return None  # resolved meanwhile: the caller goes round
            if not eff["settled"]:
                self._suspend_until_settled()
            entries = journal.parsed(self.conn, self.effect_id)
            dispatched = [e for e in entries if e["kind"] == "DISPATCHED"][-1]
            window_passed = eff["age"] > self.dedup_window - DEDUP_MARGIN
            tier = eff["tier"]
            eff_tier = effective_tier(tier, window_passed, self.queryable)
            # (c) outside any transaction: a preliminary grant read, premises against what the
            # decision rested on, and the lookup where the table needs one. A target that
            # cannot be read leaves the outcome unknown: LookupFailed, nothing written.
            grant_id = eff["grant_id"]
            prelim = self.conn.execute(
                "select revoked_at is null and (expires_at is null or expires_at > now()) as live "
                "from ilr.grants where id = %s", (grant_id,)).fetchone() if grant_id else None
            violations: list[str] = []
            found = None
            try:
                if eff_tier != 3:
                    validate = getattr(self.target, "validate_premises", None)
                    if validate and dispatched.get("premises") is not None:
                        violations = list(validate(dispatched["premises"], self.effect_id))
                stale_guess = bool(violations) or not (prelim and prelim["live"])
                if eff_tier != 3 and (force_query or needs_query(tier, window_passed, self.queryable, stale_guess)):
                    found = bool(self.target.query(self.effect_id, eff["payload"]))
            except Exception as exc:  # noqa: BLE001 - any failure to read the target
                raise LookupFailed(self.effect_id, exc) from exc
            # (d) T_resolve, with the stopwatch for a resend started before it begins, so the
            # resend's local deadline is no later than the send_deadline it writes
            # (docs/protocol.md §6.5).
            t0 = time.monotonic()
            try:
                outcome = self._t_resolve(eff, dispatched, violations, window_passed, found, take_status)
            except _Rollback:
                force_query = True  # the grant turned stale inside T_resolve: look it up first
                continue
            if outcome is None or isinstance(outcome, EffectResult):
                return outcome
            via, status, rechecked = outcome
            killpoints.hit("resolve_after_commit")
            # The resend carries the DISPATCHED entry's payload, never this call's: a replay may
            # offer another payload for the key, which T_dispatch refuses once this is resolved.
            return self._send(t0, via=via, status=status, rechecked=rechecked, take_status=take_status,
                              payload=dispatched["effect"])

    def _t_resolve(self, eff, dispatched, violations, window_passed, found, take_status):
        run = self.run
        t_fence = time.monotonic()
        with self.conn.transaction():
            cur = self.conn.cursor()
            fence = db.fence(cur, run.workflow_id, run.epoch, run.lease_ttl)
            ts = _ts(fence["now"])
            locked = cur.execute(
                "select state, grant_id, sends, now() > send_deadline + settle_margin as settled "
                "from ilr.effects where effect_id = %s for update", (self.effect_id,)).fetchone()
            # Two workflows can recover one dispatched effect (a fork and its original): both
            # read it settled in (a), outside any lock. The first to take the row lock resends
            # and moves send_deadline on; the second must see that here, under the lock, and
            # wait again (None: the caller goes round), or it would resend a second time.
            if locked["state"] != "dispatched" or locked["sends"] != eff["sends"] or not locked["settled"]:
                return None
            grant = cur.execute(GRANT_FOR_SHARE, (locked["grant_id"],)).fetchone() if locked["grant_id"] else None
            payload = eff["payload"]
            lease_live, snapshot = _lease_snapshot(grant, self.action, payload, eff["payload_hash"])
            rechecked = {"lease_live": lease_live, "lease": snapshot, "violations": violations, "at": ts}
            stale = (not lease_live) or bool(violations)
            stale_kind = "lease" if not lease_live else "stale_premise"
            action = recovery_decision(tier=eff["tier"], window_passed=window_passed, queryable=self.queryable,
                                       stale=stale, found=found)
            if action == "query":
                raise _Rollback("query")
            if action == "ambiguous":
                reason = (f"{stale_kind} at recovery, no lookup" if stale and eff["tier"] == 1 and not window_passed
                          else "tier 3: nothing can be learned after a send")
                return self._resolve_in(cur, "AMBIGUOUS", ts, {"reason": reason, "rechecked": rechecked,
                                                               "by": self._by()}, "ambiguous", "AMBIGUOUS", take_status)
            if action == "commit_on_query":
                return self._resolve_in(cur, "COMMITTED", ts, {"via": "recovery-query", "rechecked": rechecked,
                                                               "found": found, "by": self._by()},
                                        "committed", "COMMITTED_ON_QUERY", take_status)
            if action == "refuse":
                return self._resolve_in(cur, "REFUSED", ts, {
                    "reason": f"{stale_kind} at recovery", "resolves": True, "rechecked": rechecked, "by": self._by()},
                    "proposed", f"REFUSED:{stale_kind}_at_recovery", take_status)
            # resend (tier 1, idempotent) or reapply (tier 2, not found): the durable record of
            # the attempt is this update, committed before any byte goes out; no second DISPATCHED.
            cur.execute(
                "update ilr.effects set dispatch_workflow_id = %s, dispatch_epoch = %s, "
                "send_deadline = now() + make_interval(secs => %s), sends = sends + 1 where effect_id = %s",
                (run.workflow_id, run.epoch, self.send_timeout, self.effect_id))
        run.renewed(t_fence, fence["cancel_requested_at"])
        if action == "resend":
            return ("retry-idempotent", "COMMITTED_BY_RETRY", rechecked)
        return ("recovery-reapply", "REAPPLIED_AFTER_QUERY", rechecked)

    def _resolve_in(self, cur, kind: str, ts: float, fields: dict, state: str, status: str,
                    take_status: bool) -> EffectResult:
        """Append the resolving entry ``kind`` and set the effect's state, in the caller's
        fenced transaction that holds the effect row lock; return the status (recorded as this
        call's step when ``take_status``)."""
        journal.append(cur, self.effect_id, kind, ts, fields)
        cur.execute("update ilr.effects set state = %s where effect_id = %s", (state, self.effect_id))
        return self._result_in(cur, status, take_status)

    def _result_in(self, cur, status: str, take_status: bool) -> EffectResult:
        if take_status:
            return self._record_in(cur, status)
        return EffectResult(status, self.effect_id)


class _Reroute(Exception):
    """Raised inside T_dispatch to roll it back when another claim's dispatch is open."""


class _Rollback(Exception):
    def __init__(self, reason: str):
        self.reason = reason
