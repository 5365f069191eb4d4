"""The counterexamples of results/runtime_tlc.md: the shortest trace per mode and invariant, and
those of the broken configs and assumption toggles, each step with only its changed fields."""

from __future__ import annotations

import re

from prove.tlc.plan import LIVENESS, MODES, PREDICTION, SAFETY, TIER_TEXT
from prove.tlc.suite import Suite, _all_traces, _shortest, _traces
from prove.tlc.tool import TraceStep

_GOOD_FLAGS = ("liveClaim", "grantOk", "premiseOk", "recheckOk", "prevSendSettled")
_BAD_FLAGS = ("resend", "afterRevoke", "inReturned", "afterCancel", "pastWindow")


def _compact_send(change: str, step: TraceStep) -> str:
    """Render an appended sendLog entry as its payload plus the flags that are not a clean
    first send's (the JSON keeps every field)."""
    m = re.match(r"^sendLog\[(\d+)\] = ", change)
    if not m:
        return change
    entry = step.state.get("sendLog", [])[int(m.group(1)) - 1]
    flags = [f"NOT {f}" for f in _GOOD_FLAGS if entry.get(f) is False]
    flags += [f for f in _BAD_FLAGS if entry.get(f) is True]
    return f"sendLog[{m.group(1)}] = payload {entry.get('payload')}" + (f" ({', '.join(flags)})" if flags else "")


def _trace_md(steps: list[TraceStep], limit: int = 14) -> list[str]:
    lines = []
    for i, s in enumerate(steps, 1):
        if s.action == "Init":
            lines.append(f"{i:>3}. Init")
            continue
        if s.back_to is not None:
            lines.append(f"{i:>3}. back to state {s.back_to} (the behavior loops from here)")
            continue
        ch = [_compact_send(c, s) for c in s.changes if not re.match(r"lw\[w\d+\]\.auth\.", c)]
        text = ", ".join(ch[:limit]) + (f", ... (+{len(ch) - limit} more)" if len(ch) > limit else "")
        lines.append(f"{i:>3}. {s.label}: {text}" if text else f"{i:>3}. {s.label}")
    return lines


def _mode_counterexamples(suite: Suite) -> list[str]:
    """The shortest counterexample per mode and invariant (and the after-prune path)."""
    out: list[str] = []
    w = out.append
    w("## Counterexamples (shortest, breadth-first; only changed fields shown)")
    w("")
    w(
        "Tick advances the database clock. Next is the target processing one request (TLC names "
        "the step after the Next disjunct it sits in). A worker in parentheses is inferred from "
        "whose local state changed. A pending send's authorization record (lw[w].auth) is not "
        "shown: the sendLog entry the send appends repeats it, and that entry is shown as its "
        "payload and the flags that break a clean send (NOT liveClaim, NOT grantOk, NOT "
        "premiseOk, NOT recheckOk, NOT prevSendSettled, resend, afterRevoke, inReturned, "
        "afterCancel, pastWindow). For each mode and invariant the "
        "shortest trace over the tiers and event groups is shown; the JSON file holds every "
        "trace with every changed field."
    )
    w("")
    for name in SAFETY + LIVENESS:
        for mode in MODES:
            key = name
            short = _shortest(_traces(suite, mode, key))
            if not short:
                continue
            tier, steps = short
            w(f"### {name}: {mode}, {TIER_TEXT[tier]} ({len(steps)} states)")
            w("")
            w("```")
            out.extend(_trace_md(steps))
            w("```")
            w("")
            # the prediction names a second path for this one ("V after prune"): show it too
            if PREDICTION.get(name, ("", "", ""))[MODES.index(mode)] == "V@t2, V after prune" and not any(
                s.action == "Prune" for s in steps
            ):
                pruned = {k: t for k, t in _all_traces(suite, mode, key).items() if any(s.action == "Prune" for s in t)}
                if pruned:
                    k = min(pruned, key=lambda x: len(pruned[x]))
                    w(
                        f"### {name}: {mode}, after prune, {TIER_TEXT[k.split('/')[0]]}, "
                        f"events {k.split('/')[1]} ({len(pruned[k])} states)"
                    )
                    w("")
                    w("```")
                    out.extend(_trace_md(pruned[k]))
                    w("```")
                    w("")
    return out


def _check_counterexamples(suite: Suite) -> list[str]:
    """The counterexamples of the broken configs, the assumption toggles and Slots.tla's
    liveness checks that must be violated."""
    out: list[str] = []
    w = out.append
    for r in suite.results:
        slots_violation = r.check.module == "Slots" and r.check.kind in ("slots", "sanity")
        if r.check.kind in ("broken", "assumption") or slots_violation:
            for name, steps in r.traces.items():
                if r.check.kind == "assumption":
                    others = [
                        x
                        for x in suite.results
                        if x.check.kind == "assumption"
                        and x.check.title == r.check.title
                        and x.check.mode == r.check.mode
                        and name in x.traces
                    ]
                    if min(others, key=lambda x: len(x.traces[name])) is not r:
                        continue
                w(f"### {name}: {r.check.id} ({len(steps)} states)")
                w("")
                w("```")
                out.extend(_trace_md(steps))
                w("```")
                w("")
    return out
