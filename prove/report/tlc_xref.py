"""The TLC cross-reference of results/runtime_prove.md: which invariant of results/runtime_tlc.*
predicts each scenario, and what TLC measured for it in the mode that models each system."""

from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path

from prove.report import RESULTS
from prove.report.cells import LABEL

# The invariant of results/runtime_tlc.md that predicts each scenario's outcome.
TLC_MAP = {
    "S01": ["EffectAtMostOnceTier12", "Tier3NeverResends"],
    "S02": ["NoSendOnStalePremise", "RecoveryRechecks"],
    "S03": ["NoSendUnderRevokedGrant", "RecoveryRechecks"],
    "S04": ["EffectAtMostOnceTier12"],
    "S05": ["PayloadBound", "SendRequiresLiveClaim"],
    "S05L": ["StepResultUnique"],
    "S06": ["NoSendOnStalePremise"],
    "S07": ["LeaseMutex", "AtMostOneCommit", "EffectAtMostOnceTier12", "Tier3NeverResends"],
    "S08a": ["LateResultPreserved", "FencedWrites", "NoOverlappingSends"],
    "S08b": ["NoOverlappingSends", "EffectAtMostOnceTier12"],
    "S08c": ["EffectAtMostOnceTier12"],
    "S09": ["Tier3NeverResends", "AmbiguousOnlyWhenUnknowable"],
    "S10": ["TimerNotEarly"],
    "S11": ["SignalExactlyOnceConsumed", "NoLostWakeup"],
    "S12": ["RevokeLinearizable", "NoSendUnderRevokedGrant"],
    "S13": ["NoOverlappingSends", "SendRequiresLiveClaim"],
    "S14": ["VersionPinned", "NonDeterminismLoud"],
}


def load_tlc() -> tuple[str | None, dict | None]:
    md = RESULTS / "runtime_tlc.md"
    js = RESULTS / "runtime_tlc.json"
    text = md.read_text() if md.exists() else None
    data = None
    if js.exists():
        try:
            data = json.loads(js.read_text())
        except ValueError:
            data = None
    return text, data


ASSUMPTION_MAP = {
    ("S08c", ""): ("ServerSlow", ("EffectAtMostOnceTier12", "Tier3NeverResends"), "A2"),
    ("S13", "long"): ("Pause", ("EffectAtMostOnceTier12", "Tier3NeverResends"), "A1"),
}

# TLC has no DBOS mode: (c) is checked against (b)'s, the same pre-send check (scenarios.DBOS_EXPECTED_AS).
TLC_MODES = {
    "runtime": "interlock",
    "temporal": "temporal_idem",
    "temporal_check": "temporal_precheck",
    "dbos": "temporal_precheck",
}


def tlc_outcomes(data) -> dict:
    """{(mode, invariant): {tier: "hold" | "V" | "n/a" | ...}} from results/runtime_tlc.json: its
    ``summary`` rows (the per-mode, per-tier sweep, without the assumption-breaking, broken and
    control configs), plus the Signals model's check for the runtime (mode interlock)."""
    out: dict = {}
    if not isinstance(data, dict):
        return {}
    for row in data.get("summary") or []:
        if isinstance(row, dict) and row.get("invariant") and isinstance(row.get("per_tier"), dict):
            out[(row.get("mode"), row["invariant"])] = dict(row["per_tier"])
    for c in data.get("checks") or []:
        if isinstance(c, dict) and c.get("kind") == "assumption" and c.get("config"):
            stem = Path(str(c["config"])).stem
            for inv, res in (c.get("outcome") or {}).items():
                out.setdefault((f"assumption:{stem}:{c.get('mode')}", inv), {})[c.get("tier")] = res
    for c in data.get("checks") or []:
        if isinstance(c, dict) and c.get("module") == "Signals" and c.get("kind") == "signals":
            for inv, res in (c.get("outcome") or {}).items():
                out.setdefault(("interlock", inv), {"Signals.tla": res})
    return out


