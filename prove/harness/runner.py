"""The scenario runner behind ``manage.py prove`` (docs/protocol.md §16): runs cells (scenario x
variant x tier x system) with n seeds each, writes one JSON per run under .data/prove/runs/, copies
up to 20 failing runs per cell to results/runtime_prove_failures/, and hands the runs to
prove.report.runtime_prove.

Per run: a fresh payment target process (SQLite ledger, access log) and model stub process, the
system's worker subprocesses, real signals; the oracle reads only the target. Shared across the
sweep: the Runtime client (PostgreSQL) and one Temporal dev server (restarted only by S10).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from prove.harness import audit, oracle
from prove.harness.scenarios import SCENARIOS, SYSTEMS, Scenario, find
from prove.peers.dbos_system import DbosSystem
from prove.peers.systems import AsyncBridge, RuntimeSystem, System
from prove.peers.targets_client import http_json
from prove.peers.temporal_system import TemporalSystem

ROOT = Path(__file__).resolve().parents[2]
RUNS_DIR = ROOT / ".data" / "prove" / "runs"
RESULTS = ROOT / "results"
FAILURES = RESULTS / "runtime_prove_failures"
MAX_FAILURES_PER_CELL = 20
PAID = 10_000
DEDUP_WINDOW = 612.0


class Infra:
    """What a sweep shares: the Runtime client, the grants DSN, the Temporal server."""

    def __init__(self, workdir: Path, need_temporal: bool, need_dbos: bool = False):
        from django.core.management import call_command

        import prove.harness.prove_flows  # noqa: F401 - registers refund_timer (S10) so rt.start resolves it
        from ilr import Runtime
        from ilr import _db as db

        # Workers refuse to start while an ilr migration is pending: migrate first (as the demo does).
        call_command("migrate", verbosity=0)
        self.workdir = workdir
        self.rt = Runtime()
        self.dsn = db.conninfo()
        self.bridge = AsyncBridge()
        self.temporal = None
        self._client = None
        if need_temporal:
            from prove.peers.temporal_server import TemporalServer

            self.temporal = TemporalServer(workdir / "temporal.db", workdir / "temporal-server.log").start()
            self._connect()
        self._dbos = None
        if need_dbos:
            self._dbos_setup()

    def _dbos_setup(self) -> None:
        """Baseline (c)'s system database: ``<this database>_dbos`` in the same cluster, fresh per
        sweep, with DBOS's tables created by one launch before any worker starts."""
        from psycopg.conninfo import conninfo_to_dict, make_conninfo

        from ilr import _db as db
        from prove.bench.dbos import system_database_url

        name = f"{conninfo_to_dict(self.dsn)['dbname']}_dbos"
        with db.connect(make_conninfo(self.dsn, dbname="postgres")) as conn:
            conn.execute(f'drop database if exists "{name}" with (force)')
            conn.execute(f'create database "{name}"')
        self.dbos_url = system_database_url(name)
        self.dbos_dsn = make_conninfo(self.dsn, dbname=name)
        subprocess.run(
            [sys.executable, "-m", "prove.peers.dbos_baseline", "migrate", "--url", self.dbos_url],
            cwd=ROOT,
            check=True,
            timeout=120,
            stdout=subprocess.DEVNULL,
        )

    def dbos_client(self):
        """One DBOSClient per sweep (its engine reconnects after a PostgreSQL crash)."""
        if self._dbos is None:
            from dbos import DBOSClient

            self._dbos = DBOSClient(system_database_url=self.dbos_url)
        return self._dbos

    def _connect(self) -> None:
        from temporalio.client import Client

        self._client = self.bridge.call(Client.connect(self.temporal.address))

    def temporal_client(self):
        # Connected outside the bridge's loop (never from a coroutine running on it).
        return self._client

    def restart_temporal(self) -> None:
        """S10: SIGKILL the dev server and start it again on the same port and db file."""
        self.temporal.kill()
        self.temporal.start()
        self._connect()

    def close(self) -> None:
        if self.temporal is not None:
            self.temporal.stop()
        if self._dbos is not None:
            self._dbos.destroy()
        self.bridge.close()
        self.rt.close()


