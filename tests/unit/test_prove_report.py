"""The Prove report's reading of the runs (prove/report/): the TLC cross-reference per tier case,
runs that reported no outcome, (c) DBOS against (b), the Temporal mode it is predicted as, and
cells whose prediction is "not stated".

The runs are committed shard lines (results/prove_runs/, what --from-shards reads) with their
counts set per case; TLC's results are the committed results/runtime_tlc.json.
"""

from __future__ import annotations

import json

from prove.harness.shards import SHARDS_DIR

_TEMPLATE = json.loads((SHARDS_DIR / "1202043706.jsonl").read_text().splitlines()[0])


def _runs(scenario, variant, tier, system, correct, n=10, no_outcome=0):
    """``n`` shard lines of one cell, the first ``correct`` of them correct and the last
    ``no_outcome`` of them without an outcome."""
    out = []
    for seed in range(1, n + 1):
        ok = seed <= correct
        timed_out = seed > n - no_outcome
        out.append(
            {
                **_TEMPLATE,
                "run_id": f"{scenario}-t{tier}-{system}-s{seed}-x",
                "scenario": scenario,
                "variant": variant,
                "tier": tier,
                "system": system,
                "seed": seed,
                "correct": ok,
                "no_outcome": timed_out,
                "outcome": {"status": "timeout" if timed_out else "COMPLETED"},
            }
        )
    return out


def _build(tmp_path, runs):
    from prove.report import runtime_prove as report

    doc = report.build(
        runs,
        command="pytest",
        seeds=10,
        wall_s=1.0,
        versions={"git": "test"},
        selection={"ci": True},
        out_md=tmp_path / "r.md",
        out_json=tmp_path / "r.json",
        plots=False,
    )
    return doc, (tmp_path / "r.md").read_text()


def _xref(md: str, scenario: str, system: str) -> str:
    [line] = [x for x in md.splitlines() if x.startswith(f"| {scenario} |") and f"| {system} |" in x]
    return line.rsplit("|", 2)[-2].strip()


def test_tlc_agreement_is_read_per_tier_case(tmp_path):
    """(c) failed every S07 run at tier 1, where TLC holds every S07 invariant in (b)'s mode; a
    violation at tier 2 must not make the pooled row read "yes"."""
    runs = []
    for tier in (1, 2, 3):
        runs += _runs("S07", "", tier, "dbos", correct=0)
        runs += _runs("S07", "", tier, "temporal_check", correct=10 if tier < 3 else 0)
    _, md = _build(tmp_path, runs)
    assert _xref(md, "S07", "(c) dbos").startswith("**NO**: see the disagreements above at t1q; yes at t2, t3")
    assert _xref(md, "S07", "(b) temporal_check").startswith("yes at t1q, t3; consistent")


def test_an_invariant_vacuous_at_a_tier_predicts_nothing_there(tmp_path):
    """Pause.cfg checks EffectAtMostOnceTier12 only, which says nothing at tier 3; S13 long's tier-3
    duplicates of (b) agree with the base sweep's Tier3NeverResends violation there, not "NO"."""
    runs = []
    for tier, ok in ((1, 10), (2, 10), (3, 0)):
        runs += _runs("S13", "long", tier, "temporal_check", correct=ok)
    _, md = _build(tmp_path, runs)
    [row] = [x for x in md.splitlines() if x.startswith("| S13 long |") and "(b) temporal_check" in x]
    assert "t3: V (base sweep)" in row and "yes at t3" in row and "NO" not in row, row


def test_runs_without_an_outcome_are_an_availability_failure_in_the_verdict(tmp_path):
    runs = _runs("S07", "", 2, "runtime", correct=10) + _runs("S07", "", 2, "dbos", correct=0, no_outcome=10)
    doc, md = _build(tmp_path, runs)
    [row] = [r for r in doc["rows"] if r["scenario"] == "S07" and r["tier"] == 2]
    assert row["verdict_c"] == "better (its failures: no outcome)"
    assert "not comparable (the failing runs reported no outcome" in _xref(md, "S07", "(c) dbos")


def test_every_cell_where_dbos_measured_otherwise_than_b_is_listed(tmp_path):
    """S13 long tier 3: (b) 0/10 (its prediction says "not stated"), (c) 10/10. The list of (c)
    against (b) names it with its diagnosis; a small difference inside the intervals is named too."""
    runs = _runs("S13", "long", 3, "temporal_check", correct=0) + _runs("S13", "long", 3, "dbos", correct=10)
    runs += _runs("S12", "", 2, "temporal_check", correct=4) + _runs("S12", "", 2, "dbos", correct=2)
    runs += _runs("S01", "", 1, "temporal_check", correct=10) + _runs("S01", "", 1, "dbos", correct=10)
    doc, md = _build(tmp_path, runs)
    listed = {(d["scenario"], d["variant"], d["tier"]): d for d in doc["dbos_vs_b"]}
    assert set(listed) == {("S13", "long", 3), ("S12", "", 2)}
    s13 = listed[("S13", "long", 3)]
    assert s13["apart"] and "DBOS has no attempt timeout" in s13["diagnosis"]
    assert not listed[("S12", "", 2)]["apart"]
    assert "- **S13 long tier 3**: (b) 0/10, (c) 10/10 correct (intervals apart)." in md


def test_a_cell_with_no_predicted_outcome_shows_what_it_measured(tmp_path):
    """S13 long tier 3, (a): the scenario predicts nothing ("not stated"). Its 1/10 must be shown
    against the placeholder reading, not dropped; a stated prediction stays out of that list."""
    runs = _runs("S13", "long", 3, "temporal", correct=1) + _runs("S13", "long", 2, "temporal", correct=0)
    doc, md = _build(tmp_path, runs)
    listed = {(d["scenario"], d["tier"], d["system"]): d for d in doc["unstated"]}
    assert set(listed) == {("S13", 3, "temporal")}
    assert listed[("S13", 3, "temporal")]["not_as_read"] == 1
    assert "- S13 long tier 3, (a) temporal: read as incorrect; measured 1/10 correct;" in md
    assert "duplicates 0 (**1 of 10 runs not as read**)." in md
