"""The review UI: thin views over ``selectors`` (reads) and ``services`` (writes).

Every page needs a logged-in user with one of the approvals permissions (a reviewer need not be
a Django admin); every action is POST-only, CSRF-checked by Django's middleware, checks its own
permission, and answers a refusal with a message (nothing written) and an unknown id with 404.
"""

from __future__ import annotations

from functools import wraps
from urllib.parse import urlencode

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_GET, require_POST

from approvals import cases as case_lists
from approvals import receipt_page, selectors, services
from approvals.forms import ApproveForm, ReconcileForm, RejectForm
from approvals.queue import approval_queue, request_card, requests_of
from ilr import ApprovalRequestNotFound, EffectNotFound, InvalidInput
from ilr.models import Workflow

REVIEW_PERMS = ("approvals.review", "approvals.approve", "approvals.reconcile", "approvals.revoke")


def can_review(user) -> bool:
    """True when ``user`` may open the review UI: any approvals permission will do."""
    return user.is_active and any(user.has_perm(p) for p in REVIEW_PERMS)


def _forbidden(request, needed: str) -> HttpResponse:
    return render(request, "approvals/forbidden.html", {"needed": needed}, status=403)


def reviewer_required(perm: str | None = None):
    """Decorator: log in first; then 403 unless the user may review (and holds ``perm``, the
    permission of the action, when given)."""

    def decorate(view):
        """Wrap ``view`` with the login and permission checks."""

        @login_required
        @wraps(view)
        def wrapped(request, *args, **kwargs):
            """403 unless the user may review (and act); else the view."""
            if not can_review(request.user):
                return _forbidden(request, "approvals.review")
            if perm and not request.user.has_perm(perm):
                return _forbidden(request, perm)
            return view(request, *args, **kwargs)

        return wrapped

    return decorate


def _back(request, fallback: str) -> HttpResponseRedirect:
    target = request.POST.get("next") or ""
    if not url_has_allowed_host_and_scheme(
        target, allowed_hosts={request.get_host()}, require_https=request.is_secure()
    ):
        target = fallback
    return HttpResponseRedirect(target)


def _refused(request, exc: Exception) -> None:
    if isinstance(exc, InvalidInput):
        messages.error(request, f"Refused: {exc.rule}. Nothing was changed.")
    else:
        messages.error(request, str(exc))


def _form_errors(request, form) -> None:
    """One message per error, naming the field ("Approval expires: Select a valid choice...")."""
    for name, errors in form.errors.items():
        field = form.fields.get(name)
        label = field.label if field is not None and field.label else name.replace("_", " ").capitalize()
        for error in errors:
            where = "" if name == "__all__" else f"{label}: "
            messages.error(request, f"{where}{error} Nothing was changed.")


# -- pages -----------------------------------------------------------------------------------


@require_GET
@reviewer_required()
def queue(request):
    """The approval queue: pending approval requests of every workflow and target."""
    page, cards = approval_queue(request.GET.get("page", 1))
    return render(
        request,
        "approvals/queue.html",
        {
            "nav": "queue",
            "page": page,
            "cards": cards,
            "expiry_choices": ApproveForm.base_fields["expires_in"].choices,
        },
    )


@require_GET
@reviewer_required()
def cases(request):
    """The case list: workflows by outcome (``?outcome=`` one of ``cases.OUTCOMES``; none: every
    case), most recently changed first. An unknown outcome is answered with a message and the
    whole list."""
    outcome = request.GET.get("outcome") or None
    if outcome is not None and outcome not in case_lists.OUTCOMES:
        messages.error(
            request, f"outcome: {outcome!r} is not one of {', '.join(case_lists.OUTCOMES)}; showing every case."
        )
        outcome = None
    counts = case_lists.counts()
    return render(
        request,
        "approvals/cases.html",
        {
            "nav": "cases",
            "outcome": outcome,
            "page": case_lists.cases(outcome, request.GET.get("page", 1)),
            "pager_query": urlencode({"outcome": outcome}) + "&" if outcome else "",
            "filters": [(name, o.label, counts[name]) for name, o in case_lists.OUTCOMES.items()],
        },
    )


@require_GET
@reviewer_required()
def case(request, workflow_id: str):
    """One workflow: its approval requests (decided ones with their outcome), effects with their
    receipts, step timeline and signals."""
    try:
        detail = case_lists.workflow_detail(workflow_id)
    except Workflow.DoesNotExist:
        raise Http404(f"no workflow with id {workflow_id!r}") from None
    return render(
        request,
        "approvals/case.html",
        {
            "detail": detail,
            "wf": detail.workflow,
            "cards": requests_of(workflow_id),
            "expiry_choices": ApproveForm.base_fields["expires_in"].choices,
        },
    )


