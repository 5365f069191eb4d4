"""Pydantic AI messages as plain JSON: the fingerprint of a model request, a tool call's
recorded position, and the transcript a run returns."""

from __future__ import annotations

from typing import Any

from pydantic_ai.messages import ModelMessagesTypeAdapter, ModelResponse

VOLATILE = frozenset({"timestamp", "run_id", "conversation_id", "metadata"})
"""Message fields a replay rebuilds with other values (clock readings, run ids), left out of a
request's fingerprint: what the model is asked is the parts' content, not when it was asked."""


def messages_json(messages: list) -> list:
    """``messages`` (Pydantic AI ModelMessage objects) as plain JSON (their documented dump)."""
    return ModelMessagesTypeAdapter.dump_python(messages, mode="json")


def _stable(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _stable(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def conversation_request(agent_name: str, cache_key: tuple) -> dict:
    """The plain-JSON request a model request is recorded under (its sha256 is the decide
    step's fingerprint): the agent, the model id and the conversation sent, without VOLATILE
    fields. ``cache_key`` is Pydantic AI's model-request cache identity: (model_id, messages,
    ...)."""
    model_id, messages = cache_key[0], cache_key[1]
    return {"agent": agent_name, "model": model_id, "messages": _stable(messages_json(list(messages)))}


def call_position(messages: list, tool_call_id: str) -> str:
    """Where the tool call ``tool_call_id`` is in ``messages``: "<turn>.<part>" (the index of
    the model response among responses, the part's index in it). The model's tool_call_id is
    not used in keys: it changes when a request is asked again.

    Raises:
        LookupError: no response holds that call.
    """
    turn = 0
    for message in messages:
        if isinstance(message, ModelResponse):
            for i, part in enumerate(message.parts):
                if getattr(part, "tool_call_id", None) == tool_call_id and part.part_kind == "tool-call":
                    return f"{turn}.{i}"
            turn += 1
    raise LookupError(f"no model response holds tool call {tool_call_id!r}")
