"""The workflow ``manage.py bench_history`` runs (prove/bench/history.py): its worker
subprocesses import this module (``--import prove.bench.history_flows``)."""

from __future__ import annotations

import os
import time

from ilr import workflow


def _hang_then_stamp() -> float:
    """The first call past the recorded history. In the seeding worker (ILR_BENCH_HANG set) it
    never returns, so that worker is SIGKILLed holding the claim; in the worker that takes over
    it returns the wall clock at the end of the replay."""
    if os.environ.get("ILR_BENCH_HANG"):
        time.sleep(3600)
    return time.time()


@workflow(name="bench_history", version="1")
def bench_history(ctx, input):
    """``steps`` steps of ``{"i": i, "pad": "x" * pad}``, then the stamp step."""
    pad = "x" * input["pad"]
    for i in range(input["steps"]):
        ctx.step("s", lambda i=i: {"i": i, "pad": pad})
    return {"frontier_at": ctx.step("stamp", _hang_then_stamp), "length": ctx.history_length}
