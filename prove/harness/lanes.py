"""The scenario runner's parallel lanes (``manage.py prove --jobs N``): the cells shared out by
their cost among N ``manage.py prove --lane`` subprocesses, each with a database of its own (so
one lane's workers never claim another's workflows) and its own Temporal dev server; the cells
that crash PostgreSQL run afterwards, alone, in this process. ``run_lane`` is the lane's side."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from prove.harness.cell_run import ROOT, RUNS_DIR
from prove.harness.runner import cell_key, load_runs, progress_printer, sweep
from prove.harness.scenarios import SCENARIOS

COST = {"S04": 25, "S05": 30, "S08a": 30, "S08b": 25, "S08c": 45, "S10": 45, "S11": 25, "S13": 30}


def _exclusive(cell) -> bool:
    """Cells that crash the shared PostgreSQL run alone, after the lanes (S10 of the runtime and of
    DBOS, whose store is that PostgreSQL)."""
    sc, tier, system = cell
    return sc.id == "S10" and system in ("runtime", "dbos")


def _create_lane_db(name: str) -> None:
    import psycopg

    from ilr import _db as db

    base = db.conninfo()
    admin = psycopg.conninfo.make_conninfo(base, dbname="postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        if conn.execute("select 1 from pg_database where datname = %s", (name,)).fetchone() is None:
            conn.execute(f'create database "{name}"')
    env = {**os.environ, "ILR_DB_NAME": name}
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "migrate", "-v", "0"], cwd=ROOT, env=env, check=True, timeout=300
    )


def lanes(cells: list[tuple], seeds: int, jobs: int, sweep_id: str, out, first_seed: int = 1) -> list[dict]:
    """Run cells in ``jobs`` parallel lanes: each lane is a ``manage.py prove --lane`` subprocess
    with its own database (so one lane's workers never claim another's workflows) and its own
    Temporal dev server. Cells that crash PostgreSQL run afterwards, alone, in this process."""
    import threading

    from django.conf import settings

    base = settings.DATABASES["default"]["NAME"]
    shared = [c for c in cells if not _exclusive(c)]
    alone = [c for c in cells if _exclusive(c)]
    groups: list[list] = [[] for _ in range(jobs)]
    load = [0.0] * jobs

    def cost(c):
        # Temporal runs take longer (a dead worker's attempt times out, then its sticky queue).
        return COST.get(c[0].id, 18) * (1.0 if c[2] == "runtime" else 1.6)

    for c in sorted(shared, key=lambda c: -cost(c)):
        i = load.index(min(load))
        groups[i].append(c)
        load[i] += cost(c)
    order = {cell_key(*c): k for k, c in enumerate(cells)}
    procs = []
    lane_dir = RUNS_DIR.parent / f"sweep-{sweep_id}"
    lane_dir.mkdir(parents=True, exist_ok=True)
    for i, group in enumerate(groups, 1):
        if not group:
            continue
        group.sort(key=lambda c: order[cell_key(*c)])
        name = f"{base}_lane{i}"
        _create_lane_db(name)
        spec = lane_dir / f"lane{i}.json"
        spec.write_text(json.dumps([[c[0].key, c[1], c[2]] for c in group]))
        env = {**os.environ, "ILR_DB_NAME": name, "PYTHONUNBUFFERED": "1"}
        p = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "manage.py"),
                "prove",
                "--lane",
                str(spec),
                "--seeds",
                str(seeds),
                "--first-seed",
                str(first_seed),
                "--sweep-id",
                f"{sweep_id}L{i}",
            ],
            cwd=ROOT,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        procs.append((i, p))
        out.write(f"lane {i}: {len(group)} cells on database {name} (pid {p.pid})\n")
    lock = threading.Lock()

    def relay(i, p):
        for line in p.stdout:
            with lock:
                out.write(f"L{i} {line}")
                out.flush()

    threads = [threading.Thread(target=relay, args=(i, p), daemon=True) for i, p in procs]
    for t in threads:
        t.start()
    try:
        for _, p in procs:
            p.wait()
    except BaseException:
        for _, p in procs:
            if p.poll() is None:
                p.terminate()
        for _, p in procs:
            p.wait(30)
        raise
    for t in threads:
        t.join(5)
    runs = load_runs([f"{sweep_id}L{i}" for i, _ in procs])
    if alone:
        out.write(f"exclusive cells (crash PostgreSQL), run alone: {len(alone)}\n")
        runs += sweep(alone, seeds, progress=progress_printer(out), sweep_id=f"{sweep_id}X", first_seed=first_seed)[
            "runs"
        ]
    return runs


def run_lane(spec_file: str, seeds: int, sweep_id: str, out, first_seed: int = 1) -> int:
    """``manage.py prove --lane FILE``: run the listed cells; the parent writes the report."""
    wanted = json.loads(Path(spec_file).read_text())
    cells = []
    for key, tier, system in wanted:
        sc = next(s for s in SCENARIOS if s.key == key)
        cells.append((sc, tier, system))
    sweep(cells, seeds, progress=progress_printer(out), sweep_id=sweep_id, first_seed=first_seed)
    return 0
