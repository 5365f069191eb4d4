"""results/runtime_prove.md and .json (docs/protocol.md §16.6), and the PNG plots.

Order: header (versions, seeds, wall time, the command, every EMULATED mechanism, what was and
was not run); the main table with verdicts; the Stripe live table; latency and throughput; the
TLC cross-reference; the two Temporal activity bodies quoted from the code; the concessions.
"""

from __future__ import annotations

import inspect
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path

from prove.harness.scenarios import S14_NOTE, SCENARIOS, SYSTEMS

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results"
LABEL = {"runtime": "runtime", "temporal": "(a) temporal", "temporal_check": "(b) temporal_check"}

EMULATED = [
    "Payment target: prove.peers.target, a local HTTP server with a SQLite ledger standing in for Stripe "
    "(tiers 1, 2, 3 are server settings). Stripe rows: not run: no network.",
    "Key expiry (S04): POST /admin/prune_keys stands in for Stripe's 24 h key pruning; the runtime's "
    "downgrade uses real database-clock age (dedup_window 612 s - DEDUP_MARGIN 600 s = 12 s).",
    "Model variance (S05, S05b, S05L): prove.peers.model_stub behind the real anthropic SDK (base_url), "
    "scripted amounts (2000, then 3000 when re-decision is on). S05L is the live-Haiku row, EMULATED.",
    "Hand refunds (S02, S06): POST /admin/hand_refund, an operator's refund recorded with source 'hand'.",
    "Network faults (S08a): prove.peers.fault_proxy, a stdlib TCP proxy with real sockets, blackholing the "
    "sender's PostgreSQL (runtime) or Temporal-server (Temporal) connection.",
    "Timer length (S10): 20 s, shortened from 3600 s.",
    "Crashes are real: instrumented SIGKILL/SIGSTOP at kill points (ilr.killpoints, shared by the "
    "Temporal activities), external SIGKILL of worker processes, pg_ctl stop -m immediate, SIGKILL of "
    "the Temporal dev server. Nothing on a live path is mocked.",
]

DEVIATIONS = [
    "Kill-point SIGSTOPs are made synchronous in the harness's worker processes (prove/harness/worker_shim.py: "
    "after the self-signal at a stop point the calling thread waits for the harness's SIGCONT). "
    "ilr.killpoints sends a process-directed SIGSTOP, which a non-main thread outruns: a Temporal "
    "activity's request reached the target before its process stopped, and a runtime sender passed its "
    "deadline check first. SIGKILL is unaffected. The stop-based rows (S08a, S08b, S08c, S12, S13) come from "
    "the third command, run with this shim and with stops at the first hit only (point@1); S07's stops "
    "come from the first command, whose shim slept 200 ms after the stop instead.",
    "S05b: the person approves the $20 the discarded first decision showed while the re-called model "
    "proposes $30; correct when nothing but the approved $20 is ever applied.",
    "S05 (runtime): the fork's $30 proposal is approved too (the strongest test of payload binding).",
    "S08b, S08c: only the first send is delayed (the target's delay is switched off 0.5 s after the "
    "sender resumes), so retries and resends answer at once; a second worker runs, because the runtime's "
    "send watchdog ends the sender's process by design.",
    "S11r: the approve is sent 0 to 100 ms after the step that precedes the suspend; for the runtime it is "
    "a plain signal with a policy grant (approve() requires the suspend to have committed).",
    "S12: one revoke race per run (n runs per cell), the sender held at effect_before_dispatch and the "
    "revoke fired at a seeded offset in [-20, +20] ms around its release.",
    "A run whose system reports no outcome within 90 s is counted incorrect whatever the ledger shows.",
]

CONCESSIONS = [
    "A1 (bounded pauses): a worker paused between its local deadline check and the bytes leaving can "
    "still send late; S13 long measures where it shows.",
    "A2 (bounded in-flight time): a request applied later than send_timeout + settle_margin after it was "
    "sent defeats the query at tier 2; S08c measures it (conceded for all three systems). The receipt "
    "keeps the evidence (assumptions_held).",
    "A3 (premise reads): external premises are true as read; the runtime bounds the read-to-send gap by "
    "premise_max_age, it does not make the read atomic with the send.",
    "A4 and A5 (target honesty, clocks) are assumed, not tested here.",
    "Tier-3 availability: the runtime never resends at tier 3 and surfaces AMBIGUOUS, so a crash before "
    "the send leaves the refund undone until a person reconciles (blocked_never_sent in the table).",
    "Scale: one PostgreSQL primary bounds throughput; every durable call is a commit; Python only. "
    "Temporal here is the dev server with SQLite, not a production deployment; all numbers are one "
    "2-core machine.",
]

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

