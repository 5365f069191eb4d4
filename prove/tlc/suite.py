"""One invocation of the suite: running every check of a profile, what makes it fail, and its
rows (measured vs predicted, assumption toggles, broken configs) as results/runtime_tlc.json."""

from __future__ import annotations

import dataclasses
import datetime as _dt
import os
import platform
import re
import shlex
import shutil
import time
from collections.abc import Callable
from typing import Any

from prove.tlc.checks import CheckResult, build_checks, effective_cfg, filter_witnesses, quick_overrides, run_check
from prove.tlc.diagnoses import ASSUMPTION_NOTES, BASELINE_NOTES, agreement, diagnose, summarize
from prove.tlc.plan import (
    BROKEN,
    BROKEN_SOURCE,
    FINDINGS_TRACES,
    LABEL,
    LIVENESS,
    MODES,
    NOT_APPLICABLE,
    PREDICTION,
    SAFETY,
    TEMPORAL_NOTES,
    TIER_TEXT,
    TIERS,
    WORK_DIR,
)
from prove.tlc.tool import TraceStep, find_jar, find_java, java_version

# ---------------------------------------------------------------------------------------------
# Running the suite and publishing


@dataclasses.dataclass
class Suite:
    """Everything one invocation measured."""

    profile: str
    command: str
    started: str
    wall_s: float
    tlc_version: str
    java: str
    java_version: str
    jar: str
    host: str
    results: list[CheckResult]


