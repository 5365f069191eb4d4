"""Side-effecting function tools (``effect_tool``): an SDK ``FunctionTool`` whose call is a gated
effect through an Interlock target instead of a Python body.

The model sees an ordinary function tool (name, description, JSON schema). Under the durable
runner, a call sends its validated arguments, exactly, as the effect's payload; with
``needs_approval`` (the SDK's own flag: a bool, or a callable deciding per call) the run's
interruption becomes an approval request bound to the hash of those arguments; without it the
call sends under a standing grant. Outside the durable runner the tool refuses to run.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from agents import FunctionTool
from agents.exceptions import UserError
from agents.function_schema import function_schema

from ilr._agents.tools import Policy
from ilr._errors import InvalidInput


@dataclass(frozen=True)
class EffectSpec:
    """How an effect tool's call is sent and authorized.

    Attributes:
        target: the effect target (``apply``, ``tier``; see docs/guides/targets.md).
        grant: a standing grant id for calls that need no approval, or None.
        premises: ``premises(args) -> facts`` (a JSON object) captured before any approval and
            re-checked by the target at the send; or None.
        summary: ``summary(args) -> str``, the approvers' one line; default the tool name and
            arguments.
        approval_timeout: seconds an approval request stays open (database clock).
    """

    target: Any
    grant: str | None = None
    premises: Callable[[dict], dict] | None = None
    summary: Callable[[dict], str] | None = None
    approval_timeout: float = 86400.0


@dataclass(eq=False)
class EffectTool(FunctionTool):
    """A FunctionTool whose calls are gated effects (made by ``effect_tool``)."""

    effect: EffectSpec | None = field(default=None, kw_only=True)


async def _outside_runner(tool_context: Any, arguments: str) -> Any:
    raise UserError(
        f"effect tool {tool_context.tool_name!r} sends through an Interlock target and runs only under "
        "ilr.contrib.openai_agents.DurableRunner inside a workflow"
    )


def effect_tool(
    target: Any,
    func: Callable[..., Any] | None = None,
    *,
    name: str | None = None,
    description: str | None = None,
    params_json_schema: dict | None = None,
    needs_approval: bool | Callable[..., Any] = False,
    grant: str | None = None,
    premises: Callable[[dict], dict] | None = None,
    summary: Callable[[dict], str] | None = None,
    approval_timeout: float = 86400.0,
    policy: Policy | None = None,
) -> Any:
    """A side-effecting function tool sent through ``target`` as a gated effect.

    Use it as a decorator on a function whose signature and docstring define the tool (as
    ``@function_tool`` reads them; the body is never called: the target sends), or pass
    ``name``, ``description`` and ``params_json_schema``.

    Args:
        target: the effect target.
        func: the decorated function (when used as ``@effect_tool(target, ...)`` it is None).
        needs_approval: the SDK's flag: True, or ``async (run_context, args, call_id) -> bool``;
            a call that needs it waits on an approval request for its exact arguments.
        grant: the standing grant id a call that needs no approval sends under.
        premises, summary, approval_timeout: see EffectSpec.
        policy: instead of needs_approval, grant and approval_timeout, an ``ilr.Policy`` (as the
            native agent API and the Pydantic AI integration take it): ``Policy.approval()``
            asks for every call, ``Policy.standing(grant)`` asks for none,
            ``Policy.approval_above(cents, grant)`` asks above ``cents``.

    Returns:
        an EffectTool, or a decorator making one.

    Raises:
        InvalidInput: no way to authorize a call (neither needs_approval nor grant), a target
            without ``apply``, or neither a function nor a name, description and schema.
    """
    if policy is not None:
        needs_approval, grant, approval_timeout = _from_policy(policy), policy.grant, policy.approval_timeout
    if not callable(getattr(target, "apply", None)):
        raise InvalidInput("target", "an effect tool needs an effect target (an object with apply and tier)")
    if needs_approval is False and grant is None:
        raise InvalidInput("needs_approval", "an effect tool needs needs_approval, a grant, or both")
    spec = EffectSpec(target, grant, premises, summary, approval_timeout)

    def build(f: Callable[..., Any] | None) -> EffectTool:
        if f is not None:
            schema = function_schema(f, name_override=name, description_override=description)
            tool_name, text, params = schema.name, schema.description or "", schema.params_json_schema
        else:
            if not name or params_json_schema is None:
                raise InvalidInput("name", "effect_tool without a function needs name and params_json_schema")
            tool_name, text, params = name, description or "", params_json_schema
        return EffectTool(
            name=tool_name,
            description=text,
            params_json_schema=params,
            on_invoke_tool=_outside_runner,
            needs_approval=needs_approval,
            effect=spec,
        )

    if func is not None or params_json_schema is not None:
        return build(func)
    return build


def _from_policy(policy: Policy) -> bool | Callable[..., Any]:
    """A Policy as the SDK's ``needs_approval``: a bool, or a per-call check of the arguments."""
    if policy.grant is None:
        return True
    if policy.approve_above_cents is None:
        return False

    async def above(run_context: Any, args: dict, call_id: str) -> bool:
        return policy.needs_approval(args)

    return above


def parse_arguments(tool: FunctionTool, arguments: str) -> tuple[Any, list[str]]:
    """The call's arguments (a JSON string) parsed and checked against the tool's JSON schema
    (Draft 2020-12): (args, errors); errors empty when they are a valid object."""
    import jsonschema

    try:
        args = json.loads(arguments or "{}")
    except ValueError as exc:
        return None, [f"the arguments are not JSON ({exc})"]
    if not isinstance(args, dict):
        return args, ["the arguments must be a JSON object"]
    validator = jsonschema.Draft202012Validator(tool.params_json_schema)
    errors = sorted(validator.iter_errors(args), key=lambda e: list(e.path))
    return args, [f"{'.'.join(map(str, e.path)) or 'arguments'}: {e.message}" for e in errors]