@dataclass
class Run:
    infra: Infra
    scenario: Scenario
    tier: int
    system: str
    seed: int
    sweep_id: str
    run_id: str = ""
    workdir: Path = None
    faults: list = field(default_factory=list)
    killed: set = field(default_factory=set)
    extra_wf_ids: list = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    records: dict | None = None
    approved_amount: int | None = None
    approved_amounts: list = field(default_factory=list)
    approved_at: float | None = None
    revoke_at: float | None = None
    revoke_returned: list | None = None
    hand_at: float | None = None
    cancel_at: float | None = None
    t_restart: float | None = None
    t_start: float | None = None

    def __post_init__(self):
        sc = self.scenario
        tag = sc.id + (f"-{sc.variant}" if sc.variant else "")
        self.run_id = f"{tag}-t{self.tier}-{self.system}-s{self.seed}-{self.sweep_id}"
        self.workdir = RUNS_DIR / self.run_id
        self.workdir.mkdir(parents=True, exist_ok=True)
        self.case_id = self.run_id
        self.payment = f"pay_{self.run_id}"
        self.paid = PAID
        self.t0 = time.monotonic()
        self.variant = sc.variant
        self.queryable = sc.queryable if self.tier == 1 else self.tier == 2
        self.dedup_window = DEDUP_WINDOW
        self.result_timeout = 90.0

    # -- recording -------------------------------------------------------------------------

    def fault(self, what: str, **kw) -> None:
        self.faults.append(
            {"t": round(time.monotonic() - self.t0, 3), "wall": round(time.time(), 3), "what": what, **kw}
        )

    def mark_restart(self) -> None:
        self.t_restart = time.monotonic()
        self.fault("restart")

    # -- peers -----------------------------------------------------------------------------

    def target_admin(self, path: str, body: dict) -> dict:
        status, answer = http_json("POST", f"{self.target_url}/admin/{path}", body)
        if status not in (200, 201):
            raise RuntimeError(f"target admin {path}: HTTP {status}: {answer}")
        return answer

    def model_admin(self, path: str, body: dict) -> dict:
        status, answer = http_json("POST", f"{self.model_url}/admin/{path}", body)
        if status != 200:
            raise RuntimeError(f"model stub admin {path}: HTTP {status}: {answer}")
        return answer

    def start_case(self, s, **extra) -> None:
        self.target_admin("payments", {"id": self.payment, "paid": self.paid})
        if self.scenario.id == "S04":
            extra["dedup_window"] = True
        if "sleep_before_effect" in extra and s.name == "runtime":
            s.workflow = "refund_timer"
        case = s.case(self.worker_target_url, self.tier, self.queryable, **extra)
        self.t_start = time.monotonic()
        s.start(case)

    def proposal_recorded(self, s) -> bool:
        if s.name == "runtime":
            d = s.rt.describe(s.wf_id)
            return any(st["name"] == "propose" for st in d["steps"])
        return s.phase() == "waiting_approval"

    def crash_store(self, s) -> None:
        """S10: crash the system's store. Runtime and DBOS: ``ilr_db restart-immediate`` (a real
        PostgreSQL crash); Temporal: SIGKILL the dev server and restart it on the same file."""
        if s.name in ("runtime", "dbos"):
            from django.conf import settings

            if Path(settings.DATA_DIR) == ROOT / ".data" and not os.environ.get("PROVE_ALLOW_PG_CRASH"):
                raise RuntimeError(
                    "S10 crashes PostgreSQL (pg_ctl stop -m immediate): run the sweep on a "
                    "dedicated embedded cluster (ILR_DATA_DIR=.data/prove-pg) or set "
                    "PROVE_ALLOW_PG_CRASH=1"
                )
            out = subprocess.run(
                [sys.executable, str(ROOT / "manage.py"), "ilr_db", "restart-immediate"],
                cwd=ROOT,
                capture_output=True,
                text=True,
                timeout=120,
            )
            self.fault("pg_restart_immediate", rc=out.returncode, out=out.stdout[-300:], err=out.stderr[-300:])
            self.infra.rt.close()  # the client's connection died with the server
        else:
            self.infra.restart_temporal()
            self.fault("temporal_server_sigkill_restart")

    # -- the run ---------------------------------------------------------------------------

    def execute(self) -> dict:
        from prove.peers.model_stub import model_stub_process
        from prove.peers.target import target_process

        sc = self.scenario
        started = time.monotonic()
        load_start = os.getloadavg()[0]
        record: dict = {
            "run_id": self.run_id,
            "system": self.system,
            "scenario": sc.id,
            "variant": sc.variant,
            "tier": self.tier,
            "seed": self.seed,
            "queryable": self.queryable,
        }
        s = None
        with contextlib.ExitStack() as stack:
            try:
                self.target_url = stack.enter_context(
                    target_process(
                        tier=self.tier,
                        queryable=self.queryable and self.tier == 1,
                        ledger=self.workdir / "ledger.sqlite",
                    )
                )
                self.worker_target_url = self.target_url
                self.model_url = stack.enter_context(model_stub_process())
                if sc.target_delay:
                    self.target_admin("delay", {"seconds": sc.target_delay})
                    self.fault("target_delay", seconds=sc.target_delay)
                s = make_system(self.system, self)
                stack.callback(s.cleanup)
                outcome = sc.drive(self, s)
                t_end, t_end_wall = time.monotonic(), time.time()
                time.sleep(sc.quiesce)
                obs = oracle.observe(self.target_url, self.payment)
                try:
                    self.records = s.records()
                except Exception as exc:  # noqa: BLE001 - recorded, never fatal
                    self.records = {"error": repr(exc)}
                c = oracle.counts(
                    obs,
                    approved_amount=self.approved_amounts or None,
                    revoke_at=self.revoke_at,
                    revoke_returned=self.revoke_returned,
                    cancel_at=self.cancel_at,
                    hand_at=self.hand_at,
                )
                # A system that reported no outcome within the result timeout is not correct,
                # whatever the ledger shows: nobody could act on the refund.
                no_outcome = isinstance(outcome, dict) and outcome.get("status") == "timeout"
                correct = bool(sc.correct(c, outcome, self)) and not no_outcome
                if sc.audited:
                    answers = s.audit()
                    truth = oracle.ground_truth(c)
                    sc_score = audit.score(answers, truth)
                else:  # no effect in this scenario: nothing for P1 to P5 to answer
                    answers, truth, sc_score = None, None, {"score": None, "false_claims": 0, "per": {}}
                latency = {}
                if self.approved_at is not None:
                    latency["approve_to_outcome_s"] = round(t_end_wall - self.approved_at, 3)
                if self.t_start is not None:
                    latency["start_to_outcome_s"] = round(t_end - self.t_start, 3)
                if self.t_restart is not None:
                    latency["resume_s"] = round(t_end - self.t_restart, 3)
                record.update(
                    {
                        "outcome": outcome,
                        "oracle": c,
                        "correct": correct,
                        "blocked_never_sent": int(sc.refund_due and c["our_applications"] == 0),
                        "audit": {"answers": answers, "truth": truth, **sc_score},
                        "no_outcome": no_outcome,
                        "latency": latency,
                        "extra": self.extra,
                        "ledger": obs["ledger"],
                        "access_log": obs["posts"],
                        "records": self.records,
                        "error": None,
                    }
                )
            except Exception as exc:  # noqa: BLE001 - a harness error is a failed run, recorded
                record.update(
                    {
                        "correct": False,
                        "error": f"{type(exc).__name__}: {exc}",
                        "traceback": traceback.format_exc(),
                        "outcome": None,
                        "oracle": None,
                        "blocked_never_sent": 0,
                        "audit": {"score": None, "false_claims": 0, "per": {}},
                        "latency": {},
                    }
                )
                with contextlib.suppress(Exception):
                    record["oracle_partial"] = oracle.observe(self.target_url, self.payment)
        record["faults"] = self.faults
        record["wall_s"] = round(time.monotonic() - started, 2)
        # The machine's 1-minute load average (runnable processes; 2 cores here) around the run,
        # so a reader can tell a run on a saturated machine from one on a quiet one.
        record["load"] = {"start": round(load_start, 2), "end": round(os.getloadavg()[0], 2)}
        record["versions"] = self.infra_versions()
        (self.workdir / "run.json").write_text(json.dumps(record, indent=1, default=str))
        return record

    def infra_versions(self) -> dict:
        return versions()


