"""Workflows used by the tests. Step bodies log each invocation to public.test_invocations over
their own direct connection (ILR_TEST_DIRECT_DSN when set, so a fault proxy on the worker's
path does not hide them), which is how tests count body executions."""

from __future__ import annotations

import os

from ilr import Cancelled, RetryPolicy, SignalTimeout, workflow
from ilr import _db as db
from ilr._context.context import ChildFailed, ChildTimeout


def invoke(workflow_id: str, name: str) -> int:
    """Log one body execution; return how many times this (workflow, name) body has run."""
    with db.connect(os.environ.get("ILR_TEST_DIRECT_DSN") or db.conninfo()) as conn:
        conn.execute(
            "insert into public.test_invocations (workflow_id, name, pid) values (%s, %s, %s)",
            (workflow_id, name, os.getpid()),
        )
        return conn.execute(
            "select count(*) as n from public.test_invocations where workflow_id = %s and name = %s",
            (workflow_id, name),
        ).fetchone()["n"]


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
    try:
        payload = ctx.wait_signal("approve", timeout=input.get("timeout"))
    except SignalTimeout:
        payload = None
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


@workflow(name="effect_bad_input", version="1")
def effect_bad_input(ctx, input):
    """ctx.effect with one bad argument (input["bad"]): InvalidInput before any transaction."""
    from demo.peers.targets_client import LocalRefunds

    kwargs = {"payload": {"payment": "p", "amount": 1}}
    kwargs.update(
        {
            "decision": {"decision": {"workflow_id": "w", "seq": (1, 2)}},
            "payload_size": {"payload": {"payment": "p", "amount": 1, "note": "x" * 1_100_000}},
            "premises_size": {"premises": {"note": "x" * 1_100_000}},
            "amount": {"payload": {"payment": "p", "amount": 2**63}},
        }[input["bad"]]
    )
    return ctx.effect(LocalRefunds("http://127.0.0.1:9"), key="bad-input", **kwargs).status


@workflow(name="approval_bad_input", version="1")
def approval_bad_input(ctx, input):
    """ctx.request_approval with one bad argument (input["bad"]): InvalidInput, nothing written."""
    from demo.peers.targets_client import LocalRefunds

    target = LocalRefunds("http://127.0.0.1:9")
    kwargs = {"target": target, "premises": {"payment": "p"}, "decision": None}
    kwargs.update(
        {
            "target_none": {"target": None},
            "target_no_apply": {"target": type("NoApply", (), {"tier": 1})()},
            "target_unregistered": {"target": "no-such-target"},
            "premises_list": {"premises": [1]},
            "premises_callable_list": {"premises": lambda: [1]},
            "decision_str": {"decision": "nope"},
            # Another case's decide step: its model and reasoning would show on this card.
            "decision_foreign": {"decision": {"workflow_id": "another-case", "seq": 1}},
        }[input["bad"]]
    )
    approval = ctx.request_approval(
        kwargs.pop("target"), "bad-approval", {"payment": "p", "amount": 1}, summary="bad input", **kwargs
    )
    return approval is None


@workflow(name="refund_catching_cancel", version="1")
def refund_catching_cancel(ctx, input):
    """One tier-1 refund under input["grant_id"]; a Cancelled delivered at the effect is caught and
    the workflow completes ("compensated"), whatever became of the effect."""
    from demo.workflows import target_for

    try:
        return ctx.effect(
            target_for(input),
            key=f"catch:{ctx.workflow_id}",
            payload={"payment": input["payment"], "amount": 500},
            premises={"payment": input["payment"]},
            grant=input["grant_id"],
        ).status
    except Cancelled:
        return "compensated"


@workflow(name="any_input", version="1", input_object=False)
def any_input(ctx, input):
    return input


# -- versioning, children, continue-as-new (issue 5, docs/protocol.md §4, §5.3) ------------------


@workflow(name="pinned", version="1")
def pinned_v1(ctx, input):
    ctx.step("a", invoke, ctx.workflow_id, "a")
    ctx.sleep(input.get("seconds", 0))
    return {"version": "1"}


@workflow(name="pinned", version="2")
def pinned_v2(ctx, input):
    ctx.step("a", invoke, ctx.workflow_id, "a")
    ctx.sleep(input.get("seconds", 0))
    return {"version": "2"}


def nap(workflow_id: str, seconds: float) -> float:
    import time

    invoke(workflow_id, "nap")
    time.sleep(seconds)
    return seconds


@workflow(name="slow", version="1")
def slow(ctx, input):
    return ctx.step("nap", nap, ctx.workflow_id, input.get("seconds", 3))


@workflow(name="patch_twice", version="1")
def patch_twice(ctx, input):
    ctx.patched("dup")
    ctx.step("between", invoke, ctx.workflow_id, "between")
    ctx.patched("dup")  # the same patch id at a second place: InvalidInput
    return "unreachable"


class Boom(Exception):
    pass


def boom(workflow_id: str) -> None:
    invoke(workflow_id, "boom")
    raise Boom("the child's step failed for good")