# Diagnoses of measured-vs-predicted disagreements, written after reading the run JSON.
# Key: (scenario, variant, tier, system). Filled from the committed sweep.
S07_A = ("the owner was SIGKILLed after the target applied the refund and Temporal scheduled exactly one "
         "retry (no race: the server owns the retry), but that retry is a second send; at tier 2 the "
         "run-id + activity-id key is not deduplicated by the target and at tier 3 nothing can be looked "
         "up, so it applies again, exactly as in S01. The predicted 'equal' is right about the race and wrong "
         "about the outcome: (a) $20 / $40 / $40 at tiers 1 / 2 / 3.")
S07_B = ("as for (a), the one retry is a second send; (b)'s lookup saves it at tiers 1 and 2, and at "
         "tier 3 there is no lookup, so it applies again: (b) $20 / $20 / $40 at tiers 1 / 2 / 3.")
S13L_B = ("$20 in some runs where the prediction conceded $40, for two Temporal reasons measured in the "
          "attempt logs: the "
          "frozen worker keeps its long poll open, so the server hands the retry to the frozen worker rather "
          "than the live one, and the retry runs only after SIGCONT; and the SDK enforces start_to_close "
          "locally, so on SIGCONT the stale attempt is cancelled (CancelledError in its thread) before it "
          "sends. The retry then sends once, and a later attempt's lookup (b) or the key at tier 1 dedupes. "
          "Where the stale attempt's send wins the race with the local cancel, tier 2 pays $40.")
S13L_RT = ("the pause is at effect_after_dispatch, before the send-deadline check (docs/protocol.md §6.3): "
           "on SIGCONT the "
           "sender's stopwatch shows 11 s > send_timeout and it skips the send; the successor queried at "
           "send_deadline + settle_margin, found nothing and reapplied: one application. A1 is exposed only "
           "by a pause after that check and before the bytes leave, which this scenario does not target "
           "(before the harness made kill-point SIGSTOPs synchronous, the stop landed late, inside that "
           "window, and the runtime paid $40; see prove/harness/worker_shim.py). Revised: runtime $20 at tier 2; A1 "
           "stays conceded for a pause inside the check-to-send window.")
S12_B = ("(b) checks the grant before the send point, so a revoke anywhere in the window is missed unless the "
         "send finished before the revoke returned (a positive offset larger than the send time); the count "
         "per run is 0 or 1 by offset, not 'many'.")
S12_A = ("(a) never reads the grant; a send processed before the revoke returned is not a violation by the "
         "oracle's definition (offset > 0 and the send done first), so some runs count 0.")

NOTES = [
    "S08c tier 2, runtime: the ledger agrees with the conceded $40 (A2 violated: the first send was "
    "processed 11 s after it arrived, after recovery had queried, found nothing and reapplied). The "
    "prediction's second half, 'runtime receipt keeps evidence', did not hold: the first sender's process "
    "was ended by its send watchdog (docs/protocol.md §6.3) before the late response came, so no LATE_RESULT was "
    "written, and verify() answers happened_once: true and assumptions_held: true for an effect the "
    "target applied twice (3 of 3 runs; counted as false claims on P2). A receipt could answer "
    "happened_once 'unknown' after a recovery-reapply that follows a send whose answer was never recorded.",
    "S05b, runtime: the predicted '$20' assumed an approval of the first decision; with the approval given "
    "while the workflow waits (as this harness must: approve() requires the suspend), the grant binds "
    "$20 while the re-called model proposes $30, so the runtime refuses (REFUSED:lease, $0): never an "
    "unapproved amount, which is what the row tests; (a) pays the unapproved $30.",
    "TLC cross-reference, S13 long tier 3, (a) and (b): TLC's Pause config holds Tier3NeverResends for the "
    "Temporal modes, and the runs paid $60 (a) and $40 (b). The model's Temporal modes grant the baseline's "
    "best case, 'an attempt sends only before its own timeout' (spec/Runtime.tla); measured, a SIGSTOPped "
    "attempt resumed 11 s later and sent before the SDK's local start_to_close cancellation reached its "
    "thread (attempt log: send, then CancelledError), and the server had handed the retry to the frozen "
    "worker's open poll, whose own start_to_close lapsed while it sat there, so a third attempt ran on the "
    "live worker. The disagreement is the model's best-case assumption, not the measurement.",
    "L0 latency: the runtime's approve-to-outcome is bounded below by its idle poll (0.5 s); Temporal's "
    "push-based task dispatch answers in about 0.1 s. Resume after SIGKILL: the runtime waits for lease "
    "expiry (5 s) and, for an unknown send, send_deadline + settle_margin; Temporal waits for the activity's "
    "start_to_close (5 s), a 1 s retry backoff, and the dead worker's sticky queue timeout (5 s).",
]

