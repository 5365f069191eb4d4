"""A model request and response as the plain JSON a ``ctx.decide`` records.

The request (its sha256 is the turn's fingerprint) holds what decides the answer: the model name,
the system instructions, the input items, the settings, the tools' names and schemas, the output
schema and the handoffs. The response is the SDK's ``ModelResponse``: its output items (the
Responses API's own pydantic types, dumped by alias) and its usage; ``response_from_json``
rebuilds an equal ``ModelResponse``, so the SDK sees the same object live and on replay.
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic import TypeAdapter
from pydantic_core import to_jsonable_python


@functools.lru_cache(maxsize=1)
def _adapters():
    from agents.items import TResponseOutputItem
    from agents.usage import Usage

    return TypeAdapter(list[TResponseOutputItem]), TypeAdapter(Usage)


def jsonable(value: Any) -> Any:
    """``value`` (input items: dicts or the SDK's pydantic types) as plain JSON."""
    return to_jsonable_python(value, by_alias=True, exclude_none=True, fallback=str)


def _tool_json(tool: Any) -> dict:
    out = {"type": type(tool).__name__, "name": getattr(tool, "name", None)}
    schema = getattr(tool, "params_json_schema", None)
    if schema is not None:
        out["parameters"] = jsonable(schema)
        out["description"] = getattr(tool, "description", None)
    return out


def request_json(
    model: str | None,
    system_instructions: str | None,
    input: Any,
    model_settings: Any,
    tools: list,
    output_schema: Any,
    handoffs: list,
    previous_response_id: str | None,
    conversation_id: str | None,
) -> dict:
    """The plain-JSON request of one model call (see the module docstring)."""
    schema = None
    if output_schema is not None and not output_schema.is_plain_text():
        schema = {"name": output_schema.name(), "schema": jsonable(output_schema.json_schema())}
    return {
        "model": model,
        "system": system_instructions,
        "input": jsonable(input),
        "settings": jsonable(model_settings.to_json_dict()) if model_settings is not None else None,
        "tools": [_tool_json(t) for t in tools],
        "output_schema": schema,
        "handoffs": [getattr(h, "tool_name", None) for h in handoffs],
        "previous_response_id": previous_response_id,
        "conversation_id": conversation_id,
    }


def response_json(response: Any, model: str | None, emulated: bool | None) -> dict:
    """A ``ModelResponse`` as {"model", "output", "usage", "response_id", "emulated"}."""
    items, usage = _adapters()
    return {
        "model": model,
        "output": items.dump_python(response.output, mode="json", by_alias=True, exclude_none=True),
        "usage": usage.dump_python(response.usage, mode="json"),
        "response_id": response.response_id,
        "emulated": emulated,
    }


def response_from_json(record: dict) -> Any:
    """The ``ModelResponse`` that ``response_json`` recorded."""
    from agents.items import ModelResponse

    items, usage = _adapters()
    return ModelResponse(
        output=items.validate_python(record["output"]),
        usage=usage.validate_python(record["usage"]),
        response_id=record.get("response_id"),
    )


def function_calls(record: dict) -> list[tuple[int, dict]]:
    """The recorded response's function calls as (position in the output, item)."""
    return [(b, item) for b, item in enumerate(record.get("output") or []) if item.get("type") == "function_call"]
