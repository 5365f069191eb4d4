"""``manage.py prove``'s scenario runner as a command (docs/protocol.md §16): the cells selected
(prove/harness/runner.py), run in this process or in lanes (prove/harness/lanes.py), or a report
rebuilt from earlier sweeps or shards (prove/harness/shards.py); each sweep's meta.json, the
failing runs copied out, and the report handed to prove.report.runtime_prove."""

from __future__ import annotations

import json
import time
from pathlib import Path

from prove.harness.cell_run import RUNS_DIR, versions
from prove.harness.failures import copy_failures
from prove.harness.lanes import lanes
from prove.harness.runner import RESULTS, load_runs, new_sweep_id, progress_printer, select, sweep
from prove.harness.scenarios import SYSTEMS


def _ensure_signing_key(out) -> None:
    """The runtime signs its journal in the deployment the Prove harness measures: a signing
    key under the data directory, generated once before any lane starts (the lanes' workers and
    the auditor read it there; the auditor trusts only this deployment's keys, docs/security.md)."""
    from ilr._journal import keys

    if keys.key_path() is None:
        private, _ = keys.generate()
        out.write(f"prove: signing key generated at {private} (Ed25519)\n")


def run_command(
    *,
    quick: bool,
    seeds: int | None,
    scenarios,
    tiers,
    systems,
    results_dir,
    command: str,
    out,
    jobs: int = 1,
    report_from: list[str] | None = None,
    first_seed: int = 1,
    shard: bool = False,
    from_shards: bool = False,
    shards_dir: str | None = None,
) -> int:
    """``manage.py prove``'s scenario runner. Returns the exit status: 1 when any runtime run was
    not correct (or the report could not be written), else 0.

    ``shard`` also writes the sweep's runs under results/prove_runs/; ``from_shards`` runs nothing
    and rebuilds the report from every shard there (prove/harness/shards.py); ``shards_dir`` is
    another directory for both."""
    from prove.harness import shards

    shard_dir = Path(shards_dir) if shards_dir else shards.SHARDS_DIR
    from prove.report import runtime_prove as report

    n = seeds if seeds is not None else (3 if quick else 30)
    if n < 1:
        raise ValueError("--seeds must be at least 1")
    if first_seed < 1:
        raise ValueError(f"--first-seed must be at least 1, got {first_seed}")
    where = Path(results_dir) if results_dir else RESULTS
    if from_shards:
        runs, metas = shards.load_shards(shard_dir)
        command = " ; ".join(m["command"] for m in metas) + f"  (report rebuilt by: {command})"
        result = {
            "runs": runs,
            "wall_s": shards.elapsed(metas),
            "sweep_id": ",".join(m["shard"] for m in metas),
        }
        n = max(
            len({r["seed"] for r in runs if (r["scenario"], r["variant"], r["tier"], r["system"]) == cell})
            for cell in {(r["scenario"], r["variant"], r["tier"], r["system"]) for r in runs}
        )
    elif report_from:
        # A sweep id with a meta.json (written at the end of every sweep) brings its own command
        # line, wall time and lane ids; any other id is taken as a run-id suffix.
        ids, metas = [], []
        for sid in report_from:
            meta_file = RUNS_DIR.parent / f"sweep-{sid}" / "meta.json"
            if meta_file.exists():
                meta = json.loads(meta_file.read_text())
                metas.append(meta)
                ids += meta["run_sweep_ids"]
            else:
                ids.append(sid)
        runs = load_runs(ids)
        if not runs:
            raise ValueError(f"--report-from: no runs found for {report_from}")
        wall = sum(m["wall_s"] for m in metas) if metas else sum(r.get("wall_s", 0) for r in runs)
        if metas:
            command = " ; ".join(m["command"] for m in metas) + f"  (report rebuilt by: {command})"
        result = {"runs": runs, "wall_s": wall, "sweep_id": ",".join(report_from)}
        n = max((r["seed"] for r in runs), default=n)
    else:
        cells = select(scenarios, tiers, systems)
        if not cells:
            raise ValueError("the selection is empty (no scenario runs at those tiers)")
        _ensure_signing_key(out)
        out.write(f"prove: {len(cells)} cells x {n} seeds = {len(cells) * n} runs, {jobs} lane(s) -> {where}\n")
        out.flush()
        if jobs > 1:
            sweep_id = new_sweep_id()
            t0 = time.monotonic()
            runs = lanes(cells, n, jobs, sweep_id, out, first_seed=first_seed)
            result = {"runs": runs, "wall_s": round(time.monotonic() - t0, 1), "sweep_id": sweep_id}
            run_ids = [f"{sweep_id}L{i}" for i in range(1, jobs + 1)] + [f"{sweep_id}X"]
        else:
            result = sweep(cells, n, progress=progress_printer(out), first_seed=first_seed)
            run_ids = [result["sweep_id"]]
        meta_dir = RUNS_DIR.parent / f"sweep-{result['sweep_id']}"
        meta_dir.mkdir(parents=True, exist_ok=True)
        (meta_dir / "meta.json").write_text(
            json.dumps(
                {
                    "command": command,
                    "seeds": n,
                    "wall_s": result["wall_s"],
                    "run_sweep_ids": run_ids,
                    "selection": {"scenarios": scenarios, "tiers": tiers, "systems": systems},
                },
                indent=1,
            )
        )
        if shard:
            path = shards.write_shard(
                result["runs"],
                sweep_id=result["sweep_id"],
                command=command,
                seeds=range(first_seed, first_seed + n),
                wall_s=result["wall_s"],
                versions=versions(),
                where=shard_dir,
            )
            out.write(f"wrote the shard {path} ({len(result['runs'])} runs)\n")
    runs = result["runs"]
    copy_failures(runs, where / "runtime_prove_failures")
    selection = {
        "scenarios": scenarios,
        "tiers": tiers,
        "systems": systems or list(SYSTEMS),
        "seeds": n,
        "sweep_id": result["sweep_id"],
    }
    run_versions = dict(versions())
    if from_shards:
        # The report describes the code the shards ran, not the tree that rebuilt it.
        selection["shards"] = metas
        # The versions line is this machine's: say how the shards' own records compare with it.
        selection["version_check"] = shards.version_check(metas, run_versions)
        run_versions.update(shards.provenance(metas))
    doc = report.build(
        runs,
        command=command,
        seeds=n,
        wall_s=result["wall_s"],
        versions=run_versions,
        selection=selection,
        out_md=where / "runtime_prove.md",
        out_json=where / "runtime_prove.json",
    )
    bad_runtime = [r["run_id"] for r in runs if r["system"] == "runtime" and not r.get("correct")]
    out.write(f"wrote {where / 'runtime_prove.md'} and .json ({len(runs)} runs, {result['wall_s']:.0f} s)\n")
    if doc.get("plots_error"):
        out.write(f"plots not written: {doc['plots_error']}\n")
    if bad_runtime:
        out.write(f"runtime not correct on {len(bad_runtime)} run(s): {', '.join(bad_runtime)}\n")
        return 1
    return 0
