"""Run the TLA+ model in spec/ with TLC and publish results/runtime_tlc.md and .json.

``manage.py tlc`` and ``python -m prove.tlc`` (prove/tlc/__main__.py) come here: exit 0 when the
suite passes, 1 when it fails, 2 without Java. The first line above is ``--help``'s description."""

from __future__ import annotations

import json
import shlex
import sys
from pathlib import Path
from typing import Any

from prove.tlc.markdown import suite_markdown
from prove.tlc.plan import RESULTS_DIR, WORK_DIR
from prove.tlc.suite import Suite, failures, run_suite, suite_json
from prove.tlc.tool import JavaMissing


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
    parser.add_argument(
        "--quick",
        action="store_true",
        help="smaller constants (CI); writes to .data/tlc/quick unless --results-dir is given",
    )
    parser.add_argument("--only", default=None, help="run only checks whose id contains this text (no publishing)")
    parser.add_argument(
        "--results-dir",
        default=None,
        help="where to write runtime_tlc.md/.json (default: results/ for the "
        "full profile, .data/tlc/quick for --quick)",
    )


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
