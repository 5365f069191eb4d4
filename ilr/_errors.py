"""One error hierarchy with a stable code each (DBOS's pattern): callers branch on the class,
operators grep the code.
"""

from __future__ import annotations

from typing import Any


class InterlockError(Exception):
    """Base of every error the runtime raises on purpose."""

    code = "ILR-000"


class InvalidInput(InterlockError, ValueError):
    """Bad input, refused before anything was written.

    Attributes:
        field: the offending field, as a dotted path ("input.items[2]", "workflow_id").
        rule: the rule it broke, in words.
    """

    code = "ILR-001"

    def __init__(self, field: str, rule: str):
        self.field = field
        self.rule = rule
        super().__init__(f"{field}: {rule}")


class UnknownWorkflow(InterlockError, LookupError):
    """No workflow type is registered (or deployed) under this name and version."""

    code = "ILR-002"

    def __init__(self, name: str, version: str | None):
        self.name = name
        self.version = version
        where = f"{name}@{version}" if version else name
        super().__init__(f"unknown workflow {where!s}: no registered or deployed version")


class WorkflowNotFound(InterlockError, LookupError):
    """No workflow row has this id."""

    code = "ILR-003"

    def __init__(self, workflow_id: str):
        self.workflow_id = workflow_id
        super().__init__(f"workflow_id: no workflow with id {workflow_id!r}")


class WorkflowConflict(InterlockError):
    """A start reused an id that belongs to a different workflow type."""

    code = "ILR-004"


class Fenced(InterlockError):
    """This worker no longer holds a live claim (epoch moved, lease expired, or the local
    lease ran out): the run is abandoned and nothing more is written (docs/protocol.md §3.2)."""

    code = "ILR-010"


class Cancelled(InterlockError):
    """The workflow was cancelled; raised once, at the first durable call after the cancel is
    seen (docs/protocol.md §5.2). Catch it to run compensation; an uncaught one ends the workflow
    with status cancelled."""

    code = "ILR-011"


class StepFailed(InterlockError):
    """A step failed for good (max_attempts reached or a non-retryable type); recorded, and
    re-raised identically on replay.

    Attributes:
        step: the step name.
        type: the original exception's class name.
        message: its message.
        attempts: how many attempts ran.
    """

    code = "ILR-012"

    def __init__(self, step: str, type: str, message: str, attempts: int):
        self.step = step
        self.type = type
        self.message = message
        self.attempts = attempts
        super().__init__(f"step {step!r} failed after {attempts} attempt(s): {type}: {message}")


class NonDeterminism(InterlockError):
    """Replay offered a different call than the recorded one at a seq (docs/protocol.md §4,
    NonDeterminismLoud). The workflow becomes stuck with {seq, recorded, offered}."""

    code = "ILR-013"

    def __init__(self, seq: int, recorded: dict, offered: dict):
        self.seq = seq
        self.recorded = recorded
        self.offered = offered
        super().__init__(f"non-determinism at seq {seq}: recorded {recorded}, offered {offered}")


class SignalTimeout(InterlockError, TimeoutError):
    """``ctx.wait_signal(name, timeout)``: no signal ``name`` arrived before the timeout passed
    (database clock). Recorded, so a replay raises it again at the same call; a payload, None
    included, is returned, never raised.

    Attributes:
        name: the signal waited on.
        timeout: the wait's timeout in seconds.
    """

    code = "ILR-016"

    def __init__(self, name: str, timeout: float | None):
        self.name = name
        self.timeout = timeout
        super().__init__(f"no signal {name!r} arrived within the wait's timeout ({timeout} s)")


class TargetRejected(InterlockError):
    """Raised by an EffectTarget's apply for a definite no (nothing was applied)."""

    code = "ILR-020"


class SendOverrun(InterlockError, TimeoutError):
    """A send outlived its local deadline in a process that did not opt in to the watchdog's
    exit (only ``ilr_worker`` does): the send's outcome is unknown, the caller writes nothing,
    and recovery resolves the effect (docs/protocol.md §6.3)."""

    code = "ILR-025"


class SendInProgress(InterlockError):
    """Raised by an EffectTarget's apply when the target says another request with this
    idempotency key is still being processed (Stripe's 409 ``idempotency_key_in_use``).

    Not a rejection and not an answer: the send is still in flight. Recovery waits and resends
    under the target's resend policy; the answer never counts toward a lookup.
    """

    code = "ILR-024"


