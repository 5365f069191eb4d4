"""The refund agent written in Pydantic AI (``ilr.contrib.pydantic_ai``): a read-only payment
lookup (a function tool: a step) and a refund (an effect tool: a gated effect through the local
payment target). The model is Pydantic AI's ``FunctionModel`` running a script (EMULATED: turn 0
looks the payment up, turn 1 proposes the refund, turn 2 answers with the refund's result).
Used by ``manage.py agents_report --framework pydantic-ai``, ``demo --agent --framework
pydantic-ai``, ``bench_agent_tools`` and tests/faults/test_agents_pydantic_ai.py.
"""

from __future__ import annotations

import re

from ilr import workflow

SYSTEM = "You handle refund requests. Look the payment up first, then refund what is fair."
AMOUNT = 2000
"""Cents the EMULATED model proposes (the native stub's "refund" script proposes the same)."""


def prompt(case_id: str, payment: str) -> str:
    """The ticket (the EMULATED model reads the payment id from it)."""
    return f"case_id: {case_id}\npayment: {payment}\nThe customer asks for a refund: the item arrived damaged."


def scripted_model(amount: int = AMOUNT):
    """EMULATED model: a Pydantic AI FunctionModel that looks the payment up, proposes a refund
    of ``amount`` cents, then answers quoting the refund's tool result."""
    from pydantic_ai.messages import ModelRequest, ModelResponse, TextPart, ToolCallPart, ToolReturnPart
    from pydantic_ai.models.function import FunctionModel

    def script(messages, info):
        parts = [p for m in messages if isinstance(m, ModelRequest) for p in m.parts]
        ticket = next(str(p.content) for p in parts if p.part_kind == "user-prompt")
        payment = re.search(r"payment: (\S+)", ticket).group(1)
        returns = {p.tool_name: p for p in parts if isinstance(p, ToolReturnPart)}
        denied = [p for p in parts if p.part_kind == "retry-prompt"]
        if "lookup_payment" not in returns:
            return ModelResponse(parts=[ToolCallPart("lookup_payment", {"payment": payment})])
        if "issue_refund" not in returns and not denied:
            return ModelResponse(parts=[ToolCallPart("issue_refund", {"payment": payment, "amount": amount})])
        said = returns["issue_refund"].content if "issue_refund" in returns else denied[-1].content
        return ModelResponse(parts=[TextPart(f"Final answer: {said}")])

    return FunctionModel(script, model_name="emulated-refund-script")


def stub_model():
    """Pydantic AI's AnthropicModel (the real ``anthropic`` SDK over HTTP) against the local
    Messages API stub at ILR_MODEL_BASE_URL (EMULATED tool use, scripted per case_id)."""
    from pydantic_ai.models.anthropic import AnthropicModel
    from pydantic_ai.providers.anthropic import AnthropicProvider

    from demo.peers import model

    where = model.endpoint()
    return AnthropicModel(model.MODEL, provider=AnthropicProvider(base_url=where["base_url"], api_key=where["api_key"]))


def refund_agent(input: dict):
    """The Pydantic AI Agent of ``pyd_refund`` (input: url, tier, queryable, policy "approval" |
    "standing" | "above", grant, threshold, amount, approval_timeout; model "function" (default,
    FunctionModel) or "messages-stub" (``stub_model``))."""
    from pydantic_ai import Agent, ModelRetry

    from demo.peers.targets_client import LocalRefunds, UnknownPayment
    from ilr.contrib.pydantic_ai import InterlockDurability, Policy, effect_tool

    refunds = LocalRefunds(
        input["url"], tier=input.get("tier", 1), queryable=input.get("queryable"), send_timeout=2.0, settle_margin=2.0
    )
    policy = {
        "approval": lambda: Policy.approval(timeout=input.get("approval_timeout", 120)),
        "standing": lambda: Policy.standing(input["grant"]),
        "above": lambda: Policy.approval_above(input["threshold"], input["grant"]),
    }[input.get("policy", "approval")]()

    def lookup_payment(payment: str) -> dict:
        """The payment's refund facts: eligible, refunded_by_others (cents)."""
        try:
            return refunds.capture(payment)
        except UnknownPayment as exc:
            raise ModelRetry(str(exc)) from None

    def issue_refund(payment: str, amount: int) -> str:
        """Refund amount cents of a payment."""

    chosen = input.get("model", "function")
    agent = Agent(
        stub_model() if chosen == "messages-stub" else scripted_model(input.get("amount", AMOUNT)),
        name="support",
        instructions=SYSTEM,
        model_settings={"max_tokens": 512},  # as the native agent; the stub does not stream
        capabilities=[InterlockDurability()],
        tools=[
            lookup_payment,
            effect_tool(
                issue_refund,
                target=refunds,
                policy=policy,
                premises=lambda args: refunds.capture(args["payment"]),
                summary=lambda args: f"Refund {args['amount']} cents of {args['payment']}",
            ),
        ],
    )
    return agent


@workflow(name="pyd_refund", version="1")
def pyd_refund(ctx, input):
    """A Pydantic AI agent handles one refund case (input: case_id, payment, key, edit_amount
    and refund_agent's keys); returns AgentRun.as_dict()."""
    from ilr.contrib.pydantic_ai import run

    edit = None
    if input.get("edit_amount") is not None:

        def edit(tool, args):
            return {**args, "amount": input["edit_amount"]} if tool == "issue_refund" else None

    agent = refund_agent(input)
    return run(ctx, agent, prompt(input["case_id"], input["payment"]), key=input.get("key"), edit=edit).as_dict()
