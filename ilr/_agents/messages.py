"""The model call (the Messages API through the anthropic SDK, or a stub) and the words of a
refusal a model reads back as a tool result."""

from __future__ import annotations

import functools
import json
from collections.abc import Callable
from typing import Any

from ilr._agents.tools import Tool


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
            (``demo.peers.model.endpoint``: the local stub when ILR_MODEL_BASE_URL is set, else
            Claude with ANTHROPIC_API_KEY); None: the SDK's own environment.
        timeout: seconds for one call.
    """

    def call(request: dict) -> dict:
        where = endpoint() if endpoint is not None else {"base_url": None, "api_key": None, "emulated": None}
        message = _client(where.get("base_url"), where.get("api_key"), timeout).messages.create(**request)
        return message_json(message, where.get("emulated"))

    return call


def same(value: Any) -> Any:
    """Step body: ``value`` itself (records a value once, so a replay returns the recorded one)."""
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


def changed_premises(tool: Tool, args: dict, facts: Any) -> list[str]:
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
