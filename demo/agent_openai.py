"""The refund agent written for the OpenAI Agents SDK (``ilr.contrib.openai_agents``): a
read-only payment lookup (a plain ``@function_tool``) and a refund that needs approval (an
``effect_tool`` through the local payment target), with the SDK's own ``Agent`` and ``Runner``.

The model is EMULATED: ``EmulatedRefundModel`` is an SDK ``Model`` whose answers are scripted
from the conversation it is given (look the payment up, propose the refund, answer with what the
refund tool said), so any worker that asks the same turn gets the same answer and no network is
used. Used by tests/faults/test_openai_agents.py (``--import demo.agent_openai``), the agents
matrix (``agents_report --framework openai-agents``) and the demo.
"""

from __future__ import annotations

import json
import os
import re
from typing import Annotated, Any

from agents import Agent, Model, ModelProvider, ModelResponse, RunConfig, Usage, function_tool
from agents.testing.model import assistant_message, function_call
from pydantic import Field

from ilr import workflow
from ilr.contrib.openai_agents import DurableRunner, Policy, effect_tool

MODEL = "gpt-4.1-mini"
"""The model name the agent asks for (the EMULATED provider answers every name)."""
INSTRUCTIONS = "You handle refund requests. Look the payment up first, then refund what is fair."
FIRST_AMOUNT, EDITED_AMOUNT = 2000, 3000  # cents
EMULATED_VALUE = "tool use scripted from the conversation by demo.agent_openai.EmulatedRefundModel, not a model"


def agent_prompt(case_id: str, payment: str) -> str:
    """The first user message of a case."""
    return f"case_id: {case_id}\npayment: {payment}\nThe customer asks for a refund: the item arrived damaged."


class EmulatedRefundModel(Model):
    """EMULATED: an SDK ``Model`` scripted from the conversation (no network, no model).

    Turn 0 (no tool output yet): call ``lookup_payment`` for the prompt's payment. Turn 1: say so
    and call ``issue_refund`` for FIRST_AMOUNT cents (EDITED_AMOUNT once the file ``edit_when``
    exists: the model changing its mind, with the same call id). Later: answer with the last
    tool output quoted.

    Args:
        edit_when: a path, or None.
    """

    EMULATED = True

    def __init__(self, edit_when: str | None = None):
        self.edit_when = edit_when

    async def get_response(
        self, system_instructions, input, model_settings, tools, output_schema, handoffs, tracing, **_
    ):
        items = [input] if isinstance(input, str) else list(input)
        first = items[0] if isinstance(items[0], str) else items[0].get("content")
        payment = re.search(r"payment: (\S+)", str(first)).group(1)
        outputs = [i for i in items if isinstance(i, dict) and i.get("type") == "function_call_output"]
        if not outputs:
            output = [function_call("lookup_payment", {"payment": payment}, call_id="call_lookup")]
        elif len(outputs) == 1:
            amount = EDITED_AMOUNT if self.edit_when and os.path.exists(self.edit_when) else FIRST_AMOUNT
            output = [
                assistant_message(f"The payment is eligible; I will refund {amount} cents.", item_id="msg_1"),
                function_call("issue_refund", {"payment": payment, "amount": amount}, call_id="call_refund"),
            ]
        else:
            output = [assistant_message(f"Final answer: {_output_text(outputs[-1])}", item_id="msg_2")]
        return ModelResponse(output=output, usage=Usage(requests=1), response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any):
        raise NotImplementedError("EmulatedRefundModel answers get_response only")


def _output_text(item: dict) -> str:
    out = item.get("output")
    return out if isinstance(out, str) else json.dumps(out, sort_keys=True)


class EmulatedProvider(ModelProvider):
    """EMULATED: answers every model name with an EmulatedRefundModel."""

    def __init__(self, edit_when: str | None = None):
        self.edit_when = edit_when

    def get_model(self, model_name: str | None) -> Model:
        return EmulatedRefundModel(self.edit_when)


def refund_agent(input: dict) -> Agent:
    """The SDK Agent of ``agent_refund_openai`` (input: url, tier, queryable, approval_timeout,
    policy "approval" | "standing" | "above", grant, threshold)."""
    from demo.peers.targets_client import LocalRefunds

    target = LocalRefunds(
        input["url"], tier=input.get("tier", 1), queryable=input.get("queryable"), send_timeout=2.0, settle_margin=2.0
    )

    @function_tool
    def lookup_payment(payment: str) -> dict:
        """The payment's refund facts: eligible, refunded_by_others (cents)."""
        return target.capture(payment)

    kind = input.get("policy", "approval")
    policy = {
        "approval": lambda: Policy.approval(timeout=input.get("approval_timeout", 120)),
        "standing": lambda: Policy.standing(input["grant"]),
        "above": lambda: Policy.approval_above(input["threshold"], input["grant"]),
    }[kind]()

    @effect_tool(
        target,
        policy=policy,
        premises=lambda args: target.capture(args["payment"]),
        summary=lambda args: f"Refund {args['amount']} cents of {args['payment']}",
    )
    def issue_refund(payment: str, amount: Annotated[int, Field(ge=1)]) -> None:
        """Refund amount cents of a payment."""

    return Agent(name="support", instructions=INSTRUCTIONS, model=MODEL, tools=[lookup_payment, issue_refund])


def run_config(input: dict) -> RunConfig:
    """The run's RunConfig: the EMULATED provider, tracing off (nothing leaves the machine)."""
    return RunConfig(model_provider=EmulatedProvider(input.get("edit_when")), tracing_disabled=True)


@workflow(name="agent_refund_openai", version="1")
def agent_refund_openai(ctx, input):
    """An SDK agent handles one refund case (input: case_id, payment, key, and refund_agent's
    keys); returns DurableResult.as_dict()."""
    result = DurableRunner.run(
        ctx,
        refund_agent(input),
        agent_prompt(input["case_id"], input["payment"]),
        key=input.get("key"),
        run_config=run_config(input),
        max_turns=input.get("max_turns", 6),
    )
    return result.as_dict()
