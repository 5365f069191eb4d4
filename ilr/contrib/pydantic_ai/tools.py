"""``effect_tool``: a Pydantic AI tool whose call is a gated Interlock effect through a target."""

from __future__ import annotations

import inspect
import json
import typing
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic_ai import RunContext, Tool
from pydantic_ai.exceptions import ApprovalRequired, UserError
from pydantic_core import to_jsonable_python

from ilr._agents.messages import refusal_detail, refusal_text
from ilr._agents.tools import AMBIGUOUS_TEXT, COMMITTED_STATUSES, Policy
from ilr.contrib.pydantic_ai.session import Session, current_session
from ilr.contrib.pydantic_ai.transcript import call_position

SPEC_ATTR = "__ilr_effect__"


@dataclass(frozen=True)
class EffectSpec:
    """What an effect tool sends through and under which authority (see ``effect_tool``)."""

    name: str
    target: Any
    policy: Policy
    premises: Callable[[dict], Any] | None = None
    summary: Callable[[dict], str] | None = None

    def summary_line(self, args: dict) -> str:
        text = self.summary(args) if self.summary else f"{self.name} {json.dumps(args, sort_keys=True)}"
        return " ".join(str(text).split())[:300]


def effect_tool(
    function: Callable,
    *,
    target: Any,
    policy: Policy | None = None,
    premises: Callable[[dict], Any] | None = None,
    summary: Callable[[dict], str] | None = None,
    name: str | None = None,
    description: str | None = None,
) -> Tool:
    """A Pydantic AI ``Tool`` whose call is ``ctx.effect`` through ``target``.

    ``function``'s signature and docstring are the tool's schema and description (as for any
    Pydantic AI tool); its body never runs: the validated arguments are the effect's payload,
    sent by the target at most once, under ``policy``'s grant.

    Args:
        function: the tool's signature (typed parameters; a ``RunContext`` first is not allowed).
        target: an EffectTarget (``send``, ``tier``; see docs/guides/targets.md).
        policy: who authorizes the calls (``ilr.Policy``); default ``Policy.approval()``, every
            call waits for a person to approve its exact arguments (the ``requires_approval``
            of an Interlock tool).
        premises: ``premises(args) -> facts`` captured before any approval and re-checked by the
            target before the send.
        summary: ``summary(args) -> one line`` for the approvers' queue.
        name, description: override the function's name and docstring.

    Returns:
        a ``pydantic_ai.Tool`` (``durable=False``: made of durable calls itself).

    Raises:
        UserError: a function whose first parameter is a RunContext, or a policy that is not a Policy.
    """
    policy = Policy.approval() if policy is None else policy
    if not isinstance(policy, Policy):
        raise UserError(f"effect_tool: policy must be an ilr.Policy, got {type(policy).__name__}")
    signature = inspect.signature(function)
    hints = typing.get_type_hints(function)
    params = list(signature.parameters.values())
    if (
        params
        and hints.get(params[0].name) is RunContext
        or (params and typing.get_origin(hints.get(params[0].name)) is RunContext)
    ):
        raise UserError(
            f"effect_tool {function.__name__}: the function is the call's signature; it takes no RunContext"
        )
    spec = EffectSpec(name or function.__name__, target, policy, premises, summary)

    async def call(ctx: RunContext, **kwargs):
        session = current_session()
        if session is None:
            raise UserError(
                f"effect tool {spec.name} sends only inside an Interlock workflow: "
                "run the agent with ilr.contrib.pydantic_ai.run(ctx, agent, prompt)"
            )
        return gated_call(session, spec, ctx, kwargs)

    ctx_param = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=RunContext)
    call.__signature__ = signature.replace(  # type: ignore[attr-defined]
        parameters=[ctx_param, *[p.replace(annotation=hints.get(p.name, p.annotation)) for p in params]],
        return_annotation=str,
    )
    call.__annotations__ = {"ctx": RunContext, **{p.name: hints[p.name] for p in params if p.name in hints}}
    call.__annotations__["return"] = str
    call.__name__ = call.__qualname__ = spec.name
    call.__doc__ = function.__doc__
    setattr(call, SPEC_ATTR, spec)
    return Tool(call, takes_ctx=True, name=spec.name, description=description, durable=False)


