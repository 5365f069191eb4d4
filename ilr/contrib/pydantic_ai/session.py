"""The state of one ``run`` inside a workflow: the workflow context the durable units use, the
agent's name and key base, the approvals granted so far and the outcomes of its effect tools."""

from __future__ import annotations

from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any

from ilr._retry import RetryPolicy

_SESSION: ContextVar[Session | None] = ContextVar("ilr_pydantic_ai_session", default=None)


@dataclass
class Session:
    """One agent run inside a workflow (set by ``run``; read by the capability and the tools).

    Attributes:
        ctx: the workflow's context.
        agent_name: prefixes every durable call name and effect key.
        base: the base of every effect key (recorded by the run's first step).
        effect_tools: EffectSpec by tool name (the agent's effect tools).
        approvals: the Approval granted for a tool call, by tool_call_id.
        outcomes: one dict per effect tool call, in order (see ``run``'s AgentRun).
        turns: the Decision.ref of each model request, in order.
        edit: ``edit(tool_name, args) -> args | None``: arguments an approver's tool substitutes
            for the approved ones (Pydantic AI's ``ToolApproved(override_args=...)``); None keeps them.
    """

    ctx: Any
    agent_name: str
    base: str
    effect_tools: dict
    model_retry: RetryPolicy | None = None
    tool_retry: RetryPolicy | None = None
    edit: Callable[[str, dict], dict | None] | None = None
    approvals: dict = field(default_factory=dict)
    outcomes: list = field(default_factory=list)
    turns: list = field(default_factory=list)

    def effect_key(self, where: str) -> str:
        """The idempotency key of the call at ``where`` ("<turn>.<part>")."""
        return f"agent:{self.base}:{self.agent_name}:{where}"

    def decision_ref(self) -> dict | None:
        """The last model request's Decision.ref (what an approval request shows), or None."""
        return self.turns[-1] if self.turns else None


def current_session() -> Session | None:
    """The Session of the run in progress in this context, or None outside ``run``."""
    return _SESSION.get()


def open_session(session: Session):
    """Make ``session`` current; returns the token ``close_session`` takes."""
    return _SESSION.set(session)


def close_session(token) -> None:
    _SESSION.reset(token)
