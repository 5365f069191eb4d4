"""Orphaned effects: dispatched effects whose workflow ended (docs/protocol.md §8). Each is
resolved by the recovery path under a synthetic claim.

Every ended status counts, not only stuck, failed and cancelled: a workflow can also complete (or
continue as new) with its effect still dispatched: its code caught the Cancelled delivered while
recovery was waiting on the target. Nothing else would ever resolve that effect.

The synthetic claim bumps the epoch and sets owner $recovery and a lease, and leaves the ended
status as it is: the fence (``ilr._queries.workflows.FENCE_SQL``) admits the claim by its owner, while the worker's
claim scan, ``signal_in`` and ``cancel_in`` still see an ended workflow.
"""

from __future__ import annotations

import logging
import threading
import time
from typing import Any

import psycopg

from ilr import _db as db
from ilr._effects.call_state import EffectCallState, target_settings
from ilr._effects.recovery import recover
from ilr._effects.targets import registered_targets
from ilr._errors import Fenced, LookupFailed, Suspend
from ilr._queries.effects import LOCK_WORKFLOW_SQL, ORPHAN_CLAIM_SQL, ORPHANS_SQL
from ilr._queries.workflows import HEARTBEAT_UPDATE_WORKFLOWS, RECOVER_ONE_UPDATE_WORKFLOWS
from ilr._statuses import ACTIVE

log = logging.getLogger("ilr.orphans")

RECOVERY_OWNER = db.RECOVERY_OWNER


class _SyntheticRun:
    """The claim an orphan recovery holds: an epoch bump with owner $recovery."""

    def __init__(self, workflow_id: str, name: str, epoch: int, lease_ttl: float, t0: float):
        self.workflow_id, self.name, self.epoch, self.lease_ttl = workflow_id, name, epoch, lease_ttl
        self.local_lease = t0 + lease_ttl
        self.fenced = self.released = self.cancel_requested = False

    clock = staticmethod(time.monotonic)

    def renewed(self, t0, cancel_requested_at):
        # Called by the sweep's thread and its heartbeat's. Two racing calls can leave the
        # smaller of two renewals, each a lower bound of the database lease: safe.
        self.local_lease = max(self.local_lease, t0 + self.lease_ttl)

    def require_local_lease(self):
        if self.fenced or time.monotonic() >= self.local_lease:
            raise Fenced(f"orphan recovery of {self.workflow_id}: local lease ran out")


class _SweepContext:
    """What an orphan's recovery has for a workflow context: nothing is ever released
    (``_NotSettled`` instead), so nothing is ever suspended."""

    suspended = False


class _NotSettled(Exception):
    """The effect's send deadline plus settle margin is still ahead (or a resend's outcome is
    unknown): the sweep writes nothing and reports it. Raised instead of releasing the ended
    workflow (``EffectCallState.raise_instead_of_release``): a send's unknown outcome, an
    overrun one too (watchdog.SendOverrun), leaves the effect dispatched for a later sweep."""


class _Heartbeat:
    """Renews a synthetic claim's lease every lease_ttl / 3, on a connection of its own, while
    the sweep's connection waits on the target (a lookup, a send). Zero rows (another epoch
    holds the workflow, or the lease lapsed) marks the run fenced and stops."""

    RENEW_SQL = HEARTBEAT_UPDATE_WORKFLOWS

    def __init__(self, dsn: str, run: _SyntheticRun):
        self._stop = threading.Event()
        self._thread = threading.Thread(
            target=self._beat, args=(dsn, run), daemon=True, name=f"ilr-orphans-heartbeat {run.workflow_id}"
        )
        self._thread.start()

    def _beat(self, dsn: str, run: _SyntheticRun) -> None:
        conn = None
        params = {"ttl": run.lease_ttl, "wf": run.workflow_id, "epoch": run.epoch, "owner": RECOVERY_OWNER}
        try:
            while not self._stop.wait(run.lease_ttl / 3):
                t0 = time.monotonic()
                try:
                    conn = conn or db.connect(dsn, application_name="ilr-orphans-heartbeat")
                    row = conn.execute(self.RENEW_SQL, params).fetchone()
                except psycopg.OperationalError as exc:
                    log.warning("orphan recovery of %s: heartbeat failed (%s)", run.workflow_id, exc)
                    if conn is not None:
                        conn.close()
                    conn = None
                    continue
                if row is None:
                    run.fenced = True
                    return
                run.renewed(t0, None)
        finally:
            if conn is not None:
                conn.close()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


def _call_for(conn, run: _SyntheticRun, target, effect: dict) -> EffectCallState:
    """The state of one orphan's recovery: no step row (seq None), the effect as recorded."""
    return EffectCallState(
        ctx=_SweepContext(),
        run=run,
        connection=lambda: conn,
        target=target,
        **target_settings(target),
        effect_id=effect["effect_id"],
        payload=effect["payload"],
        payload_hash=effect["payload_hash"],
        name="orphan-recovery",
        raise_instead_of_release=_NotSettled,
    )


def find_orphans(conn) -> list[dict]:
    """The orphaned effects, oldest dispatch first; reads only.

    Args:
        conn: a psycopg connection with dict rows (``db.connect``'s).

    Returns:
        ilr.effects rows plus ``wf_status`` and ``wf_name`` (the dispatching workflow's) and
        ``settled`` (database now() is past send_deadline + settle_margin).
    """
    return conn.execute(ORPHANS_SQL, (list(ACTIVE),)).fetchall()


