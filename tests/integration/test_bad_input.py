"""Bad input (issue 2): a clear error naming the field, nothing written, no workflow running."""

from __future__ import annotations

import pytest

from ilr import InvalidInput, UnknownWorkflow, WorkflowNotFound
from ilr._context.context import WorkflowContext
from ilr._errors import WorkflowConflict
from tests.support.db import count_workflows
from tests.support.queries.signals import COUNT_SIGNALS


def _nested(depth: int) -> dict:
    value: dict = {}
    for _ in range(depth):
        value = {"a": value}
    return value


@pytest.mark.parametrize(
    "bad, field",
    [
        ({"x": float("nan")}, "input.x"),
        ({"x": float("inf")}, "input.x"),
        ({"x": {1, 2}}, "input.x"),
        ({"x": b"bytes"}, "input.x"),
        ({"x": ("a", "b")}, "input.x"),
        ({"x": ["ok", "nul\x00inside"]}, "input.x[1]"),
        ({1: "non-str key"}, "input"),
        # What jsonb would not give back as written (exact decimals): the payload hash and a replay
        # would then differ (found by a fresh user: an approval of {"f": 1e16} was refused).
        ({"x": 1e16}, "input.x"),
        ({"x": [-0.0]}, "input.x[0]"),
        ({"x": 10**4000}, "input.x"),
        pytest.param({"x": _nested(300)}, "input.x" + ".a" * 255, id="nested-300"),
    ],
)
def test_input_not_plain_json_is_refused(rt, bad, field):
    with pytest.raises(InvalidInput) as err:
        rt.start("three_steps", "bad", bad)
    assert err.value.field == field
    assert count_workflows(rt) == 0


def test_input_must_be_an_object_where_required(rt):
    with pytest.raises(InvalidInput) as err:
        rt.start("three_steps", "bad", [1, 2])
    assert err.value.field == "input" and "JSON object" in err.value.rule
    assert rt.start("any_input", "fine", [1, 2]) == "fine"  # a workflow may accept any JSON
    assert count_workflows(rt) == 1


def test_oversized_input_is_refused(rt):
    with pytest.raises(InvalidInput) as err:
        rt.start("three_steps", "big", {"blob": "x" * 1_100_000})
    assert err.value.field == "input" and "exceeds" in err.value.rule
    assert count_workflows(rt) == 0


def test_unknown_workflow_name_or_version(rt):
    with pytest.raises(UnknownWorkflow):
        rt.start("no_such_workflow", "x", {})
    with pytest.raises(UnknownWorkflow):
        rt.start("three_steps", "x", {}, version="99")
    assert count_workflows(rt) == 0


@pytest.mark.parametrize("wf_id", ["", "   ", "x" * 201, None, 42])
def test_bad_workflow_ids(rt, wf_id):
    with pytest.raises(InvalidInput) as err:
        rt.start("three_steps", wf_id, {})
    assert err.value.field == "workflow_id"
    assert count_workflows(rt) == 0


def test_id_of_200_characters_is_fine(rt):
    assert rt.start("three_steps", "y" * 200, {}) == "y" * 200


def test_same_id_other_workflow_conflicts(rt):
    rt.start("three_steps", "dup", {})
    with pytest.raises(WorkflowConflict) as err:
        rt.start("sleeper", "dup", {})
    # The field, then the rule, with the owner's name quoted (no article to get wrong).
    assert str(err.value) == "workflow_id: 'dup' already belongs to the workflow 'three_steps', not 'sleeper'"


def test_signal_to_unknown_workflow(rt):
    with pytest.raises(WorkflowNotFound) as err:
        rt.signal("nobody", "approve", {})
    assert "nobody" in str(err.value)
    assert rt.connection().execute(COUNT_SIGNALS).fetchone()["n"] == 0


def test_signal_payload_must_be_plain_json(rt):
    rt.start("waiter", "w", {})
    with pytest.raises(InvalidInput) as err:
        rt.signal("w", "approve", {"bad": float("nan")})
    assert err.value.field == "payload.bad"


def test_cancel_unknown_workflow(rt):
    with pytest.raises(WorkflowNotFound):
        rt.cancel("nobody")


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda ctx: ctx.sleep(-1), "seconds"),
        (lambda ctx: ctx.wait_signal("approve", timeout=-5), "timeout"),
        (lambda ctx: ctx.wait_signal("", timeout=5), "name"),
    ],
)
def test_negative_sleep_or_timeout_is_refused_before_any_write(call, field):
    ctx = WorkflowContext.__new__(WorkflowContext)  # argument checks run before any database use
    with pytest.raises(InvalidInput) as err:
        call(ctx)
    assert err.value.field == field


def test_what_jsonb_keeps_as_written_is_accepted(rt):
    # The edges of the rules above: these read back from jsonb as written.
    fine = {"big": 9999999999999998.0, "small": 5e-324, "zero": 0.0, "int": 10**3999 * 9, "deep": _nested(250)}
    rt.start("any_input", "fine", fine)
    assert rt.describe("fine")["input"] == fine