# Diagnoses of measured-vs-predicted disagreements, written after reading the run JSON.
# Key: (scenario, variant, tier, system).
DIAGNOSES: dict = {
    ("S07", "", 2, "temporal"): S07_A, ("S07", "", 3, "temporal"): S07_A,
    ("S07", "", 3, "temporal_check"): S07_B,
    ("S13", "long", 2, "temporal_check"): S13L_B, ("S13", "long", 2, "temporal"): S13L_B,
    ("S13", "long", 2, "runtime"): S13L_RT,
    ("S12", "", 1, "temporal_check"): S12_B, ("S12", "", 2, "temporal_check"): S12_B,
    ("S12", "", 3, "temporal_check"): S12_B,
    ("S12", "", 1, "temporal"): S12_A, ("S12", "", 2, "temporal"): S12_A, ("S12", "", 3, "temporal"): S12_A,
}


def wilson(k: int, n: int, z: float = 1.96) -> tuple[float, float]:
    if n == 0:
        return (0.0, 1.0)
    p = k / n
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, c - h), min(1.0, c + h))


def pct(values, q):
    if not values:
        return None
    v = sorted(values)
    i = min(len(v) - 1, max(0, math.ceil(q / 100 * len(v)) - 1))
    return v[i]


def aggregate(runs: list[dict]) -> dict:
    """Per cell (scenario|variant|tier|system) aggregates (docs/protocol.md §16.4)."""
    cells: dict[str, dict] = {}
    groups = defaultdict(list)
    for r in runs:
        groups[(r["scenario"], r["variant"], r["tier"], r["system"])].append(r)
    for (sid, var, tier, system), rs in groups.items():
        n = len(rs)
        k = sum(1 for r in rs if r.get("correct"))
        lo, hi = wilson(k, n)
        sums = defaultdict(int)
        for r in rs:
            for key, val in (r.get("oracle") or {}).items():
                if isinstance(val, (int, float)) and not isinstance(val, bool):
                    sums[key] += val
        lat = [r["latency"].get("approve_to_outcome_s") for r in rs
               if r.get("latency", {}).get("approve_to_outcome_s") is not None]
        resume = [r["latency"].get("resume_s") for r in rs if r.get("latency", {}).get("resume_s") is not None]
        scores = [r["audit"].get("score") for r in rs if r["audit"].get("score") is not None]
        cells[f"{sid}|{var}|{tier}|{system}"] = {
            "scenario": sid, "variant": var, "tier": tier, "system": system, "n": n, "correct": k,
            "rate": k / n if n else None, "wilson95": [round(lo, 3), round(hi, 3)],
            "sums": dict(sums), "blocked_never_sent": sum(r.get("blocked_never_sent", 0) for r in rs),
            "duplicates": sums.get("duplicates", 0), "errors": sum(1 for r in rs if r.get("error")),
            "can_prove_mean": round(statistics.mean(scores), 2) if scores else None,
            "false_claims": sum(r["audit"].get("false_claims", 0) for r in rs),
            "false_claims_per_1000": round(1000 * sum(r["audit"].get("false_claims", 0) for r in rs) / n, 1),
            "latency_approve_to_outcome_s": {"p50": pct(lat, 50), "p99": pct(lat, 99), "count": len(lat),
                                             "values": lat},
            "latency_resume_s": {"p50": pct(resume, 50), "p99": pct(resume, 99), "count": len(resume)},
            "_resume_values": resume,
            "outcomes": sorted({str((r.get("outcome") or {}).get("status")) for r in rs}),
            "totals": sorted({(r.get("oracle") or {}).get("total_refunded") for r in rs}, key=lambda x: (x is None, x)),
            "failing_runs": [r["run_id"] for r in rs if not r.get("correct")],
            "mean_wall_s": round(statistics.mean([r.get("wall_s", 0) for r in rs]), 1),
            "extra": [r.get("extra") for r in rs if r.get("extra")],
        }
    return cells


def verdict(rt: dict, other: dict) -> str:
    if not rt or not other:
        return "-"
    (rlo, rhi), (olo, ohi) = rt["wilson95"], other["wilson95"]
    if rt["correct"] / rt["n"] > other["correct"] / other["n"] and rlo > ohi:
        v = "better"
    elif rt["correct"] / rt["n"] < other["correct"] / other["n"] and rhi < olo:
        v = "worse"
    else:
        v = "equal"
    notes = []
    rd = rt["duplicates"] / rt["n"]
    od = other["duplicates"] / other["n"]
    if rd < od:
        notes.append("fewer duplicates")
    elif rd > od:
        notes.append("more duplicates")
    if rt["blocked_never_sent"] / rt["n"] > other["blocked_never_sent"] / other["n"]:
        notes.append("worse (availability)")
    return v + (f" ({', '.join(notes)})" if notes else "")


def _cell_text(c: dict | None) -> str:
    if c is None:
        return "not run"
    rate = 100 * c["correct"] / c["n"]
    err = f", {c['errors']} harness err" if c["errors"] else ""
    return (f"{rate:.0f}% ({c['n']}) dup {c['duplicates']} blk {c['blocked_never_sent']} "
            f"prove {'-' if c['can_prove_mean'] is None else c['can_prove_mean']}/5{err}<br>"
            f"${_totals(c)} {', '.join(c['outcomes'])}")


