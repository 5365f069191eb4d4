"""The OpenAI Agents SDK driver's checks of a refund case's result (FrameworkDriver.answer and
.replayed, prove.harness.agent_frameworks)."""

from __future__ import annotations


def openai_agents_answer(result: dict) -> str:
    """The final text the agent gave."""
    return str(result.get("final_output") or "")


def openai_agents_replayed(input: dict, result: dict, decided: list[dict]) -> bool:
    """Each turn's request, rebuilt from the returned transcript, hashes to the fingerprint the
    worker that ran it recorded, and the model's items in the transcript are the recorded
    responses."""
    from demo.agent_openai import refund_agent
    from ilr.contrib.openai_agents.replay import request_fingerprints

    if not result:
        return False
    transcript = result["transcript"]
    from_model = [
        i
        for i in transcript
        if i.get("type") == "function_call" or (i.get("type") == "message" and i.get("role") == "assistant")
    ]
    recorded = [item for t in decided for item in t["output"]["response"]["output"]]
    fingerprints = request_fingerprints(refund_agent(input), transcript)
    return fingerprints == [t["fingerprint"] for t in decided] and from_model == recorded
