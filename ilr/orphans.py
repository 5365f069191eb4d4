"""Orphaned effects: dispatched effects whose workflow ended (spec §5.7 "Orphans"). Each is
resolved by the recovery path under a synthetic claim.

The spec names stuck, failed and cancelled. A workflow can also complete (or continue as new)
with its effect still dispatched: its code caught the Cancelled delivered while recovery was
waiting on the target. Nothing else would ever resolve that effect, so every ended status counts.
"""

from __future__ import annotations

import time
from typing import Any

from ilr import db
from ilr.effects import EffectCall, LookupFailed
from ilr.errors import Fenced, Suspend
from ilr.runtime import ACTIVE
from ilr.targets import attr, registered_targets

RECOVERY_OWNER = "$recovery"


class _SyntheticRun:
    """The claim an orphan recovery holds: an epoch bump with owner $recovery."""

    def __init__(self, workflow_id: str, name: str, epoch: int, lease_ttl: float, t0: float):
        self.workflow_id, self.name, self.epoch, self.lease_ttl = workflow_id, name, epoch, lease_ttl
        self.local_lease = t0 + lease_ttl
        self.fenced = self.released = self.cancel_requested = False

    clock = staticmethod(time.monotonic)

    def renewed(self, t0, cancel_requested_at):
        self.local_lease = max(self.local_lease, t0 + self.lease_ttl)

    def require_local_lease(self):
        if self.fenced or time.monotonic() >= self.local_lease:
            raise Fenced(f"orphan recovery of {self.workflow_id}: local lease ran out")


class _RecoveryContext:
    def __init__(self, run, conn):
        self._run, self._conn, self.suspended = run, conn, False


def _call_for(ctx, target, effect: dict) -> EffectCall:
    call = EffectCall.__new__(EffectCall)
    call.ctx, call.run, call.conn, call.target = ctx, ctx._run, ctx._conn, target
    call.target_name, call.action = attr(target, "name"), attr(target, "action")
    call.effect_id, call.payload, call.payload_hash = effect["effect_id"], effect["payload"], effect["payload_hash"]
    call.seq, call.name, call.compensation, call.premises = None, "orphan-recovery", False, None
    for key in ("send_timeout", "settle_margin", "premise_max_age", "queryable", "dedup_window"):
        setattr(call, key, attr(target, key))
    return call


ORPHANS_SQL = (
    "select e.*, w.status as wf_status, w.name as wf_name, now() > e.send_deadline + e.settle_margin as settled "
    "from ilr.effects e join ilr.workflows w on w.id = e.dispatch_workflow_id "
    "where e.state = 'dispatched' and w.status <> all(%s) "
    "order by e.first_dispatched_at")


def find_orphans(conn) -> list[dict]:
    """The orphaned effects, oldest dispatch first; reads only.

    Args:
        conn: a psycopg connection with dict rows (``db.connect``'s).

    Returns:
        ilr.effects rows plus ``wf_status`` and ``wf_name`` (the dispatching workflow's) and
        ``settled`` (database now() is past send_deadline + settle_margin).
    """
    return conn.execute(ORPHANS_SQL, (list(ACTIVE),)).fetchall()


def recover_orphans(dsn: str | None = None, targets: dict[str, Any] | None = None, lease_ttl: float = 30.0
                    ) -> list[dict]:
    """Resolve every orphaned dispatched effect that recovery may act on now.

    For each: bump the workflow's epoch with owner $recovery (a claim row records it), run the
    recovery path without recording a step (journal entries and the effects row only), then
    restore the workflow's previous status. Effects still inside send_deadline + settle_margin,
    or whose target is not known, are reported and left alone.

    Args:
        targets: target name -> EffectTarget; default the registered targets.

    Returns:
        one {"effect_id", "workflow_id", "outcome"} per orphan; outcome is an EffectResult
        status, "not settled yet", "no target registered named X", "fenced", or "lookup failed,
        left dispatched: <the target's error>" (nothing written; run it again later).
    """
    targets = registered_targets() if targets is None else targets
    report = []
    with db.connect(dsn or db.conninfo(), application_name="ilr-orphans") as conn:
        for eff in find_orphans(conn):
            entry = {"effect_id": eff["effect_id"], "workflow_id": eff["dispatch_workflow_id"]}
            target = targets.get(eff["target"])
            if target is None:
                report.append({**entry, "outcome": f"no target registered named {eff['target']}"})
                continue
            if not eff["settled"]:
                report.append({**entry, "outcome": "not settled yet"})
                continue
            report.append({**entry, "outcome": _recover_one(conn, eff, target, lease_ttl)})
    return report


def _recover_one(conn, eff: dict, target, lease_ttl: float) -> str:
    t0 = time.monotonic()
    claim = conn.execute(
        "with u as (update ilr.workflows set epoch = epoch + 1, owner = %(owner)s, status = 'running', "
        "lease_expires_at = now() + make_interval(secs => %(ttl)s), updated_at = now() "
        "where id = %(wf)s and status = %(status)s returning id, epoch, version, lease_expires_at, now() as now), "
        "h as (insert into ilr.claims (workflow_id, epoch, owner, version, claimed_at, lease_expires_at, prev_status) "
        "select id, epoch, %(owner)s, version, now, lease_expires_at, %(status)s from u) select * from u",
        {"owner": RECOVERY_OWNER, "ttl": lease_ttl, "wf": eff["dispatch_workflow_id"],
         "status": eff["wf_status"]}).fetchone()
    if claim is None:
        return "fenced"
    run = _SyntheticRun(eff["dispatch_workflow_id"], eff["wf_name"], claim["epoch"], lease_ttl, t0)
    try:
        result = _call_for(_RecoveryContext(run, conn), target, eff)._recover(take_status=False)
        return result.status if result is not None else "resolved meanwhile"
    except (Fenced, Suspend):
        return "fenced"
    except LookupFailed as exc:
        return f"lookup failed, left dispatched: {exc.error}"
    finally:
        # Restore the workflow's previous status, guarded by the synthetic epoch.
        conn.execute("update ilr.workflows set status = %s, owner = null, lease_expires_at = null, "
                     "updated_at = now() where id = %s and epoch = %s",
                     (eff["wf_status"], run.workflow_id, run.epoch))
