"""Writes: every action of the admin and the review UI (Django's services/selectors split).

Each service checks the acting user's permission, runs the runtime's own transaction body
(``approve_in``, ``signal_in``, ``cancel_in``, ``resume_in``, ``grant_in``, ``revoke_in``,
``reconcile_in``) on
Django's connection inside ``transaction.atomic()``, and writes a ``django.contrib.admin``
``LogEntry`` in the same transaction: either the action and its log entry commit together, or
neither does. ``by`` / ``granted_by`` is always ``user.get_username()``, never a form value.

Refusals raise ``ActionRefused`` (or the runtime's ``InvalidInput``) before anything commits, and
unknown ids raise the runtime's not-found errors; views turn the first into a message and the
second into a 404.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.db import IntegrityError, connection, transaction
from psycopg.rows import dict_row
from psycopg.types.json import JsonbLoader, JsonLoader

from approvals import conf, selectors
from approvals.models import Approval
from ilr import CancelRequest, cancel_in, resume_in, signal_in
from ilr.errors import InvalidInput, WorkflowNotFound
from ilr.grants import approve_in, grant_in, reconcile_in, revoke_in
from ilr.models import Deployment, Effect, Grant, Workflow


class ActionRefused(Exception):
    """The action cannot be done as asked; nothing was written. The message says why, in words
    a reviewer can act on."""


class DeploymentNotFound(LookupError):
    """No deployment has this name and version."""

    def __init__(self, name: str, version: str):
        self.name = name
        self.version = version
        super().__init__(f"no deployment {name}@{version}")


@dataclass(frozen=True)
class ApprovalOutcome:
    """What an approval did.

    Attributes:
        grant_id: the issued grant, or None while a second approver is due.
        approvers: usernames that approved this proposal, first approver first.
        needs_second: True when this approval was recorded and waits for a second person.
    """

    grant_id: str | None
    approvers: list[str]
    needs_second: bool


def second_approver_cents() -> int:
    """APPROVALS_SECOND_APPROVER_CENTS (approvals.conf): the amount (cents) from which an approval
    needs two distinct approvers."""
    return int(conf.settings.SECOND_APPROVER_CENTS)


# -- the runtime's transaction bodies on Django's connection ---------------------------------------

class _IlrConnection:
    """Django's psycopg connection, presented the way the ilr transaction bodies read rows.

    Django registers a text loader for json/jsonb on its connections (it decodes JSON itself in
    ``from_db_value``), but the bodies read ``waiting`` and ``reconciled`` as objects. Every cursor
    handed out here gets psycopg's JSON loaders registered on the cursor alone, so Django's own
    queries on the same connection are untouched. The transaction is Django's: the bodies' SQL
    and the LogEntry insert commit or roll back together.
    """

    def __init__(self, raw):
        self._raw = raw

    def cursor(self, *args, **kwargs):
        """A cursor on the Django transaction that loads json/jsonb as Python objects."""
        cur = self._raw.cursor(*args, **kwargs)
        cur.adapters.register_loader("jsonb", JsonbLoader)
        cur.adapters.register_loader("json", JsonLoader)
        return cur

    def execute(self, query, params=None):
        """``connection.execute`` with dict rows, as the bodies expect of an ilr connection."""
        return self.cursor(row_factory=dict_row).execute(query, params)


def _ilr_conn() -> _IlrConnection:
    """The current Django transaction's connection for an ilr body (call inside atomic())."""
    connection.ensure_connection()
    return _IlrConnection(connection.connection)


def _require(user, perm: str) -> None:
    if not (user is not None and user.is_authenticated and user.is_active and user.has_perm(f"approvals.{perm}")):
        raise PermissionDenied(f"you need the approvals.{perm} permission")


def _log(user, model, object_id: str, object_repr: str, flag: int, message: str) -> None:
    LogEntry.objects.create(
        user_id=user.pk,
        content_type=ContentType.objects.get_for_model(model, for_concrete_model=False),
        object_id=str(object_id),
        object_repr=str(object_repr)[:200],
        action_flag=flag,
        change_message=message,
    )