def make_system(name: str, run) -> System:
    """The driver of system ``name`` (one of scenarios.SYSTEMS) for one run.

    Raises:
        ValueError: an unknown system name.
    """
    if name == "runtime":
        return RuntimeSystem(run)
    if name == "temporal":
        return TemporalSystem(run, "a")
    if name == "temporal_check":
        return TemporalSystem(run, "b")
    if name == "dbos":
        return DbosSystem(run)
    raise ValueError(f"unknown system {name!r}")


_VERSIONS: dict | None = None


def versions() -> dict:
    global _VERSIONS
    if _VERSIONS is None:
        import django
        import temporalio

        from prove.peers.temporal_server import cli_version

        try:
            git = subprocess.run(
                ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=10
            ).stdout.strip()
            dirty = bool(
                subprocess.run(
                    ["git", "status", "--porcelain"], cwd=ROOT, capture_output=True, text=True, timeout=10
                ).stdout.strip()
            )
        except Exception:  # noqa: BLE001
            git, dirty = "unknown", None
        try:
            import anthropic

            anth = anthropic.__version__
        except Exception:  # noqa: BLE001
            anth = None
        from ilr import _db as db

        try:
            with db.connect() as conn:
                pg = conn.execute("show server_version").fetchone()
                pg = list(pg.values())[0] if isinstance(pg, dict) else pg[0]
        except Exception:  # noqa: BLE001
            pg = None
        from prove.bench.dbos import dbos_version

        _VERSIONS = {
            "python": sys.version.split()[0],
            "django": django.get_version(),
            "temporalio": temporalio.__version__,
            "temporal_cli": cli_version(),
            "dbos": dbos_version(),
            "anthropic": anth,
            "postgresql": pg,
            "git": git,
            "dirty_tree": dirty,
        }
    return _VERSIONS


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


