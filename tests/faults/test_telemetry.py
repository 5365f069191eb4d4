"""Telemetry (issue 46): the spans of a gated refund across a real SIGKILL, read from the real
OpenTelemetry SDK of each worker (ILR_TELEMETRY's spans_file: every finished span as a JSON line,
written before the span's end returns), and the test's own SDK for the caller's spans."""

from __future__ import annotations

import json
import signal
from collections import Counter

import pytest
from opentelemetry import trace

from ilr._telemetry import ids
from tests.support.refund_harness import our_refunds, refund_env, wait_for_request
from tests.support.waits import wait_for


@pytest.fixture
def caller_spans():
    """This process's SDK (the code that calls rt.start and approves): its finished spans, in memory."""
    from ilr._telemetry import hooks, setup

    setup.configure({"prometheus": True, "spans_memory": True})  # as test_prometheus does: one meter per process
    setup.memory_spans().clear()

    class Flushed:
        def get_finished_spans(self):
            return setup.memory_spans().get_finished_spans()  # the batch processor's queue flushed first

    yield Flushed()
    hooks.on = False  # the rest of the session runs with telemetry off, as configured


def read_spans(path) -> list[dict]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def hex_id(value: int, width: int) -> str:
    return f"0x{value:0{width}x}"


def test_spans_of_a_gated_refund_across_a_sigkill_are_parent_linked_and_never_repeated(
    rt, workers, tmp_path, caller_spans
):
    """Worker A decides, asks for approval, is approved, dispatches and sends, and is SIGKILLed
    right after the send; worker B recovers the effect and finishes. Every span either worker
    exported is in the trace of the request that started it, has an id of its own, and names its
    parent: the workflow span is a child of rt.start's span (the start's trace context is kept on
    the workflow's row), the decide answered from the history on B's claim emits nothing, and the
    approval's span links to the approver's request span."""
    spans_file = tmp_path / "spans.jsonl"
    telemetry = json.dumps({"spans_file": str(spans_file)})
    tracer = trace.get_tracer("tests.telemetry")
    wf = "tr-refund"
    with refund_env(tmp_path, tier=1) as env:
        a = workers.start(
            "A", lease_ttl=2, env=env.worker_env(ILR_TELEMETRY=telemetry, ILR_KILL_AT="effect_after_send")
        )
        case = env.case(wf)
        with tracer.start_as_current_span("POST /refunds") as start_request:
            rt.start("refund", wf, case)
        request = wait_for_request(rt, wf)
        with tracer.start_as_current_span("POST /review/requests/approve") as approver_request:
            rt.approve_request(request["id"], by="alice")
        a.wait(30)
        assert a.returncode == -signal.SIGKILL, workers.log("A")
        workers.start("B", lease_ttl=2, env=env.worker_env(ILR_TELEMETRY=telemetry))
        result = rt.result(wf, timeout=60)
        assert result["status"].startswith("COMMITTED"), result
        assert len(our_refunds(env, case)) == 1

    # B ends the workflow, then emits its span: wait for it.
    wait_for(
        lambda: any(s["name"].startswith("interlock.workflow ") for s in read_spans(spans_file)),
        timeout=30,
        message="the workflow span",
    )
    spans = read_spans(spans_file)
    ids_seen = Counter(s["context"]["span_id"] for s in spans)
    assert [i for i, n in ids_seen.items() if n > 1] == [], "a span id was exported twice"
    started = next(s for s in caller_spans.get_finished_spans() if s.name == "interlock.start refund")
    assert started.parent.span_id == start_request.get_span_context().span_id
    trace_id = hex_id(start_request.get_span_context().trace_id, 32)
    assert trace_id != hex_id(ids.trace_id_for(wf), 32)  # the request's trace, not the derived one
    assert {s["context"]["trace_id"] for s in spans} == {trace_id}
    by_id = {s["context"]["span_id"]: s for s in spans}
    names = Counter(s["name"].split(" ")[0] for s in spans)

    workflow = next(s for s in spans if s["name"] == "interlock.workflow refund")
    assert workflow["context"]["span_id"] == hex_id(ids.span_id_for("workflow", wf), 16)
    assert workflow["parent_id"] == hex_id(started.get_span_context().span_id, 16)
    assert workflow["attributes"]["interlock.workflow.outcome"] == "completed"

    runs = [s for s in spans if s["name"] == "interlock.run refund"]
    for run in runs:  # every run is a child of the workflow span, under its deterministic id
        assert run["parent_id"] == workflow["context"]["span_id"]
        assert run["context"]["span_id"] == hex_id(
            ids.span_id_for("run", wf, run["attributes"]["interlock.workflow.epoch"]), 16
        )
    owners = Counter((r["attributes"]["interlock.worker.id"], r["attributes"]["interlock.run.outcome"]) for r in runs)
    assert owners[("A", "suspended")] >= 1 and owners[("B", "completed")] == 1, owners
    b_run = next(r for r in runs if r["attributes"]["interlock.run.outcome"] == "completed")
    a_epochs = {
        r["attributes"]["interlock.workflow.epoch"] for r in runs if r["attributes"]["interlock.worker.id"] == "A"
    }

    # The decide ran once, on A; B answered it from the history and emitted no span for it.
    decides = [s for s in spans if s["name"] == "interlock.decide pick_amount"]
    assert len(decides) == 1
    decided_in = by_id[decides[0]["parent_id"]]
    assert decided_in["name"] == "interlock.run refund" and decided_in["attributes"]["interlock.worker.id"] == "A"

    # The approval: from the ask to the decision, linked to the approver's request span.
    approval = next(s for s in spans if s["name"] == "interlock.approval")
    assert approval["attributes"]["interlock.approval.request_id"] == request["id"]
    assert approval["attributes"]["interlock.approval.outcome"] == "approved"
    assert approval["start_time"] < approval["end_time"]
    link = approval["links"][0]["context"]
    assert link["span_id"] == hex_id(approver_request.get_span_context().span_id, 16)
    assert link["trace_id"] == hex_id(approver_request.get_span_context().trace_id, 32)

    # A settled the approval and sent in one claim, SIGKILLed after the send: that claim's run
    # span and its effect span were still open and died with A. The spans that ended before the
    # kill (the approval, T_dispatch, the send) name them by their deterministic ids.
    a_epoch = approval["attributes"]["interlock.workflow.epoch"]
    assert approval["parent_id"] == hex_id(ids.span_id_for("run", wf, a_epoch), 16)
    assert not any(r["attributes"]["interlock.workflow.epoch"] == a_epoch for r in runs)
    effect_seq = approval["attributes"]["interlock.step.seq"] + 1
    a_effect = hex_id(ids.span_id_for("effect", wf, effect_seq, a_epoch), 16)
    a_phases = sorted(s["name"] for s in spans if s["parent_id"] == a_effect)
    assert a_phases == ["interlock.effect.dispatch", "interlock.effect.send"], a_phases
    assert a_effect not in by_id

    # B's recovery of the open dispatch, under B's effect span, under B's completed run; every
    # effect span B ended names the effect, its tier, payload hash and grant.
    b_effect = next(s for s in spans if s["parent_id"] == b_run["context"]["span_id"])
    assert b_effect["name"] == "interlock.effect effect:local-refunds"
    assert b_effect["attributes"]["interlock.effect.outcome"] == result["status"]
    assert b_effect["attributes"]["interlock.effect.id"] == result["effect_id"]
    for effect in (s for s in spans if s["name"] == "interlock.effect effect:local-refunds"):
        assert effect["attributes"]["interlock.effect.tier"] == 1
        assert effect["attributes"]["interlock.grant.id"]
        assert len(effect["attributes"]["interlock.effect.payload_hash"]) == 64
    recovery = [
        s
        for s in spans
        if s["name"] == "interlock.effect.recovery" and s["parent_id"] == b_effect["context"]["span_id"]
    ]
    assert len(recovery) == 1
    assert all(
        by_id[s["parent_id"]]["name"] == "interlock.effect.recovery"
        for s in spans
        if s["name"] == "interlock.effect.commit"
    )
    assert names["interlock.effect"] == names["interlock.run"] - len(a_epochs)  # one per B claim: A's never ended


