"""One run of a cell (scenario x variant x tier x system, one seed) for the scenario runner
(prove/harness/runner.py): ``Run`` starts a fresh payment target process (SQLite ledger, access
log) and model stub process, drives the system's worker subprocesses through the scenario with
real signals, has the oracle read the target, and writes the run's JSON under
.data/prove/runs/. ``Infra`` is what a sweep's runs share: the Runtime client (PostgreSQL), the
DBOS system database and one Temporal dev server (restarted only by S10); ``versions`` what the
runs ran on."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from demo.peers.targets_client import http_json
from prove.harness import audit, oracle
from prove.harness.scenarios import Scenario
from prove.peers.dbos_system import DbosSystem
from prove.peers.systems import AsyncBridge, RuntimeSystem, System
from prove.peers.temporal_system import TemporalSystem

ROOT = Path(__file__).resolve().parents[2]


RUNS_DIR = ROOT / ".data" / "prove" / "runs"


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
        from demo.peers.model_stub import model_stub_process
        from demo.peers.target import target_process

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