def _totals(c):
    return "/".join("?" if t is None else f"{t / 100:g}" for t in c["totals"])


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


ASSUMPTION_MAP = {("S08c", ""): ("ServerSlow", ("EffectAtMostOnceTier12", "Tier3NeverResends"), "A2"),
                  ("S13", "long"): ("Pause", ("EffectAtMostOnceTier12", "Tier3NeverResends"), "A1")}

TLC_MODES = {"runtime": "interlock", "temporal": "temporal_idem", "temporal_check": "temporal_precheck"}


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


def activity_sources() -> tuple[str, str]:
    from prove.peers import temporal_baselines as tb

    return (inspect.getsource(tb.refund_idem.__wrapped__ if hasattr(tb.refund_idem, "__wrapped__") else tb.refund_idem),
            inspect.getsource(tb.refund_check.__wrapped__ if hasattr(tb.refund_check, "__wrapped__")
                              else tb.refund_check))


def build(runs: list[dict], *, command: str, seeds: int, wall_s: float, versions: dict,
          selection: dict, out_md: Path | None = None, out_json: Path | None = None, plots: bool = True) -> dict:
    """Write the report; returns the JSON document."""
    out_md = out_md or RESULTS / "runtime_prove.md"
    out_json = out_json or RESULTS / "runtime_prove.json"
    out_md.parent.mkdir(parents=True, exist_ok=True)
    derive_s10_temporal(runs)
    cells = aggregate(runs)
    ran_keys = {(c["scenario"], c["variant"], c["tier"]) for c in cells.values()}
    rows = []
    disagreements = []
    for sc in SCENARIOS:
        for tier in sc.tiers:
            if (sc.id, sc.variant, tier) not in ran_keys:
                continue
            row = {"scenario": sc.id, "variant": sc.variant, "tier": tier, "title": sc.title, "fault": sc.fault,
                   "oracle": sc.oracle, "cells": {}, "predicted": {}}
            for system in SYSTEMS:
                c = cells.get(f"{sc.id}|{sc.variant}|{tier}|{system}")
                row["cells"][system] = c
                pred = sc.pred.get(system, {}).get(tier)
                row["predicted"][system] = {"correct": pred[0], "text": pred[1]} if pred else None
                if c and pred and c["n"] and not pred[1].startswith("not stated"):
                    measured_ok = c["correct"] == c["n"]
                    measured_bad = c["correct"] == 0
                    if (pred[0] and not measured_ok) or (not pred[0] and not measured_bad):
                        d = {"scenario": sc.id, "variant": sc.variant, "tier": tier, "system": system,
                             "predicted": pred[1], "predicted_correct": pred[0],
                             "measured": f"{c['correct']}/{c['n']} correct; totals ${_totals(c)}; "
                                         f"outcomes {', '.join(c['outcomes'])}; duplicates {c['duplicates']}",
                             "failing_runs": c["failing_runs"],
                             "diagnosis": DIAGNOSES.get((sc.id, sc.variant, tier, system),
                                                        "not yet diagnosed: see the failing runs' JSON")}
                        disagreements.append(d)
            row["verdict_a"] = verdict(row["cells"]["runtime"], row["cells"]["temporal"])
            row["verdict_b"] = verdict(row["cells"]["runtime"], row["cells"]["temporal_check"])
            rows.append(row)
    not_run = []
    for sc in SCENARIOS:
        missing = [f"t{tier} {LABEL[system]}" for tier in sc.tiers for system in SYSTEMS
                   if f"{sc.id}|{sc.variant}|{tier}|{system}" not in cells]
        if len(missing) == len(sc.tiers) * len(SYSTEMS):
            not_run.append(f"{sc.key} (every tier and system)")
        elif missing:
            not_run.append(f"{sc.key} ({', '.join(missing)})")
    tlc_text, tlc_data = load_tlc()
    a_src, b_src = activity_sources()
    doc = {"header": {"command": command, "seeds_per_cell": seeds, "wall_s": wall_s, "versions": versions,
                      "selection": selection, "emulated": EMULATED, "runs": len(runs),
                      "timeouts": {"lease_ttl": 5, "poll": 0.5, "send_timeout": 3, "settle_margin": 5,
                                   "temporal_start_to_close": 5, "temporal_retry": "default (1 s, x2, cap 100 s)"},
                      "not_run": not_run, "s14": S14_NOTE},
           "rows": rows, "cells": cells, "disagreements": disagreements,
           "tlc": {sid: {mode: {inv: tlc_status(inv, mode, tlc_outcomes(tlc_data), tlc_text) for inv in invs}
                         for mode in TLC_MODES.values()} for sid, invs in TLC_MAP.items()},
           "tlc_present": {"md": tlc_text is not None, "json": tlc_data is not None}}
    out_json.write_text(json.dumps(doc, indent=1, default=str))
    md = render_md(doc, a_src, b_src, tlc_present=tlc_text is not None or tlc_data is not None)
    out_md.write_text(md)
    if plots:
        try:
            make_plots(doc, out_md.parent)
        except Exception as exc:  # noqa: BLE001 - a missing matplotlib must not lose the report
            doc["plots_error"] = repr(exc)
    return doc