@workflow(name="child_ok", version="1")
def child_ok(ctx, input):
    ctx.sleep(input.get("seconds", 0))
    runs = ctx.step("work", invoke, ctx.workflow_id, "work")
    if input.get("fail"):
        ctx.step("boom", boom, ctx.workflow_id, retry=RetryPolicy(max_attempts=1))
    return {"doubled": input.get("x", 0) * 2, "runs": runs}


@workflow(name="parent", version="1")
def parent(ctx, input):
    kid = ctx.child(
        input.get("child_name", "child_ok"),
        input.get("child", {}),
        id=input.get("child_id"),
        parent_close_policy=input.get("policy", "request_cancel"),
    )
    try:
        out = ctx.wait_child(kid, timeout=input.get("timeout"))
    except ChildFailed as exc:
        if not input.get("catch"):
            raise
        return {"child": kid, "failed": exc.status, "error_type": (exc.error or {}).get("type")}
    except ChildTimeout as exc:
        if input.get("fail_on_timeout"):
            raise
        return {"child": kid, "timeout": True, "waited_on": exc.child_id}
    return {"child": kid, "result": out}


@workflow(name="parent_continues", version="1")
def parent_continues(ctx, input):
    """The first run starts a sleeping child (input "policy") and continues as new; the next run
    waits on a signal "done"."""
    if not input.get("n"):
        ctx.child("child_ok", {"seconds": 3600}, parent_close_policy=input.get("policy", "request_cancel"))
        ctx.continue_as_new({**input, "n": 1})
    return ctx.wait_signal("done")


@workflow(name="counter", version="1")
def counter(ctx, input):
    n = input.get("n", 0)
    if input.get("seconds") and n >= input.get("sleep_from", 0):
        ctx.sleep(input["seconds"])
    ctx.step("count", invoke, ctx.workflow_id, "count")
    if n < input.get("until", 3):
        ctx.continue_as_new({**input, "n": n + 1})
    return {"n": n, "id": ctx.workflow_id}


# -- a payload read live, not through a step (issue 19: the resend carries the bound payload) ------


@workflow(name="live_amount", version="1")
def live_amount(ctx, input):
    """One tier-1 refund whose amount is read from input["amount_file"] on every run, outside any
    step, so a replay can offer another payload under the same key. Returns the EffectResult's
    status and effect id."""
    from pathlib import Path

    from demo.workflows import target_for

    amount = int(Path(input["amount_file"]).read_text())
    r = ctx.effect(
        target_for(input),
        key=f"live:{ctx.workflow_id}",
        payload={"payment": input["payment"], "amount": amount},
        grant=input["grant_id"],
    )
    return {"status": r.status, "effect_id": r.effect_id}


# -- a null signal payload against a signal wait's timeout -----------------------------------------


def echo(value):
    """A step body returning its argument: records what the first run saw."""
    return value


@workflow(name="wake_waiter", version="1")
def wake_waiter(ctx, input):
    """Wait on "wake" (input["timeout"], default 30 s): a payload, None included, is the signal
    branch; SignalTimeout is the timeout branch. Records that view in step "seen", then waits on
    "go" forever, so the run that returns replays the "wake" wait from the steps table. Returns
    {"seen": first run's view, "replayed": the returning run's view}."""
    try:
        payload = ctx.wait_signal("wake", timeout=input.get("timeout", 30))
        got = {"branch": "signal", "payload": payload}
    except SignalTimeout as exc:
        got = {"branch": "timeout", "name": exc.name, "timeout": exc.timeout}
    seen = ctx.step("seen", echo, got)
    ctx.wait_signal("go")
    return {"seen": seen, "replayed": got}


def wait_for_file(path: str) -> str:
    """A step body that waits (no database use) until ``path`` exists; returns the path."""
    import time

    while not os.path.exists(path):
        time.sleep(0.05)
    return path


@workflow(name="busy_then_wait", version="1")
def busy_then_wait(ctx, input):
    """Plain code (no durable call) that blocks until the file input["path"] exists, then a wait
    on "go" forever: a cancel that lands while it blocks meets no fenced write before the
    suspend."""
    wait_for_file(input["path"])
    return ctx.wait_signal("go")


@workflow(name="gated", version="1")
def gated(ctx, input):
    """One step whose body returns once the file input["path"] exists: the test decides when the
    step ends (e.g. after a database restart under it)."""
    return ctx.step("gate", wait_for_file, input["path"])


@workflow(name="swallow_unless_fixed", version="1")
def swallow_unless_fixed(ctx, input):
    """Records "before", then sleeps input["seconds"] (default 0.5): under ILR_TEST_FIXED=1 a
    plain durable sleep; otherwise the sleep sits in a bare except, so the runtime marks the
    workflow stuck ("Suspend swallowed"). Then records "after". Returns "fixed"."""
    ctx.step("before", invoke, ctx.workflow_id, "before")
    if os.environ.get("ILR_TEST_FIXED") == "1":
        ctx.sleep(input.get("seconds", 0.5))
    else:
        try:
            ctx.sleep(input.get("seconds", 0.5))
        except:  # noqa: E722 - deliberately wrong: swallows the runtime's Suspend
            pass
    ctx.step("after", invoke, ctx.workflow_id, "after")
    return "fixed"


