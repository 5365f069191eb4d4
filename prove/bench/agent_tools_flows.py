"""The workflows of ``manage.py bench_agent_tools``: one refund tool call in an agent, plain or
gated (input "variant"), per framework. The model is EMULATED (Pydantic AI's FunctionModel:
turn 0 calls issue_refund, turn 1 answers)."""

from __future__ import annotations

import time

from ilr import workflow

AMOUNT = 100


def pydantic_ai_tool_agent(input: dict, *, durable: bool = True, clock: list | None = None):
    """A Pydantic AI agent whose one tool call refunds AMOUNT cents of input["payment"]: plain
    (the tool calls the payment target itself) or gated (an effect_tool under input["grant"]).
    ``durable``: with InterlockDurability; ``clock``: a list each model request appends
    ``time.perf_counter()`` to."""
    from pydantic_ai import Agent
    from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    from demo.peers.targets_client import LocalRefunds
    from ilr.contrib.pydantic_ai import InterlockDurability, Policy, effect_tool

    refunds = LocalRefunds(input["url"], tier=1, queryable=True, send_timeout=2.0, settle_margin=2.0)

    def script(messages, info):  # EMULATED model
        if clock is not None:
            clock.append(time.perf_counter())
        if any(isinstance(p, ToolReturnPart) for m in messages for p in m.parts):
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(parts=[ToolCallPart("issue_refund", {"payment": input["payment"], "amount": AMOUNT})])

    def issue_refund(payment: str, amount: int) -> str:
        """Refund amount cents of a payment."""
        return str(refunds.apply(f"plain:{input['case_id']}", {"payment": payment, "amount": amount}))

    tool = issue_refund
    if input["variant"] == "gated":
        tool = effect_tool(
            issue_refund,
            target=refunds,
            policy=Policy.standing(input["grant"]),
            premises=lambda args: refunds.capture(args["payment"]),
        )
    capabilities = [InterlockDurability()] if durable else []
    return Agent(
        FunctionModel(script, model_name="emulated-bench"), name="bench", capabilities=capabilities, tools=[tool]
    )


@workflow(name="pyd_tool_bench", version="1")
def pyd_tool_bench(ctx, input):
    """One Pydantic AI agent run with one refund tool call (input: variant "plain" | "gated",
    url, payment, case_id, grant)."""
    from ilr.contrib.pydantic_ai import run

    return run(ctx, pydantic_ai_tool_agent(input), "refund it", key=input["case_id"]).output