def render_md(doc: dict, a_src: str, b_src: str, tlc_present: bool) -> str:
    h = doc["header"]
    v = h["versions"]
    L = []
    L.append("# Prove: the runtime vs Temporal (a) and (b)")
    L.append("")
    L.append("Regenerated by the command below; never edited by hand. One 2-core laptop-class machine; "
             "Temporal is the dev server with SQLite, not a production deployment.")
    L.append("")
    L.append(f"- Command: `{h['command']}`")
    summed = " (the sum over the commands above)" if " ; " in h["command"] else ""
    L.append(f"- Seeds per cell: {h['seeds_per_cell']} (seed 1..n); runs: {h['runs']}; wall time: {h['wall_s']:.0f} s"
             f"{summed}. Where two commands ran the same cell and seed, the later command's run is the one "
             "counted (it re-ran those cells after a harness fix).")
    L.append(f"- Versions: Python {v.get('python')}, Django {v.get('django')}, PostgreSQL {v.get('postgresql')}, "
             f"temporalio {v.get('temporalio')}, {v.get('temporal_cli')}, anthropic {v.get('anthropic')}, "
             f"git {v.get('git')}{' (uncommitted changes)' if v.get('dirty_tree') else ''}")
    t = h["timeouts"]
    L.append(f"- Timeouts: lease_ttl {t['lease_ttl']} s, poll {t['poll']} s, send_timeout {t['send_timeout']} s, "
             f"settle_margin {t['settle_margin']} s; "
             f"Temporal activity start_to_close {t['temporal_start_to_close']} s, "
             f"retry {t['temporal_retry']}.")
    L.append("- Workers: the runtime runs `manage.py ilr_worker` subprocesses, Temporal runs "
             "`python -m prove.peers.temporal_baselines worker` subprocesses, one per phase (crash phase, recovery "
             "phase), three in S07, two in S08a and S13. \"Down\" SIGKILLs every worker of the system.")
    L.append("- Assumptions A1 to A5 (docs/protocol.md section 10) hold for every runtime claim below unless a row "
             "measures one of them (S08c: A2; S13 long: A1). PostgreSQL runs with fsync=on, synchronous_commit=on.")
    L.append("- EMULATED mechanisms:")
    for e in h["emulated"]:
        L.append(f"  - {e}")
    if h["not_run"]:
        L.append(f"- Not run in this report ({len(h['not_run'])} cells): " + "; ".join(h["not_run"]))
    L.append(f"- {h['s14']}")
    L.append("- Harness choices where a scenario's text leaves room (each is also in the scenario list below):")
    for d in DEVIATIONS:
        L.append(f"  - {d}")
    L.append("")
    L.append("## Main table")
    L.append("")
    L.append("Each cell: correct % (n), duplicates, blocked-never-sent, can-prove score (mean of 5), then the "
             "ledger totals seen ($) and the system's own reported outcomes. "
             "Verdict rule (docs/protocol.md section 16.4): "
             "better when our correct count is higher and the 95% Wilson intervals do not overlap, worse "
             "when the reverse, else equal. With n = 3 intervals overlap unless the difference is total and "
             "n is larger, so a quick sweep mostly prints equal: read the rates beside it.")
    L.append("")
    L.append("| scenario | tier | runtime | (a) temporal | (b) temporal_check | vs (a) | vs (b) | "
             "predicted (runtime / a / b) |")
    L.append("|---|---|---|---|---|---|---|---|")
    for row in doc["rows"]:
        name = row["scenario"] + (f" {row['variant']}" if row["variant"] else "")
        preds = " / ".join((p["text"] if p else "-") for p in row["predicted"].values())
        L.append(f"| {name}: {row['title']} | {row['tier']} | "
                 + " | ".join(_cell_text(row["cells"][s]) for s in SYSTEMS)
                 + f" | {row['verdict_a']} | {row['verdict_b']} | {preds} |")
    L.append("")
    L.append("Per 1,000 runs (sums over the cells above): " + per_thousand(doc))
    L.append("")
    L.append("### Scenarios as run (fault injection; correct when)")
    L.append("")
    seen = set()
    for row in doc["rows"]:
        key = (row["scenario"], row["variant"])
        if key in seen:
            continue
        seen.add(key)
        name = row["scenario"] + (f" {row['variant']}" if row["variant"] else "")
        L.append(f"- {name}: {row['fault']}. Correct when: {row['oracle']}.")
    L.append("")
    L.append("### Where a prediction came out the other way")
    L.append("")
    if not doc["disagreements"]:
        L.append("None: every measured cell agrees with its prediction.")
    for d in doc["disagreements"]:
        name = d["scenario"] + (f" {d['variant']}" if d["variant"] else "")
        L.append(f"- **{name} tier {d['tier']}, {LABEL[d['system']]}**: predicted {d['predicted']} "
                 f"({'correct' if d['predicted_correct'] else 'incorrect'}); measured {d['measured']}. "
                 f"Revised prediction: {d['diagnosis']} Failing runs: {', '.join(d['failing_runs'][:5]) or '-'}.")
    L.append("")
    if NOTES:
        L.append("### Notes on rows that agree with their prediction only in part")
        L.append("")
        for n in NOTES:
            L.append(f"- {n}")
        L.append("")
    L.append("## Stripe live table")
    L.append("")
    L.append("| scenario | tier | runtime | (a) | (b) | PaymentIntents |")
    L.append("|---|---|---|---|---|---|")
    for sid in ("S01", "S02", "S03"):
        L.append(f"| {sid} | 1 | not run: no network | not run: no network | not run: no network | none |")
    L.append("")
    L.append("## Latency and throughput")
    L.append("")
    L.append("One machine; Temporal is the dev server with SQLite, not a production deployment. "
             "approve→outcome: from the approval to the system's reported outcome. resume: from the "
             "restart of workers after a crash to the outcome.")
    L.append("")
    L.append("| measure | runtime p50 / p99 (count) | (a) p50 / p99 (count) | (b) p50 / p99 (count) |")
    L.append("|---|---|---|---|")
    for label, metric, filt in (("no-fault approve→outcome (L0, tier 1, 20 ms service delay)",
                                 "latency_approve_to_outcome_s", lambda c: c["scenario"] == "L0"),
                                ("resume after SIGKILL (all crash runs)", "latency_resume_s", lambda c: True)):
        cols = []
        for s in SYSTEMS:
            vals = []
            for c in doc["cells"].values():
                if c["system"] == s and filt(c):
                    vals += latency_values(doc, c, metric)
            cols.append(fmt_lat(vals))
        L.append(f"| {label} | " + " | ".join(cols) + " |")
    timer = timer_lateness(doc)
    L.append("| S10 timer lateness after workers return (s) | "
             + " | ".join(fmt_lat(timer.get(s, [])) for s in SYSTEMS) + " |")
    L.append("")
    bench = RESULTS / "runtime_bench_core.md"
    L.append("Throughput: " + (f"see `{bench.relative_to(ROOT)}` (runtime core benchmark, `manage.py bench`); "
                               if bench.exists() else "not measured by this harness; ")
             + "Temporal's throughput on the dev server is not measured here. Temporal Cloud cost reference "
               "(context, not measured): $100/month Essentials, 1M actions (fetched 2026-09-13).")
    L.append("")
    L.append("## The full sweep (n = 30)")
    L.append("")
    est = full_sweep_estimate(doc)
    L.append("Not run in this session. Measured mean wall time per run in this sweep, and what the full sweep "
             "(n = 30 per cell; S11r 200 and S12 1000 iterations per cell, docs/protocol.md section 16.4) "
             "would take run "
             "sequentially; `--jobs 3` divides it by about 2.5 on this machine. Commands: "
             "`ILR_DATA_DIR=.data/prove-pg python manage.py prove --jobs 3` (n = 30 for every cell), then "
             "`... prove --scenario S11r --seeds 200 --jobs 3` and `... prove --scenario S12 --seeds 1000 --jobs 3`, "
             "and one report over all three with `--report-from`.")
    L.append("")
    L.append("| scenario | mean s per run: runtime / (a) / (b) | runs per cell (full) | "
             "estimated hours (3 systems, all tiers) |")
    L.append("|---|---|---|---|")
    for name, per, runs, hours in est["rows"]:
        L.append(f"| {name} | {per} | {runs} | {hours:.2f} |")
    L.append(f"| total | | | {est['total_h']:.1f} h sequential, about {est['total_h'] / 2.5:.1f} h with --jobs 3 |")
    L.append("")
    L.append("## TLC cross-reference")
    L.append("")
    if not tlc_present:
        L.append("results/runtime_tlc.md and results/runtime_tlc.json were absent when this report was written; "
                 "the column below names the invariant that predicts each scenario, unchecked.")
        L.append("")
    L.append("Each system against the TLC mode that models it (runtime: interlock; (a): temporal_idem; (b): "
             "temporal_precheck). A TLC violation means the model has a trace that breaks the invariant, so a "
             "measured failure agrees with it and an all-correct measurement only says the scenario's fault "
             "did not produce that trace; a TLC hold with a measured failure is a disagreement to diagnose.")
    L.append("")
    L.append("| scenario | invariant(s) | system | TLC | measured correct | agree? |")
    L.append("|---|---|---|---|---|---|")
    for sid, invs in TLC_MAP.items():
        for system, mode in TLC_MODES.items():
            rs = [c for c in doc["cells"].values() if c["scenario"] == sid and c["system"] == system]
            tl = doc["tlc"][sid][mode]
            if not rs:
                meas, agree = "not run", "-"
            else:
                k = sum(c["correct"] for c in rs)
                n = sum(c["n"] for c in rs)
                meas = f"{k}/{n}"
                joined = " ".join(tl.values())
                if not tlc_present or "absent" in joined:
                    agree = "unchecked (TLC results absent)"
                elif any(k[0] == sid for k in ASSUMPTION_MAP):
                    agree = "see the assumption rows below (this scenario breaks an assumption on purpose)"
                elif "n/a" in joined and "holds" not in joined and "violated" not in joined:
                    agree = "not modeled (n/a in TLC)"
                elif "violated" in joined:
                    agree = "yes" if k < n else "consistent (the fault did not produce the violating trace)"
                elif "holds" in joined and "not checked" not in joined:
                    agree = "yes" if k == n else "**NO**: see the disagreements above"
                else:
                    agree = "unchecked"
            L.append(f"| {sid} | {', '.join(invs)} | {LABEL[system]} | "
                     + "; ".join(f"{i}: {st}" for i, st in tl.items()) + f" | {meas} | {agree} |")
    if tlc_present:
        L.append("")
        L.append("Rows that break an assumption on purpose, against TLC's configs that break the same one "
                 "(spec/assumptions/): measured correct per tier beside TLC's per-tier outcome.")
        L.append("")
        L.append("| scenario | assumption config | system | TLC | measured correct per tier | agree? |")
        L.append("|---|---|---|---|---|---|")
        outcomes = tlc_outcomes(load_tlc()[1])
        for (sid, var), (stem, invs, which) in ASSUMPTION_MAP.items():
            for system, mode in TLC_MODES.items():
                per: dict = {}
                for inv in invs:
                    for k, v in outcomes.get((f"assumption:{stem}:{mode}", inv), {}).items():
                        per[k] = "V" if "V" in (v, per.get(k)) else v
                inv = " or ".join(invs)
                cs = {c["tier"]: c for c in doc["cells"].values()
                      if c["scenario"] == sid and c["variant"] == var and c["system"] == system}
                if not cs:
                    continue
                meas = ", ".join(f"t{t} {cs[t]['correct']}/{cs[t]['n']}" for t in sorted(cs))
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
                tl_txt = "; ".join(f"{k}: {v}" for k, v in per.items()) or "not checked"
                L.append(f"| {sid} {var} | spec/assumptions/{stem}.cfg ({which}) | {LABEL[system]} | {inv}: {tl_txt} | "
                         f"{meas} | {', '.join(dict.fromkeys(verdicts)) or 'unchecked'} |")
    L.append("")
    L.append("## The two Temporal activity bodies (quoted from prove/peers/temporal_baselines.py)")
    L.append("")
    L.append("(a) temporal, Temporal's recommended key:")
    L.append("")
    L.append("```python")
    L.append(a_src.rstrip())
    L.append("```")
    L.append("")
    L.append("(b) temporal_check, the check a competent engineer writes:")
    L.append("")
    L.append("```python")
    L.append(b_src.rstrip())
    L.append("```")
    L.append("")
    L.append("`http_target.post_refund` hits the kill points effect_before_dispatch (before the HTTP send) and "
             "effect_after_send (after the response, before returning), the same module the runtime uses.")
    L.append("")
    L.append("## Concessions")
    L.append("")
    for c in CONCESSIONS:
        L.append(f"- {c}")
    L.append("")
    L.append("Plots: `runtime_prove_correct.png` (correct rate per cell), `runtime_prove_latency.png` "
             "(latency distributions). Per-run JSON: `.data/prove/runs/`; up to 20 failing runs per cell: "
             "`results/runtime_prove_failures/`.")
    L.append("")
    return "\n".join(L)


