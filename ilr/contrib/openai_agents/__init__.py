"""The OpenAI Agents SDK inside an Interlock workflow (extra ``interlock[openai-agents]``).

``DurableRunner.run(ctx, agent, input)`` runs an SDK ``Agent`` with the SDK's own ``Runner``,
made durable the way Temporal's plugin and DBOS's runner make it durable, through the SDK's
documented extension points:

- every model call is one ``ctx.decide`` (a ``Model`` that records: ``RunConfig.model_provider``
  for model names, a wrapper for each agent's ``Model`` instance): recorded once, a replay never
  calls the model for a turn it has, a call a crash discarded is counted (``ilr.llm_calls``);
- every plain function tool is a ``ctx.step`` (its output recorded);
- an ``effect_tool`` (a function tool that sends through an Interlock target) is ``ctx.effect``:
  its payload is exactly the call's validated arguments, its key the call's recorded position;
- an interruption (the SDK's ``needs_approval``) is an approval request bound to the hash of the
  exact arguments (``ctx.request_approval``), a durable wait: the run resumes when it is decided,
  on any worker, after any crash; ``RunState.approve`` or ``RunState.reject`` then continues the
  SDK's run, and a rejection reaches the model in words.

Refusals (a premise that moved, a revoked grant, a payload other than the approved one) go back
to the model as the tool's output, in words it can act on.
"""

from __future__ import annotations

try:
    import agents  # noqa: F401
except ImportError as exc:  # the extra is missing: say which
    raise ImportError(
        "ilr.contrib.openai_agents needs the OpenAI Agents SDK: pip install 'interlock[openai-agents]' "
        "(openai-agents==0.24.0)"
    ) from exc

import asyncio
from dataclasses import dataclass, field
from typing import Any

from agents import Agent, RunConfig, Runner
from agents.models.multi_provider import MultiProvider

from ilr._agents.tools import TOOL_NAME, Policy
from ilr._errors import InvalidInput
from ilr._retry import RetryPolicy
from ilr.contrib.openai_agents._model import RecordingModel, RecordingProvider
from ilr.contrib.openai_agents._records import jsonable
from ilr.contrib.openai_agents._run import DurableRun
from ilr.contrib.openai_agents._tools import EffectSpec, EffectTool, effect_tool


@dataclass
class DurableResult:
    """What ``DurableRunner.run`` returns.

    Attributes:
        final_output: the SDK's final output (the last agent's text or output_type value).
        transcript: ``RunResult.to_input_list()`` as plain JSON (the input and every item).
        outcomes: one dict per tool call: turn, block, tool, input, kind ("read" | "effect"),
            status, content (what the model read), is_error, effect_id (effects).
        turns: model turns recorded.
        last_agent: the name of the agent that answered.
        result: the SDK's RunResult (not serializable; ``as_dict`` leaves it out).
    """

    final_output: Any
    transcript: list
    outcomes: list
    turns: int
    last_agent: str
    result: Any = field(default=None, repr=False)

    def as_dict(self) -> dict:
        """Plain JSON for a workflow's result."""
        return {
            "final_output": jsonable(self.final_output),
            "transcript": self.transcript,
            "outcomes": self.outcomes,
            "turns": self.turns,
            "last_agent": self.last_agent,
        }


class DurableRunner:
    """Runs an SDK agent durably inside a workflow (see the module docstring)."""

    @staticmethod
    def run(
        ctx,
        agent: Agent,
        input: str | list,
        *,
        key: str | None = None,
        name: str = "agent",
        run_config: RunConfig | None = None,
        context: Any = None,
        max_turns: int = 10,
        retry: RetryPolicy | None = None,
    ) -> DurableResult:
        """Run ``agent`` on ``input`` as durable calls of ``ctx`` (synchronous, in the workflow).

        Args:
            ctx: the workflow's context.
            agent: the SDK Agent (not modified: the run uses a prepared clone).
            input: the first user message, or Responses API input items (plain JSON).
            key: the base of every effect key (e.g. the case id: a fork, or a new workflow for
                the same case, never sends a call twice); default the workflow id.
            name: prefixes every step name and key (two runs in one workflow need two names).
            run_config: the SDK's RunConfig; its ``model_provider`` (default ``MultiProvider``)
                resolves model names, and tracing is off unless it says otherwise.
            context: the SDK's run context object, passed to tools as usual.
            max_turns: the SDK's turn limit for each leg between approvals.
            retry: the model call's RetryPolicy (default the runtime's, unlimited).

        Returns:
            DurableResult.

        Raises:
            InvalidInput: a bad name or input, a plain function tool with ``needs_approval``.
            MaxTurnsExceeded, and the SDK's other errors; StepFailed (a model call past its
            retries); Cancelled and what else a durable call raises (never caught here).
        """
        if not isinstance(name, str) or not TOOL_NAME.match(name):
            raise InvalidInput("name", f"must match {TOOL_NAME.pattern}")
        if not isinstance(input, (str, list)) or not input:
            raise InvalidInput("input", "must be a non-empty string or a list of input items")
        run = DurableRun(ctx, name, retry)
        run.start_key(key)
        prepared = run.prepare(agent)
        config = run_config or RunConfig(tracing_disabled=True)
        provider = RecordingProvider(run, config.model_provider or MultiProvider())
        model = config.model
        if model is not None and not isinstance(model, str) and not isinstance(model, RecordingModel):
            model = RecordingModel(run, model, getattr(model, "model", None) or type(model).__name__)
        config = _replace(config, model_provider=provider, model=model)

        async def legs():
            result = await Runner.run(prepared, input, run_config=config, context=context, max_turns=max_turns)
            while result.interruptions:
                state = result.to_state()
                for item in result.interruptions:
                    approved, words = run.request(item)
                    if approved:
                        state.approve(item)
                    else:
                        state.reject(item, rejection_message=words)
                result = await Runner.run(prepared, state, run_config=config, context=context, max_turns=max_turns)
            return result

        try:
            result = asyncio.run(legs())
        except BaseException:
            if run.escaped is not None:
                raise run.escaped from None
            raise
        if run.escaped is not None:
            raise run.escaped
        return DurableResult(
            final_output=result.final_output,
            transcript=jsonable(result.to_input_list()),
            outcomes=run.outcomes,
            turns=run.turn,
            last_agent=result.last_agent.name,
            result=result,
        )


def _replace(config: RunConfig, **changes) -> RunConfig:
    import dataclasses

    return dataclasses.replace(config, **changes)


__all__ = ["DurableResult", "DurableRunner", "EffectSpec", "EffectTool", "Policy", "effect_tool"]
