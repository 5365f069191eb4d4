"""The ``close_account`` workflow, autodiscovered by ``ilr`` (this is the app's workflows module).

A worker refuses to start when this file changes under the same version: bump the version
(or guard the change with ``ctx.patched``) when you edit it.
"""

from __future__ import annotations

from accounts.targets import AccountClosures
from ilr import RetryPolicy, workflow
from ilr._effects.targets import register_target

# Registered here, so the worker and the review UI (which imports this module too) find it by
# name: the review UI re-checks a request's premises through it.
closures = register_target(AccountClosures())

APPROVAL_TIMEOUT = 3 * 86400
"""Seconds an approver has to decide before the request expires."""


def euros(cents: int) -> str:
    """Cents as the queue shows them: "EUR 1,234.50"."""
    return f"EUR {cents // 100:,}.{cents % 100:02d}"


@workflow(name="close_account", version="1")
def close_account(ctx, case):
    """Close ``case["account"]`` once a person approved it, refunding its balance.

    Returns:
        {"status", ...}: the effect's status with its id and the target's answer, the
        approval's status ("rejected", "expired") with the reason, or "not_closable" /
        "already_closed" when the facts rule a closure out.
    """
    facts = ctx.step("facts", closures.capture, case["account"], retry=RetryPolicy(non_retryable=("DoesNotExist",)))
    if facts["closed"]:
        return {"status": "already_closed"}
    if facts["open_disputes"]:
        return {"status": "not_closable", "reason": f"{facts['open_disputes']} open dispute(s)"}
    if facts["balance_cents"] < 0:
        return {"status": "not_closable", "reason": f"the owner owes {euros(-facts['balance_cents'])}"}
    key = f"close:{facts['account']}"
    payload = {"account": facts["account"], "owner": facts["owner"], "amount": facts["balance_cents"]}
    approval = ctx.request_approval(
        closures,
        key,
        payload,
        premises=facts,
        timeout=APPROVAL_TIMEOUT,
        summary=f"Close account {facts['account']} of {facts['owner']} and refund {euros(facts['balance_cents'])}",
    )
    if approval is None:
        return {"status": ctx.last_approval["status"], "reason": ctx.last_approval["reason"]}
    r = ctx.effect(closures, key=key, payload=approval.payload, premises=approval.facts_seen, grant=approval.grant_id)
    return {"status": r.status, "effect_id": r.effect_id, "result": r.result}
