"""One durable run of an SDK agent inside a workflow (``DurableRun``): the prepared agent tree,
the turn counter, each tool call's recorded position and the approvals granted so far.

Names and keys (``<name>`` is the runner's name, ``<t>`` a model turn, ``<b>`` the position of a
function call in that turn's output):

- ``<name>:key`` (step): the base of every effect key, recorded by the first run;
- ``<name>:turn:<t>`` (decide): a model call, recorded once; its request is the fingerprint;
- ``<name>:tool:<t>.<b>:<tool>`` (step): a plain function tool's output;
- ``<name>:premises:<t>.<b>`` (step): an effect tool's premises, captured before any approval;
- an approval request, then ``ctx.effect`` named ``<name>:tool:<t>.<b>:<tool>`` with the key
  ``openai-agents:<base>:<name>:<t>.<b>`` (the call's recorded position, never the model's
  call id), so a fork or a second workflow with the same ``key`` never sends a call twice.
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from agents import Agent, FunctionTool, Model

from ilr._agents.messages import changed_premises, refusal_detail, refusal_text, same
from ilr._agents.tools import AMBIGUOUS_TEXT, COMMITTED_STATUSES, DEFAULT_TOOL_RETRY
from ilr._effects.targets import attr
from ilr._errors import InvalidInput, StepFailed
from ilr.contrib.openai_agents._model import RecordingModel
from ilr.contrib.openai_agents._records import function_calls, jsonable
from ilr.contrib.openai_agents._threads import run_coroutine
from ilr.contrib.openai_agents._tools import EffectSpec, EffectTool, parse_arguments


class DurableRun:
    """The state of one run (see the module docstring); built by ``DurableRunner.run``."""

    def __init__(self, ctx, name: str, retry=None):
        self.ctx, self.name, self.retry = ctx, name, retry
        self.base: str | None = None
        self.turn = 0
        self.positions: dict[str, tuple[int, int]] = {}
        self.refs: dict[int, dict] = {}
        self.approvals: dict[tuple[int, int], Any] = {}
        self.effect_tools: dict[str, EffectTool] = {}
        self.outcomes: list[dict] = []
        self.escaped: BaseException | None = None

    # -- the durable calls, guarded -------------------------------------------------------------

    def guard(self, fn):
        """Run a durable call. Whatever it raises (a suspension, Cancelled, Fenced,
        NonDeterminism) is kept, re-raised at every later call and by the runner once the SDK
        unwinds: the SDK turns a tool's exception into a model-visible error, and a workflow's
        control flow must never reach the model as text."""
        if self.escaped is not None:
            raise self.escaped
        try:
            return fn()
        except BaseException as exc:
            self.escaped = exc
            raise

    def decide(self, request: dict, call) -> dict:
        """Turn ``t``: ``ctx.decide`` (recorded once); the function calls' positions noted."""
        t = self.turn
        self.turn += 1
        d = self.guard(lambda: self.ctx.decide(f"{self.name}:turn:{t}", call=call, request=request, retry=self.retry))
        self.refs[t] = d.ref
        for b, item in function_calls(d.output):
            self.positions[item["call_id"]] = (t, b)
        return d.output

    def position(self, call_id: str) -> tuple[int, int]:
        if call_id not in self.positions:
            raise InvalidInput("call_id", f"tool call {call_id!r} is not in a recorded model turn")
        return self.positions[call_id]

    def effect_key(self, t: int, b: int) -> str:
        """The idempotency key of the function call at output position ``b`` of turn ``t``."""
        return f"openai-agents:{self.base}:{self.name}:{t}.{b}"

    # -- the agent tree -------------------------------------------------------------------------

    def prepare(self, agent: Agent, memo: dict | None = None) -> Agent:
        """A clone of ``agent`` (and of the agents it hands off to) whose Model instances record
        their calls, whose function tools are steps and whose effect tools are gated effects.

        Raises:
            InvalidInput: a plain function tool with ``needs_approval`` (an approval binds an
                effect's payload: make it an ``effect_tool``), or two effect tools sharing a name.
        """
        memo = {} if memo is None else memo
        if id(agent) in memo:
            return memo[id(agent)]
        model = agent.model
        if isinstance(model, Model) and not isinstance(model, RecordingModel):
            model = RecordingModel(self, model, getattr(model, "model", None) or type(model).__name__)
        clone = agent.clone(model=model, tools=[self._tool(agent, t) for t in agent.tools], handoffs=[])
        memo[id(agent)] = clone
        clone.handoffs = [self.prepare(h, memo) if isinstance(h, Agent) else h for h in agent.handoffs]
        return clone

    def _tool(self, agent: Agent, tool: Any) -> Any:
        if isinstance(tool, EffectTool):
            known = self.effect_tools.setdefault(tool.name, tool)
            if known is not tool:
                raise InvalidInput("tools", f"two effect tools are named {tool.name!r}")
            return dataclasses.replace(tool, on_invoke_tool=self._effect_invoker(tool))
        if isinstance(tool, FunctionTool):
            if tool.needs_approval is not False:
                raise InvalidInput(
                    "needs_approval",
                    f"tool {tool.name!r} of agent {agent.name!r} needs approval but is a plain function tool: "
                    "an approval binds an effect's exact payload, so make it an effect_tool with a target",
                )
            return dataclasses.replace(tool, on_invoke_tool=self._read_invoker(tool))
        return tool  # hosted tools run at the provider: their items are part of the recorded response

    # -- plain function tools: recorded steps ---------------------------------------------------

    def _read_invoker(self, tool: FunctionTool):
        original = tool.on_invoke_tool

        async def invoke(tool_context, arguments: str):
            t, b = self.position(tool_context.tool_call_id)

            def body():
                return _plain(run_coroutine(lambda: original(tool_context, arguments)))

            name = f"{self.name}:tool:{t}.{b}:{tool.name}"
            out = {"turn": t, "block": b, "tool": tool.name, "input": _loads(arguments), "kind": "read"}
            try:
                value = self.guard(lambda: _step(self, name, body))
            except StepFailed as exc:
                self.escaped = None  # a recorded failure goes back to the model as words
                text = f"error: {tool.name} failed: {exc.type}: {exc.message}"
                self.outcomes.append({**out, "status": "failed", "content": text, "is_error": True})
                return text
            self.outcomes.append({**out, "status": "ok", "content": _text(value), "is_error": False})
            return value

        return invoke

    # -- effect tools: approval requests and gated effects ----------------------------------------

    def request(self, item: Any) -> tuple[bool, str | None]:
        """An interruption's approval (the SDK's ToolApprovalItem): validate the arguments,
        capture the premises, ask for approval of exactly these arguments and wait (durably).

        Returns:
            (approved, the words the model reads when it is not).
        """
        raw = item.raw_item
        call_id = str(raw.get("call_id") if isinstance(raw, dict) else raw.call_id)
        tool = self.effect_tools.get(item.tool_name)
        if tool is None:
            raise InvalidInput("tools", f"the run asks to approve {item.tool_name!r}, which is not an effect_tool")
        t, b = self.position(call_id)
        args, errors = parse_arguments(tool, item.arguments)
        out = {"turn": t, "block": b, "tool": tool.name, "input": args, "kind": "effect", "effect_id": None}
        if errors:
            text = f"error: invalid input for {tool.name}: {'; '.join(errors)}. Nothing was run or sent."
            self.outcomes.append({**out, "status": "invalid_input", "content": text, "is_error": True})
            return False, text
        spec = _spec(tool)
        facts = self._premises(tool, t, b, args)
        summary = spec.summary(args) if spec.summary else f"{tool.name} {json.dumps(args, sort_keys=True)}"
        approval = self.guard(
            lambda: self.ctx.request_approval(
                spec.target,
                self.effect_key(t, b),
                args,
                premises=facts,
                decision=self.refs.get(t),
                summary=" ".join(summary.split())[:300],
                timeout=spec.approval_timeout,
                action=attr(spec.target, "action"),
            )
        )
        if approval is None:
            decided = self.ctx.last_approval or {}
            by = decided.get("decided_by")
            reason = decided.get("reason") or decided.get("status")
            text = f"not approved: {reason}" + (f" ({decided.get('status')} by {by})" if by else "")
            self.outcomes.append(
                {
                    **out,
                    "status": f"not_approved:{decided.get('status')}",
                    "content": text,
                    "is_error": True,
                    "approval_request": decided.get("request_id"),
                }
            )
            return False, text
        self.approvals[(t, b)] = approval
        return True, None

    def _premises(self, tool: EffectTool, t: int, b: int, args: dict) -> Any:
        premises = _spec(tool).premises
        if premises is None:
            return None
        return self.guard(lambda: self.ctx.step(f"{self.name}:premises:{t}.{b}", premises, args))

    def _effect_invoker(self, tool: EffectTool):
        spec = _spec(tool)

        async def invoke(tool_context, arguments: str):
            t, b = self.position(tool_context.tool_call_id)
            where = f"{t}.{b}"
            args, errors = parse_arguments(tool, arguments)
            out = {"turn": t, "block": b, "tool": tool.name, "input": args, "kind": "effect", "effect_id": None}

            def done(status: str, content: str, is_error: bool, **more) -> str:
                self.outcomes.append({**out, "status": status, "content": content, "is_error": is_error, **more})
                return content

            if errors:
                text = f"error: invalid input for {tool.name}: {'; '.join(errors)}. Nothing was run or sent."
                return done("invalid_input", text, True)
            approval = self.approvals.get((t, b))
            if approval is not None:
                # The approval's grant is bound to the hash of the payload it approved: these
                # arguments are sent as they are, so any others are refused at the send.
                grant, premises = approval.grant_id, approval.facts_seen
            else:
                grant, premises = spec.grant, self._premises(tool, t, b, args)
            if grant is None:
                return done(
                    "not_approved:none",
                    "not approved: this call needs an approval and none was given; nothing was sent",
                    True,
                )
            r = self.guard(
                lambda: self.ctx.effect(
                    spec.target,
                    key=self.effect_key(t, b),
                    payload=args,
                    premises=premises,
                    grant=grant,
                    name=f"{self.name}:tool:{where}:{tool.name}",
                    decision=self.refs.get(t),
                )
            )
            extra = {"effect_id": r.effect_id}
            if r.status in COMMITTED_STATUSES:
                body = {"status": r.status, "effect_id": r.effect_id, "result": r.result}
                if r.status == "DUPLICATE_IGNORED":
                    body["note"] = "this call was applied before; nothing was sent again"
                return done(r.status, json.dumps(body, sort_keys=True), False, **extra)
            if r.status == "AMBIGUOUS":
                return done(r.status, f"{AMBIGUOUS_TEXT} (effect {r.effect_id}); do not retry it", True, **extra)
            facts = approval.facts_seen if approval is not None else premises
            detail = self.guard(
                lambda: self.ctx.step(
                    f"{self.name}:refusal:{where}", _refusal, spec, args, facts, r.effect_id, r.status, r.result
                )
            )
            return done(r.status, detail["text"], True, **extra)

        return invoke

    def start_key(self, key: str | None) -> None:
        """Record the base of the effect keys (step ``<name>:key``)."""
        self.base = self.guard(
            lambda: self.ctx.step(f"{self.name}:key", same, key if key is not None else self.ctx.workflow_id)
        )


