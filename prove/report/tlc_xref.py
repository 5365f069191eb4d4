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
    # Keys pruned: EffectAtMostOnceTier12 is vacuous at t1n past the window by its formula, and
    # Tier3NeverResends' tier-1 clause (no resend past the window without lookup) is the one that speaks.
    "S04": ["EffectAtMostOnceTier12", "Tier3NeverResends"],
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


# Tiers where an invariant is vacuous by its own formula (spec/Runtime.tla): it says nothing there,
# so its "hold" predicts nothing about a run at that tier.
VACUOUS = {"EffectAtMostOnceTier12": {"t3"}, "Tier3NeverResends": {"t1q", "t2"}}


def tier_case(sid: str, variant: str, tier: int) -> str:
    """TLC's tier case for a run of the scenario at ``tier``: t1q / t1n (tier 1 with or without
    lookup, from the scenario's ``queryable``), t2, t3."""
    from prove.harness.scenarios import SCENARIOS

    if tier != 1:
        return f"t{tier}"
    sc = next((x for x in SCENARIOS if x.id == sid and x.variant == variant), None)
    return "t1q" if sc is None or sc.queryable else "t1n"


def tier_statuses(invs, mode: str, case: str, outcomes: dict) -> list[str]:
    """TLC's outcomes ("hold", "V", "n/a") of the invariants ``invs`` in ``mode`` at the tier case,
    leaving out an invariant vacuous there and one TLC did not check in that mode."""
    out = []
    for inv in invs:
        if case in VACUOUS.get(inv, ()):
            continue
        per = outcomes.get((mode, inv)) or {}
        st = per.get(case, per.get("Signals.tla"))
        if st is not None:
            out.append(st)
    return out


def _one_tier(statuses: list[str], k: int, n: int, no_outcome: int = 0) -> str:
    """One tier case: TLC's ``statuses`` against ``k`` of ``n`` runs correct, of whose failures
    ``no_outcome`` reported no outcome in time (an availability failure, not a violating trace)."""
    if not statuses or all(st == "n/a" for st in statuses):
        return "not modeled"
    if "V" in statuses:
        if k == n:
            return "consistent (the fault did not produce the violating trace)"
        if no_outcome == n - k:
            return "not comparable (the failing runs reported no outcome: availability, not the violating trace)"
        return "yes"
    if all(st in ("hold", "n/a") for st in statuses):
        return "yes" if k == n else "**NO**: see the disagreements above"
    return "unchecked"


def _agreement(sid: str, mode: str, cells: list[dict], outcomes: dict, tlc_present: bool) -> str:
    """Whether the measured cells of one scenario and system agree with TLC, tier case by tier
    case: a violation at the case agrees with any failure there, a hold (of the invariants not
    vacuous at the case) agrees only with every run correct."""
    if not tlc_present or not outcomes:
        return "unchecked (TLC results absent)"
    if any(key[0] == sid for key in ASSUMPTION_MAP):
        return "see the assumption rows below (this scenario breaks an assumption on purpose)"
    by_answer: dict = defaultdict(list)
    for c in sorted(cells, key=lambda c: (c["variant"], c["tier"])):
        case = tier_case(sid, c["variant"], c["tier"])
        answer = _one_tier(
            tier_statuses(TLC_MAP[sid], mode, case, outcomes), c["correct"], c["n"], c.get("no_outcome", 0)
        )
        by_answer[answer].append(f"{c['variant']} {case}".strip())
    if len(by_answer) == 1:
        return next(iter(by_answer))
    return "; ".join(f"{answer} at {', '.join(cases)}" for answer, cases in by_answer.items())


def xref_rows(doc: dict, tlc_present: bool) -> list[dict[str, str]]:
    """Per scenario of TLC_MAP and system: its invariants, TLC's statuses in the system's mode,
    the measured correct count, and whether they agree (per tier case, see ``_agreement``)."""
    rows = []
    outcomes = tlc_outcomes(load_tlc()[1])
    for sid, invs in TLC_MAP.items():
        for system, mode in TLC_MODES.items():
            rs = [c for c in doc["cells"].values() if c["scenario"] == sid and c["system"] == system]
            tl = doc["tlc"][sid][mode]
            if not rs:
                meas, agree = "not run", "-"
            else:
                k = sum(c["correct"] for c in rs)
                n = sum(c["n"] for c in rs)
                per_tier = ", ".join(
                    f"{(c['variant'] + ' ') if c['variant'] else ''}{tier_case(sid, c['variant'], c['tier'])} "
                    f"{c['correct']}/{c['n']}"
                    for c in sorted(rs, key=lambda c: (c["variant"], c["tier"]))
                )
                meas, agree = f"{k}/{n} ({per_tier})", _agreement(sid, mode, rs, outcomes, tlc_present)
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
    breaks the same one: per system and tier case, TLC's outcome of the row's invariants (those
    not vacuous at the case) beside the measured correct count. Where the config checks none of
    them at a case, the base sweep's outcome in the same mode stands in, and says so. The
    config's other invariants are listed beside the row ("also")."""
    rows = []
    outcomes = tlc_outcomes(load_tlc()[1])
    for (sid, var), (stem, invs, which) in ASSUMPTION_MAP.items():
        for system, mode in TLC_MODES.items():
            key = f"assumption:{stem}:{mode}"
            cs = {
                c["tier"]: c
                for c in doc["cells"].values()
                if c["scenario"] == sid and c["variant"] == var and c["system"] == system
            }
            if not cs:
                continue
            tlc, answers = [], []
            for t in sorted(cs):
                case = tier_case(sid, var, t)
                statuses, source = tier_statuses(invs, key, case, outcomes), stem
                if not statuses:
                    statuses, source = tier_statuses(invs, mode, case, outcomes), "base sweep"
                worst = "V" if "V" in statuses else ("hold" if statuses else "not checked")
                tlc.append(f"{case}: {worst} ({source})")
                answer = _one_tier(statuses, cs[t]["correct"], cs[t]["n"], cs[t].get("no_outcome", 0))
                answers.append(f"{answer} at {case}")
            others = [
                f"{inv}: " + ", ".join(f"{case} {res}" for case, res in per.items())
                for (m, inv), per in outcomes.items()
                if m == key and inv not in invs
            ]
            rows.append(
                {
                    "sid": sid,
                    "variant": var,
                    "stem": stem,
                    "which": which,
                    "system": LABEL[system],
                    "invariant": " or ".join(invs),
                    "tlc": "; ".join(tlc),
                    "measured": ", ".join(
                        f"{tier_case(sid, var, t)} {cs[t]['correct']}/{cs[t]['n']}" for t in sorted(cs)
                    ),
                    "agree": "; ".join(answers),
                    "also": "; ".join(others) or "-",
                }
            )
    return rows
