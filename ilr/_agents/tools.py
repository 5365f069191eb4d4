"""An agent's tools and policy: the schema a model sees, the target a side-effecting tool goes
through, the premises it rests on, and the result of a run."""

from __future__ import annotations

import functools
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ilr._errors import ToolError
from ilr._retry import RetryPolicy

TOOL_NAME = re.compile(r"^[a-zA-Z0-9_-]{1,64}$")
COMMITTED_STATUSES = (
    "COMMITTED",
    "COMMITTED_BY_RETRY",
    "COMMITTED_ON_QUERY",
    "REAPPLIED_AFTER_QUERY",
    "DUPLICATE_IGNORED",
)
AMBIGUOUS_TEXT = "outcome unknown; a person will reconcile it"


DEFAULT_TOOL_RETRY = RetryPolicy(initial=0.5, max_attempts=3, non_retryable=(ToolError,))
"""A read-only tool's retries: three attempts, 0.5 s then 1 s apart; ToolError fails at once."""


@dataclass(frozen=True)
class Policy:
    """Who authorizes a side-effecting tool's calls.

    Attributes:
        grant: a standing grant id (``rt.grant(principal, action, max_cents)``); the runtime
            checks it at every send (live, action, amount within max_cents: else REFUSED:lease).
        approve_above_cents: with ``grant``, calls whose ``amount_field`` exceeds this many cents
            (or lack it) ask for approval; the rest use the grant. Without ``grant``, every call
            asks.
        approval_timeout: seconds an approval request stays open (database clock).
        amount_field: the argument holding the amount in cents.

    Raises:
        ValueError: a threshold without a grant (nothing would authorize the calls below it),
            or a threshold that is not non-negative integer cents.
    """

    grant: str | None = None
    approve_above_cents: int | None = None
    approval_timeout: float = 86400.0
    amount_field: str = "amount"

    def __post_init__(self):
        if self.approve_above_cents is not None:
            if self.grant is None:
                raise ValueError("Policy: approve_above_cents needs a grant for the calls at or below it")
            if (
                isinstance(self.approve_above_cents, bool)
                or not isinstance(self.approve_above_cents, int)
                or self.approve_above_cents < 0
            ):
                raise ValueError("Policy: approve_above_cents must be non-negative integer cents")

    @classmethod
    def standing(cls, grant: str) -> Policy:
        """Every call sends under ``grant`` (a policy grant id)."""
        return cls(grant=grant)

    @classmethod
    def approval(cls, timeout: float = 86400.0) -> Policy:
        """Every call waits for a person to approve its exact arguments."""
        return cls(approval_timeout=timeout)

    @classmethod
    def approval_above(cls, cents: int, grant: str, timeout: float = 86400.0) -> Policy:
        """Calls above ``cents`` wait for approval; the others send under ``grant``."""
        return cls(grant=grant, approve_above_cents=cents, approval_timeout=timeout)

    def needs_approval(self, args: dict) -> bool:
        """Whether a call with these (validated) arguments asks a person."""
        if self.grant is None:
            return True
        if self.approve_above_cents is None:
            return False
        amount = args.get(self.amount_field)
        return not isinstance(amount, int) or amount > self.approve_above_cents


