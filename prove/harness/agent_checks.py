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