def test_the_start_s_trace_reaches_children_successors_and_signals(rt, workers, tmp_path, caller_spans):
    """Workflows started inside a request span: a child with an id of its own, a continue-as-new
    successor and a signal's wait all put their spans in the request's trace. The child's
    workflow span is a child of its parent's; the successor's is a child of the start's span; the
    signal's span (in the sender's trace) links to the workflow span of the run it reached."""
    spans_file = tmp_path / "spans.jsonl"
    workers.start("W", env={"ILR_TELEMETRY": json.dumps({"spans_file": str(spans_file)})})
    tracer = trace.get_tracer("tests.telemetry")
    with tracer.start_as_current_span("POST /batch") as request:
        rt.start("parent", "tr-parent", {"child_id": "tr-own-kid", "child": {"x": 2}})
        rt.start("counter", "tr-counter", {"until": 1})
        rt.start("waiter", "tr-waiter", {})
    wait_for(lambda: rt.describe("tr-waiter")["status"] == "sleeping", timeout=30, message="the waiter's wait")
    with tracer.start_as_current_span("POST /approve") as sender:
        rt.signal("tr-waiter", "approve", {"ok": True})
    for wf in ("tr-parent", "tr-counter", "tr-waiter"):
        rt.result(wf, timeout=60)
    ended = {"interlock.workflow parent", "interlock.workflow child_ok", "interlock.workflow waiter"}
    wait_for(
        lambda: (
            ended <= {s["name"] for s in read_spans(spans_file)}
            and sum(s["name"] == "interlock.workflow counter" for s in read_spans(spans_file)) == 2
        ),
        timeout=30,
        message="the workflow spans",
    )
    spans = read_spans(spans_file)
    trace_id = hex_id(request.get_span_context().trace_id, 32)
    assert {s["context"]["trace_id"] for s in spans} == {trace_id}
    workflow = {
        s["attributes"]["interlock.workflow.id"]: s for s in spans if s["name"].startswith("interlock.workflow ")
    }
    starts = {
        s.attributes["interlock.workflow.id"]: s
        for s in caller_spans.get_finished_spans()
        if s.name.startswith("interlock.start ")
    }
    for wf in ("tr-parent", "tr-counter", "tr-waiter"):
        assert workflow[wf]["parent_id"] == hex_id(starts[wf].get_span_context().span_id, 16), wf
    assert workflow["tr-own-kid"]["parent_id"] == workflow["tr-parent"]["context"]["span_id"]
    # The successor keeps its predecessor's start: a sibling under the same rt.start span.
    assert workflow["tr-counter#1"]["parent_id"] == workflow["tr-counter"]["parent_id"]
    signalled = next(s for s in caller_spans.get_finished_spans() if s.name == "interlock.signal approve")
    assert signalled.parent.span_id == sender.get_span_context().span_id
    (link,) = signalled.links
    assert hex_id(link.context.trace_id, 32) == trace_id
    assert hex_id(link.context.span_id, 16) == workflow["tr-waiter"]["context"]["span_id"]