def explode(message: str) -> None:
    """A step body that always raises ValueError(message)."""
    raise ValueError(message)


@workflow(name="always_fails", version="1")
def always_fails(ctx, input):
    """One step that raises ValueError(input["message"], default "boom") on every attempt, under
    the default unlimited retries with a short backoff (0.2 s, capped at 0.5 s)."""
    return ctx.step("explode", explode, input.get("message", "boom"), retry=RetryPolicy(initial=0.2, max_interval=0.5))


@workflow(name="asks_approval", version="1")
def asks_approval(ctx, input):
    """Request approval of one refund (input: url, payment, amount, key, timeout, two_person_cents,
    action, amount_field, payload, summary), then send it under the approval's grant and premises."""
    from demo.peers.targets_client import LocalRefunds

    target = LocalRefunds(input["url"], tier=1, queryable=True, send_timeout=2.0, settle_margin=2.0)
    if input.get("two_person_cents") is not None:
        target.two_person_cents = input["two_person_cents"]
    if input.get("action"):
        target.action = input["action"]  # what the effect asks the grant to cover, and the request
    if input.get("amount_field"):
        target.amount_field = input["amount_field"]  # the payload key the money rules read
    # "payload": the exact payload to ask for (the amount under amount_field, other keys as given).
    payload = input.get("payload") or {"payment": input["payment"], "amount": input["amount"]}
    approval = ctx.request_approval(
        target,
        input["key"],
        payload,
        premises=lambda: target.capture(input["payment"]),
        summary=input.get("summary") or f"Refund {input.get('amount')} cents",
        timeout=input.get("timeout", 60),
    )
    if approval is None:
        out = ctx.last_approval
        return {"status": out["status"], "by": out["decided_by"], "reason": out["reason"]}
    r = ctx.effect(
        target, key=input["key"], payload=approval.payload, premises=approval.facts_seen, grant=approval.grant_id
    )
    return {"status": r.status, "approved_by": list(approval.approved_by), "effect_id": r.effect_id}


# -- agents (ilr.agents): the agent_refund workflow and its Agent, shared with agents_report ----------

from demo.agent_refund import agent_prompt, agent_refund, refund_agent  # noqa: E402, F401 - registers agent_refund


@workflow(name="keyed_refund", version="1")
def keyed_refund(ctx, input):
    """One refund under a key the caller picks and a policy grant (input: url, payment, amount,
    key, grant); two workflows given one key share one effect id. Returns the EffectResult's
    status, effect_id and result (a refusal's reason when it is recorded on this step only)."""
    from demo.peers.targets_client import LocalRefunds

    target = LocalRefunds(input["url"], tier=1, queryable=True, send_timeout=2.0, settle_margin=2.0)
    payload = {"payment": input["payment"], "amount": input["amount"]}
    r = ctx.effect(target, key=input["key"], payload=payload, grant=input["grant"])
    return {"status": r.status, "effect_id": r.effect_id, "result": r.result}


def raise_deep(message: str) -> None:
    """Raises RuntimeError(message): the function a failed workflow's traceback must name."""
    raise RuntimeError(message)


@workflow(name="fails_with_traceback", version="1")
def fails_with_traceback(ctx, input):
    """Workflow code (no step, so no retry) raises RuntimeError(input["message"]) from raise_deep:
    the workflow fails at once."""
    return raise_deep(input.get("message", "kaboom"))


class HugeAnswer:
    """An in-process tier-1 target whose answer is ``size`` bytes of text beside its reference:
    what a target that echoes a whole document back looks like."""

    tier = 1
    name = "huge-answer"

    def __init__(self, size: int):
        self.size = size

    def apply(self, effect_id, payload):
        return {"id": f"ref_{effect_id[:8]}", "status": "ok", "echo": "x" * self.size}


@workflow(name="huge_answer", version="1")
def huge_answer(ctx, input):
    """One effect against HugeAnswer(input["size"]) under policy grant input["grant"]; returns
    the status, effect id and the answer as the workflow sees it."""
    r = ctx.effect(HugeAnswer(input["size"]), key="huge", payload={"amount": 1}, grant=input["grant"])
    return {"status": r.status, "effect_id": r.effect_id, "result": r.result}


@workflow(name="credit_server", version="1")
def credit_server(ctx, input):
    """Serves "credit" signals, one per run, continuing as new until ``expect`` are summed."""
    got = ctx.wait_signal("credit")
    total, n = input.get("total", 0) + got["amount"], input.get("n", 0) + 1
    if n < input["expect"]:
        ctx.continue_as_new({"total": total, "n": n, "expect": input["expect"]})
    return {"total": total, "runs": n}


# -- agents in Pydantic AI (ilr.contrib.pydantic_ai): the pyd_refund workflow ---------------------

import demo.agent_pydantic_ai  # noqa: E402, F401 - registers pyd_refund
