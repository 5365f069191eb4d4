"""The public API is ``ilr/__init__.py``'s ``__all__``, pinned here as Temporal's SDK pins its own.

Adding a name is a change to this list; removing or renaming one breaks users and must be a
decision, not a side effect of moving code. Everything else in ``ilr`` is private (``_``-named)
except Django's own entry points. The reusable approvals app uses the public surface only.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import ilr
from tests.support import ROOT

PUBLIC_NAMES = {
    # Writing workflows
    "workflow",
    "WorkflowContext",
    "Decision",
    "RetryPolicy",
    "ChildFailed",
    "ChildTimeout",
    "Concurrency",
    "declare_schedule",
    # Running them
    "Runtime",
    "Worker",
    "CancelRequest",
    "TerminateRequest",
    "ACTIVE",
    "TERMINAL",
    "SCHEDULE_OVERLAPS",
    # Gated effects and targets
    "EffectTarget",
    "EffectResult",
    "register_target",
    "registered_targets",
    "get_target",
    "effect_id_for",
    "payload_amount",
    # Transaction bodies
    "connect",
    "signal_in",
    "cancel_in",
    "terminate_in",
    "resume_in",
    "grant_in",
    "revoke_in",
    "approve_request_in",
    "reject_request_in",
    "reconcile_in",
    "drain_report_in",
    "retire_in",
    "unserved_on",
    "queues_on",
    "history_on",
    "schedule_in",
    "pause_schedule_in",
    "resume_schedule_in",
    "trigger_schedule_in",
    "backfill_schedule_in",
    "delete_schedule_in",
    "describe_schedule_on",
    # Approvals
    "Approval",
    "approver_identity",
    "check_who",
    "check_text",
    "MAX_TEXT_LENGTH",
    "lifetime_seconds",
    "MAX_LIFETIME_S",
    "APPROVAL_REQUEST_SIGNAL_PREFIX",
    "NO_WORKER_ROW",
    # Receipts
    "receipt_bundle",
    "verify_receipt",
    # Agents
    "Agent",
    "AgentResult",
    "Policy",
    "Tool",
    "messages_call",
    "AMBIGUOUS_TEXT",
    "COMMITTED_STATUSES",
    # Errors
    "InterlockError",
    "InvalidInput",
    "UnknownWorkflow",
    "WorkflowNotFound",
    "WorkflowConflict",
    "WorkflowFailed",
    "ConcurrencyLimitReached",
    "Fenced",
    "Cancelled",
    "StepFailed",
    "NonDeterminism",
    "SignalTimeout",
    "TargetRejected",
    "SendInProgress",
    "ToolError",
    "ApprovalRequestNotFound",
    "ApprovalRefused",
    "GrantNotFound",
    "EffectNotFound",
    "ActionRefused",
    "AlreadyReconciled",
    "DeploymentNotFound",
    "HistoryLimitExceeded",
}

# Where Django looks: these stay public by name; every other entry of ilr/ starts with "_".
DJANGO_ENTRY_POINTS = {
    "__init__.py",
    "apps.py",
    "models.py",
    "migrations",
    "management",
    "sql",
    "__pycache__",
    "tasks.py",
    "contrib",
}
"""Where Django looks, ``ilr.tasks`` (the path TASKS["BACKEND"] names) and ``ilr.contrib`` (the
agent-framework integrations a user imports by path, each behind an optional extra)."""


def test_the_public_names_are_pinned():
    assert len(ilr.__all__) == len(set(ilr.__all__)), "a name is listed twice in ilr.__all__"
    assert set(ilr.__all__) == PUBLIC_NAMES


def test_the_api_reference_lists_every_public_name_once():
    """docs/reference/ilr.md lists its members by role, by hand: a name added to ``__all__`` must
    be placed there too, or the reference would leave it out without a warning."""
    listed = re.findall(r"^ {8}- (\w+)$", (ROOT / "docs" / "reference" / "ilr.md").read_text(), re.M)
    assert sorted(listed) == sorted(ilr.__all__)


def test_every_public_name_is_importable_and_documented():
    for name in ilr.__all__:
        obj = getattr(ilr, name)
        if inspect.isclass(obj) or inspect.isfunction(obj):
            assert inspect.getdoc(obj), f"ilr.{name} has no docstring"


def test_every_public_error_derives_from_interlock_error():
    for name in ilr.__all__:
        obj = getattr(ilr, name)
        if inspect.isclass(obj) and issubclass(obj, Exception):
            assert issubclass(obj, ilr.InterlockError), name


def test_everything_else_in_ilr_is_private():
    public = sorted(p.name for p in (ROOT / "ilr").iterdir() if not p.name.startswith("_") or p.name == "__init__.py")
    assert set(public) <= DJANGO_ENTRY_POINTS, f"not private: {sorted(set(public) - DJANGO_ENTRY_POINTS)}"


def _ilr_imports(path: Path) -> set[str]:
    """The ilr modules a file imports (``from ilr import x`` counts ``ilr.x`` when x is a module)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "ilr")
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "ilr":
            found.add(node.module)
            if node.module == "ilr":
                found.update(f"ilr.{a.name}" for a in node.names if a.name.startswith("_"))
    return found


def test_the_approvals_app_uses_the_public_surface_only():
    allowed = {"ilr", "ilr.models"}
    offenders = {
        (p.relative_to(ROOT).as_posix(), m)
        for p in (ROOT / "approvals").rglob("*.py")
        if "migrations" not in p.parts
        for m in _ilr_imports(p)
        if m not in allowed
    }
    assert not offenders, f"approvals reaches past ilr's public surface: {sorted(offenders)}"
