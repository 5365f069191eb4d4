"""Check that a run's transcript replays: the fingerprint of each of its model requests, rebuilt
from the transcript alone, to compare with the decide steps the workflow recorded."""

from __future__ import annotations

from ilr import _codec as codec
from ilr.contrib.pydantic_ai.transcript import conversation_request


def request_fingerprints(agent_name: str, model_id: str | None, transcript: list) -> list[str]:
    """The sha256 of every model request of ``transcript`` (an AgentRun's, Pydantic AI JSON), as
    ``InterlockBackend`` records it: the conversation before each response.

    Args:
        agent_name: the agent's name.
        model_id: the model id the run's requests carried (None for the agent's default model).
        transcript: ``AgentRun.transcript``.
    """
    from pydantic_ai.messages import ModelMessagesTypeAdapter

    messages = ModelMessagesTypeAdapter.validate_python(transcript)
    return [
        codec.sha256_hex(codec.canonical(conversation_request(agent_name, (model_id, messages[:i]))))
        for i, m in enumerate(transcript)
        if m.get("kind") == "response"
    ]
