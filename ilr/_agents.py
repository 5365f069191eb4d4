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

import functools
import json
import re
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from ilr import _codec as codec
from ilr._effects.targets import attr
from ilr._errors import InvalidInput, StepFailed, ToolError
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


def message_json(message: Any, emulated: bool | None = None) -> dict:
    """An SDK ``Message`` as the plain JSON a decision records: {"id", "model", "content",
    "stop_reason", "usage": {"input_tokens", "output_tokens"}, "emulated"}. Content keeps text
    blocks as {"type", "text"} and tool_use blocks as {"type", "id", "name", "input"}; any other
    block as the SDK dumps it."""
    content = []
    for block in message.content:
        kind = getattr(block, "type", None)
        if kind == "text":
            content.append({"type": "text", "text": block.text})
        elif kind == "tool_use":
            content.append({"type": "tool_use", "id": block.id, "name": block.name, "input": block.input})
        else:
            content.append(block.model_dump(mode="json", exclude_none=True))
    return {
        "id": message.id,
        "model": message.model,
        "content": content,
        "stop_reason": message.stop_reason,
        "usage": {"input_tokens": message.usage.input_tokens, "output_tokens": message.usage.output_tokens},
        "emulated": emulated,
    }


@functools.lru_cache(maxsize=8)
def _client(base_url: str | None, api_key: str | None, timeout: float):
    import anthropic

    # max_retries=0: retrying is the decision's RetryPolicy's job, so every call is counted.
    return anthropic.Anthropic(base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout)


def messages_call(endpoint: Callable[[], dict] | None = None, timeout: float = 60.0) -> Callable[[dict], dict]:
    """A model call for ``Agent(call=...)``: ``client.messages.create(**request)`` through the
    ``anthropic`` SDK, answered as ``message_json``.

    Args:
        endpoint: ``endpoint() -> {"base_url", "api_key", "emulated"}``, read at every call
            (``prove.peers.model.endpoint``: the local stub when ILR_MODEL_BASE_URL is set, else
            Claude with ANTHROPIC_API_KEY); None: the SDK's own environment.
        timeout: seconds for one call.
    """

    def call(request: dict) -> dict:
        where = endpoint() if endpoint is not None else {"base_url": None, "api_key": None, "emulated": None}
        message = _client(where.get("base_url"), where.get("api_key"), timeout).messages.create(**request)
        return message_json(message, where.get("emulated"))

    return call


def _same(value: Any) -> Any:
    return value


def refusal_detail(effect_id: str) -> dict:
    """The last REFUSED journal entry of ``effect_id``: {"reason", "recorded"} (a step body).

    Returns:
        {"reason": the entry's reason (a string or the violations), "recorded": the payload
        first bound, for conflicting_payload}; {} when the effect has no REFUSED entry.
    """
    from ilr import _db as db
    from ilr._journal import journal

    with db.connect(application_name="ilr-agent") as conn:
        refused = [e for e in journal.parsed(conn, effect_id) if e.get("kind") == "REFUSED"]
    if not refused:
        return {}
    return {"reason": refused[-1].get("reason"), "recorded": refused[-1].get("recorded")}


def _changed_premises(tool: Tool, args: dict, facts: Any) -> list[str]:
    """ "the premise <name> changed from <a> to <b>" for each captured fact that differs now."""
    if tool.premises is None or not isinstance(facts, dict):
        return []
    try:
        now = tool.premises(args)
    except Exception:  # noqa: BLE001 - a diff is a courtesy; the journal's reason stands alone
        return []
    if not isinstance(now, dict):
        return []
    return [
        f"the premise {k} changed from {json.dumps(v)} to {json.dumps(now.get(k))}"
        for k, v in facts.items()
        if now.get(k) != v
    ]


def refusal_text(status: str, detail: dict, changes: list[str]) -> str:
    """The words a REFUSED status goes back to the model in."""
    reason = detail.get("reason")
    if isinstance(reason, list):
        reason = "; ".join(str(r) for r in reason)
    if status in ("REFUSED:stale_premise", "REFUSED:stale_premise_at_recovery"):
        if changes:
            return "refused: " + "; ".join(changes) + "; nothing was sent"
        return f"refused: a premise no longer holds ({reason or 'the target did not say which'}); nothing was sent"
    if status == "REFUSED:conflicting_payload":
        return (
            "refused: conflicting_payload: this call was first proposed with other arguments "
            f"({json.dumps(detail.get('recorded'), sort_keys=True)}); those stay bound to it and "
            "these were not sent"
        )
    if status in ("REFUSED:lease", "REFUSED:lease_at_recovery"):
        return (
            "refused: not authorized: the grant is not live or does not cover this call "
            "(an amount above its cap, another action); nothing was sent"
        )
    if status == "REFUSED:cancelled":
        return "refused: the workflow is being cancelled; nothing was sent"
    if status == "REFUSED:target":
        return f"refused by the target: {reason or 'a definite no'}; nothing was applied"
    return f"refused ({status}): {reason or 'no reason recorded'}"


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
        base = ctx.step(f"{self.name}:key", _same, key if key is not None else ctx.workflow_id)
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
    changes = _changed_premises(tool, args, facts) if "stale_premise" in status else []
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
