"""Workflows of the history-limit tests (docs/protocol.md §5.7): many quick steps, the
history's figures as the code sees them, and the opt-in continue-as-new."""

from __future__ import annotations

from ilr import HistoryLimitExceeded, workflow


def _value(i: int, size: int):
    return {"i": i, "pad": "x" * size} if size else i


def _steps(ctx, input) -> dict:
    """``input["steps"]`` steps (a ``ctx.sleep`` after ``sleep_after`` of them, so that the rest
    run after a replay), each returning the history's figures seen before it; then the figures
    at the end, and the length at which continue-as-new was first suggested."""
    seen, first_suggested = [], None
    size = input.get("size", 0)
    for i in range(input["steps"]):
        if i == input.get("sleep_after"):
            ctx.sleep(input.get("seconds", 0.2))
        if first_suggested is None and ctx.continue_as_new_suggested:
            first_suggested = ctx.history_length
        seen.append(ctx.step("s", lambda i=i, length=ctx.history_length: [length, _value(i, size)])[0])
    return {
        "seen": seen,
        "length": ctx.history_length,
        "bytes": ctx.history_bytes,
        "suggested": ctx.continue_as_new_suggested,
        "first_suggested": first_suggested,
    }


@workflow(name="history_steps", version="1")
def history_steps(ctx, input):
    """Records ``steps`` steps; a HistoryLimitExceeded is caught when ``catch`` (it fails all the same)."""
    if input.get("catch"):
        try:
            return _steps(ctx, input)
        except HistoryLimitExceeded:
            return {"caught": True}
    return _steps(ctx, input)


@workflow(name="history_rollover", version="1", continue_as_new_at_history_limit=True)
def history_rollover(ctx, input):
    """Opted in: at the limit it continues as new with its input; a successor run (its id has
    a "#") records only ``then`` steps and returns its figures and input."""
    if "#" in ctx.workflow_id:
        input = {**input, "steps": input["then"]}
    out = _steps(ctx, input)
    return {"run": ctx.workflow_id, "input": ctx.input, "length": out["length"]}


@workflow(name="history_sum", version="1")
def history_sum(ctx, input):
    """``steps`` steps returning 0, 1, 2 ..., a wait for the signal "go" after ``wait_after`` of
    them (it waits as long as the test needs), the sum at the end."""
    total = 0
    for i in range(input["steps"]):
        if i == input["wait_after"]:
            ctx.wait_signal("go")
        total += ctx.step("s", lambda i=i: i)
    return {"total": total, "length": ctx.history_length}
