"""Writes: every action of the admin and the review UI (Django's services/selectors split).

Each service checks the acting user's permission, runs the runtime's own transaction body
(``approve_request_in``, ``reject_request_in``, ``cancel_in``, ``resume_in``, ``grant_in``,
``revoke_in``, ``reconcile_in``) on
Django's connection inside ``transaction.atomic()``, and writes a ``django.contrib.admin``
``LogEntry`` in the same transaction: either the action and its log entry commit together, or
neither does. ``by`` / ``granted_by`` is always ``user.get_username()``, never a form value.

Refusals raise ``ActionRefused`` (or the runtime's ``InvalidInput``) before anything commits, and
unknown ids raise the runtime's not-found errors; views turn the first into a message and the
second into a 404.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib.admin.models import ADDITION, CHANGE, LogEntry
from django.contrib.contenttypes.models import ContentType
from django.core.exceptions import PermissionDenied
from django.db import connection, transaction
from psycopg.rows import dict_row
from psycopg.types.json import JsonbLoader, JsonLoader

from approvals import queue, selectors
from ilr import (
    ActionRefused,
    AlreadyReconciled,
    ApprovalRefused,
    ApprovalRequestNotFound,
    CancelRequest,
    DeploymentNotFound,
    InvalidInput,
    TerminateRequest,
    approve_request_in,
    cancel_in,
    grant_in,
    reconcile_in,
    reject_request_in,
    resume_in,
    retire_in,
    revoke_in,
    terminate_in,
)
from ilr.models import ApprovalRequest, Deployment, Effect, Grant, Workflow


@dataclass(frozen=True)
class ApprovalOutcome:
    """What an approval did.

    Attributes:
        grant_id: the issued grant, or None while a second approver is due.
        approvers: usernames that approved this request, first approver first.
        needs_second: True when this approval was recorded and waits for a second person.
        premise_changes: what a re-check of the premises found just before approving ([] when
            they hold or could not be read): an approval that will not send.
    """

    grant_id: str | None
    approvers: list[str]
    needs_second: bool
    premise_changes: list[str]


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

    def transaction(self):
        """A savepoint inside the Django transaction (a body that must survive one refused write)."""
        return self._raw.transaction()


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


def _request_for(request_id: str, seen_hash: str | None) -> ApprovalRequest:
    """The request, refused when the reviewer's page showed another payload."""
    req = ApprovalRequest.objects.filter(id=request_id).first()
    if req is None:
        raise ApprovalRequestNotFound(request_id)
    if seen_hash is not None and seen_hash != req.payload_hash:
        raise ActionRefused(
            "The request is not the one you reviewed (its payload hash differs). "
            "Reload the page and review it again. Nothing was changed."
        )
    return req


def _refused(exc: ApprovalRefused) -> ActionRefused:
    return ActionRefused(f"{exc} Nothing was changed.")


# -- approval requests --------------------------------------------------------------------------


def request_approve(
    *, user, request_id: str, seen_payload_hash: str, expires_in: float | None = None
) -> ApprovalOutcome:
    """Approve an approval request as the logged-in user (``approve_request_in``: the grant is
    bound to the request's payload hash and premises; the two-person rule is the request's own).

    Args:
        user: the logged-in user (needs approvals.approve); the approver.
        request_id: the request.
        seen_payload_hash: the payload hash the reviewer saw; another payload is refused.
        expires_in: grant lifetime in seconds; None never expires.

    Returns:
        an ApprovalOutcome, with what a re-check of the premises found just before.

    Raises:
        PermissionDenied: no approvals.approve permission.
        ApprovalRequestNotFound: unknown request.
        ActionRefused: the page showed another payload, or the runtime refused (decided already,
            expired, its workflow ended or is being cancelled, the same person twice).
        InvalidInput: a bad expiry.
    """
    _require(user, "approve")
    by = user.get_username()
    if not seen_payload_hash:
        raise ActionRefused("The form did not say which request you reviewed. Reload the page. Nothing was changed.")
    card = queue.request_card(request_id)
    if card is None:
        raise ApprovalRequestNotFound(request_id)
    with transaction.atomic():
        req = _request_for(request_id, seen_payload_hash)
        try:
            after = approve_request_in(_ilr_conn(), request_id, by=by, expires_in=expires_in)
        except ApprovalRefused as exc:
            raise _refused(exc) from None
        approvers = [a["by"] for a in after["approvals"]]
        changes = card.premises.changes
        warning = f" The premises had changed ({'; '.join(changes)}): the send will be refused." if changes else ""
        if after["status"] == "pending":
            _log(
                user,
                Workflow,
                req.workflow_id,
                req.workflow_id,
                CHANGE,
                f"First approval of request {request_id} ({req.summary or req.action}); a second, different "
                f"approver is needed.{warning}",
            )
            return ApprovalOutcome(None, approvers, True, changes)
        _log(
            user,
            Workflow,
            req.workflow_id,
            req.workflow_id,
            CHANGE,
            f"Approved request {request_id} ({req.summary or req.action}) as grant {after['grant_id']}; "
            f"approvers {', '.join(approvers)}.{warning}",
        )
        _log(
            user,
            Grant,
            after["grant_id"],
            after["grant_id"],
            ADDITION,
            f"Issued by approval request {request_id} of workflow {req.workflow_id}.",
        )
        return ApprovalOutcome(after["grant_id"], approvers, False, changes)


