"""The workflows ``manage.py bench`` runs (prove/bench/full.py): its worker subprocesses import
this module (``--import prove.bench.full_flows``)."""

from __future__ import annotations

import time

from ilr import workflow
from prove.bench.core import noop


@workflow(name="bench_steps4", version="1")
def bench_steps4(ctx, input):
    """Four no-op steps."""
    return [ctx.step(f"s{i}", noop, i) for i in range(4)]


@workflow(name="bench_refund", version="1")
def bench_refund(ctx, case):
    """The refund shape: one decide (model stub), one tier-1 gated effect under a policy grant."""
    from demo.peers import model
    from demo.workflows import call_model, target_for

    target = target_for(case)
    d = ctx.decide("pick_amount", call=call_model, request=model.build_request({"case_id": case["id"]}))
    r = ctx.effect(
        target,
        key=f"bench:{case['id']}",
        payload={"payment": case["payment"], "amount": d.output["amount"]},
        grant=case["grant_id"],
    )
    return r.status


def _timed_direct_apply(case: dict) -> float:
    """One plain call of the target's apply() with a fresh key; returns its duration in ms."""
    from demo.workflows import target_for

    target = target_for(case)
    t = time.perf_counter()
    target.apply(
        f"direct-{case['id']}-{time.time_ns()}",
        {"payment": case["direct_payment"], "amount": 1},
        timeout=target.send_timeout,
    )
    return (time.perf_counter() - t) * 1000


@workflow(name="bench_effect_timed", version="1")
def bench_effect_timed(ctx, case):
    """What a gated effect adds over its target's own latency, seen from the workflow.

    A step calls the target straight (a fresh key, the same client code the effect sends with,
    in this worker process) and returns how long the call took; then the workflow times its own
    ``ctx.effect`` call of the same target on the worker's monotonic clock. Both durations are
    in the result, in ms. The effect's duration is a measurement, not a recorded value: a replay
    would measure the replay. The benchmark runs no crashes, so each workflow runs once.
    """
    from demo.workflows import target_for

    target = target_for(case)
    direct_ms = ctx.step("direct", _timed_direct_apply, case)
    t = time.perf_counter()
    r = ctx.effect(
        target, key=f"timed:{case['id']}", payload={"payment": case["payment"], "amount": 1}, grant=case["grant_id"]
    )
    return {"status": r.status, "direct_ms": direct_ms, "effect_ms": (time.perf_counter() - t) * 1000}
