"""The refund workflows, autodiscovered by ``ilr`` (this app's ``workflows`` module).

A model decides an amount (recorded once), a person approves the exact payload, and the refund
is a gated effect against the payment target. ``refund`` asks through an approval request (the
review UI's queue); ``refund_signal`` waits on the raw "approve" signal (the Prove harness). The
target is configured per case (``case["target"]``) so every worker, fork and replay of a case talks
to the same target; without it, the ILR_TARGET_* environment is used.
"""

from __future__ import annotations

import functools
import os
from typing import Any

from demo.peers import model
from demo.peers.targets_client import LocalRefunds
from ilr import RetryPolicy, SignalTimeout, register_target, workflow

REFUND_VERSION = "2026-12-01.2"
REFUND_SIGNAL_VERSION = "2026-12-01.1"


def target_for(case: dict) -> LocalRefunds:
    """The LocalRefunds target of a case.

    Args:
        case: {"target": {"url", "tier", "queryable", "send_timeout", "settle_margin",
            "premise_max_age", "dedup_window", "lookup_after", "resend_policy": {RetryPolicy's
            fields}}} or nothing (then ILR_TARGET_URL, ILR_TARGET_TIER,
            ILR_TARGET_QUERYABLE, ILR_SEND_TIMEOUT, ILR_SETTLE_MARGIN).
    """
    spec = case.get("target") or env_target_spec()
    if not spec or not spec.get("url"):
        raise ValueError("case.target.url: no payment target configured (set case['target'] or ILR_TARGET_URL)")
    kwargs: dict[str, Any] = {"tier": int(spec.get("tier", 1))}
    for key in ("send_timeout", "settle_margin", "premise_max_age", "dedup_window"):
        if spec.get(key) is not None:
            kwargs[key] = float(spec[key])
    if spec.get("queryable") is not None:
        kwargs["queryable"] = bool(spec["queryable"])
    if spec.get("lookup_after") is not None:
        kwargs["lookup_after"] = int(spec["lookup_after"])
    if spec.get("resend_policy") is not None:
        kwargs["resend_policy"] = RetryPolicy(**spec["resend_policy"])
    return LocalRefunds(spec["url"], **kwargs)


def env_target_spec() -> dict | None:
    url = os.environ.get("ILR_TARGET_URL")
    if not url:
        return None
    spec: dict[str, Any] = {"url": url, "tier": int(os.environ.get("ILR_TARGET_TIER", "1"))}
    if os.environ.get("ILR_TARGET_QUERYABLE"):
        spec["queryable"] = os.environ["ILR_TARGET_QUERYABLE"] not in ("0", "false", "no")
    for key, var in (("send_timeout", "ILR_SEND_TIMEOUT"), ("settle_margin", "ILR_SETTLE_MARGIN")):
        if os.environ.get(var):
            spec[key] = float(os.environ[var])
    return spec


def call_model(request: dict) -> dict:
    """``ctx.decide``'s call: the Messages API request through the real ``anthropic`` SDK, at
    the local stub (ILR_MODEL_BASE_URL, EMULATED model variance) or real Claude.

    Returns:
        {"model", "amount" (cents), "reasoning", "usage"}.
    """
    where = model.endpoint()
    response = _client(where["base_url"], where["api_key"]).messages.create(**request)
    text = "".join(block.text for block in response.content if getattr(block, "type", None) == "text")
    decision = model.parse_decision(text)
    return {
        "model": response.model,
        "amount": decision["amount"],
        "reasoning": decision["reasoning"],
        "usage": {"input_tokens": response.usage.input_tokens, "output_tokens": response.usage.output_tokens},
        "emulated": where["emulated"],
    }


@functools.lru_cache(maxsize=8)
def _client(base_url: str | None, api_key: str):
    # One SDK client per endpoint and process: building one costs more than the call itself.
    import anthropic

    return anthropic.Anthropic(base_url=base_url, api_key=api_key, max_retries=0, timeout=60.0)


def notify_ops(effect_id: str) -> dict:
    """Page a person about an AMBIGUOUS effect (here: a log line the demo shows)."""
    return {"paged": True, "effect_id": effect_id}


def proposal_for(case: dict, amount: int) -> dict:
    """The effect payload a person approves: exactly what would be sent."""
    return {"payment": case["payment"], "amount": amount}


def summary_for(case: dict, amount: int) -> str:
    """The approval request's line in the queue."""
    reason = str(case.get("reason") or "")[:120].replace("\n", " ")
    return f"Refund {amount / 100:.2f} of payment {case['payment']}" + (f": {reason}" if reason else "")


@workflow(name="refund", version=REFUND_VERSION)
def refund(ctx, case):
    """Decide, ask a person to approve the exact refund (an approval request), send it as a
    gated effect under the approval's grant, verify.

    Input: {"id": case id, "payment": payment id, "reason": str, "target": {...},
    "approval_timeout": seconds (default 86400), "verify_after": seconds (default 1)}.
    Returns {"status": EffectResult status, "approval expired" or "rejected", "effect_id",
    "amount", "request_id"}.
    """
    target = target_for(case)
    d = ctx.decide(
        "pick_amount",
        call=call_model,
        request=model.build_request(
            {k: case[k] for k in ("id", "payment", "reason", "paid") if k in case} | {"case_id": case["id"]}
        ),
        premises=lambda: target.capture(case["payment"]),
    )
    proposal = proposal_for(case, d.output["amount"])
    key = f"refund:{case['id']}"
    approval = ctx.request_approval(
        target,
        key,
        proposal,
        premises=d.premises,
        decision=d.ref,
        summary=summary_for(case, proposal["amount"]),
        timeout=case.get("approval_timeout", 24 * 3600),
    )
    if approval is None:
        out = ctx.last_approval
        if out["status"] == "expired":
            return {"status": "approval expired", "amount": proposal["amount"], "request_id": out["request_id"]}
        return {"status": "rejected", "by": out["decided_by"], "reason": out["reason"], "request_id": out["request_id"]}
    r = ctx.effect(
        target, key=key, payload=approval.payload, premises=approval.facts_seen, grant=approval.grant_id, decision=d.ref
    )
    if r.status == "AMBIGUOUS":
        ctx.step("page_human", notify_ops, r.effect_id)
    ctx.sleep(case.get("verify_after", 1))
    return {
        "status": r.status,
        "effect_id": r.effect_id,
        "amount": proposal["amount"],
        "request_id": approval.request_id,
        "approved_by": list(approval.approved_by),
    }


@workflow(name="refund_signal", version=REFUND_SIGNAL_VERSION)
def refund_signal(ctx, case):
    """The refund on the raw signal path, as the Prove harness drives it: decide, record the
    proposal (step "propose"), wait for signal "approve" ({"grant_id", "facts_seen"} from
    ``rt.approve``, or {"rejected", "by", "reason"}), send the gated refund, verify.

    Input and result as ``refund`` (without "request_id").
    """
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
    if approval.get("rejected"):
        return {"status": "rejected", "by": approval.get("by"), "reason": approval.get("reason")}
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
    ctx.sleep(case.get("verify_after", 1))
    return {"status": r.status, "effect_id": r.effect_id, "amount": proposal["amount"]}


_env = env_target_spec()
if _env:
    # Registered unchecked: the worker checks every registered target at start and refuses
    # to run with a clear message (docs/protocol.md §6.5), instead of failing at import.
    register_target(target_for({"target": _env}), check=False)
