"""One error hierarchy with a stable code each (DBOS's pattern): callers branch on the class,
operators grep the code.
"""

from __future__ import annotations


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


class WorkflowFailed(InterlockError):
    """Runtime.result: the workflow ended failed, stuck or cancelled.

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


class Suspend(BaseException):
    """Internal: the workflow suspended durably; unwinds workflow code. A BaseException so a
    plain ``except Exception`` does not swallow it; a bare ``except:`` that does is detected and
    the workflow marked stuck ("Suspend swallowed", docs/protocol.md §4)."""
