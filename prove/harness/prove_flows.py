"""Workflows only the Prove harness runs (imported by its workers with ``--import
prove.harness.prove_flows``): the refund of demo.workflows with a durable timer before the effect
(scenario S10: the workflow sleeps 20 s, shortened from 3600 and labeled so, before the effect).
"""

from __future__ import annotations

from demo.peers import model
from demo.workflows import call_model, notify_ops, proposal_for, target_for
from ilr import SignalTimeout, workflow

REFUND_TIMER_VERSION = "2026-12-01.1"


@workflow(name="refund_timer", version=REFUND_TIMER_VERSION)
def refund_timer(ctx, case):
    """As demo.workflows.refund, with ``ctx.sleep(case["sleep_before_effect"])`` after the
    approval and before the effect."""
    target = target_for(case)
    d = ctx.decide(
        "pick_amount",
        call=call_model,
        request=model.build_request(
            {k: case[k] for k in ("id", "payment", "reason", "paid") if k in case} | {"case_id": case["id"]}
        ),
        premises=lambda: target.capture(case["payment"]),
    )
    proposal = ctx.step("propose", proposal_for, case, d.output["amount"])
    try:
        approval = ctx.wait_signal("approve", timeout=case.get("approval_timeout", 24 * 3600))
    except SignalTimeout:
        return {"status": "approval expired", "amount": proposal["amount"]}
    ctx.sleep(case.get("sleep_before_effect", 20))
    r = ctx.effect(
        target,
        key=f"refund:{case['id']}",
        payload=proposal,
        premises=approval["facts_seen"],
        grant=approval["grant_id"],
        decision=d.ref,
    )
    if r.status == "AMBIGUOUS":
        ctx.step("page_human", notify_ops, r.effect_id)
    return {"status": r.status, "effect_id": r.effect_id, "amount": proposal["amount"]}