def _lock_waiting_workflow(conn: _IlrConnection, wf_id: str) -> dict:
    """Lock the workflow row (the runtime's lock order starts there) and refuse unless it waits
    for approval with no approval already on its way."""
    row = conn.execute("select id, name, status, waiting from ilr.workflows where id = %s for update",
                       (wf_id,)).fetchone()
    if row is None:
        raise WorkflowNotFound(wf_id)
    pending = conn.execute("select id from ilr.signals where workflow_id = %s and name = 'approve' "
                           "and consumed_seq is null limit 1", (wf_id,)).fetchone()
    if pending is not None:
        raise ActionRefused(f"Workflow {wf_id} has already been decided: an approval or rejection is on its way "
                            f"to it. Nothing was changed.")
    waiting = row["waiting"] or {}
    if not (row["status"] == "sleeping" and waiting.get("kind") == "signal" and waiting.get("signal") == "approve"):
        raise ActionRefused(f"Workflow {wf_id} no longer waits for approval (it is {row['status']}). "
                            f"Nothing was changed.")
    return row


def _proposal_for(wf_id: str, seen_hash: str | None) -> selectors.Proposal:
    proposal = selectors.proposal(wf_id)
    if proposal is None:
        raise ActionRefused(f"Workflow {wf_id} has no recorded proposal to approve. Nothing was changed.")
    if seen_hash is not None and seen_hash != proposal.payload_hash:
        raise ActionRefused("The proposal is not the one you reviewed (its payload hash differs). "
                            "Reload the page and review it again. Nothing was changed.")
    return proposal


# -- approvals ----------------------------------------------------------------------------

def approval_submit(*, user, workflow_id: str, seen_payload_hash: str, expires_in: float | None = None
                    ) -> ApprovalOutcome:
    """Approve the exact proposal of a workflow waiting on signal "approve".

    Binds the recorded proposal (payload hash) and the premises the decision rested on
    (facts_seen) through ``approve_in``. At or above ``second_approver_cents()`` the first
    approval is only recorded (an ``Approval`` row) and the grant is issued at the second,
    distinct approver's approval; the grant's lifetime is then the shorter of the two requested.

    Args:
        user: the logged-in user (needs approvals.approve); the grant's ``granted_by``.
        workflow_id: the workflow.
        seen_payload_hash: the payload hash the reviewer saw; a different current proposal is
            refused (the page was stale).
        expires_in: grant lifetime in seconds; None never expires.

    Returns:
        an ApprovalOutcome.

    Raises:
        PermissionDenied: no approvals.approve permission.
        WorkflowNotFound: unknown workflow.
        ActionRefused: the workflow no longer waits, it was already decided, the proposal differs
            from the one reviewed, or this person already approved it (two-person rule).
        InvalidInput: approve_in refused the payload or expiry.
    """
    _require(user, "approve")
    by = user.get_username()
    if not seen_payload_hash:
        raise ActionRefused("The form did not say which proposal you reviewed. Reload the page. Nothing was changed.")
    try:
        with transaction.atomic():
            conn = _ilr_conn()
            _lock_waiting_workflow(conn, workflow_id)
            prop = _proposal_for(workflow_id, seen_payload_hash)
            votes = list(Approval.objects.select_for_update().filter(
                workflow_id=workflow_id, payload_hash=prop.payload_hash, grant_id__isnull=True).order_by("created_at"))
            if any(v.username == by for v in votes):
                raise ActionRefused(f"You already approved {workflow_id}. The two-person rule needs a second, "
                                    f"different approver. Nothing was changed.")
            two_person = prop.amount is not None and prop.amount >= second_approver_cents()
            vote = Approval(workflow_id=workflow_id, payload_hash=prop.payload_hash, amount=prop.amount, user=user,
                            username=by, expires_in=expires_in)
            if two_person and not votes:
                vote.save()
                _log(user, Workflow, workflow_id, workflow_id, CHANGE,
                     f"First approval of {json.dumps(prop.payload, sort_keys=True)} (payload hash "
                     f"{prop.payload_hash[:12]}); a second, different approver is needed before the grant is issued.")
                return ApprovalOutcome(None, [by], True)
            lifetimes = [v.expires_in for v in votes if v.expires_in] + ([expires_in] if expires_in else [])
            grant_id = approve_in(conn, workflow_id, prop.payload, prop.facts_seen, by=by,
                                  expires_in=min(lifetimes) if lifetimes else None)
            vote.grant_id = grant_id
            vote.save()
            for v in votes:
                v.grant_id = grant_id
                v.save(update_fields=["grant_id"])
            approvers = [v.username for v in votes] + [by]
            detail = f"; approvers {', '.join(approvers)} (two-person rule)" if two_person else ""
            _log(user, Workflow, workflow_id, workflow_id, CHANGE,
                 f"Approved {json.dumps(prop.payload, sort_keys=True)} with the premises it rested on as grant "
                 f"{grant_id}{detail}.")
            _log(user, Grant, grant_id, grant_id, ADDITION,
                 f"Issued by the approval of workflow {workflow_id}{detail}.")
            return ApprovalOutcome(grant_id, approvers, False)
    except IntegrityError:
        # Two concurrent first approvals by the same person: the unique constraint refused one.
        raise ActionRefused(f"You already approved {workflow_id}. Nothing more was changed.") from None