def tlc_status(inv: str, mode: str, outcomes: dict, text: str | None) -> str:
    """What results/runtime_tlc.* say about an invariant in one mode."""
    if outcomes:
        per = outcomes.get((mode, inv))
        if not per:
            return "not checked"
        by_word: dict = defaultdict(list)
        for tier in per:
            by_word[{"hold": "holds", "V": "violated"}.get(per[tier], per[tier])].append(str(tier))
        return "; ".join(f"{word} {','.join(tiers)}" for word, tiers in by_word.items())
    if text is not None:
        return "see runtime_tlc.md (json not parsed)" if inv in text else "not named in runtime_tlc.md"
    return "absent"


def _agreement(sid: str, k: int, n: int, tl: dict, tlc_present: bool) -> str:
    """Whether ``k`` of ``n`` measured correct agrees with TLC's statuses ``tl`` (invariant ->
    status) for the scenario."""
    joined = " ".join(tl.values())
    if not tlc_present or "absent" in joined:
        return "unchecked (TLC results absent)"
    if any(key[0] == sid for key in ASSUMPTION_MAP):
        return "see the assumption rows below (this scenario breaks an assumption on purpose)"
    if "n/a" in joined and "holds" not in joined and "violated" not in joined:
        return "not modeled (n/a in TLC)"
    if "violated" in joined:
        return "yes" if k < n else "consistent (the fault did not produce the violating trace)"
    if "holds" in joined and "not checked" not in joined:
        return "yes" if k == n else "**NO**: see the disagreements above"
    return "unchecked"


def xref_rows(doc: dict, tlc_present: bool) -> list[dict[str, str]]:
    """Per scenario of TLC_MAP and system: its invariants, TLC's statuses in the system's mode,
    the measured correct count, and whether they agree."""
    rows = []
    for sid, invs in TLC_MAP.items():
        for system, mode in TLC_MODES.items():
            rs = [c for c in doc["cells"].values() if c["scenario"] == sid and c["system"] == system]
            tl = doc["tlc"][sid][mode]
            if not rs:
                meas, agree = "not run", "-"
            else:
                k = sum(c["correct"] for c in rs)
                n = sum(c["n"] for c in rs)
                meas, agree = f"{k}/{n}", _agreement(sid, k, n, tl, tlc_present)
            rows.append(
                {
                    "sid": sid,
                    "invariants": ", ".join(invs),
                    "system": LABEL[system],
                    "tlc": "; ".join(f"{i}: {st}" for i, st in tl.items()),
                    "measured": meas,
                    "agree": agree,
                }
            )
    return rows


def assumption_rows(doc: dict) -> list[dict[str, str]]:
    """The rows that break an assumption on purpose (ASSUMPTION_MAP), against TLC's config that
    breaks the same one: per system, TLC's per-tier outcome and the measured correct per tier."""
    rows = []
    outcomes = tlc_outcomes(load_tlc()[1])
    for (sid, var), (stem, invs, which) in ASSUMPTION_MAP.items():
        for system, mode in TLC_MODES.items():
            per: dict = {}
            for inv in invs:
                for k, v in outcomes.get((f"assumption:{stem}:{mode}", inv), {}).items():
                    per[k] = "V" if "V" in (v, per.get(k)) else v
            cs = {
                c["tier"]: c
                for c in doc["cells"].values()
                if c["scenario"] == sid and c["variant"] == var and c["system"] == system
            }
            if not cs:
                continue
            verdicts = []
            for t in sorted(cs):
                tl = [v for k, v in per.items() if str(k).startswith(f"t{t}")]
                if not tl:
                    continue
                ok = cs[t]["correct"] == cs[t]["n"]
                if all(v == "hold" for v in tl):
                    verdicts.append("yes" if ok else f"NO at t{t} (see the notes above)")
                else:
                    verdicts.append("yes" if not ok else f"consistent at t{t} (trace not produced)")
            rows.append(
                {
                    "sid": sid,
                    "variant": var,
                    "stem": stem,
                    "which": which,
                    "system": LABEL[system],
                    "invariant": " or ".join(invs),
                    "tlc": "; ".join(f"{k}: {v}" for k, v in per.items()) or "not checked",
                    "measured": ", ".join(f"t{t} {cs[t]['correct']}/{cs[t]['n']}" for t in sorted(cs)),
                    "agree": ", ".join(dict.fromkeys(verdicts)) or "unchecked",
                }
            )
    return rows
