"""Per-framework checks of a refund case's result (FrameworkDriver.answer and .replayed)."""

from __future__ import annotations


def native_answer(result: dict) -> str:
    return result.get("text") or ""


def native_replayed(input: dict, result: dict, decided: list[dict]) -> bool:
    from demo.agent_refund import refund_agent

    return bool(result) and refund_agent(input).turn_fingerprints(result["transcript"]) == [
        t["fingerprint"] for t in decided
    ]


def pydantic_ai_answer(result: dict) -> str:
    return str(result.get("output") or "")


def pydantic_ai_replayed(input: dict, result: dict, decided: list[dict]) -> bool:
    """Each request rebuilt from the transcript hashes to its recorded fingerprint, and each
    response in the transcript is the recorded one."""
    from ilr.contrib.pydantic_ai.replay import request_fingerprints

    if not result:
        return False
    transcript = result["transcript"]
    responses = [m["parts"] for m in transcript if m.get("kind") == "response"]
    return request_fingerprints("support", None, transcript) == [t["fingerprint"] for t in decided] and responses == [
        t["output"]["response"]["parts"] for t in decided
    ]


def pydantic_ai_conversation(transcript: list) -> list[str]:
    """One line per part of a Pydantic AI transcript (JSON): the prompt, each model response's
    text and tool calls, each tool return or retry prompt."""
    import json

    lines, turn = [], 0
    for message in transcript:
        if message.get("kind") == "response":
            lines.append(f"turn {turn} (model):")
            turn += 1
        for part in message.get("parts", []):
            kind = part.get("part_kind")
            if kind == "user-prompt":
                lines.append(f"user (the ticket): {part['content']}")
            elif kind == "text":
                lines.append(f"  text: {part['content']}")
            elif kind == "tool-call":
                args = part["args"] if isinstance(part["args"], str) else json.dumps(part["args"], sort_keys=True)
                lines.append(f"  tool call {part['tool_name']} {args}")
            elif kind in ("tool-return", "retry-prompt"):
                content = part["content"] if isinstance(part["content"], str) else json.dumps(part["content"])
                lines.append(f"{kind} for {part.get('tool_name')}: {content}")
    return lines
