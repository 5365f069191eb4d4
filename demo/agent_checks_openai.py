"""The OpenAI Agents SDK driver's checks of a refund case's result and its conversation's lines
(FrameworkDriver.answer, .replayed and .conversation, demo.agent_frameworks)."""

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


def openai_agents_conversation(transcript: list) -> list[str]:
    """One line per item of an SDK transcript (``RunResult.to_input_list()`` as JSON): the
    ticket, each turn's text and function calls, each function call's output."""
    lines, turn, previous_from_model, names = [], 0, False, {}
    for item in transcript:
        kind, role = item.get("type"), item.get("role")
        from_model = kind == "function_call" or (kind == "message" and role == "assistant")
        if from_model and not previous_from_model:
            lines.append(f"turn {turn} (model):")
            turn += 1
        previous_from_model = from_model
        if role == "user":
            lines.append(f"user (the ticket): {item.get('content')}")
        elif kind == "message" and role == "assistant":
            text = "".join(c.get("text", "") for c in item.get("content") or [] if isinstance(c, dict))
            lines.append(f"  text: {text}")
        elif kind == "function_call":
            names[item.get("call_id")] = item.get("name")
            lines.append(f"  function_call {item.get('name')} {item.get('arguments')}")
        elif kind == "function_call_output":
            lines.append(f"function_call_output for {names.get(item.get('call_id'), '?')}: {item.get('output')}")
    return lines
