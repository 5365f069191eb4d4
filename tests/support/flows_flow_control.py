"""Workflows of the flow-control tests (issue 42): concurrency keys, ctx.lock and queues. Their
step bodies log to public.test_invocations as ``tests.support.flows``' do; the critical ones log
their start and end ("enter", "leave"), which ``tests.support.overlap`` reads."""

from __future__ import annotations

from ilr import Concurrency, RetryPolicy, StepFailed, workflow
from tests.support.flows import invoke

# -- concurrency keys (issue 42) ------------------------------------------------------------------


def critical(workflow_id: str, seconds: float) -> float:
    """A step body whose start and end are logged ("enter", "leave"): the tests check that the
    bodies of one key's workflows never overlap."""
    import time

    invoke(workflow_id, "enter")
    time.sleep(seconds)
    invoke(workflow_id, "leave")
    return seconds


@workflow(name="keyed", version="1", concurrency=Concurrency(key=lambda input: input.get("account"), limit=1))
def keyed(ctx, input):
    """One account's work at a time: two critical steps, optionally a sleep, a signal wait and
    continue-as-new between them (the slot is held through all of them)."""
    ctx.step("first", critical, ctx.workflow_id, input.get("seconds", 0.02))
    if input.get("sleep"):
        ctx.sleep(input["sleep"])
    if input.get("wait_signal"):
        ctx.wait_signal("go")
    ctx.step("second", critical, ctx.workflow_id, input.get("seconds", 0.02))
    n = input.get("n", 0)
    if n < input.get("continue_until", 0):
        ctx.continue_as_new({**input, "n": n + 1})
    return {"account": input.get("account"), "n": n}


@workflow(name="keyed_parent", version="1")
def keyed_parent(ctx, input):
    """Starts a ``keyed`` child and waits on it (a child queues for its key like a start)."""
    kid = ctx.child("keyed", input.get("child", {}))
    return ctx.wait_child(kid)


class InsideBlock(Exception):
    pass


def fail_inside(workflow_id: str) -> None:
    invoke(workflow_id, "fail_inside")
    raise InsideBlock("a step inside the lock block failed for good")


@workflow(name="locked", version="1")
def locked(ctx, input):
    """A critical step inside ``ctx.lock(input["lock"])`` (optionally a sleep, a signal wait, a
    failure and a refund effect inside it too), then a step and a signal wait outside it."""
    from demo.peers.targets_client import LocalRefunds

    outcome = {}
    try:
        with ctx.lock(input["lock"], limit=input.get("limit", 1)):
            ctx.step("inside", critical, ctx.workflow_id, input.get("seconds", 0.02))
            if input.get("sleep"):
                ctx.sleep(input["sleep"])
            if input.get("wait_inside"):
                ctx.wait_signal("go")
            if input.get("fail"):
                ctx.step("boom", fail_inside, ctx.workflow_id, retry=RetryPolicy(max_attempts=1))
            if input.get("grant"):
                target = LocalRefunds(input["url"], tier=1, queryable=True, send_timeout=2.0, settle_margin=2.0)
                payload = {"payment": input["payment"], "amount": input["amount"]}
                r = ctx.effect(target, key=input["key"], payload=payload, grant=input["grant"])
                outcome = {"status": r.status, "result": r.result}
    except StepFailed:
        outcome = {"failed_inside": True}
    ctx.step("outside", invoke, ctx.workflow_id, "outside")
    if input.get("wait_after"):
        ctx.wait_signal("done")
    return outcome


# -- queues (issue 42): ILR_QUEUES comes from the test (settings and the workers' environment) --------

TEST_QUEUES = {
    "two_at_a_time": {"concurrency": 2},
    "three_per_second": {"rate": "3/s"},
    "two_per_second_per_key": {"per_key_rate": "2/s"},
    "one_at_a_time_slow_per_key": {"concurrency": 1, "per_key_rate": "1/4s"},
}
"""The queues the tests below run in (ILR_QUEUES)."""


@workflow(
    name="in_two_at_a_time",
    version="1",
    queue="two_at_a_time",
    concurrency=Concurrency(key=lambda input: input.get("account"), limit=1),
)
def in_two_at_a_time(ctx, input):
    """A critical step in a queue of concurrency 2, under an optional account key."""
    return ctx.step("work", critical, ctx.workflow_id, input.get("seconds", 0.1))


@workflow(name="in_three_per_second", version="1", queue="three_per_second")
def in_three_per_second(ctx, input):
    return ctx.step("work", invoke, ctx.workflow_id, "work")


@workflow(
    name="in_two_per_second_per_key",
    version="1",
    queue="two_per_second_per_key",
    concurrency=Concurrency(key=lambda input: input["account"], limit=10),
)
def in_two_per_second_per_key(ctx, input):
    return ctx.step("work", invoke, ctx.workflow_id, "work")


@workflow(
    name="in_one_slow_per_key",
    version="1",
    queue="one_at_a_time_slow_per_key",
    concurrency=Concurrency(key=lambda input: input["account"], limit=10),
)
def in_one_slow_per_key(ctx, input):
    """A step in a queue of concurrency 1 whose accounts start at most once per 4 seconds each: a
    second start of one account is put off by its key's rate, and must not keep the queue's one
    slot from another account meanwhile."""
    return ctx.step("work", invoke, ctx.workflow_id, "work")