def _spec(tool: EffectTool) -> EffectSpec:
    """An effect tool's EffectSpec (``effect_tool`` always sets one)."""
    if tool.effect is None:
        raise InvalidInput("tools", f"effect tool {tool.name!r} has no EffectSpec: make it with effect_tool")
    return tool.effect


def _step(run: DurableRun, name: str, body):
    return run.ctx.step(name, body, retry=DEFAULT_TOOL_RETRY)


def _refusal(spec, args: dict, facts: Any, effect_id: str, status: str, result: Any = None) -> dict:
    """Step body: the refusal's words, from the call's result or the key's journal and (for a
    premise) a fresh read."""
    if isinstance(result, dict) and result.get("reason") is not None:
        detail = {"reason": result["reason"], "recorded": result.get("recorded")}
    else:
        detail = refusal_detail(effect_id)
    changes = changed_premises(spec, args, facts) if "stale_premise" in status else []
    return {"text": refusal_text(status, detail, changes), "detail": detail}


def _plain(value: Any) -> Any:
    """A tool's output as plain JSON to record: JSON as is, anything else as the SDK's text."""
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    try:
        json.dumps(value)
        return value
    except (TypeError, ValueError):
        return jsonable(value) if hasattr(value, "model_dump") else str(value)


def _loads(arguments: str) -> Any:
    try:
        return json.loads(arguments or "{}")
    except ValueError:
        return arguments


def _text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)