def latency_values(doc, c, metric):
    if metric == "latency_approve_to_outcome_s":
        return [x for x in c[metric].get("values", []) if x is not None]
    return list(c.get("_resume_values", []))


def fmt_lat(vals):
    if not vals:
        return "-"
    return f"{pct(vals, 50):.2f} s / {pct(vals, 99):.2f} s ({len(vals)})"


def timer_lateness(doc):
    out = defaultdict(list)
    for c in doc["cells"].values():
        if c["scenario"] == "S10":
            for e in c["extra"]:
                if e.get("timer_lateness_after_return_s") is not None:
                    out[c["system"]].append(e["timer_lateness_after_return_s"])
    return out


def per_thousand(doc) -> str:
    parts = []
    for s in SYSTEMS:
        cs = [c for c in doc["cells"].values() if c["system"] == s]
        n = sum(c["n"] for c in cs)
        if not n:
            continue

        def k(name, cs=cs, n=n):
            return round(1000 * sum(c["sums"].get(name, 0) for c in cs) / n, 1)
        blocked = round(1000 * sum(c["blocked_never_sent"] for c in cs) / n, 1)
        fc = round(1000 * sum(c["false_claims"] for c in cs) / n, 1)
        parts.append(f"{LABEL[s]}: duplicates {k('duplicates')}, wrong amounts {k('wrong_amounts')}, "
                     f"sends after revoke {k('sends_after_revoke')}, sends on changed premises "
                     f"{k('sends_on_changed_premises')}, blocked_never_sent {blocked}, false claims {fc} (n={n})")
    return "; ".join(parts)


