"""Pydantic AI agents made durable and gated by Interlock (``pip install interlock[pydantic-ai]``).

::

    agent = Agent(model, name="support", capabilities=[InterlockDurability()],
                  tools=[lookup_payment, effect_tool(issue_refund, target=refunds)])

    @workflow(name="support_case")
    def support_case(ctx, input):
        return run(ctx, agent, input["ticket"], key=input["case_id"]).as_dict()

Each model request is recorded once (``ctx.decide``), a function tool is a step, an effect tool
is a gated ``ctx.effect`` through its target, and a tool approval is an approval request bound to
the hash of the exact arguments, waited on durably. See docs/guides/agent-frameworks.md.
"""

try:
    import pydantic_ai  # noqa: F401
except ImportError as exc:  # the extra is missing: say which
    raise ImportError(
        "ilr.contrib.pydantic_ai needs Pydantic AI: pip install 'interlock[pydantic-ai]' (pydantic-ai-slim==2.78.0)"
    ) from exc

from ilr._agents.tools import Policy
from ilr.contrib.pydantic_ai.durability import InterlockDurability
from ilr.contrib.pydantic_ai.run import AgentRun, run
from ilr.contrib.pydantic_ai.tools import EffectSpec, effect_tool

__all__ = ["AgentRun", "EffectSpec", "InterlockDurability", "Policy", "effect_tool", "run"]