class WorkflowFailed(InterlockError):
    """Runtime.result: the workflow ended failed, stuck, cancelled or terminated.

    Attributes:
        status: the terminal status.
        error: the recorded error object.
    """

    code = "ILR-030"

    def __init__(self, workflow_id: str, status: str, error):
        self.workflow_id = workflow_id
        self.status = status
        self.error = error
        super().__init__(f"workflow {workflow_id} ended {status}: {error}")


class LookupFailed(InterlockError):
    """The target could not be read (validate_premises or query raised), before a send or during
    recovery; nothing was written. ``__cause__`` is the target's exception."""

    code = "ILR-023"

    def __init__(self, effect_id: str, exc: BaseException):
        self.effect_id = effect_id
        self.error = f"{type(exc).__name__}: {exc}"[:500]
        super().__init__(f"reading the target for {effect_id} failed: {self.error}")


class EffectRefused(InterlockError):
    """``raise_on_refusal=True`` and the effect was refused. Attributes: result (EffectResult)."""

    code = "ILR-022"

    def __init__(self, result: Any):
        self.result = result
        super().__init__(f"effect {result.effect_id} refused: {result.status}")


class TargetMisconfigured(InterlockError):
    """A target's settings break an assumption the runtime relies on (docs/protocol.md §6.5)."""

    code = "ILR-021"


class ChildFailed(InterlockError):
    """``ctx.wait_child``: the child ended failed, cancelled or stuck (docs/protocol.md §5.3).

    Recorded, so a replay raises it again at the same call.

    Attributes:
        child_id: the child that ended (the last run of its continue-as-new chain).
        status: "failed", "cancelled" or "stuck".
        error: the child's recorded error object ({"type", "message", ...}).
    """

    code = "ILR-014"

    def __init__(self, child_id: str, status: str, error: Any):
        self.child_id = child_id
        self.status = status
        self.error = error
        kind = (error or {}).get("type", "Error") if isinstance(error, dict) else "Error"
        message = (error or {}).get("message", "") if isinstance(error, dict) else str(error)
        super().__init__(f"child workflow {child_id} ended {status}: {kind}: {message}")


class ChildTimeout(InterlockError, TimeoutError):
    """``ctx.wait_child(id, timeout)``: the child had not ended when the timeout passed
    (database clock). Recorded, so a replay raises it again; the child keeps running.

    Attributes:
        child_id: the child waited on (the last run of its chain at the timeout).
    """

    code = "ILR-015"

    def __init__(self, child_id: str, timeout_at: Any = None):
        self.child_id = child_id
        self.timeout_at = timeout_at
        super().__init__(f"child workflow {child_id} had not ended at the wait's timeout ({timeout_at})")


class ApprovalRequestNotFound(InterlockError, LookupError):
    """No approval request has this id."""

    code = "ILR-017"

    def __init__(self, request_id: str):
        self.request_id = request_id
        super().__init__(f"request_id: no approval request with id {request_id!r}")


class ApprovalRefused(InterlockError):
    """The request cannot be approved or rejected now (decided already, expired, the workflow
    ended, or the same person approving twice under the two-person rule). Nothing was written.

    Attributes:
        request_id, status: the request and its status when refused.
    """

    code = "ILR-018"

    def __init__(self, request_id: str, status: str, why: str):
        self.request_id = request_id
        self.status = status
        super().__init__(f"approval request {request_id}: {why}")


class CodeChanged(InterlockError):
    """A deployment's code_sha256 differs from the running code; the worker exits 2
    (docs/protocol.md §4, versions).

    Attributes:
        name, version: the deployment.
        deployed: the code_sha256 recorded for it; running: this worker's.
    """

    code = "ILR-040"

    def __init__(self, name: str, version: str, deployed: str, running: str):
        self.name = name
        self.version = version
        self.deployed = deployed
        self.running = running
        super().__init__(
            f"workflow {name!r} version {version!r} ({name}@{version}) is deployed with code_sha256 {deployed} "
            f"but this worker's code has code_sha256 {running}: the module source changed under the same "
            f"version. Bump the version, guard the change with ctx.patched, or pass --allow-code-change"
        )


