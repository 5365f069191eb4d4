"""The agent frameworks the agents kill matrix, ``demo --agent`` and ``bench_agent_tools`` run:
one FrameworkDriver per framework, by name (``--framework NAME``).

Every driver runs the same refund case (a read-only payment lookup, an approval request for the
refund's exact arguments, the refund through the local payment target, a final answer) written
in its framework. To add a framework: a workflow module like demo/agent_pydantic_ai.py and one
DRIVERS entry. Functions are named "module:attribute" and imported when used, so this registry
imports no framework.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


def load(ref: str) -> Any:
    """The attribute a "module:attribute" string names (imported now)."""
    module, _, attribute = ref.partition(":")
    return getattr(importlib.import_module(module), attribute)


@dataclass(frozen=True)
class FrameworkDriver:
    """How to run the refund case in one framework.

    Attributes:
        name: the ``--framework`` value.
        title: the framework as a section title says it.
        module: the workflow module workers import (``ilr_worker --import``).
        workflow: its workflow name; version: its version.
        model: what the model is, for the report (EMULATED, and how).
        needs_model_stub: whether the case's model is the local Messages API stub
            (ILR_MODEL_BASE_URL, scripted per case); else the model runs in the worker.
        answer: "module:function": ``answer(result) -> str``, the final text the model gave.
        replayed: "module:function": ``replayed(input, result, decide_rows) -> bool``, whether
            the transcript rebuilt after a kill hashes to the recorded request fingerprints.
        conversation: "module:function": ``conversation(transcript) -> [line]`` for ``demo
            --agent``, or None (the native loop's own printing).
        bench: "module:function": ``bench(n, out) -> dict`` for bench_agent_tools (see
            prove.bench.agent_tools.summarize), or None.
    """

    name: str
    title: str
    module: str
    workflow: str
    version: str
    model: str
    needs_model_stub: bool
    answer: str
    replayed: str
    bench: str | None = None
    conversation: str | None = None

    @property
    def only(self) -> str:
        """The worker's ``--only`` value."""
        return f"{self.workflow}@{self.version}"


DRIVERS: dict[str, FrameworkDriver] = {
    "native": FrameworkDriver(
        name="native",
        title="ilr.agents (native, over the anthropic SDK)",
        module="demo.agent_refund",
        workflow="agent_refund",
        version="1",
        model=(
            "the local Messages API stub (EMULATED tool use: scripted lookup, refund proposal, final answer) "
            "through the real `anthropic` SDK"
        ),
        needs_model_stub=True,
        answer="demo.agent_checks:native_answer",
        replayed="demo.agent_checks:native_replayed",
    ),
    "pydantic-ai": FrameworkDriver(
        name="pydantic-ai",
        title="Pydantic AI (ilr.contrib.pydantic_ai, pydantic-ai-slim 2.78.0)",
        module="demo.agent_pydantic_ai",
        workflow="pyd_refund",
        version="1",
        model=(
            "Pydantic AI's `FunctionModel` running a script (EMULATED: lookup, refund proposal, final answer) "
            "in the real Pydantic AI agent loop, under `InterlockDurability`"
        ),
        needs_model_stub=False,
        answer="demo.agent_checks:pydantic_ai_answer",
        replayed="demo.agent_checks:pydantic_ai_replayed",
        bench="prove.bench.agent_tools:pydantic_ai_bench",
        conversation="demo.agent_checks:pydantic_ai_conversation",
    ),
    "openai-agents": FrameworkDriver(
        name="openai-agents",
        title="OpenAI Agents SDK (ilr.contrib.openai_agents, openai-agents 0.24.0)",
        module="demo.agent_openai",
        workflow="agent_refund_openai",
        version="1",
        model=(
            "`demo.agent_openai.EmulatedRefundModel`, an SDK `Model` scripted from the conversation (EMULATED: lookup, "
            "refund proposal, final answer) in the real SDK `Runner`, under `DurableRunner`"
        ),
        needs_model_stub=False,
        answer="demo.agent_checks_openai:openai_agents_answer",
        replayed="demo.agent_checks_openai:openai_agents_replayed",
        conversation="demo.agent_checks_openai:openai_agents_conversation",
        bench="prove.bench.agent_tools_openai:openai_agents_bench",
    ),
}

NAMES = tuple(DRIVERS)


def drivers(spec: str) -> list[FrameworkDriver]:
    """The drivers ``--framework`` names: one name, a comma list, or "all".

    Raises:
        ValueError: an unknown name (the message lists the known ones).
    """
    names = list(DRIVERS) if spec == "all" else [s.strip() for s in spec.split(",") if s.strip()]
    unknown = [n for n in names if n not in DRIVERS]
    if unknown or not names:
        raise ValueError(f"unknown framework {', '.join(unknown) or spec!r}; known: {', '.join(DRIVERS)} or all")
    return [DRIVERS[n] for n in names]
