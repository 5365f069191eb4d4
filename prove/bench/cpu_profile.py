"""The bench's CPU profile of a worker (the first steps4 run of ``manage.py bench``): py-spy sampling one process
(``start_profiler``, ``stop_profiler``) and the summary of its raw stacks by leaf function and by
group (``profile_summary``)."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
import time
from pathlib import Path


def start_profiler(pid: int, out: Path) -> subprocess.Popen | None:
    """py-spy sampling ``pid`` (250 Hz, without pausing it, only the thread holding the GIL: where
    the worker's Python CPU goes) until stop_profiler.
    None, with a note on stderr, when py-spy is not installed."""
    import shutil

    exe = shutil.which("py-spy")
    if exe is None:
        sys.stderr.write("bench: py-spy not found (pip install py-spy); no CPU profile\n")
        return None
    proc = subprocess.Popen(
        [
            exe,
            "record",
            "--pid",
            str(pid),
            "--rate",
            "250",
            "--nonblocking",
            "--gil",
            "--format",
            "raw",
            "--output",
            str(out),
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)  # attach before the workflows are inserted
    return proc


def stop_profiler(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGINT)  # py-spy writes its output on SIGINT
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()


PROFILE_GROUPS = (
    ("statements: ilr.batch and psycopg (building, sending, reading)", ("psycopg/", "ilr/_db/batch.py")),
    ("json and canonical encoding", ("json/", "ilr/_codec.py")),
    ("journal sealing (sha256, Ed25519)", ("ilr/_journal/journal.py", "cryptography/")),
    # Substrings of a frame's file: "ilr/context" is ilr/_context/context.py and every ilr/context_*.py.
    (
        "the worker loop, replay and step bookkeeping",
        ("ilr/worker", "ilr/_worker/claims.py", "ilr/_worker/run.py", "ilr/context", "ilr/_db/store.py"),
    ),
    ("threads and queues", ("threading.py", "concurrent/futures", "queue.py")),
)


def profile_summary(raw: Path, top: int = 12) -> dict:
    """Summarize py-spy raw stacks: the share of samples by leaf function and by group.

    Returns {"samples", "top_self": [[function, share]], "groups": [[group, share]]}; shares are
    fractions of all samples (taken with --gil: the thread holding the GIL, so this is where the
    worker's Python CPU went, waits on PostgreSQL excluded).
    """
    from collections import Counter

    leaf: Counter = Counter()
    groups: Counter = Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frame = stack.split(";")[-1]
        leaf[re.sub(r"\(.*/(site-packages/|lib/python3\.\d+/)?", "(", frame)] += n
        group = next((g for g, keys in PROFILE_GROUPS if any(k in frame for k in keys)), "other")
        groups[group] += n
    share = lambda c: round(c / total, 3) if total else 0.0  # noqa: E731
    return {
        "samples": total,
        "top_self": [[f, share(c)] for f, c in leaf.most_common(top)],
        "groups": [[g, share(c)] for g, c in groups.most_common()],
    }
