"""The conversation that led an agent's approval request (``ilr.agents``: its decision is a turn
``<agent>:turn:<t>``), rebuilt from the workflow's recorded steps: each turn up to the one that
made the call (its text and its tool calls, arguments as labelled fields), and what each earlier
call came back with. Nothing here names a workflow, a tool or an action of its own."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from approvals.display import Field, labelled
from ilr.models import ApprovalRequest, Step


@dataclass
class ToolCall:
    """One tool_use block of an agent's turn, and what came back for it.

    Attributes:
        tool: the tool's name. position: "<turn>.<block>".
        arguments: the call's input as labelled fields.
        result: what the tool gave back (None: nothing recorded before the request).
        is_error: the result was an error or a refusal.
        current: this is the call the request is for.
        note: why there is no result (not run, or not run yet).
    """

    tool: str
    position: str
    arguments: list[Field]
    result: str | None = None
    is_error: bool = False
    current: bool = False
    note: str = ""


@dataclass
class Turn:
    """One recorded model turn of an agent: its text and its tool calls."""

    number: int
    model: str | None
    text: str
    calls: list[ToolCall]
    at: Any = None


AGENT_TURN = re.compile(r"^(?P<agent>[a-zA-Z0-9_-]{1,64}):turn:(?P<turn>\d+)$")
"""The name ``ilr.agents`` gives each model turn's decide step."""


def response_text(response: dict) -> str | None:
    """The text blocks of a Messages API response (an agent turn's reasoning), else None."""
    content = response.get("content")
    if not isinstance(content, list):
        return None
    text = "".join(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return text or None


def _result_of(step: Step | None, tool: str, refusal: Step | None, outcome: Step | None) -> tuple[str | None, bool]:
    """(what came back for a tool call, is_error), read from its recorded steps: the read's
    step, the effect's step (and its refusal step), or the outcome of a request that sent
    nothing; (None, False) when nothing is recorded for it."""
    if step is not None and step.kind == "effect":
        from ilr import AMBIGUOUS_TEXT, COMMITTED_STATUSES

        out = step.output if isinstance(step.output, dict) else {}
        status = out.get("status")
        if refusal is not None and isinstance(refusal.output, dict) and refusal.output.get("text"):
            return str(refusal.output["text"]), True
        if status == "AMBIGUOUS":
            return f"{AMBIGUOUS_TEXT} (effect {out.get('effect_id')})", True
        body = {"status": status, "effect_id": out.get("effect_id"), "result": out.get("result")}
        return json.dumps(body, sort_keys=True, default=str), status not in COMMITTED_STATUSES
    if step is not None:
        if step.error:
            err = step.error if isinstance(step.error, dict) else {}
            return f"error: {tool} failed: {err.get('type')}: {err.get('message')}", True
        return json.dumps(step.output, sort_keys=True, default=str), False
    if outcome is not None and isinstance(outcome.output, dict) and not outcome.output.get("grant_id"):
        out = outcome.output
        by = out.get("decided_by")
        return f"{out.get('status')}: {out.get('reason') or 'no reason given'}" + (f" (by {by})" if by else ""), True
    return None, False


def _arguments(value: Any) -> list[Field]:
    """A tool call's input as fields keyed exactly, look-alike keys flagged (``labelled``)."""
    return labelled(value if isinstance(value, dict) else {"input": value})


def _conversation(request: ApprovalRequest, decide: Step, steps: list[Step]) -> list[Turn]:
    """The agent's turns up to ``decide`` (the turn that made the request's call), each call
    with what its recorded steps say came back before the request was written ([] when
    ``decide`` is not an agent's turn)."""
    found = AGENT_TURN.match(decide.name or "")
    if found is None:
        return []
    agent, last = found["agent"], int(found["turn"])
    before = {s.name: s for s in steps if s.seq < request.seq}
    key_step = before.get(f"{agent}:key")
    base = key_step.output if key_step is not None else None
    turns = []
    for s in steps:
        m = AGENT_TURN.match(s.name or "") if s.kind == "decide" and s.seq <= decide.seq else None
        if m is None or m["agent"] != agent:
            continue
        t = int(m["turn"])
        output = s.output if isinstance(s.output, dict) else {}
        response = output.get("response") if isinstance(output.get("response"), dict) else {}
        content = [b for b in response.get("content") or [] if isinstance(b, dict)]
        calls = []
        for b, block in enumerate(content):
            if block.get("type") != "tool_use":
                continue
            tool, position = str(block.get("name")), f"{t}.{b}"
            key = f"agent:{base}:{agent}:{position}"  # ilr.agents' effect key for this position
            call = ToolCall(tool, position, _arguments(block.get("input")), current=key == request.effect_key)
            call.result, call.is_error = _result_of(
                before.get(f"{agent}:tool:{position}:{tool}"),
                tool,
                before.get(f"{agent}:refusal:{position}"),
                before.get(f"approval_outcome:{key}"),
            )
            if call.result is None and not call.current:
                call.note = (
                    "not run yet"
                    if t == last
                    else "not run: the runtime turned it down before it ran (an unknown tool or invalid input)"
                )
            calls.append(call)
        turns.append(
            Turn(t, response.get("model") or output.get("model"), response_text(response) or "", calls, s.created_at)
        )
    return turns


def conversations(requests: list[ApprovalRequest]) -> dict[str, list[Turn]]:
    """The conversation of each request an agent made (``_conversation``), in one query."""
    refs = {
        r.id: r.decision
        for r in requests
        if isinstance(r.decision, dict)
        and r.decision.get("seq") is not None
        and r.decision.get("workflow_id") == r.workflow_id
    }
    by_workflow: dict[str, list[Step]] = {}
    for s in Step.objects.filter(workflow_id__in={r.workflow_id for r in requests if r.id in refs}).order_by("seq"):
        by_workflow.setdefault(s.workflow_id, []).append(s)
    out = {}
    for r in requests:
        steps = by_workflow.get(r.workflow_id, [])
        seq = refs.get(r.id, {}).get("seq")
        decide = next((s for s in steps if s.seq == seq and s.kind == "decide"), None)
        if decide is not None:
            out[r.id] = _conversation(r, decide, steps)
    return out
