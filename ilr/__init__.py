"""Interlock runtime: durable workflows with gated effects, on PostgreSQL.

The public API. Implementation lives in the modules beside this file.
"""

from ilr.approval_requests import Approval, ApprovalRefused, ApprovalRequestNotFound
from ilr.context import ChildFailed, ChildTimeout, Decision, WorkflowContext
from ilr.errors import (
    Cancelled,
    Fenced,
    InterlockError,
    InvalidInput,
    NonDeterminism,
    SendInProgress,
    SignalTimeout,
    StepFailed,
    TargetRejected,
    UnknownWorkflow,
    WorkflowConflict,
    WorkflowFailed,
    WorkflowNotFound,
)
from ilr.registry import workflow
from ilr.retry import RetryPolicy
from ilr.runtime import CancelRequest, Runtime, cancel_in, resume_in, signal_in
from ilr.worker import Worker

__all__ = [
    "Approval",
    "ApprovalRefused",
    "ApprovalRequestNotFound",
    "CancelRequest",
    "Cancelled",
    "ChildFailed",
    "ChildTimeout",
    "Decision",
    "Fenced",
    "InterlockError",
    "InvalidInput",
    "NonDeterminism",
    "RetryPolicy",
    "Runtime",
    "SendInProgress",
    "SignalTimeout",
    "StepFailed",
    "TargetRejected",
    "UnknownWorkflow",
    "Worker",
    "WorkflowConflict",
    "WorkflowContext",
    "WorkflowFailed",
    "WorkflowNotFound",
    "cancel_in",
    "resume_in",
    "signal_in",
    "workflow",
]
