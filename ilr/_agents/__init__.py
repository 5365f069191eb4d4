"""Durable agents: a model with tools, run inside a workflow, with every side effect gated.

``Agent(...).run(ctx, messages)`` is the Messages API tool-use loop, made of durable calls:

- each model turn is one ``ctx.decide`` named ``<agent>:turn:<t>`` (recorded once; the
  ``ilr.llm_calls`` row written before each call counts the calls a crash discarded), so a
  replay rebuilds the transcript from recorded turns and never calls the model for a turn it
  has. The request (model, system, tools, transcript) is the decision's fingerprint: a replay
  that rebuilt another transcript is NonDeterminism, not a silent divergence;
- each ``tool_use`` block is validated first: an unknown tool, an input that is not an object or
  fails the tool's JSON schema (Draft 2020-12, ``jsonschema``) goes back to the model as an
  error ``tool_result`` (``is_error: true``) and nothing runs or is sent;
- a read-only tool runs as ``ctx.step("<agent>:tool:<t>.<b>:<tool>")``;
- a side-effecting tool is ``ctx.effect`` through its target: the payload is exactly the
  validated arguments, the idempotency key is ``agent:<base>:<agent>:<t>.<b>`` (the call's
  recorded position: turn ``t`` and content block ``b``; never the model's tool_use id, which
  changes when a turn is asked again), the premises the tool declares are captured by a step
  before any approval, and the tool's Policy supplies the grant: a standing grant, or an
  approval request (``ctx.request_approval``) for every call or above a threshold;
- results go back as ``tool_result`` blocks; a refusal in words the model can act on.

``<base>`` is recorded by the agent's first call (step ``<agent>:key``): the ``key`` given to
``run``, else the workflow id of the run that first got there. A fork copies that step, so a
forked agent keeps the original's keys: a call it makes again at a recorded position is
DUPLICATE_IGNORED, or REFUSED:conflicting_payload with other arguments, never a second send.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

from ilr import _codec as codec
from ilr._agents.messages import changed_premises, message_json, messages_call, refusal_detail, refusal_text, same
from ilr._agents.tools import (
    AMBIGUOUS_TEXT,
    COMMITTED_STATUSES,
    DEFAULT_TOOL_RETRY,
    TOOL_NAME,
    AgentResult,
    Policy,
    Tool,
)
from ilr._effects.targets import attr
from ilr._errors import InvalidInput, StepFailed, ToolError
from ilr._retry import RetryPolicy


class Agent:
    """A model, a system prompt, tools and a turn limit; ``run`` it inside a workflow.

    Args:
        model: the Messages API model name.
        system: the system prompt.
        tools: Tool objects (unique names).
        call: ``call(request) -> message_json`` (default ``messages_call()``: the SDK's
            environment).
        name: prefixes every step name and key (two agents in one workflow need two names).
        max_turns: model turns at most.
        max_tokens: per turn.
        retry: the model call's RetryPolicy (default the runtime's, unlimited).

    Raises:
        ValueError: no model, a bad name or turn limit, or two tools with one name.
    """

    def __init__(
        self,
        *,
        model: str,
        system: str = "",
        tools: Iterable[Tool] = (),
        call: Callable[[dict], dict] | None = None,
        name: str = "agent",
        max_turns: int = 8,
        max_tokens: int = 1024,
        retry: RetryPolicy | None = None,
    ):
        if not isinstance(model, str) or not model:
            raise ValueError("Agent: model must be a model name")
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            raise ValueError(f"Agent: name {name!r} must match {TOOL_NAME.pattern}")
        if isinstance(max_turns, bool) or not isinstance(max_turns, int) or max_turns < 1:
            raise ValueError("Agent: max_turns must be a positive integer")
        self.tools: dict[str, Tool] = {}
        for tool in tools:
            if tool.name in self.tools:
                raise ValueError(f"Agent: two tools are named {tool.name!r}")
            self.tools[tool.name] = tool
        self.model, self.system, self.name = model, system, name
        self.max_turns, self.max_tokens = max_turns, max_tokens
        self.call = call or messages_call()
        self.retry = retry

    def request_for(self, messages: list) -> dict:
        """The Messages API request of the turn that answers ``messages`` (its sha256 is the
        turn's recorded fingerprint)."""
        request = {"model": self.model, "max_tokens": self.max_tokens, "messages": messages}
        if self.system:
            request["system"] = self.system
        if self.tools:
            request["tools"] = [t.definition() for t in self.tools.values()]
        return request

    def run(self, ctx, messages: str | list, *, key: str | None = None) -> AgentResult:
        """Run the tool-use loop as durable calls of ``ctx`` (see the module docstring).

        Args:
            ctx: the workflow's context.
            messages: the first user message's text, or the Messages API messages (plain JSON).
            key: the base of every effect key (e.g. the case id, so a fork from any point,
                or a new workflow for the same case, never sends a call twice); default the
                workflow id, recorded by the first run.

        Returns:
            AgentResult (``as_dict()`` for a workflow's result).

        Raises:
            InvalidInput: messages neither a string nor a list of message objects.
            StepFailed: the model call failed past its RetryPolicy (recorded).
            Cancelled: and anything else a durable call raises (never caught here).
        """
        if isinstance(messages, str):
            messages = [{"role": "user", "content": messages}]
        if not isinstance(messages, list) or not messages or not all(isinstance(m, dict) for m in messages):
            raise InvalidInput("messages", "must be a non-empty string or a list of message objects")
        codec.check_plain(messages, "messages")
        base = ctx.step(f"{self.name}:key", same, key if key is not None else ctx.workflow_id)
        transcript = [dict(m) for m in messages]
        outcomes: list[dict] = []
        text = ""
        for t in range(self.max_turns):
            decision = ctx.decide(
                f"{self.name}:turn:{t}", call=self.call, request=self.request_for(transcript), retry=self.retry
            )
            response = decision.output
            content = list(response.get("content") or [])
            transcript.append({"role": "assistant", "content": content})
            text = "".join(b.get("text", "") for b in content if b.get("type") == "text")
            uses = [(b, block) for b, block in enumerate(content) if block.get("type") == "tool_use"]
            if not uses:
                return AgentResult(text, transcript, outcomes, t + 1, response.get("stop_reason") or "end_turn")
            results = []
            for b, block in uses:
                outcome = self._tool_call(ctx, base, t, b, block, decision.ref)
                outcomes.append(outcome)
                result = {"type": "tool_result", "tool_use_id": block.get("id"), "content": outcome["content"]}
                if outcome["is_error"]:
                    result["is_error"] = True
                results.append(result)
            transcript.append({"role": "user", "content": results})
        return AgentResult("", transcript, outcomes, self.max_turns, "max_turns")

    def turn_fingerprints(self, transcript: list, first_messages: int = 1) -> list[str]:
        """The fingerprint (request sha256) of every turn of ``transcript`` as this agent would
        ask it: compare with the recorded ``decide`` steps' fingerprints to show that a
        transcript replays identically.

        Args:
            transcript: an AgentResult's transcript.
            first_messages: how many messages ``run`` was given.
        """
        out = []
        for i, message in enumerate(transcript):
            if message.get("role") == "assistant" and i >= first_messages:
                out.append(codec.sha256_hex(codec.canonical(self.request_for(transcript[:i]))))
        return out

    def effect_key(self, base: str, turn: int, block: int) -> str:
        """The idempotency key of the call at content block ``block`` of turn ``turn``."""
        return f"agent:{base}:{self.name}:{turn}.{block}"

    def _tool_call(self, ctx, base: str, t: int, b: int, block: dict, ref: dict) -> dict:
        # The model's tool_use block (JSON): an unknown name finds no tool; tool.errors checks args.
        name: Any
        args: Any
        name, args = block.get("name"), block.get("input")
        out = {"turn": t, "block": b, "tool": name, "input": args, "effect_id": None}

        def done(kind: str, status: str, content: str, is_error: bool, **more) -> dict:
            return {**out, "kind": kind, "status": status, "content": content, "is_error": is_error, **more}

        tool = self.tools.get(name)
        if tool is None:
            names = ", ".join(sorted(self.tools)) or "none"
            return done(
                "rejected",
                "unknown_tool",
                f"error: there is no tool named {name!r}; the tools are: {names}. Nothing was run.",
                True,
            )
        errors = tool.errors(args)
        if errors:
            return done(
                "rejected",
                "invalid_input",
                f"error: invalid input for {name}: {'; '.join(errors)}. Nothing was run or sent.",
                True,
            )
        where = f"{t}.{b}"
        if tool.run is not None:
            try:
                value = ctx.step(
                    f"{self.name}:tool:{where}:{name}", tool.run, args, retry=tool.retry or DEFAULT_TOOL_RETRY
                )
            except StepFailed as exc:
                return done("read", "failed", f"error: {name} failed: {exc.type}: {exc.message}", True)
            return done("read", "ok", json.dumps(value, sort_keys=True), False)
        policy = tool.policy
        assert policy is not None  # Tool.__post_init__: a tool without run has a target, hence a Policy
        key = self.effect_key(base, t, b)
        facts = ctx.step(f"{self.name}:premises:{where}", tool.premises, args) if tool.premises else None
        if policy.needs_approval(args):
            summary = tool.summary(args) if tool.summary else f"{name} {json.dumps(args, sort_keys=True)}"
            summary = " ".join(summary.split())[:300]
            # The action the effect's grant check uses (ilr._effects.targets.attr: default "refund"), so the
            # approval's grant covers exactly this target's sends.
            approval = ctx.request_approval(
                tool.target,
                key,
                args,
                premises=facts,
                decision=ref,
                summary=summary,
                timeout=policy.approval_timeout,
                action=attr(tool.target, "action"),
            )
            if approval is None:
                decided = ctx.last_approval or {}
                reason = decided.get("reason") or decided.get("status")
                by = decided.get("decided_by")
                text = f"not approved: {reason}" + (f" ({decided.get('status')} by {by})" if by else "")
                return done(
                    "effect",
                    f"not_approved:{decided.get('status')}",
                    text,
                    True,
                    approval_request=decided.get("request_id"),
                )
            grant, premises, payload = approval.grant_id, approval.facts_seen, approval.payload
        else:
            grant, premises, payload = policy.grant, facts, args
        r = ctx.effect(
            tool.target,
            key=key,
            payload=payload,
            premises=premises,
            grant=grant,
            name=f"{self.name}:tool:{where}:{name}",
            decision=ref,
        )
        extra = {"effect_id": r.effect_id}
        if r.status in COMMITTED_STATUSES:
            body = {"status": r.status, "effect_id": r.effect_id, "result": r.result}
            if r.status == "DUPLICATE_IGNORED":
                body["note"] = "this call was applied before; nothing was sent again"
            return done("effect", r.status, json.dumps(body, sort_keys=True), False, **extra)
        if r.status == "AMBIGUOUS":
            return done("effect", r.status, f"{AMBIGUOUS_TEXT} (effect {r.effect_id}); do not retry it", True, **extra)
        detail = ctx.step(f"{self.name}:refusal:{where}", _refusal, tool, args, facts, r.effect_id, r.status, r.result)
        return done("effect", r.status, detail["text"], True, **extra)


def _refusal(tool: Tool, args: dict, facts: Any, effect_id: str, status: str, result: Any = None) -> dict:
    """Step body: the refusal's words, from the journal and (for a premise) a fresh read. A
    refusal of a key another workflow owns is on the call's own result, not the key's journal
    (docs/protocol.md §6.8): its reason is read there."""
    if isinstance(result, dict) and result.get("reason") is not None:
        detail = {"reason": result["reason"], "recorded": result.get("recorded")}
    else:
        detail = refusal_detail(effect_id)
    changes = changed_premises(tool, args, facts) if "stale_premise" in status else []
    return {"text": refusal_text(status, detail, changes), "detail": detail}


__all__ = [
    "AMBIGUOUS_TEXT",
    "DEFAULT_TOOL_RETRY",
    "Agent",
    "AgentResult",
    "Policy",
    "Tool",
    "ToolError",
    "message_json",
    "messages_call",
    "refusal_text",
]