def copy_failures(runs: list[dict], failures: Path = FAILURES) -> None:
    """Up to 20 failing runs per cell into results/runtime_prove_failures/ (replacing the old copy)."""
    FAILURES = failures
    if FAILURES.exists():
        shutil.rmtree(FAILURES)
    per_cell: dict[str, int] = {}
    for rec in runs:
        if rec.get("correct"):
            continue
        key = f"{rec['scenario']}{'-' + rec['variant'] if rec['variant'] else ''}-t{rec['tier']}-{rec['system']}"
        if per_cell.get(key, 0) >= MAX_FAILURES_PER_CELL:
            continue
        per_cell[key] = per_cell.get(key, 0) + 1
        dest = FAILURES / key
        dest.mkdir(parents=True, exist_ok=True)
        src = RUNS_DIR / rec["run_id"]
        (dest / f"{rec['run_id']}.json").write_text(json.dumps(rec, indent=1, default=str))
        for name in ("attempts.jsonl",):
            if (src / name).exists():
                shutil.copy(src / name, dest / f"{rec['run_id']}.{name}")


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
        runs += sweep(alone, seeds, progress=_progress(out), sweep_id=f"{sweep_id}X", first_seed=first_seed)["runs"]
    return runs


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


def run_lane(spec_file: str, seeds: int, sweep_id: str, out, first_seed: int = 1) -> int:
    """``manage.py prove --lane FILE``: run the listed cells; the parent writes the report."""
    wanted = json.loads(Path(spec_file).read_text())
    cells = []
    for key, tier, system in wanted:
        sc = next(s for s in SCENARIOS if s.key == key)
        cells.append((sc, tier, system))
    sweep(cells, seeds, progress=_progress(out), sweep_id=sweep_id, first_seed=first_seed)
    return 0


def _progress(out):
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
            result = sweep(cells, n, progress=_progress(out), first_seed=first_seed)
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
