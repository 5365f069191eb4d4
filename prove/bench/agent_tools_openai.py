"""The OpenAI Agents SDK part of ``manage.py bench_agent_tools`` (prove.bench.agent_tools): one
refund tool call in an SDK agent, plain or gated, as the bench's three variants. The model is
EMULATED (an SDK ``Model``: turn 0 calls issue_refund, turn 1 answers)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

from ilr import workflow

AMOUNT = 100


def openai_tool_agent(input: dict, *, clock: list | None = None):
    """(agent, run_config): an SDK agent whose one tool call refunds AMOUNT cents of
    input["payment"], plain (a ``@function_tool`` calling the payment target itself) or gated (an
    ``effect_tool`` under the standing grant input["grant"]); ``clock``: a list each model request
    appends ``time.perf_counter()`` to."""
    from agents import Agent, Model, ModelProvider, ModelResponse, RunConfig, Usage, function_tool
    from agents.testing.model import assistant_message, function_call

    from demo.peers.targets_client import LocalRefunds
    from ilr.contrib.openai_agents import effect_tool

    case = input
    refunds = LocalRefunds(input["url"], tier=1, queryable=True, send_timeout=2.0, settle_margin=2.0)

    class Scripted(Model):  # EMULATED model
        EMULATED = True

        async def get_response(self, system_instructions, input, *args: Any, **kwargs: Any):  # noqa: A002 - the SDK's name
            if clock is not None:
                clock.append(time.perf_counter())
            done = any(isinstance(i, dict) and i.get("type") == "function_call_output" for i in input)
            if done:
                return ModelResponse(output=[assistant_message("done")], usage=Usage(requests=1), response_id=None)
            call = function_call("issue_refund", {"payment": case["payment"], "amount": AMOUNT}, call_id="call_0")
            return ModelResponse(output=[call], usage=Usage(requests=1), response_id=None)

        def stream_response(self, *args: Any, **kwargs: Any):
            raise NotImplementedError

    class Provider(ModelProvider):
        def get_model(self, model_name):
            return Scripted()

    if input["variant"] == "gated":

        @effect_tool(refunds, grant=input["grant"], premises=lambda args: refunds.capture(args["payment"]))
        def issue_refund(payment: str, amount: int) -> None:
            """Refund amount cents of a payment."""

    else:

        @function_tool
        def issue_refund(payment: str, amount: int) -> str:
            """Refund amount cents of a payment."""
            return str(refunds.apply(f"plain:{input['case_id']}", {"payment": payment, "amount": amount}))

    agent = Agent(name="bench", model="emulated-bench", tools=[issue_refund])
    return agent, RunConfig(model_provider=Provider(), tracing_disabled=True)


@workflow(name="openai_tool_bench", version="1")
def openai_tool_bench(ctx, input):
    """One SDK agent run with one refund tool call (input: variant "plain" | "gated", url,
    payment, case_id, grant)."""
    from ilr.contrib.openai_agents import DurableRunner

    agent, config = openai_tool_agent(input)
    return DurableRunner.run(ctx, agent, "refund it", key=input["case_id"], run_config=config).as_dict()["final_output"]


def openai_agents_bench(n: int, out) -> dict:
    """The three variants in the OpenAI Agents SDK (see prove.bench.agent_tools)."""
    from agents import Runner

    from prove.bench.agent_tools import VARIANTS, WARMUP, DurableRuns, summarize

    samples: dict[str, list[float]] = {v: [] for v in VARIANTS}
    with DurableRuns("prove.bench.agent_tools_openai", "openai_tool_bench", "1") as runs:

        def framework_plain(i: int) -> float:
            clock: list[float] = []
            agent, config = openai_tool_agent(runs.input("framework_plain", i), clock=clock)
            asyncio.run(Runner.run(agent, "refund it", run_config=config))
            return clock[1] - clock[0]

        for i in range(n + WARMUP):
            # Rotate the order each round: no variant always runs first after a pause.
            order = VARIANTS[i % 3 :] + VARIANTS[: i % 3]
            for variant in order:
                s = framework_plain(i) if variant == "framework_plain" else runs.gap(variant, i)
                if i >= WARMUP:
                    samples[variant].append(s)
            if (i + 1) % 25 == 0:
                out.write(f"openai-agents: {i + 1 - WARMUP}/{n} rounds\n")
    return summarize(samples)
