"""Pydantic AI's deferred tool approvals answered by Interlock approval requests."""

from __future__ import annotations

from pydantic_ai.exceptions import UserError
from pydantic_ai.tools import DeferredToolRequests, DeferredToolResults, RunContext, ToolApproved, ToolDenied

from ilr._effects.targets import attr
from ilr.contrib.pydantic_ai.session import Session
from ilr.contrib.pydantic_ai.transcript import call_position


def answer_approvals(session: Session, ctx: RunContext, requests: DeferredToolRequests) -> DeferredToolResults:
    """One approval request per call in ``requests.approvals``, bound to the hash of the call's
    exact arguments, with the premises captured (a step) before it is written; waits durably
    (``ctx.request_approval`` suspends the workflow until the request is decided).

    Returns:
        DeferredToolResults: True (or ToolApproved with the arguments ``session.edit`` gives) for
        an approved call, whose Approval is kept for the tool's send; ToolDenied with the
        decision's words for a rejected or expired one.

    Raises:
        UserError: a tool that asks for approval but is no ``effect_tool`` (nothing would bind
            the approval to what it does).
    """
    wf = session.ctx
    answers: dict = {}
    for call in requests.approvals:
        spec = session.effect_tools.get(call.tool_name)
        if spec is None:
            raise UserError(
                f"tool {call.tool_name!r} requires approval but is not an Interlock effect tool: build it with "
                "ilr.contrib.pydantic_ai.effect_tool(function, target=...) so the approval binds what it sends"
            )
        args = call.args_as_dict()
        where = call_position(ctx.messages, call.tool_call_id)
        facts = wf.step(f"{session.agent_name}:premises:{where}", spec.premises, args) if spec.premises else None
        approval = wf.request_approval(
            spec.target,
            session.effect_key(where),
            args,
            premises=facts,
            decision=session.decision_ref(),
            summary=spec.summary_line(args),
            timeout=spec.policy.approval_timeout,
            action=attr(spec.target, "action"),
        )
        if approval is None:
            decided = wf.last_approval or {}
            reason = decided.get("reason") or decided.get("status")
            by = decided.get("decided_by")
            answers[call.tool_call_id] = ToolDenied(
                f"not approved: {reason}" + (f" ({decided.get('status')} by {by})" if by else "") + "; nothing was sent"
            )
            session.outcomes.append(
                {
                    "where": where,
                    "tool": spec.name,
                    "input": args,
                    "effect_id": None,
                    "status": f"not_approved:{decided.get('status')}",
                }
            )
            continue
        session.approvals[call.tool_call_id] = approval
        edited = session.edit(spec.name, args) if session.edit else None
        answers[call.tool_call_id] = ToolApproved(override_args=edited) if edited is not None else True
    return DeferredToolResults(approvals=answers)
