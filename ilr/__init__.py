"""Interlock runtime: durable workflows with gated effects, on PostgreSQL.

This module is the public API; ``tests/unit/test_public_api.py`` pins its names. Every other module
of the package is private (``ilr._context``, ``ilr._effects``, ``ilr._worker``, ``ilr._db``,
``ilr._journal``, ``ilr._ops`` and the ``_``-modules beside them) and may change without notice.
Django's own entry points stay where Django looks for them: ``ilr.models``, ``ilr.apps``, the
migrations and the management commands.
"""

from ilr._agents import AMBIGUOUS_TEXT, COMMITTED_STATUSES, Agent, AgentResult, Policy, Tool, messages_call
from ilr._amounts import payload_amount
from ilr._codec import MAX_TEXT_LENGTH, check_text, check_who, effect_id_for
from ilr._concurrency import Concurrency
from ilr._context.context import ChildFailed, ChildTimeout, Decision, WorkflowContext
from ilr._db import connect
from ilr._effects.reconcile import reconcile_in
from ilr._effects.result import EffectResult
from ilr._effects.targets import EffectTarget, get_target, register_target, registered_targets
from ilr._errors import (
    ActionRefused,
    AlreadyReconciled,
    ApprovalRefused,
    ApprovalRequestNotFound,
    Cancelled,
    ConcurrencyLimitReached,
    DeploymentNotFound,
    EffectNotFound,
    Fenced,
    GrantNotFound,
    HistoryLimitExceeded,
    InterlockError,
    InvalidInput,
    NonDeterminism,
    SendInProgress,
    SignalTimeout,
    StepFailed,
    TargetRejected,
    ToolError,
    UnknownWorkflow,
    WorkflowConflict,
    WorkflowFailed,
    WorkflowNotFound,
)
from ilr._journal.receipts import bundle as receipt_bundle
from ilr._journal.receipts import verify as verify_receipt
from ilr._ops.approval_requests import Approval, approve_request_in, approver_identity, reject_request_in
from ilr._ops.deployments import NO_WORKER_ROW, drain_report_in, retire_in, unserved_on
from ilr._ops.grants import APPROVAL_REQUEST_SIGNAL_PREFIX, MAX_LIFETIME_S, grant_in, lifetime_seconds, revoke_in
from ilr._ops.lifecycle import TerminateRequest, terminate_in
from ilr._ops.reads import history_on
from ilr._ops.runtime import CancelRequest, Runtime, cancel_in, resume_in, signal_in
from ilr._ops.slots import queues_on
from ilr._registry import workflow
from ilr._retry import RetryPolicy
from ilr._schedules.declared import declare_schedule
from ilr._schedules.ops import (
    backfill_schedule_in,
    delete_schedule_in,
    describe_schedule_on,
    pause_schedule_in,
    resume_schedule_in,
    schedule_in,
    trigger_schedule_in,
)
from ilr._schedules.spec import OVERLAPS as SCHEDULE_OVERLAPS
from ilr._statuses import ACTIVE, TERMINAL
from ilr._telemetry.figures import figures_on
from ilr._worker.worker import Worker

__all__ = [
    # Writing workflows
    "workflow",
    "WorkflowContext",
    "Decision",
    "RetryPolicy",
    "ChildFailed",
    "ChildTimeout",
    "Concurrency",
    "declare_schedule",
    # Running them: the client and the worker
    "Runtime",
    "Worker",
    "CancelRequest",
    "TerminateRequest",
    "ACTIVE",
    "TERMINAL",
    "SCHEDULE_OVERLAPS",
    # Gated effects and their targets
    "EffectTarget",
    "EffectResult",
    "register_target",
    "registered_targets",
    "get_target",
    "effect_id_for",
    "payload_amount",
    # Transaction bodies an app runs in its own transaction (a psycopg connection: ``connect()``)
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
    "figures_on",
    # Approvals: identities, lifetimes, the request's signal
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
]
