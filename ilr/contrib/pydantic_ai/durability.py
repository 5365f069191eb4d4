"""``InterlockDurability``: Pydantic AI's durability capability, with Interlock as the engine.

Built on the pinned Pydantic AI's public engine surface (``pydantic_ai.durable_exec``:
``BaseDurabilityCapability`` and a ``JournalCallableOperationBackend``). Inside an Interlock
workflow (``ilr.contrib.pydantic_ai.run``), each durable unit Pydantic AI opens becomes one durable
call of the workflow's context:

- a model request is one ``ctx.decide`` (recorded once; the ``ilr.llm_calls`` row written before
  the call counts the calls a crash discarded). Its fingerprint is the conversation the request
  sends (``conversation_request``), so a replay that rebuilt another conversation is
  NonDeterminism, never a silent divergence;
- a function tool call is one ``ctx.step`` (at least once, its result recorded);
- an Interlock effect tool (``effect_tool``) runs inline (``durable=False``): it is made of
  durable calls itself (``ctx.request_approval``, ``ctx.effect``);
- a deferred tool call (``requires_approval``, ``ApprovalRequired``) is answered by
  ``handle_deferred_tool_calls``: one approval request per call, bound to the hash of the exact
  arguments, waited on durably (the workflow sleeps; any worker resumes it once it is decided).

Outside a workflow the capability is transparent: the agent runs as a plain Pydantic AI agent.
"""

from __future__ import annotations

import asyncio

from pydantic_ai.durable_exec import (
    JSON_CODEC,
    BaseDurabilityCapability,
    DurabilityEngineSpec,
    JournalCallableOperationBackend,
    ModelRequestId,
    RoleBasedOperationConfig,
    ToolsetCallToolId,
)
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, RunContext

from ilr._errors import Cancelled, Fenced, NonDeterminism, Suspend
from ilr.contrib.pydantic_ai.approvals import answer_approvals
from ilr.contrib.pydantic_ai.session import current_session
from ilr.contrib.pydantic_ai.transcript import conversation_request


class InterlockBackend(JournalCallableOperationBackend[dict]):
    """Runs each Pydantic AI durable unit as a durable call of the current workflow."""

    def __init__(self, agent_name: str):
        super().__init__(
            agent_name=agent_name,
            config=RoleBasedOperationConfig(model={}, event={}, capability={}, tool={}, resolve_tool=None),
        )

    async def execute(self, *, operation_id, name, body, cache_key, config) -> object:
        """Run ``body`` as one durable call: ``ctx.decide`` for a model request (fingerprint:
        ``conversation_request``), ``ctx.step`` for anything else; outside ``run``, ``body()``.
        Returns the recorded (JSON) result; raises what the durable call raises (StepFailed,
        Suspend, NonDeterminism, ...)."""
        session = current_session()
        if session is None:  # outside ilr.contrib.pydantic_ai.run: a plain call
            return await body()
        ctx = session.ctx
        loop = asyncio.get_running_loop()

        def on_agent_loop(_request=None):
            # The durable call waits in a helper thread while the unit's body runs on the agent's
            # own event loop, where the model's and the tools' clients live.
            return asyncio.run_coroutine_threadsafe(body(), loop).result()

        if isinstance(operation_id, ModelRequestId):
            decision = await asyncio.to_thread(
                ctx.decide,
                f"{session.agent_name}:model:{name}",
                call=on_agent_loop,
                request=conversation_request(session.agent_name, cache_key),
                retry=session.model_retry,
            )
            session.turns.append(decision.ref)
            return decision.output
        step_name = f"{session.agent_name}:{name}"
        if isinstance(operation_id, ToolsetCallToolId):
            step_name = f"{session.agent_name}:tool:{cache_key[0]}"
        return await asyncio.to_thread(ctx.step, step_name, on_agent_loop, retry=session.tool_retry)


class InterlockDurability(BaseDurabilityCapability):
    """Attach to a Pydantic AI ``Agent`` (``capabilities=[InterlockDurability()]``) and run the
    agent with ``ilr.contrib.pydantic_ai.run(ctx, agent, prompt)`` inside an Interlock workflow.

    Args:
        name: prefixes the agent's durable call names (default the agent's ``name``; one is
            required, as for every Pydantic AI durability engine).
        models: other models the run may switch to, by id (as for DBOS and Temporal).

    Raises:
        pydantic_ai.exceptions.UserError: an agent without a name, or a second engine.
    """

    engine_spec = DurabilityEngineSpec(
        engine_name="Interlock",
        durable_unit_noun="step",
        durable_unit_plural="steps",
        durable_container_noun="workflow",
        codec=JSON_CODEC,
        wrapped_toolset_kinds=frozenset({"function", "mcp", "dynamic"}),
        toolset_lifecycles={"function": "enter-always", "mcp": "enter-in-durable-unit", "dynamic": "enter-never"},
        journal_discovery=False,
        # One call at a time: a workflow's durable calls are numbered in the order they are made.
        sequential_tools_in_durable_context=True,
        control_flow_error_types=(Suspend, Fenced),
        cancellation_error_types=(Cancelled,),
        nondeterminism_error_types=(NonDeterminism,),
    )

    def __init__(self, *, name: str | None = None, models=None):
        super().__init__(name=name, models=models)
        self._backend: InterlockBackend | None = None
        self._backend_name: str | None = None

    @property
    def in_durable_context(self) -> bool:
        return current_session() is not None

    def get_default_run_id(self) -> str | None:
        session = current_session()
        return None if session is None else f"{session.ctx.workflow_id}:{session.agent_name}"

    def get_durable_operation_backend(self) -> InterlockBackend:
        if self._backend is None or self._backend_name != self.name:
            self._backend, self._backend_name = InterlockBackend(self.name), self.name
        return self._backend

    async def handle_deferred_tool_calls(
        self, ctx: RunContext, *, requests: DeferredToolRequests
    ) -> DeferredToolResults | None:
        """Each approval a tool asks for becomes an Interlock approval request bound to the hash
        of its exact arguments; the run waits durably until every one is decided. Calls for
        external execution are left to the next handler (or end the run as DeferredToolRequests)."""
        session = current_session()
        if session is None or not requests.approvals:
            return None
        return answer_approvals(session, ctx, requests)
