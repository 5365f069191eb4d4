"""Write summary.md from the <side>_<tag><round>.json files here: python summarize.py"""

import glob
import json
import statistics as st

SIDES = ("before", "after")


def runs(tag, side):
    return [json.load(open(f)) for f in sorted(glob.glob(f"{side}_{tag}*.json"))]


def effect_lines(tag, committed):
    """The serial-effect figures of runs ``tag`` for each side (with the committed counts)."""
    for side in SIDES:
        xs = runs(tag, side)
        if xs:
            eff = [x["effect_p50_ms"] for x in xs]
            ovh = [x["overhead_p50_ms"] for x in xs]
            direct = [x["direct_call_p50_ms"] for x in xs]
            line = (
                f"- {side}: effect p50 ms {eff}, median {st.median(eff):.2f}; overhead p50 ms {ovh}, "
                f"median {st.median(ovh):.2f}; direct call p50 ms {direct}, median {st.median(direct):.2f}"
            )
            if committed:
                line += f"; committed {[x['committed'] for x in xs]} of {xs[0]['n']} each"
            lines.append(line)


lines = [
    "# A/B of issue 47's composition of the effect call (before = e999e55, after = this branch)",
    "",
    "before: the tree at e999e55 (EffectCall built from EffectCallBase -> EffectSend -> EffectDispatch /",
    "EffectRecovery by inheritance); after: the effect procedure as functions of one EffectCallState",
    "(ilr/_effects/effects.py). Each side is its own git worktree (/tmp/comp/<side>) with its own data",
    "directory; the sides alternate within each round (`bash run.sh TAG ROUNDS before after`; run.sh is",
    "here). One 2-core machine shared with other sessions' tests and benches, which ran throughout",
    "(`uptime` load average about 9 to 13 during these runs): compare the sides with each other only.",
    "Figures: each run's JSON, copied here as <side>_<tag><round>.json; this file is written from them",
    "by `python summarize.py`.",
    "",
    "## c: `python manage.py bench --core --n 5000 --workers 2 --concurrency 16`",
    "",
    "Its shape is 3 no-op steps: no ctx.effect call, so it checks that the step path and the worker",
    "are unchanged; the effect path is measured by e below.",
    "",
]
for side in SIDES:
    xs = runs("c", side)
    if xs:
        wf = [x["workflows_per_s"] for x in xs]
        cpw = [x["commits_per_workflow"] for x in xs]
        lines.append(f"- {side}: wf/s {wf}, median {st.median(wf):.1f}; commits/wf {cpw}, median {st.median(cpw):.2f}")
lines += [
    "",
    "## e: `python effect_serial.py OUT.json 300` (the serial gated effect, prove.bench.floors.run_serial_effect)",
    "",
    "One worker, concurrency 1: per workflow a straight call of the local tier-1 target and then the",
    "ctx.effect call (pre-read, T_dispatch, watchdog, send, response log, T_commit), both timed in the",
    "worker process; overhead = p50(effect) - p50(direct call), in ms. Runs e1-e3: `bash run.sh e 3 before",
    "after`; runs e21-e23: `bash run.sh e2 3 after before` (the other order), listed in file-name order.",
    "",
]
effect_lines("e", committed=True)
lines += [
    "",
    "## q: the same serial gated effect on a quiet machine",
    "",
    "Runs q1-q3: `bash run.sh q 3 before after`, after the lead's CI run, nothing else running; before =",
    "e999e55, after = the merged main (/tmp/comp/after at the commit named in its JSON).",
    "",
]
effect_lines("q", committed=False)


def reading(tag, key, what):
    b, a = [x[key] for x in runs(tag, "before")], [x[key] for x in runs(tag, "after")]
    if not (a and b):
        return
    diff = abs(st.median(a) - st.median(b))
    spread = max(max(a) - min(a), max(b) - min(b))
    verdict = (
        "less than the spread of one side's rounds: no difference measurable at this noise"
        if diff < spread
        else "more than the spread of either side's rounds"
    )
    lines.append(
        f"- {tag}: median {what} after / before = {st.median(a) / st.median(b):.3f}; the medians differ by "
        f"{diff:.2f}, {verdict} ({spread:.2f})."
    )


lines += ["", "## Reading", ""]
reading("c", "workflows_per_s", "wf/s")
reading("e", "effect_p50_ms", "effect p50 ms")
reading("e", "overhead_p50_ms", "overhead p50 ms")
reading("q", "effect_p50_ms", "effect p50 ms (quiet)")
reading("q", "overhead_p50_ms", "overhead p50 ms (quiet)")
lines.append(
    "- e: the overhead subtracts the direct call timed in the same run, so it is the figure of the effect path"
)
lines.append("  itself; the effect p50 moves with the machine's load, which the direct call shows too.")
open("summary.md", "w").write("\n".join(lines) + "\n")
