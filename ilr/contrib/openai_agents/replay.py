"""Check a finished run against its record: the request of every turn, rebuilt from the
transcript a run returned, and its sha256, which is the fingerprint ``ctx.decide`` recorded."""

from __future__ import annotations

from typing import Any

from agents import Agent, ModelSettings

from ilr import _codec as codec
from ilr.contrib.openai_agents._records import request_json


def request_fingerprints(
    agent: Agent,
    transcript: list,
    *,
    model: str | None = None,
    settings: ModelSettings | None = None,
    first_items: int = 1,
) -> list[str]:
    """The fingerprint of each model turn of ``transcript`` as ``agent`` asked it (one agent, no
    handoffs, no output type): the input before each run of model items, with the agent's
    instructions (a string), tools and settings.

    Args:
        agent: the SDK Agent the run was given.
        transcript: ``DurableResult.transcript``.
        model: the model name asked for (default ``agent.model``).
        settings: the settings the model was given (default ``agent.model_settings``).
        first_items: how many input items the run was given (1 for a string input).

    Returns:
        one sha256 hex per turn, in order.
    """
    tools = list(agent.tools)
    name = model if model is not None else agent.model
    out = []
    previous_from_model = True
    for i, item in enumerate(transcript):
        from_model = item.get("type") == "function_call" or (
            item.get("type") == "message" and item.get("role") == "assistant"
        )
        if from_model and not previous_from_model and i >= first_items:
            out.append(_hash(name, agent.instructions, transcript[:i], settings or agent.model_settings, tools))
        previous_from_model = from_model
    return out


def _hash(name: Any, instructions: Any, items: list, settings: Any, tools: list) -> str:
    request = request_json(name, instructions, items, settings, tools, None, [], None, None)
    return codec.sha256_hex(codec.canonical(request))