def approval_reject(*, user, workflow_id: str, reason: str, seen_payload_hash: str | None = None) -> int:
    """Reject a proposal: send the workflow the signal "approve" with {"rejected": true, "by", "reason"}
    through ``signal_in`` (the refund workflow ends "rejected").

    Raises:
        PermissionDenied: no approvals.approve permission.
        WorkflowNotFound: unknown workflow.
        ActionRefused: empty reason, the workflow no longer waits or was already decided, or the
            proposal differs from the one reviewed.

    Returns:
        the signal id.
    """
    _require(user, "approve")
    by = user.get_username()
    reason = (reason or "").strip()
    if not reason:
        raise ActionRefused("A rejection needs a reason. Nothing was changed.")
    with transaction.atomic():
        conn = _ilr_conn()
        _lock_waiting_workflow(conn, workflow_id)
        if seen_payload_hash:
            _proposal_for(workflow_id, seen_payload_hash)
        signal_id = signal_in(conn, workflow_id, "approve", {"rejected": True, "by": by, "reason": reason}, sender=by)
        _log(user, Workflow, workflow_id, workflow_id, CHANGE, f"Rejected: {reason}")
    return signal_id


# -- grants ------------------------------------------------------------------------------

def grant_create(*, user, principal: str, action: str, max_cents: int | None = None,
                 expires_in: float | None = None) -> str:
    """Create a policy grant through ``grant_in`` (``granted_by`` is the user).

    Raises:
        PermissionDenied: no approvals.grant permission.
        InvalidInput: empty principal or action, negative max_cents, bad expiry.

    Returns:
        the grant id.
    """
    _require(user, "grant")
    with transaction.atomic():
        grant_id = grant_in(_ilr_conn(), principal, action, by=user.get_username(), max_cents=max_cents,
                            expires_in=expires_in)
        cap = "no cap" if max_cents is None else f"max {max_cents} cents"
        life = "never expires" if expires_in is None else f"expires in {expires_in:g} s"
        _log(user, Grant, grant_id, grant_id, ADDITION,
             f"Policy grant: {principal} may {action} ({cap}, {life}).")
    return grant_id


def grant_revoke(*, user, grant_id: str) -> list[str]:
    """Revoke a grant through ``revoke_in``.

    Returns:
        exactly the effect ids that may still land (dispatched under the grant when the revoke
        committed).

    Raises:
        PermissionDenied: no approvals.revoke permission.
        GrantNotFound: unknown grant.
        InvalidInput: the grant was revoked already (field grant_id; the message names who
            revoked it, when, and what may still land). Nothing is written, no LogEntry either.
    """
    _require(user, "revoke")
    with transaction.atomic():
        landing = revoke_in(_ilr_conn(), grant_id, by=user.get_username())
        tail = f" These effects may still land: {', '.join(landing)}." if landing else " No effect was in flight."
        _log(user, Grant, grant_id, grant_id, CHANGE, f"Revoked.{tail}")
    return landing


# -- effects -----------------------------------------------------------------------------

