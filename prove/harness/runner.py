"""The scenario runner behind ``manage.py prove`` (docs/protocol.md §16): selects cells (scenario x
variant x tier x system), runs them with n seeds each in this process (a sweep: one ``Run`` per
cell and seed, prove/harness/cell_run.py, writing one JSON under .data/prove/runs/), reads runs
back; prove/harness/failures.py keeps up to 20 failing runs per cell in results/runtime_prove_failures/. The command
that hands the runs to prove.report.runtime_prove is prove/harness/prove_command.py; parallel
lanes are prove/harness/lanes.py.
"""

from __future__ import annotations

import json
import sys
import time

from prove.harness.cell_run import ROOT, RUNS_DIR, Infra, Run
from prove.harness.scenarios import SCENARIOS, SYSTEMS, Scenario, find

RESULTS = ROOT / "results"


# -- selection and the sweep -----------------------------------------------------------------------


def select(scenarios: list[str] | None, tiers: list[int] | None, systems: list[str] | None) -> list[tuple]:
    """The cells to run: [(Scenario, tier, system)] in spec order."""
    chosen: list[Scenario] = []
    if scenarios:
        for key in scenarios:
            found = find(key)
            if not found:
                raise ValueError(f"--scenario: unknown scenario {key!r}")
            chosen += [s for s in found if s not in chosen]
        chosen = [s for s in SCENARIOS if s in chosen]
    else:
        chosen = list(SCENARIOS)
    systems = systems or list(SYSTEMS)
    for name in systems:
        if name not in SYSTEMS:
            raise ValueError(f"--system: unknown system {name!r} (one of {', '.join(SYSTEMS)})")
    cells = []
    for sc in chosen:
        for tier in sc.tiers:
            if tiers and tier not in tiers:
                continue
            # A scenario names the systems it applies to (S14 is not driven on DBOS).
            cells += [(sc, tier, name) for name in systems if name in sc.systems]
    return cells


def cell_key(sc: Scenario, tier: int, system: str) -> str:
    return f"{sc.key}|t{tier}|{system}"


def new_sweep_id() -> str:
    """A sweep id of its own: the time to the second ("%m%d%H%M%S"), claimed by creating its
    directory ``.data/prove/sweep-<id>``; when another sweep of this checkout claimed it in the
    same second (an S10 shard started beside a lane shard), a letter is added (b, c, ...), so two
    sweeps never share run ids, a directory or a shard file."""
    stamp = time.strftime("%m%d%H%M%S")
    RUNS_DIR.parent.mkdir(parents=True, exist_ok=True)
    for suffix in ["", *"bcdefghijklmnopqrstuvwxyz"]:
        try:
            (RUNS_DIR.parent / f"sweep-{stamp}{suffix}").mkdir()
        except FileExistsError:
            continue
        return stamp + suffix
    raise RuntimeError(f"26 sweeps started in the second {stamp}")


def sweep(
    cells: list[tuple], seeds: int, *, progress=None, sweep_id: str | None = None, out=sys.stdout, first_seed: int = 1
) -> dict:
    """Run every cell with seeds first_seed..first_seed+seeds-1; returns {"runs": [...], "wall_s",
    "sweep_id"}."""
    sweep_id = sweep_id or new_sweep_id()
    RUNS_DIR.mkdir(parents=True, exist_ok=True)
    need_temporal = any(system in ("temporal", "temporal_check") for _, _, system in cells)
    need_dbos = any(system == "dbos" for _, _, system in cells)
    infra_dir = RUNS_DIR.parent / f"sweep-{sweep_id}"
    infra_dir.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    runs = []
    infra = Infra(infra_dir, need_temporal, need_dbos)
    total = len(cells) * seeds
    done = 0
    try:
        for seed in range(first_seed, first_seed + seeds):
            for sc, tier, system in cells:
                run = Run(infra, sc, tier, system, seed, sweep_id)
                rec = run.execute()
                runs.append(rec)
                done += 1
                if progress:
                    progress(done, total, rec, time.monotonic() - started)
    finally:
        infra.close()
    return {"runs": runs, "wall_s": round(time.monotonic() - started, 1), "sweep_id": sweep_id}


def load_runs(sweep_ids: list[str]) -> list[dict]:
    """Every run.json of the given sweep ids (a run id ends with -<sweep id>). When two sweeps
    ran the same (cell, seed), the one listed later wins (a re-run after a harness fix)."""
    found = []
    for order, sid in enumerate(sweep_ids):
        for path in RUNS_DIR.glob(f"*-{sid}/run.json"):
            try:
                found.append(((order, path.stat().st_mtime), json.loads(path.read_text())))
            except ValueError:
                pass
    latest: dict = {}
    # A later sweep id in the list overrides an earlier one for the same (cell, seed).
    for _, rec in sorted(found, key=lambda x: x[0]):
        latest[(rec["scenario"], rec["variant"], rec["tier"], rec["system"], rec["seed"])] = rec
    return list(latest.values())


def progress_printer(out):
    """A sweep's ``progress`` callback: one bar line per finished run on ``out``."""

    def progress(done, total, rec, elapsed):
        width = 30
        filled = int(width * done / total)
        eta = elapsed / done * (total - done)
        mark = "ok  " if rec.get("correct") else ("ERR " if rec.get("error") else "FAIL")
        status = (rec.get("outcome") or {}).get("status") if isinstance(rec.get("outcome"), dict) else None
        total_c = (rec.get("oracle") or {}).get("total_refunded")
        out.write(
            f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} {mark} {rec['run_id']} "
            f"{status} ${'?' if total_c is None else format(total_c / 100, 'g')} {rec['wall_s']:.0f}s "
            f"(elapsed {elapsed:.0f}s, eta {eta:.0f}s)" + (f" error: {rec['error']}" if rec.get("error") else "") + "\n"
        )
        out.flush()

    return progress