def make_plots(doc: dict, where: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = doc["rows"]
    labels = [r["scenario"] + (f" {r['variant']}" if r["variant"] else "") + f" t{r['tier']}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(8, 0.45 * len(rows) + 2), 4.5))
    width = 0.27
    colors = {"runtime": "#2b7bba", "temporal": "#e07b39", "temporal_check": "#7a9a3a"}
    for i, s in enumerate(SYSTEMS):
        xs, ys = [], []
        for j, r in enumerate(rows):
            c = r["cells"][s]
            if c:
                xs.append(j + (i - 1) * width)
                ys.append(100 * c["correct"] / c["n"])
        ax.bar(xs, ys, width, label=LABEL[s], color=colors[s])
    ax.set_xticks(range(len(rows)))
    ax.set_xticklabels(labels, rotation=70, fontsize=7)
    ax.set_ylabel("correct %")
    ax.set_ylim(0, 105)
    ax.set_title(f"Correct rate per cell (n = {doc['header']['seeds_per_cell']} per cell)")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(where / "runtime_prove_correct.png", dpi=110)
    plt.close(fig)

    fig, axes = plt.subplots(1, 2, figsize=(10, 4))
    for ax, metric, title in ((axes[0], "latency_approve_to_outcome_s", "approve → outcome, every run (s)"),
                              (axes[1], "resume", "resume after crash (s)")):
        data, names = [], []
        for s in SYSTEMS:
            vals = []
            for c in doc["cells"].values():
                if c["system"] != s:
                    continue
                if metric == "resume":
                    vals += c.get("_resume_values", [])
                else:
                    vals += [x for x in c[metric]["values"] if x is not None]
            data.append(vals or [float("nan")])
            names.append(LABEL[s])
        ax.boxplot(data, showfliers=True)
        ax.set_xticks(range(1, len(names) + 1))
        ax.set_xticklabels(names, fontsize=8)
        ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(where / "runtime_prove_latency.png", dpi=110)
    plt.close(fig)


def full_sweep_estimate(doc: dict) -> dict:
    """Per scenario key: mean wall seconds per run per system, full-sweep runs per cell, hours."""
    walls = defaultdict(lambda: defaultdict(list))
    tiers = defaultdict(set)
    for c in doc["cells"].values():
        key = c["scenario"] + (f" {c['variant']}" if c["variant"] else "")
        walls[key][c["system"]].append(c.get("mean_wall_s") or 0)
        tiers[key].add(c["tier"])
    rows, total = [], 0.0
    for key in walls:
        runs = 1000 if key.startswith("S12") else 200 if key == "S11 r" else 30
        means = {s: (statistics.mean(v) if v else 0) for s, v in walls[key].items()}
        hours = sum(means.values()) * runs * len(tiers[key]) / 3600
        total += hours
        per = " / ".join(f"{means.get(s, 0):.0f}" for s in SYSTEMS)
        rows.append((key, per, runs, hours))
    return {"rows": rows, "total_h": total}


def derive_s10_temporal(runs: list[dict]) -> None:
    """S10, Temporal: the server fires the timer on time even with every worker down, so the
    comparable moment is when the workflow resumed after it: the first refund activity attempt
    (the worker's attempt log). Lateness after the workers' return = that moment minus the later
    of the timer's due time and the restart. Derived from each run's stored records."""
    for r in runs:
        if r.get("scenario") != "S10" or r.get("system") == "runtime" or not isinstance(r.get("records"), dict):
            continue
        hs = r["records"].get("histories") or []
        st = [t for t in (hs[-1].get("timer_started", []) if hs else []) if abs(t["seconds"] - 20) < 1]
        first = next((a["t_wall"] for a in r["records"].get("attempts") or [] if a.get("activity") == "refund"), None)
        restart = next((f["wall"] for f in r.get("faults", []) if f["what"] == "restart"), None)
        if st and first is not None and restart is not None:
            r.setdefault("extra", {})["timer_lateness_after_return_s"] = round(
                first - max(st[0]["t"] + st[0]["seconds"], restart), 3)