class PoolerRefused(InterlockError):
    """ILR_POOLER declares a pooler the worker cannot run behind (ilr.conf); the worker exits 2."""

    code = "ILR-041"


class GrantNotFound(InterlockError, LookupError):
    """No grant has this id."""

    code = "ILR-050"

    def __init__(self, grant_id: str):
        self.grant_id = grant_id
        super().__init__(f"grant_id: no grant with id {grant_id!r}")


class EffectNotFound(InterlockError, LookupError):
    """No effect has this id."""

    code = "ILR-051"

    def __init__(self, effect_id: str):
        self.effect_id = effect_id
        super().__init__(f"effect_id: no effect with id {effect_id!r}")


class ToolError(InterlockError):
    """Raised by a read-only tool's function: its message goes back to the model as an error
    tool_result at once (not retried)."""

    code = "ILR-060"


class ActionRefused(InterlockError):
    """The action cannot be done as asked; nothing was written. The message says why, in words
    a reviewer can act on."""

    code = "ILR-070"


class DeploymentNotFound(InterlockError, LookupError):
    """No deployment has this name and version."""

    code = "ILR-071"

    def __init__(self, name: str, version: str):
        self.name = name
        self.version = version
        super().__init__(f"no deployment {name}@{version}")


class AlreadyReconciled(InvalidInput):
    """A second reconcile of an effect: an attestation is recorded once and never replaced.

    Attributes:
        effect_id: the effect; by, at: who reconciled it first, and when (ISO text).
    """

    code = "ILR-052"

    def __init__(self, effect_id: str, by: Any, at: Any):
        self.effect_id = effect_id
        self.by = by
        self.at = at
        super().__init__(
            "effect_id",
            f"effect {effect_id} was already reconciled by {by} at {at}; an attestation "
            f"is recorded once and never replaced. Nothing was changed",
        )


class SigningKeyUnavailable(InterlockError):
    """The signing key file the settings name is missing or cannot be read (ilr.keys): the
    message is one sentence naming the setting (ILR_SIGNING_KEY, or ILR_DATA_DIR for the
    default path) and the file."""

    code = "ILR-080"


class Suspend(BaseException):
    """Internal: the workflow suspended durably; unwinds workflow code. A BaseException so a
    plain ``except Exception`` does not swallow it; a bare ``except:`` that does is detected and
    the workflow marked stuck ("Suspend swallowed", docs/protocol.md §4)."""


class TaskFailed(InterlockError):
    """A Django task's last attempt raised (``ilr.tasks``); every attempt's error is in its
    ``TaskResult.errors``."""

    code = "ILR-090"


class ConcurrencyLimitReached(InterlockError):
    """A start with ``on_conflict="reject"`` found its concurrency key full; nothing was
    written.

    Attributes:
        key: the concurrency key; limit: its limit; holders: the ids of the workflows that hold
            its slots.
    """

    code = "ILR-100"

    def __init__(self, key: str, limit: int, holders: list[str]):
        self.key = key
        self.limit = limit
        self.holders = holders
        super().__init__(
            f"concurrency_key: {key!r} is held by {', '.join(holders) or 'workflows that are ending'} "
            f"(limit {limit}), and on_conflict is 'reject'. Nothing was started"
        )


class HistoryLimitExceeded(InterlockError):
    """A run's history passed ``ILR_HISTORY_LIMIT_STEPS`` or ``ILR_HISTORY_LIMIT_BYTES``: raised
    at the durable call that would cross it, and the workflow fails with it (even when its code
    catches it), unless the workflow opted in to ``continue_as_new_at_history_limit``
    (docs/protocol.md §5.7).

    Attributes:
        setting: the limit's setting name ("ILR_HISTORY_LIMIT_STEPS" or "ILR_HISTORY_LIMIT_BYTES").
        limit: its value. figure: the history's figure against it (the step rows the call would
            make, or the payload bytes recorded).
        history_length, history_bytes: the run's history when the call was offered.
    """

    code = "ILR-110"

    def __init__(self, setting: str, limit: int, figure: int, history_length: int, history_bytes: int):
        self.setting = setting
        self.limit = limit
        self.figure = figure
        self.history_length = history_length
        self.history_bytes = history_bytes
        unit = "steps" if setting.endswith("STEPS") else "bytes"
        super().__init__(f"history of {figure:,} {unit} exceeds {setting} {limit:,}")
