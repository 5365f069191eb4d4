"""The refund agent (ilr.agents): a read-only payment lookup and a gated refund through the
local payment target, with the model behind the real ``anthropic`` SDK (the local stub when
ILR_MODEL_BASE_URL is set, EMULATED tool use; else Claude with ANTHROPIC_API_KEY). Used by
tests/faults/test_agents.py (``--import tests.support.flows``) and ``manage.py agents_report``.
"""

from __future__ import annotations

from ilr import workflow

AGENT_SYSTEM = "You handle refund requests. Look the payment up first, then refund what is fair."


def agent_prompt(case_id: str, payment: str) -> str:
    """The first user message of an agent case (the stub keys its script on case_id)."""
    return f"case_id: {case_id}\npayment: {payment}\nThe customer asks for a refund: the item arrived damaged."


def refund_agent(input: dict):
    """The Agent of ``agent_refund``: a read-only lookup and a gated refund (input: url, tier,
    queryable, policy "approval" | "standing" | "above", grant, threshold, max_turns)."""
    from demo.peers import model
    from demo.peers.targets_client import LocalRefunds, UnknownPayment
    from ilr import Agent, Policy, Tool, ToolError, messages_call

    target = LocalRefunds(
        input["url"], tier=input.get("tier", 1), queryable=input.get("queryable"), send_timeout=2.0, settle_margin=2.0
    )

    def lookup(args):
        try:
            return target.capture(args["payment"])
        except UnknownPayment as exc:
            raise ToolError(str(exc)) from None

    kind = input.get("policy", "approval")
    policy = {
        "approval": lambda: Policy.approval(timeout=input.get("approval_timeout", 120)),
        "standing": lambda: Policy.standing(input["grant"]),
        "above": lambda: Policy.approval_above(input["threshold"], input["grant"]),
    }[kind]()
    payment_schema = {"type": "string", "minLength": 1}
    tools = [
        Tool.read(
            "lookup_payment",
            "The payment's refund facts: eligible, refunded_by_others (cents).",
            {
                "type": "object",
                "properties": {"payment": payment_schema},
                "required": ["payment"],
                "additionalProperties": False,
            },
            lookup,
        ),
        Tool.effect(
            "issue_refund",
            "Refund amount cents of a payment.",
            {
                "type": "object",
                "properties": {"payment": payment_schema, "amount": {"type": "integer", "minimum": 1}},
                "required": ["payment", "amount"],
                "additionalProperties": False,
            },
            target,
            policy,
            premises=lambda args: target.capture(args["payment"]),
            summary=lambda args: f"Refund {args['amount']} cents of {args['payment']}",
        ),
    ]
    return Agent(
        model=model.MODEL,
        system=AGENT_SYSTEM,
        tools=tools,
        call=messages_call(model.endpoint),
        max_turns=input.get("max_turns", 6),
        max_tokens=512,
    )


@workflow(name="agent_refund", version="1")
def agent_refund(ctx, input):
    """An agent handles one refund case (input: case_id, payment, key, and refund_agent's keys);
    returns AgentResult.as_dict()."""
    agent = refund_agent(input)
    return agent.run(ctx, agent_prompt(input["case_id"], input["payment"]), key=input.get("key")).as_dict()