@require_GET
@reviewer_required()
def ambiguous(request):
    """The AMBIGUOUS queue: effects whose outcome is unknown, with the reconcile form."""
    done = request.GET.get("reconciled") == "1"
    return render(
        request,
        "approvals/ambiguous.html",
        {
            "nav": "ambiguous",
            "reconciled": done,
            "pager_query": "reconciled=1&" if done else "",
            "page": selectors.ambiguous_effects(request.GET.get("page", 1), reconciled=done),
            "applied_choices": ReconcileForm.base_fields["applied"].choices,
        },
    )


@require_GET
@reviewer_required()
def receipt(request, effect_id: str):
    """A receipt: verify()'s answers to P1..P5, the chain of entries, the tamper flag."""
    try:
        r = receipt_page.receipt(effect_id)
    except EffectNotFound:
        raise Http404(f"no effect with id {effect_id!r}") from None
    return render(request, "approvals/receipt.html", {"r": r})


@require_GET
@reviewer_required()
def receipt_json(request, effect_id: str):
    """The receipt bundle as a JSON download (what ``ilr.verify_receipt`` takes)."""
    try:
        r = receipt_page.receipt(effect_id)
    except EffectNotFound:
        raise Http404(f"no effect with id {effect_id!r}") from None
    response = HttpResponse(r.bundle_json(), content_type="application/json")
    response["Content-Disposition"] = f'attachment; filename="receipt-{effect_id}.json"'
    return response


# -- actions ---------------------------------------------------------------------------------


def _case_of(request_id: str) -> str:
    card = request_card(request_id)
    if card is None:
        raise Http404(f"no approval request with id {request_id!r}")
    return reverse("approvals:case", args=[card.request.workflow_id])


@require_POST
@reviewer_required("approvals.approve")
def approve(request, request_id: str):
    """Approve the request the reviewer saw (its payload hash); the two-person rule is the
    request's. Changed premises make the answer a warning: the send will be refused."""
    fallback = _case_of(request_id)
    form = ApproveForm(request.POST)
    if not form.is_valid():
        _form_errors(request, form)
        return _back(request, fallback)
    try:
        outcome = services.request_approve(
            user=request.user,
            request_id=request_id,
            seen_payload_hash=form.cleaned_data["payload_hash"],
            expires_in=form.cleaned_data["expires_in"],
        )
    except ApprovalRequestNotFound:
        raise Http404(f"no approval request with id {request_id!r}") from None
    except (services.ActionRefused, InvalidInput) as exc:
        _refused(request, exc)
        return _back(request, fallback)
    changed = (
        (
            f" But the premises have changed ({'; '.join(outcome.premise_changes)}): the runtime re-checks "
            f"them before sending and will refuse this send."
        )
        if outcome.premise_changes
        else ""
    )
    if outcome.needs_second:
        messages.warning(
            request,
            f"Your approval of {request_id} is recorded. It needs a second, different "
            f"approver before the grant is issued.{changed}",
        )
    elif changed:
        messages.warning(request, f"Approved {request_id} as grant {outcome.grant_id}.{changed}")
    else:
        messages.success(
            request, f"Approved {request_id} as grant {outcome.grant_id} (approvers: {', '.join(outcome.approvers)})."
        )
    return _back(request, fallback)


@require_POST
@reviewer_required("approvals.approve")
def reject(request, request_id: str):
    """Reject a request; its workflow reads the rejection and the reason."""
    fallback = _case_of(request_id)
    form = RejectForm(request.POST)
    if not form.is_valid():
        _form_errors(request, form)
        return _back(request, fallback)
    try:
        services.request_reject(
            user=request.user,
            request_id=request_id,
            reason=form.cleaned_data["reason"],
            seen_payload_hash=form.cleaned_data["payload_hash"] or None,
        )
    except ApprovalRequestNotFound:
        raise Http404(f"no approval request with id {request_id!r}") from None
    except (services.ActionRefused, InvalidInput) as exc:
        _refused(request, exc)
        return _back(request, fallback)
    messages.success(request, f"Rejected {request_id}.")
    return _back(request, fallback)


@require_POST
@reviewer_required("approvals.reconcile")
def reconcile(request, effect_id: str):
    """Reconcile an AMBIGUOUS effect with the evidence a person found."""
    fallback = reverse("approvals:ambiguous")
    form = ReconcileForm(request.POST)
    if not form.is_valid():
        _form_errors(request, form)
        return _back(request, fallback)
    try:
        services.effect_reconcile(
            user=request.user, effect_id=effect_id, evidence=form.cleaned_data["evidence"], applied=form.applied_value()
        )
    except EffectNotFound:
        raise Http404(f"no effect with id {effect_id!r}") from None
    except (services.ActionRefused, InvalidInput) as exc:
        _refused(request, exc)
        return _back(request, fallback)
    messages.success(request, f"Reconciled {effect_id}.")
    return _back(request, fallback)