def effect_reconcile(*, user, effect_id: str, evidence: str, applied: bool | None) -> dict:
    """Attest what happened to an AMBIGUOUS effect through ``reconcile_in``.

    An effect already reconciled is refused here (the UI never silently replaces a person's
    attestation); the LogEntry keeps every attestation.

    Raises:
        PermissionDenied: no approvals.reconcile permission.
        EffectNotFound: unknown effect.
        ActionRefused: empty evidence, or the effect was already reconciled.
        InvalidInput: the effect is not ambiguous.

    Returns:
        the stored reconciliation {"evidence", "by", "applied", "at"}.
    """
    _require(user, "reconcile")
    evidence = (evidence or "").strip()
    if not evidence:
        raise ActionRefused("A reconcile needs evidence: what shows the refund did or did not land "
                            "(a ledger reference, a ticket). Nothing was changed.")
    with transaction.atomic():
        conn = _ilr_conn()
        row = conn.execute("select state, reconciled from ilr.effects where effect_id = %s for update",
                           (effect_id,)).fetchone()
        if row is not None and row["reconciled"] is not None:
            raise ActionRefused(f"Effect {effect_id} was already reconciled by {row['reconciled'].get('by')}. "
                                f"Nothing was changed.")
        reconciled = reconcile_in(conn, effect_id, evidence, by=user.get_username(), applied=applied)
        shows = {True: "it landed", False: "it did not land", None: "unsure"}[applied]
        _log(user, Effect, effect_id, effect_id, CHANGE, f"Reconciled ({shows}): {evidence}")
    return reconciled


# -- workflows and deployments ------------------------------------------------------------

def workflow_cancel(*, user, workflow_id: str) -> CancelRequest:
    """Request cancellation through ``cancel_in``.

    Returns:
        the CancelRequest: truthy when this call requested the cancel (falsy when it had ended or
        a cancel was already requested; then no LogEntry is written: nothing changed), with the
        effects whose sends were authorized before it and may still land.

    Raises:
        PermissionDenied: no approvals.cancel permission.
        WorkflowNotFound: unknown workflow.
    """
    _require(user, "cancel")
    with transaction.atomic():
        requested = cancel_in(_ilr_conn(), workflow_id, by=user.get_username())
        if requested:
            landing = (f" Sends authorized before it may still land: {', '.join(requested.may_still_land)}."
                       if requested.may_still_land else "")
            _log(user, Workflow, workflow_id, workflow_id, CHANGE, f"Cancellation requested.{landing}")
    return requested


def workflow_resume(*, user, workflow_id: str) -> dict:
    """Resume a stuck workflow through ``resume_in`` (by = the user), with a LogEntry naming
    the error it was stuck with and the steps it keeps.

    Returns:
        resume_in's answer.

    Raises:
        PermissionDenied: no approvals.resume permission.
        WorkflowNotFound: unknown workflow.
        InvalidInput: the workflow is not stuck (field "workflow_id"); nothing is written, no
            LogEntry either.
    """
    _require(user, "resume")
    with transaction.atomic():
        out = resume_in(_ilr_conn(), workflow_id, by=user.get_username())
        error = out["error"] or {}
        _log(user, Workflow, workflow_id, workflow_id, CHANGE,
             f"Resumed from stuck ({error.get('type', 'error')}: {error.get('message', '')}). "
             f"Kept {out['steps']} recorded step(s); the next step without a row runs again.")
    return out


def deployment_retire(*, user, name: str, version: str) -> selectors.DrainReport:
    """Retire a deployment version: it takes no new starts; running work drains.

    The runtime has no retire body yet, so this is the one statement it needs: set
    ``retired_at`` once (``Runtime.resolve_version`` refuses retired versions), on the row
    locked in this transaction.

    Returns:
        the drain report at retirement (also written into the LogEntry).

    Raises:
        PermissionDenied: no approvals.retire permission.
        DeploymentNotFound: unknown name and version.
        ActionRefused: already retired.
    """
    _require(user, "retire")
    with transaction.atomic():
        conn = _ilr_conn()
        row = conn.execute("select retired_at from ilr.deployments where name = %s and version = %s for update",
                           (name, version)).fetchone()
        if row is None:
            raise DeploymentNotFound(name, version)
        if row["retired_at"] is not None:
            raise ActionRefused(f"{name}@{version} was already retired at {row['retired_at']:%Y-%m-%d %H:%M:%S %Z}. "
                                f"Nothing was changed.")
        conn.execute("update ilr.deployments set retired_at = now() where name = %s and version = %s",
                     (name, version))
        report = selectors.drain_report(name, version)
        _log(user, Deployment, f"{name}@{version}", f"{name}@{version}", CHANGE,
             f"Retired. Drain report: {report.summary()}")
    return report


__all__ = [
    "ActionRefused",
    "ApprovalOutcome",
    "DeploymentNotFound",
    "InvalidInput",
    "approval_reject",
    "approval_submit",
    "deployment_retire",
    "effect_reconcile",
    "grant_create",
    "grant_revoke",
    "second_approver_cents",
    "workflow_cancel",
    "workflow_resume",
]
