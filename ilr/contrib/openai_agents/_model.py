"""The SDK ``Model`` and ``ModelProvider`` a durable run hands the ``Runner``: each call is one
``ctx.decide``, so it is recorded once and a replay never calls the model for a turn it has.

This is what Temporal's plugin does with an activity per model call
(``temporalio.contrib.openai_agents``) and DBOS's runner with a step per call, through the SDK's
documented extension points: ``RunConfig.model_provider`` for model names, and a ``Model`` in
place of each agent's own ``Model`` instance.
"""

from __future__ import annotations

from typing import Any

from agents import Model, ModelProvider

from ilr.contrib.openai_agents._records import request_json, response_from_json, response_json
from ilr.contrib.openai_agents._threads import run_coroutine


class RecordingModel(Model):
    """The SDK ``Model`` of a durable run: ``get_response`` is ``ctx.decide`` named
    ``<name>:turn:<t>`` over the wrapped model's ``get_response`` (run off the workflow's event
    loop); streaming is not offered (a recorded turn is one response).

    Args:
        run: the DurableRun whose context records the turn (its ``decide``).
        inner: the model that answers (an OpenAI model, or an offline one).
        name: the model's name, part of the request fingerprint.
    """

    def __init__(self, run: Any, inner: Model, name: str | None):
        self.run, self.inner, self.name = run, inner, name

    async def get_response(
        self,
        system_instructions,
        input,
        model_settings,
        tools,
        output_schema,
        handoffs,
        tracing,
        *,
        previous_response_id=None,
        conversation_id=None,
        prompt=None,
    ):
        request = request_json(
            self.name,
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            previous_response_id,
            conversation_id,
        )
        emulated = getattr(self.inner, "EMULATED", None)

        def call(_request: dict) -> dict:
            response = run_coroutine(
                lambda: self.inner.get_response(
                    system_instructions,
                    input,
                    model_settings,
                    tools,
                    output_schema,
                    handoffs,
                    tracing,
                    previous_response_id=previous_response_id,
                    conversation_id=conversation_id,
                    prompt=prompt,
                )
            )
            return response_json(response, self.name, emulated)

        record = self.run.decide(request, call)
        return response_from_json(record)

    def stream_response(self, *args: Any, **kwargs: Any):
        raise NotImplementedError(
            "ilr.contrib.openai_agents records each model call as one response: use Runner.run, not run_streamed"
        )


class RecordingProvider(ModelProvider):
    """Resolves a model name through the wrapped provider (default the SDK's ``MultiProvider``)
    and hands back its model as a RecordingModel."""

    def __init__(self, run: Any, inner: ModelProvider):
        self.run, self.inner = run, inner

    def get_model(self, model_name: str | None) -> Model:
        model = self.inner.get_model(model_name)
        if isinstance(model, RecordingModel):
            return model
        return RecordingModel(self.run, model, model_name)