def recover_orphans(
    dsn: str | None = None, targets: dict[str, Any] | None = None, lease_ttl: float = 30.0
) -> list[dict]:
    """Resolve every orphaned dispatched effect that recovery may act on now.

    For each (``_recover_one``): while it is still an orphan, bump the workflow's epoch with owner
    $recovery (a claim row records it), run the recovery path without recording a step (journal
    entries and the effects row only) while a heartbeat renews the lease, then clear the claim.
    The workflow's status never changes. Effects still inside send_deadline + settle_margin, or
    whose target is not known, are reported and left alone.

    Args:
        targets: target name -> EffectTarget; default the registered targets.
        lease_ttl: seconds of the synthetic claim's lease, renewed every lease_ttl / 3.

    Returns:
        one {"effect_id", "workflow_id", "outcome"} per orphan; outcome is an EffectResult
        status, "not settled yet", "no target registered named X", "another sweep holds it",
        "resolved meanwhile", "no longer an orphan: workflow is <status>", "fenced", or "lookup
        failed, left dispatched: <the target's error>" (nothing written; run it again later).
    """
    targets = registered_targets() if targets is None else targets
    report = []
    dsn = dsn or db.conninfo()
    with db.connect(dsn, application_name="ilr-orphans") as conn:
        for eff in find_orphans(conn):
            entry = {"effect_id": eff["effect_id"], "workflow_id": eff["dispatch_workflow_id"]}
            target = targets.get(eff["target"])
            if target is None:
                report.append({**entry, "outcome": f"no target registered named {eff['target']}"})
                continue
            if not eff["settled"]:
                report.append({**entry, "outcome": "not settled yet"})
                continue
            report.append({**entry, "outcome": _recover_one(conn, eff, target, lease_ttl, dsn)})
    return report


def _claim(conn, eff: dict, lease_ttl: float) -> int | str:
    """Take the synthetic claim on the orphan's workflow, or say why not.

    Returns:
        the claim's epoch; or the outcome to report (nothing written): "another sweep holds
        it", "resolved meanwhile", "no longer an orphan: workflow is <status>".
    """
    wf_id = eff["dispatch_workflow_id"]
    # The row ``eff`` came from find_orphans, maybe long ago; everything it said is read again
    # here, under locks, in lock order (workflow row, then effect row), in one transaction.
    with conn.transaction():
        # 1. The workflow row lock: no worker claim, migrate, cancel, signal or other sweep's
        # claim or fence changes the row until this commits.
        wf = conn.execute(LOCK_WORKFLOW_SQL, (wf_id,)).fetchone()
        if wf is None:
            return "resolved meanwhile"
        if wf["status"] in ACTIVE:
            # Not ended (rt.migrate returned a stuck workflow to pending): its own worker
            # resolves the effect when it gets there.
            return f"no longer an orphan: workflow is {wf['status']}"
        if wf["owner"] == RECOVERY_OWNER and wf["live"]:
            # A concurrent sweep holds it and renews its lease: bumping the epoch would fence
            # it in the middle of its lookup or send. A crashed sweep's lease lapses within
            # its ttl and the next sweep takes over.
            return "another sweep holds it"
        # 2. The effect row, FOR UPDATE in a statement that starts after the workflow lock was
        # granted (READ COMMITTED: a new snapshot, and FOR UPDATE waits for a transaction that
        # holds the row and re-reads its newest version). Another workflow's recovery of the same
        # effect id (a fork's, say) locks its own workflow row, not this one, so only the effect
        # row lock orders the two: either it committed its resolution first and nothing is
        # claimed here, or it resolves after this commit and our T_resolve sees that under its
        # own effect row lock ("resolved meanwhile").
        row = conn.execute(
            ORPHAN_CLAIM_SQL,
            {
                "eid": eff["effect_id"],
                "wf": wf_id,
                "owner": RECOVERY_OWNER,
                "ttl": lease_ttl,
                "status": wf["status"],
                "prev_lease": wf["lease_expires_at"],
            },
        ).fetchone()
        return "resolved meanwhile" if row is None else row["epoch"]


def _recover_one(conn, eff: dict, target, lease_ttl: float, dsn: str | None = None) -> str:
    """Resolve one orphan under a synthetic claim, if it is still an orphan when locked.

    Args:
        conn: the sweep's connection (``db.connect``'s, autocommit).
        eff: a ``find_orphans`` row (it may be stale: every fact used is read again).
        target: the effect's target.
        lease_ttl: seconds of the claim's lease; a heartbeat renews it every lease_ttl / 3.
        dsn: for the heartbeat's own connection; default Django's database.

    Returns:
        the outcome (see ``recover_orphans``).
    """
    t0 = time.monotonic()
    epoch = _claim(conn, eff, lease_ttl)
    if isinstance(epoch, str):
        return epoch
    run = _SyntheticRun(eff["dispatch_workflow_id"], eff["wf_name"], epoch, lease_ttl, t0)
    # The lookup or send can outlast the lease: without renewals the fence of T_resolve or
    # T_commit would then refuse, and the effect would stay dispatched ("fenced").
    beat = _Heartbeat(dsn or db.conninfo(), run)
    try:
        result = recover(_call_for(conn, run, target, eff), take_status=False)
        return result.status if result is not None else "resolved meanwhile"
    except _NotSettled:
        return "not settled yet"
    except (Fenced, Suspend):
        return "fenced"
    except LookupFailed as exc:
        return f"lookup failed, left dispatched: {exc.error}"
    finally:
        beat.stop()
        # Clear the claim, guarded by its epoch and owner; the status was never changed.
        conn.execute(
            RECOVER_ONE_UPDATE_WORKFLOWS,
            (run.workflow_id, run.epoch, RECOVERY_OWNER),
        )
