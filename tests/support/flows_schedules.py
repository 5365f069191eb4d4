"""Workflows of the schedule tests (issue 44): each returns its ``ctx.scheduled_time``; a slow
one holds its run for ``seconds`` (longer than the interval: the overlap policies act), a failing
one fails (pause_on_failure)."""

from __future__ import annotations

from ilr import workflow


def hold(seconds: float) -> float:
    import time

    time.sleep(seconds)
    return seconds


@workflow(name="sched_note", version="1")
def sched_note(ctx, input):
    """Returns its scheduled time (ISO) and, after continue-as-new, the same from its successor."""
    n = input.get("n", 0)
    if n < input.get("continue_until", 0):
        ctx.continue_as_new({**input, "n": n + 1})
    t = ctx.scheduled_time
    return {"scheduled_time": t.isoformat() if t else None, "n": n}


@workflow(name="sched_slow", version="1")
def sched_slow(ctx, input):
    """A run longer than the schedule's interval: sleeps durably ``seconds`` (cancellable)."""
    ctx.sleep(input.get("seconds", 3.0))
    return ctx.scheduled_time.isoformat()


@workflow(name="sched_fail", version="1")
def sched_fail(ctx, input):
    raise RuntimeError("scheduled run failed on purpose")