def run_suite(quick: bool, only: str | None = None, log: Callable[[str], None] = lambda s: None) -> Suite:
    """Run every check of the profile (optionally only ids containing ``only``)."""
    java = find_java()
    jar = find_jar()
    started = _dt.datetime.now(_dt.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
    t0 = time.monotonic()
    results = []
    version = ""
    for check in build_checks(quick):
        if only and only not in check.id:
            continue
        if quick:
            check.overrides = {**quick_overrides(check), **check.overrides}
        filter_witnesses(check, effective_cfg(check)["constants"])
        result = run_check(check, java, jar, log=log)
        results.append(result)
        for run in result.runs:
            version = version or run.version
    if not os.environ.get("TLC_KEEP_WORK"):
        shutil.rmtree(WORK_DIR / "work" / str(os.getpid()), ignore_errors=True)
    cpu = os.cpu_count() or 0
    host = f"{platform.system()} {platform.machine()}, {cpu} cores"
    return Suite(
        profile="quick" if quick else "full",
        command="",
        started=started,
        wall_s=time.monotonic() - t0,
        tlc_version=version,
        java=java,
        java_version=java_version(java),
        jar=str(jar),
        host=host,
        results=results,
    )


def failures(suite: Suite) -> list[str]:
    """What makes the suite fail: a broken config that stops failing on a named invariant, an
    interlock (or Signals, Slots, control or liveness) check that stops holding, a witness that
    becomes unreachable, or TLC errors."""
    out = []
    for r in suite.results:
        c = r.check
        for name in c.must_violate:
            if r.outcome.get(name) != "V":
                out.append(f"{c.id}: {name} must be violated, measured {r.outcome.get(name)}")
        for name in c.must_hold:
            if r.outcome.get(name) != "hold":
                out.append(f"{c.id}: {name} must hold, measured {r.outcome.get(name)}")
        for e in r.errors:
            out.append(f"{c.id}: TLC error: {e}")
    return out


def _merge(a: str | None, b: str) -> str:
    order = {"error": 3, "V": 2, "hold": 1, "n/a": 0}
    return b if a is None or order[b] > order[a] else a


def _matrix(suite: Suite) -> dict[str, dict[str, dict[str, str]]]:
    m: dict[str, dict[str, dict[str, str]]] = {mode: {} for mode in MODES}
    for r in suite.results:
        c = r.check
        if c.kind in ("mode", "liveness") and c.mode:
            row = m[c.mode]
            for name, outcome in r.outcome.items():
                cell = row.setdefault(name, {})
                cell[c.tier] = _merge(cell.get(c.tier), outcome)
    for mode in MODES[1:]:
        for name in NOT_APPLICABLE:
            m[mode].setdefault(name, {t: "n/a" for t in TIERS})
    return m


def _all_traces(suite: Suite, mode: str, name: str) -> dict[str, list[TraceStep]]:
    """Every trace of a mode's invariant, keyed "tier/group" (group "-" when not split)."""
    out: dict[str, list[TraceStep]] = {}
    for r in suite.results:
        if r.check.mode == mode and r.check.kind in ("mode", "liveness") and name in r.traces:
            out[f"{r.check.tier}/{r.check.group or '-'}"] = r.traces[name]
    return out


def _traces(suite: Suite, mode: str, name: str) -> dict[str, list[TraceStep]]:
    """The shortest trace per tier of a mode's invariant, over the event groups."""
    out: dict[str, list[TraceStep]] = {}
    for r in suite.results:
        if r.check.mode == mode and r.check.kind in ("mode", "liveness") and name in r.traces:
            t = r.traces[name]
            if r.check.tier not in out or len(t) < len(out[r.check.tier]):
                out[r.check.tier] = t
    return out


def summary_rows(suite: Suite) -> list[dict[str, Any]]:
    """Per mode and invariant: per-tier outcomes, summary, prediction, agreement, diagnosis."""
    rows = []
    m = _matrix(suite)
    for name in SAFETY + LIVENESS:
        for i, mode in enumerate(MODES):
            per_tier = m[mode].get(name, {})
            traces = _all_traces(suite, mode, name)
            pred = PREDICTION.get(name, (None, None, None))[i]
            measured = summarize(per_tier)
            agree = agreement(pred, per_tier, traces)
            note = ""
            if mode != "interlock" and name in TEMPORAL_NOTES and measured == "hold":
                note = TEMPORAL_NOTES[name]
            if mode != "interlock" and name in NOT_APPLICABLE:
                note = NOT_APPLICABLE[name]
            rows.append(
                {
                    "invariant": name,
                    "mode": mode,
                    "per_tier": per_tier,
                    "measured": measured,
                    "predicted": pred,
                    "agreement": agree,
                    "note": note,
                    "diagnosis": diagnose(mode, name, measured, agree)
                    if agree in ("disagrees", "partly", "error")
                    else "",
                }
            )
    return rows


def _steps_json(steps: list[TraceStep]) -> list[dict[str, Any]]:
    return [
        {
            "n": s.number,
            "action": s.action,
            "label": s.label,
            "changes": s.changes,
            **({"back_to": s.back_to} if s.back_to else {}),
        }
        for s in steps
    ]


def _shortest(traces: dict[str, list[TraceStep]]) -> tuple[str, list[TraceStep]] | None:
    if not traces:
        return None
    tier = min(traces, key=lambda t: (len(traces[t]), list(TIERS).index(t)))
    return tier, traces[tier]


def normal_labels(steps: list[TraceStep]) -> list[str]:
    """A trace's step labels with the workers renamed w1, w2, ... in order of appearance."""
    rename: dict[str, str] = {}
    normal = []
    for lab in (s.label for s in steps):
        w = re.search(r"\((w\d+)\)", lab)
        if w:
            rename.setdefault(w.group(1), f"w{len(rename) + 1}")
            lab = lab.replace(w.group(0), f"({rename[w.group(1)]})")
        normal.append(lab)
    return normal


def findings_match(name: str, steps: list[TraceStep]) -> tuple[bool, str]:
    """Whether a broken config's trace reproduces the finding's trace of the same name."""
    kind, expected = FINDINGS_TRACES[name]
    if kind == "exact":
        normal = normal_labels(steps)
        ok = normal == expected
        return ok, (
            "the same 11 steps as the findings trace (workers named in order of appearance)"
            if ok
            else "differs from the findings trace: " + " ; ".join(normal)
        )
    actions = [s.action for s in steps]
    it = iter(actions)
    ok = all(any(a == e for a in it) for e in expected)
    return ok, (
        "contains the findings trace's key steps in order: " + ", ".join(expected)
        if ok
        else "does not contain the findings trace's key steps in order"
    )


def _toggle_adds_nothing(suite: Suite, toggle: str, mode: str, name: str) -> bool:
    """Whether every counterexample of a toggle row is one the mode's own safety checks found
    at the same tier without the toggle (same steps, workers renamed)."""
    found = False
    for r in suite.results:
        c = r.check
        if c.kind == "assumption" and c.title == toggle and c.mode == mode and name in r.traces:
            own = [
                normal_labels(x.traces[name])
                for x in suite.results
                if x.check.kind == "mode" and x.check.mode == mode and x.check.tier == c.tier and name in x.traces
            ]
            if normal_labels(r.traces[name]) not in own:
                return False
            found = True
    return found


def assumption_rows(suite: Suite) -> list[dict[str, Any]]:
    """Per toggle, mode and invariant of the assumption checks: outcomes and the comparison."""
    amat: dict[tuple[str, str, str], dict[str, str]] = {}
    for r in suite.results:
        if r.check.kind == "assumption":
            for name, o in r.outcome.items():
                amat.setdefault((r.check.title, r.check.mode, name), {})[r.check.tier] = o
    rows = []
    for (toggle, mode, name), per in amat.items():
        meas = summarize(per)
        pred = {"EffectAtMostOnceTier12": "V@t2", "Witness_LateAfterDuplicate": "V"}.get(name)
        ok = agreement(pred, per, {}) if pred else "not predicted"
        text = ""
        note = ASSUMPTION_NOTES.get((toggle, mode, name))
        if (toggle, mode, name) in BASELINE_NOTES and _toggle_adds_nothing(suite, toggle, mode, name):
            note = BASELINE_NOTES[(toggle, mode, name)]
        if ok in ("disagrees", "partly", "error"):
            text = diagnose(f"{toggle}/{mode}", name, meas, ok)
        elif note and note[0] == meas:
            text = note[1]
        rows.append(
            {
                "toggle": toggle,
                "mode": mode,
                "invariant": name,
                "per_tier": per,
                "measured": meas,
                "predicted": pred,
                "agreement": ok,
                "diagnosis": text,
            }
        )
    return rows


def suite_json(suite: Suite) -> dict[str, Any]:
    """The JSON document results/runtime_tlc.json holds (the Prove harness reads it)."""
    rows = summary_rows(suite)
    checks = []
    counterexamples = []
    for r in suite.results:
        c = r.check
        checks.append(
            {
                "id": c.id,
                "kind": c.kind,
                "module": c.module,
                "config": f"spec/{c.cfg}",
                "mode": c.mode,
                "tier": c.tier,
                "overrides": c.overrides,
                "constants": r.constants,
                "invariants": c.invariants,
                "properties": c.properties,
                "must_violate": c.must_violate,
                "must_hold": c.must_hold,
                "outcome": r.outcome,
                "distinct_states": r.distinct,
                "diameter": r.depth,
                "wall_s": round(r.wall_s, 2),
                "tlc_runs": [
                    {
                        "command": shlex.join(run.command),
                        "wall_s": round(run.wall_s, 2),
                        "violated": run.violated,
                        "distinct_states": run.distinct,
                        "generated_states": run.generated,
                        "depth": run.depth,
                        "completed": run.completed,
                        "errors": run.errors,
                    }
                    for run in r.runs
                ],
                "errors": r.errors,
            }
        )
        for name, steps in r.traces.items():
            counterexamples.append(
                {
                    "check": c.id,
                    "kind": c.kind,
                    "mode": c.mode,
                    "tier": c.tier,
                    "invariant": name,
                    "states": len(steps),
                    "steps": _steps_json(steps),
                }
            )
    broken = []
    for r in suite.results:
        if r.check.kind == "broken":
            name = r.check.title
            entry = {
                "config": f"spec/{r.check.cfg}",
                "name": name,
                "source": BROKEN_SOURCE.get(name, "predicted design mistake"),
                "must_violate": r.check.must_violate,
                "outcome": {k: r.outcome.get(k) for k in r.check.must_violate},
                "trace_states": {k: len(r.traces[k]) for k in r.traces},
            }
            if name in FINDINGS_TRACES and name in BROKEN and BROKEN[name][0] in r.traces:
                ok, text = findings_match(name, r.traces[BROKEN[name][0]])
                entry["reproduces_findings_trace"] = ok
                entry["findings_comparison"] = text
            broken.append(entry)
    return {
        "label": LABEL,
        "profile": suite.profile,
        "command": suite.command,
        "started": suite.started,
        "wall_s": round(suite.wall_s, 1),
        "tlc_version": suite.tlc_version,
        "java_version": suite.java_version,
        "jar": suite.jar,
        "host": suite.host,
        "tiers": {t: TIER_TEXT[t] for t in TIERS},
        "summary": rows,
        "assumptions": assumption_rows(suite),
        "broken": broken,
        "checks": checks,
        "counterexamples": counterexamples,
        "failures": failures(suite),
    }