def effect_specs(agent) -> dict[str, EffectSpec]:
    """The EffectSpec of every effect tool registered on ``agent`` (Agent.toolsets), by name."""
    out: dict[str, EffectSpec] = {}

    def visit(toolset) -> None:
        for tool in (getattr(toolset, "tools", None) or {}).values():
            spec = getattr(getattr(tool, "function", None), SPEC_ATTR, None)
            if spec is not None:
                out[spec.name] = spec

    for toolset in agent.toolsets:
        toolset.apply(visit)
    return out


def gated_call(session: Session, spec: EffectSpec, ctx: RunContext, kwargs: dict) -> str:
    """One effect tool call (the tool's body): the result text the model reads."""
    wf = session.ctx
    args = to_jsonable_python(kwargs)
    call_id = ctx.tool_call_id or ""  # always set for a tool call
    where = call_position(ctx.messages, call_id)
    key = session.effect_key(where)
    outcome = {"where": where, "tool": spec.name, "input": args, "effect_id": None, "key": key}
    approval = session.approvals.get(call_id)
    if approval is None and spec.policy.needs_approval(args):
        # Pydantic AI's deferred flow: InterlockDurability.handle_deferred_tool_calls asks.
        raise ApprovalRequired(metadata={"interlock_key": key})
    if approval is not None:
        grant, premises = approval.grant_id, approval.facts_seen
    else:
        grant = spec.policy.grant
        premises = wf.step(f"{session.agent_name}:premises:{where}", spec.premises, args) if spec.premises else None
    r = wf.effect(
        spec.target,
        key=key,
        payload=args,
        premises=premises,
        grant=grant,
        name=f"{session.agent_name}:tool:{where}:{spec.name}",
        decision=session.decision_ref(),
    )
    outcome.update(effect_id=r.effect_id, status=r.status)
    if r.status in COMMITTED_STATUSES:
        body = {"status": r.status, "effect_id": r.effect_id, "result": r.result}
        if r.status == "DUPLICATE_IGNORED":
            body["note"] = "this call was applied before; nothing was sent again"
        text = json.dumps(body, sort_keys=True)
    elif r.status == "AMBIGUOUS":
        text = f"{AMBIGUOUS_TEXT} (effect {r.effect_id}); do not retry it"
    elif approval is not None and args != approval.payload:
        text = (
            f"refused: the approval covers {json.dumps(approval.payload, sort_keys=True)}, not these arguments "
            f"{json.dumps(args, sort_keys=True)}: edited arguments are another payload and need their own "
            "approval; nothing was sent"
        )
    else:
        text = wf.step(
            f"{session.agent_name}:refusal:{where}",
            _refusal_words,
            spec,
            args,
            premises,
            r.effect_id,
            r.status,
            r.result,
        )
    outcome["content"] = text
    session.outcomes.append(outcome)
    return text


def _refusal_words(spec: EffectSpec, args: dict, facts: Any, effect_id: str, status: str, result: Any) -> str:
    """Step body: a refusal in words the model can act on (the journal's reason; for a premise,
    each captured fact that differs from a fresh read)."""
    if isinstance(result, dict) and result.get("reason") is not None:
        detail = {"reason": result["reason"], "recorded": result.get("recorded")}
    else:
        detail = refusal_detail(effect_id)
    changes = []
    if "stale_premise" in status and spec.premises is not None and isinstance(facts, dict):
        now = spec.premises(args)
        if isinstance(now, dict):
            changes = [
                f"the premise {k} changed from {json.dumps(v)} to {json.dumps(now.get(k))}"
                for k, v in facts.items()
                if now.get(k) != v
            ]
    return refusal_text(status, detail, changes)