def request_reject(*, user, request_id: str, reason: str, seen_payload_hash: str | None = None) -> None:
    """Reject an approval request with a reason (``reject_request_in``); its workflow reads the
    rejection and the reason.

    Raises:
        PermissionDenied: no approvals.approve permission.
        ApprovalRequestNotFound: unknown request.
        ActionRefused: an empty reason, the page showed another payload, or the runtime refused.
    """
    _require(user, "approve")
    by = user.get_username()
    reason = (reason or "").strip()
    if not reason:
        raise ActionRefused("A rejection needs a reason. Nothing was changed.")
    with transaction.atomic():
        req = _request_for(request_id, seen_payload_hash or None)
        try:
            reject_request_in(_ilr_conn(), request_id, by=by, reason=reason)
        except ApprovalRefused as exc:
            raise _refused(exc) from None
        _log(user, Workflow, req.workflow_id, req.workflow_id, CHANGE, f"Rejected request {request_id}: {reason}")


# -- grants ------------------------------------------------------------------------------


def grant_create(
    *, user, principal: str, action: str, max_cents: int | None = None, expires_in: float | None = None
) -> str:
    """Create a policy grant through ``grant_in`` (``granted_by`` is the user).

    Raises:
        PermissionDenied: no approvals.grant permission.
        InvalidInput: empty principal or action, negative max_cents, bad expiry.

    Returns:
        the grant id.
    """
    _require(user, "grant")
    with transaction.atomic():
        grant_id = grant_in(
            _ilr_conn(), principal, action, by=user.get_username(), max_cents=max_cents, expires_in=expires_in
        )
        cap = "no cap" if max_cents is None else f"max {max_cents} cents"
        life = "never expires" if expires_in is None else f"expires in {expires_in:g} s"
        _log(user, Grant, grant_id, grant_id, ADDITION, f"Policy grant: {principal} may {action} ({cap}, {life}).")
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
        raise ActionRefused(
            "A reconcile needs evidence: what shows the effect did or did not land "
            "(a ledger reference, a ticket). Nothing was changed."
        )
    with transaction.atomic():
        try:
            reconciled = reconcile_in(_ilr_conn(), effect_id, evidence, by=user.get_username(), applied=applied)
        except AlreadyReconciled as exc:
            raise ActionRefused(
                f"Effect {effect_id} was already reconciled by {exc.by}. Nothing was changed."
            ) from None
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
            landing = (
                f" Sends authorized before it may still land: {', '.join(requested.may_still_land)}."
                if requested.may_still_land
                else ""
            )
            _log(user, Workflow, workflow_id, workflow_id, CHANGE, f"Cancellation requested.{landing}")
    return requested


def workflow_terminate(*, user, workflow_id: str, reason: str) -> TerminateRequest:
    """End a workflow now through ``terminate_in`` (no compensation; by = the user), with a
    LogEntry naming the reason, what its children's policies did and what may still land.

    Returns:
        the TerminateRequest: truthy when this call ended it (falsy when it had ended; then no
        LogEntry is written: nothing changed).

    Raises:
        PermissionDenied: no approvals.terminate permission.
        WorkflowNotFound: unknown workflow.
        InvalidInput: an empty ``reason`` (field "reason"); nothing is written.
    """
    _require(user, "terminate")
    with transaction.atomic():
        ended = terminate_in(_ilr_conn(), workflow_id, reason, user.get_username())
        if ended:
            children = "; ".join(f"{child}: {what}" for child, what in ended.children.items())
            landing = ", ".join(ended.may_still_land)
            _log(
                user,
                Workflow,
                workflow_id,
                workflow_id,
                CHANGE,
                f"Terminated: {reason}."
                + (f" Children: {children}." if children else "")
                + (f" Sends authorized before it may still land: {landing}." if landing else ""),
            )
    return ended


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
        _log(
            user,
            Workflow,
            workflow_id,
            workflow_id,
            CHANGE,
            f"Resumed from stuck ({error.get('type', 'error')}: {error.get('message', '')}). "
            f"Kept {out['steps']} recorded step(s); the next step without a row runs again.",
        )
    return out


def deployment_retire(*, user, name: str, version: str) -> selectors.DrainReport:
    """Retire a deployment version: it takes no new starts; running work drains.

    Runs the runtime's retire body (``ilr.retire_in``, which locks the row), then
    reads the drain report, in this transaction.

    Returns:
        the drain report at retirement (also written into the LogEntry).

    Raises:
        PermissionDenied: no approvals.retire permission.
        DeploymentNotFound: unknown name and version.
        ActionRefused: already retired.
    """
    _require(user, "retire")
    with transaction.atomic():
        retirement = retire_in(_ilr_conn(), name, version)
        if retirement is None:
            raise DeploymentNotFound(name, version)
        if retirement.already:
            raise ActionRefused(
                f"{name}@{version} was already retired at "
                f"{retirement.retired_at:%Y-%m-%d %H:%M:%S %Z}. Nothing was changed."
            )
        report = selectors.drain_report(name, version)
        _log(
            user,
            Deployment,
            f"{name}@{version}",
            f"{name}@{version}",
            CHANGE,
            f"Retired. Drain report: {report.summary()}",
        )
    return report


__all__ = [
    "ActionRefused",
    "ApprovalOutcome",
    "DeploymentNotFound",
    "InvalidInput",
    "deployment_retire",
    "effect_reconcile",
    "grant_create",
    "grant_revoke",
    "request_approve",
    "request_reject",
    "workflow_cancel",
    "workflow_resume",
]