@dataclass(frozen=True)
class Tool:
    """One tool the model may call. Exactly one of ``run`` (read-only) and ``target``
    (side-effecting) is set; build one with ``Tool.read`` or ``Tool.effect``.

    Attributes:
        name: the API's tool name (``[a-zA-Z0-9_-]{1,64}``).
        description: what the model is told the tool does.
        input_schema: a JSON Schema object for the arguments (checked when the Tool is built).
        run: ``run(args) -> plain JSON``; runs as a step (at least once, output recorded).
        target: an EffectTarget; the validated arguments are the effect's payload.
        policy: the target's Policy (required with ``target``).
        premises: ``premises(args) -> facts`` the send rests on, captured (recorded) before
            any approval and re-checked by the target's ``validate_premises`` before the send.
        summary: ``summary(args) -> one line`` for the approvers' queue.
        retry: a read-only tool's RetryPolicy (default DEFAULT_TOOL_RETRY).

    Raises:
        ValueError: a bad name, not exactly one of run and target, a target without a Policy,
            an input_schema whose type is not "object".
        jsonschema.SchemaError: an input_schema that is not a valid JSON Schema.
    """

    name: str
    description: str
    input_schema: dict
    run: Callable[[dict], Any] | None = None
    target: Any = None
    policy: Policy | None = None
    premises: Callable[[dict], Any] | None = None
    summary: Callable[[dict], str] | None = None
    retry: RetryPolicy | None = None

    def __post_init__(self):
        import jsonschema

        if not isinstance(self.name, str) or not TOOL_NAME.match(self.name):
            raise ValueError(f"Tool name {self.name!r} must match {TOOL_NAME.pattern}")
        if (self.run is None) == (self.target is None):
            raise ValueError(f"Tool {self.name}: give exactly one of run (read-only) and target (side effect)")
        if self.target is not None and not isinstance(self.policy, Policy):
            raise ValueError(f"Tool {self.name}: a side-effecting tool needs a Policy")
        if not isinstance(self.input_schema, dict) or self.input_schema.get("type") != "object":
            raise ValueError(f"Tool {self.name}: input_schema must be a JSON Schema with type 'object'")
        jsonschema.Draft202012Validator.check_schema(self.input_schema)

    @classmethod
    def read(
        cls,
        name: str,
        description: str,
        input_schema: dict,
        run: Callable[[dict], Any],
        retry: RetryPolicy | None = None,
    ) -> Tool:
        """A read-only tool: ``run(args)`` as a recorded step."""
        return cls(name, description, input_schema, run=run, retry=retry)

    @classmethod
    def effect(
        cls,
        name: str,
        description: str,
        input_schema: dict,
        target: Any,
        policy: Policy,
        premises: Callable[[dict], Any] | None = None,
        summary: Callable[[dict], str] | None = None,
    ) -> Tool:
        """A side-effecting tool: a gated effect through ``target`` under ``policy``."""
        return cls(name, description, input_schema, target=target, policy=policy, premises=premises, summary=summary)

    @functools.cached_property
    def validator(self):
        import jsonschema

        return jsonschema.Draft202012Validator(self.input_schema)

    def errors(self, args: Any) -> list[str]:
        """Why ``args`` is not a valid input (one sentence each, by path); [] when valid."""
        if not isinstance(args, dict):
            return [f"the input must be a JSON object, got {type(args).__name__}"]
        out = []
        for err in sorted(self.validator.iter_errors(args), key=lambda e: list(e.absolute_path)):
            where = ".".join(str(p) for p in err.absolute_path)
            out.append(f"{where}: {err.message}" if where else err.message)
        return out

    def definition(self) -> dict:
        """The tool as the Messages API's ``tools`` entry."""
        return {"name": self.name, "description": self.description, "input_schema": self.input_schema}


@dataclass
class AgentResult:
    """What ``Agent.run`` returns.

    Attributes:
        text: the final turn's text ("" when the turn limit ended the loop).
        transcript: every message sent and received, plain JSON (the last request's messages
            plus the last answer).
        outcomes: one dict per tool_use block, in order: {"turn", "block", "tool", "input",
            "kind" ("read", "effect", "rejected"), "status", "is_error", "content",
            "effect_id"}; status is the EffectResult status for an effect, "not_approved:<request
            status>" for a refused approval, "ok"/"failed" for a read, "unknown_tool" or
            "invalid_input" for a rejected call.
        turns: model turns taken.
        stop: the last turn's stop_reason, or "max_turns".
    """

    text: str
    transcript: list
    outcomes: list = field(default_factory=list)
    turns: int = 0
    stop: str = "end_turn"

    def as_dict(self) -> dict:
        return {
            "text": self.text,
            "transcript": self.transcript,
            "outcomes": self.outcomes,
            "turns": self.turns,
            "stop": self.stop,
        }
