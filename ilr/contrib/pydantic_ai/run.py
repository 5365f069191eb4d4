"""``run``: a Pydantic AI agent run as durable calls of an Interlock workflow."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from pydantic_ai.exceptions import UserError
from pydantic_core import to_jsonable_python

from ilr._agents.messages import same
from ilr._errors import InvalidInput
from ilr._retry import RetryPolicy
from ilr.contrib.pydantic_ai.durability import InterlockDurability
from ilr.contrib.pydantic_ai.session import Session, close_session, open_session
from ilr.contrib.pydantic_ai.tools import effect_specs
from ilr.contrib.pydantic_ai.transcript import messages_json


@dataclass
class AgentRun:
    """What ``run`` returns.

    Attributes:
        output: the run's output as plain JSON (a string for a text agent).
        transcript: every message of the run, Pydantic AI's JSON form (``ModelMessagesTypeAdapter``).
        outcomes: one dict per effect tool call, in order: {"where" ("<turn>.<part>"), "tool",
            "input", "key", "effect_id", "status" (the EffectResult status, or
            "not_approved:<request status>"), "content" (what the model read)}.
        turns: model requests made (recorded).
    """

    output: Any
    transcript: list
    outcomes: list = field(default_factory=list)
    turns: int = 0

    def as_dict(self) -> dict:
        return {"output": self.output, "transcript": self.transcript, "outcomes": self.outcomes, "turns": self.turns}


def _leaf(exc: BaseException) -> BaseException:
    """The one exception a task group wrapped (a Suspend or a Fenced must leave as itself)."""
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def run(
    ctx,
    agent,
    prompt: str,
    *,
    key: str | None = None,
    deps: Any = None,
    model_retry: RetryPolicy | None = None,
    tool_retry: RetryPolicy | None = None,
    edit: Callable[[str, dict], dict | None] | None = None,
) -> AgentRun:
    """Run ``agent`` (a Pydantic AI Agent with ``InterlockDurability``) on ``prompt`` inside the
    workflow of ``ctx``: model requests recorded once, function tools as steps, effect tools as
    gated effects, tool approvals as approval requests waited on durably.

    Args:
        ctx: the workflow's context.
        agent: a ``pydantic_ai.Agent`` built with ``capabilities=[InterlockDurability()]``.
        prompt: the user prompt.
        key: the base of every effect key (e.g. the case id, so a new workflow for the same
            case never sends a call twice); default the workflow id, recorded by the first run.
        deps: the run's dependencies (Pydantic AI ``deps``).
        model_retry: the model request's RetryPolicy (default the runtime's).
        tool_retry: a function tool's RetryPolicy (default the runtime's).
        edit: ``edit(tool_name, args) -> args | None``, an approver's edit applied as
            ``ToolApproved(override_args=...)``: the edited call is another payload, refused
            under the approval of the original (it needs its own).

    Returns:
        AgentRun (``as_dict()`` for a workflow's result).

    Raises:
        InvalidInput: an empty prompt.
        UserError: an agent without InterlockDurability.
        StepFailed: a model request failed past its RetryPolicy (recorded).
    """
    if not isinstance(prompt, str) or not prompt:
        raise InvalidInput("prompt", "must be a non-empty string")
    if InterlockDurability.from_agent(agent) is None:
        raise UserError("run: the agent has no InterlockDurability: Agent(..., capabilities=[InterlockDurability()])")
    name = agent.name
    base = ctx.step(f"{name}:key", same, key if key is not None else ctx.workflow_id)
    session = Session(ctx, name, base, effect_specs(agent), model_retry, tool_retry, edit)
    token = open_session(session)
    try:
        result = agent.run_sync(prompt, deps=deps)
    except BaseExceptionGroup as group:
        raise _leaf(group) from None
    finally:
        close_session(token)
    return AgentRun(
        to_jsonable_python(result.output), messages_json(result.all_messages()), session.outcomes, len(session.turns)
    )
