"""Workflows used by the tests. Step bodies log each invocation to public.test_invocations over
their own direct connection (ILR_TEST_DIRECT_DSN when set, so a fault proxy on the worker's
path does not hide them), which is how tests count body executions."""

from __future__ import annotations

import os

from ilr import Cancelled, RetryPolicy, workflow
from ilr import db


def invoke(workflow_id: str, name: str) -> int:
    """Log one body execution; return how many times this (workflow, name) body has run."""
    with db.connect(os.environ.get("ILR_TEST_DIRECT_DSN") or db.conninfo()) as conn:
        conn.execute("insert into public.test_invocations (workflow_id, name, pid) values (%s, %s, %s)",
                     (workflow_id, name, os.getpid()))
        return conn.execute("select count(*) as n from public.test_invocations where workflow_id = %s and name = %s",
                            (workflow_id, name)).fetchone()["n"]


@workflow(name="three_steps", version="1")
def three_steps(ctx, input):
    out = []
    for i in range(1, 4):
        out.append(ctx.step(f"step{i}", invoke, ctx.workflow_id, f"step{i}"))
    return {"counts": out}


@workflow(name="sleeper", version="1")
def sleeper(ctx, input):
    ctx.sleep(input.get("seconds", 1))
    return ctx.step("after", invoke, ctx.workflow_id, "after")


@workflow(name="waiter", version="1")
def waiter(ctx, input):
    payload = ctx.wait_signal("approve", timeout=input.get("timeout"))
    return {"payload": payload}


class Flaky(Exception):
    pass


def flaky(workflow_id: str, fail_times: int) -> int:
    n = invoke(workflow_id, "flaky")
    if n <= fail_times:
        raise Flaky(f"attempt {n} fails")
    return n


@workflow(name="retrier", version="1")
def retrier(ctx, input):
    policy = RetryPolicy(initial=input.get("initial", 0.5), backoff=2.0, max_attempts=input.get("max_attempts", 3))
    return ctx.step("flaky", flaky, ctx.workflow_id, input["fail_times"], retry=policy)


@workflow(name="compensating", version="1")
def compensating(ctx, input):
    ctx.step("reserve", invoke, ctx.workflow_id, "reserve")
    try:
        ctx.sleep(3600)
    except Cancelled:
        ctx.step("release", invoke, ctx.workflow_id, "release")
        raise
    return "slept"


@workflow(name="swallower", version="1")
def swallower(ctx, input):
    try:
        ctx.sleep(60)
    except:  # noqa: E722 - deliberately wrong: swallows the runtime's Suspend
        pass
    return "should not complete"


@workflow(name="bad_output", version="1")
def bad_output(ctx, input):
    return ctx.step("nan", lambda: {"x": float("nan")})


@workflow(name="any_input", version="1", input_object=False)
def any_input(ctx, input):
    return input
