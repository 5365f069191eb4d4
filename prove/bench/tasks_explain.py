"""Where the time goes, for ``manage.py bench_tasks``: each backend's enqueue (one call alone in
autocommit and inside one transaction) and its claim statement, timed and EXPLAINed against a
backlog of ``backlog`` ready tasks. Every claim runs in a transaction that is rolled back, so the
backlog stays the same; the worker processes are stopped meanwhile.
"""

from __future__ import annotations

import re
import statistics
import time
from pathlib import Path

from prove.bench.tasks_backends import DB, INTERLOCK


def enqueue_cost(k: int = 300) -> dict:
    """Milliseconds per ``Task.enqueue`` call of each backend: ``k`` calls each in its own
    transaction (autocommit, as a view enqueuing one task), and ``k`` in one transaction."""
    from django.db import connection, transaction

    out = {}
    for backend in (INTERLOCK, DB):
        task = backend.task()
        task.enqueue(0, 0)  # the first call's one-time costs (imports, the code hash)
        t = time.perf_counter()
        for i in range(k):
            task.enqueue(i, 0)
        each = (time.perf_counter() - t) / k * 1000
        t = time.perf_counter()
        with transaction.atomic():
            for i in range(k):
                task.enqueue(i, 0)
        batched = (time.perf_counter() - t) / k * 1000
        out[backend.key] = {"autocommit_ms": round(each, 3), "in_one_transaction_ms": round(batched, 3)}
        with connection.cursor() as cur:
            cur.execute(backend.reset_sql)
    return out


def _db_claim_sql() -> str:
    """The SQL of db_worker's claim (its Worker.run: ready(), backend and queue, get_locked()),
    as Django sends it."""
    from django.db import connection, transaction
    from django.test.utils import CaptureQueriesContext
    from django_tasks_db.models import DBTaskResult

    qs = DBTaskResult.objects.ready().filter(backend_name="db").filter(queue_name__in=["default"])
    with CaptureQueriesContext(connection) as ctx, transaction.atomic():
        qs.get_locked()
    return next(q["sql"] for q in ctx.captured_queries if "FOR UPDATE" in q["sql"])


def _timed_plans(cursor, sql: str, params, runs: int) -> tuple[float, list[str]]:
    times = []
    for _ in range(runs):
        cursor.execute("begin")
        t = time.perf_counter()
        cursor.execute(sql, params)
        cursor.fetchall()
        times.append((time.perf_counter() - t) * 1000)
        cursor.execute("rollback")
    cursor.execute("begin")
    cursor.execute("explain (analyze, buffers, costs off) " + sql, params)
    plan = [r[0] for r in cursor.fetchall()]
    cursor.execute("rollback")
    return round(statistics.median(times), 3), plan


def claim_plans(backlog: int, claim_n: int, runs: int = 50) -> dict:
    """Each backend's claim statement against ``backlog`` ready tasks of its own: median ms over
    ``runs`` executions, and its plan. Interlock claims up to ``claim_n`` rows a statement (a
    worker asks for its free run slots); db_worker one."""
    from django.db import connection, transaction

    from ilr._queries.claims import CLAIM_SQL

    out = {}
    for backend in (INTERLOCK, DB):
        task = backend.task()
        with connection.cursor() as cur:
            cur.execute(backend.reset_sql)
        with transaction.atomic():
            for i in range(backlog):
                task.enqueue(i, 0)
        with connection.cursor() as cur:
            cur.execute("analyze")
            if backend is INTERLOCK:
                params = {"names": ["task:default"], "versions": ["1"], "n": claim_n, "owner": "x", "ttl": 30}
                ms, plan = _timed_plans(cur, CLAIM_SQL, params, runs)
                out[backend.key] = {"statement": "ilr CLAIM_SQL", "rows_per_claim": claim_n, "claim_ms_p50": ms}
            else:
                ms, plan = _timed_plans(cur, _db_claim_sql(), None, runs)
                out[backend.key] = {
                    "statement": "db_worker get_locked() (then one UPDATE by save())",
                    "rows_per_claim": 1,
                    "claim_ms_p50": ms,
                }
            out[backend.key]["plan"] = plan
            cur.execute(backend.reset_sql)
    out["backlog"] = backlog
    return out


AREAS = (
    ("psycopg (sending statements, reading rows)", ("psycopg/",)),
    ("Django ORM (querysets, models, SQL compiler)", ("django/db/models/",)),
    ("Django database layer (connections, cursors, transactions)", ("django/db/",)),
    ("django-tasks-db", ("django_tasks_db/",)),
    ("Django Tasks framework (Task, TaskResult, signals)", ("django_tasks/", "django/tasks/", "django/dispatch/")),
    ("Interlock", ("ilr/",)),
    ("json", ("json/",)),
    ("threads and queues", ("threading.py", "concurrent/futures", "queue.py")),
)


_OUTER = (
    "(manage.py)",
    "ManagementUtility.",
    "BaseCommand.",
    "execute_from_command_line",
    "Command.handle",
    "Thread.",
    "(thread.py)",
    "_WorkItem.run",
    "process ",
    "thread (",
)
"""Frames on (nearly) every stack of a worker: the command's and the thread's entry points."""


def profile_areas(raw: Path, top: int = 14) -> dict:
    """py-spy raw stacks (``--gil``: where the process's Python CPU went) summarized two ways: the
    share of samples by the area of the innermost frame, and the inclusive share of the functions
    most often on the stack (a caller counts each sample of everything it called), and the source
    lines sampled most as the innermost frame."""
    from collections import Counter

    areas: Counter = Counter()
    inclusive: Counter = Counter()
    lines: Counter = Counter()
    total = 0
    for line in raw.read_text(errors="replace").splitlines():
        stack, _, count = line.rpartition(" ")
        if not count.isdigit():
            continue
        n = int(count)
        total += n
        frames = stack.split(";")
        leaf = frames[-1]
        areas[next((a for a, keys in AREAS if any(k in leaf for k in keys)), "other")] += n
        lines[re.sub(r"\(.*/(site-packages/|lib/python3\.\d+/)?", "(", leaf)] += n
        names = {re.sub(r":\d+\)$", ")", re.sub(r"\(.*/(site-packages/|lib/python3\.\d+/)?", "(", f)) for f in frames}
        for name in names:
            if not any(s in name for s in _OUTER):
                inclusive[name] += n
    share = lambda c: round(c / total, 3) if total else 0.0  # noqa: E731
    return {
        "samples": total,
        "areas": [[a, share(c)] for a, c in areas.most_common()],
        "inclusive": [[f, share(c)] for f, c in inclusive.most_common(top)],
        "innermost_lines": [[f, share(c)] for f, c in lines.most_common(6)],
    }
