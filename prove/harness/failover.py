"""Failover under load: ``python manage.py failover [--mode sync|async|both] [--workflows N] ...``.

A primary and a streaming standby (two clusters of Debian's PostgreSQL server package,
pg_basebackup -R over a replication slot) under ``ilr_worker`` subprocesses that reach them
through one multi-host URL (``postgresql://postgres@127.0.0.1:P1,127.0.0.1:P2/interlock?
target_session_attrs=read-write``). Each workflow records a step, consumes a signal, sends a
tier-1 refund (idempotency key) and a tier-2 refund (no dedup, a truthful lookup) through two
local payment targets under a policy grant, and records two more steps.

Mid-run the primary is SIGKILLed (the postmaster and every child at once) and the standby
promoted. ``sync``: ``synchronous_standby_names = 'standby1'`` and ``synchronous_commit`` on (or
remote_apply). ``async``: none, and the primary's WAL sender is SIGSTOPped ``--lag`` seconds
before the kill, so the commits of those seconds exist on the primary only and are lost.

Three reads of the database, compared: what the old primary showed committed just before the
kill (acknowledged), what the standby held when it was promoted (read as a hot standby, replay
caught up), and what the old primary's own WAL held at its death (its data directory recovered
afterwards on a socket nobody else can reach). Then the targets' ledgers (applications per
effect, by tier), the invariants registry with the ledgers as evidence, and every effect's
receipt against the ledger. The harness re-sends the signals it had sent that the new primary
lacks (what a client that keeps its acknowledgements does); it never re-starts a workflow.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

import psycopg

from demo.peers.targets_client import LocalRefunds, http_json
from ilr import workflow
from prove.harness.waiting import until
from prove.peers.pg_cluster import DB_NAME, Cluster, free_port

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results" / "runtime_failover"
SEND_TIMEOUT = 3.0
SETTLE_MARGIN = 1.0
TARGET_DELAY = {1: 0.15, 2: 0.3}
"""Seconds each target holds a refund before applying it: sends are in flight at the kill."""


def _echo(value):
    return value


def _target(spec: dict) -> LocalRefunds:
    return LocalRefunds(spec["url"], tier=spec["tier"], send_timeout=SEND_TIMEOUT, settle_margin=SETTLE_MARGIN)


@workflow(name="failover_pay", version="1")
def failover_pay(ctx, case):
    """A step, the signal "go", a tier-1 and a tier-2 refund under ``case["grant_id"]``, two steps."""
    ctx.step("prepare", _echo, case["id"])
    go = ctx.wait_signal("go")
    r1 = ctx.effect(
        _target(case["t1"]),
        key=f"fo1:{case['id']}",
        payload={"payment": case["payment"], "amount": 100},
        grant=case["grant_id"],
    )
    ctx.step("between", _echo, r1.status)
    r2 = ctx.effect(
        _target(case["t2"]),
        key=f"fo2:{case['id']}",
        payload={"payment": case["payment"], "amount": 200},
        grant=case["grant_id"],
    )
    ctx.step("finish", _echo, r2.status)
    return {"t1": r1.status, "t2": r2.status, "go": go}


# -- database reads --------------------------------------------------------------------------------

SNAPSHOT_SQL = {
    "steps": "select workflow_id || ':' || seq as k from ilr.steps",
    "journal": "select hash as k, kind from ilr.journal",
    "signals": "select workflow_id || ':' || name || ':' || payload::text as k, consumed_seq from ilr.signals",
    "effects": "select effect_id as k, state, tier from ilr.effects",
    "claims": "select workflow_id || ':' || epoch as k, owner, claimed_at from ilr.claims",
    "workflows": "select id as k, status from ilr.workflows",
}


def snapshot(conninfo: str) -> dict:
    """Every row key the comparison needs, read in one repeatable-read transaction.

    Returns:
        {table: {key: row}} for SNAPSHOT_SQL's tables.
    """
    with psycopg.connect(conninfo, autocommit=True, row_factory=psycopg.rows.dict_row) as conn:
        with conn.transaction():
            conn.execute("set transaction isolation level repeatable read, read only")
            return {name: {r["k"]: r for r in conn.execute(sql).fetchall()} for name, sql in SNAPSHOT_SQL.items()}


def _connect(dsn: str, timeout: float = 2.0):
    return psycopg.connect(dsn, autocommit=True, row_factory=psycopg.rows.dict_row, connect_timeout=timeout)


def _lost(before: dict, after: dict) -> dict:
    """Counts of keys in ``before`` missing from ``after``, per table; journal and effects by kind."""
    out = {t: len(set(before[t]) - set(after[t])) for t in ("steps", "signals", "claims", "workflows")}
    gone = set(before["journal"]) - set(after["journal"])
    out["journal"] = len(gone)
    kinds: dict[str, int] = {}
    for h in gone:
        kinds[before["journal"][h]["kind"]] = kinds.get(before["journal"][h]["kind"], 0) + 1
    out["journal_by_kind"] = dict(sorted(kinds.items()))
    out["effects_committed"] = sum(
        1
        for k, r in before["effects"].items()
        if r["state"] == "committed" and after["effects"].get(k, {}).get("state") != "committed"
    )
    out["effects_dispatched"] = sum(
        1
        for k, r in before["effects"].items()
        if r["state"] in ("dispatched", "committed")
        and after["effects"].get(k, {}).get("state") not in ("dispatched", "committed")
    )
    return out


def _sizes(snap: dict) -> dict:
    return {
        "steps": len(snap["steps"]),
        "journal": len(snap["journal"]),
        "signals": len(snap["signals"]),
        "claims": len(snap["claims"]),
        "effects_committed": sum(1 for r in snap["effects"].values() if r["state"] == "committed"),
        "effects_dispatched": sum(1 for r in snap["effects"].values() if r["state"] == "dispatched"),
    }


# -- processes ---------------------------------------------------------------------------------------


class Workers:
    """``manage.py ilr_worker`` subprocesses with DATABASE_URL set; stopped by ``close``."""

    def __init__(self, url: str, logs: Path, lease_ttl: float):
        self.url, self.logs, self.lease_ttl = url, logs, lease_ttl
        self.procs: dict[str, subprocess.Popen] = {}

    def env(self) -> dict:
        env = dict(os.environ, DATABASE_URL=self.url, PYTHONUNBUFFERED="1")
        env.pop("ILR_DB_NAME", None)
        return env

    def start(self, wid: str) -> None:
        log = open(self.logs / f"{wid}.log", "ab")  # noqa: SIM115 - the child holds it
        self.procs[wid] = subprocess.Popen(
            [
                sys.executable,
                str(ROOT / "manage.py"),
                "ilr_worker",
                "--id",
                wid,
                "--import",
                "prove.harness.failover",
                "--only",
                "failover_pay@1",
                "--lease-ttl",
                str(self.lease_ttl),
                "--poll",
                "0.5",
                "--concurrency",
                "4",
            ],
            cwd=ROOT,
            env=self.env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()

    def close(self) -> None:
        for proc in self.procs.values():
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
        for proc in self.procs.values():
            try:
                proc.wait(15)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)

    def log_text(self) -> str:
        return "\n".join((self.logs / f"{w}.log").read_text(errors="replace") for w in self.procs)


class Signaller(threading.Thread):
    """Sends "go" to each workflow in turn, every ``interval`` seconds, retrying through the
    failover; records each acknowledged signal (its payload) and can re-send lost ones."""

    def __init__(self, dsn: str, ids: list[str], interval: float):
        super().__init__(daemon=True)
        self.dsn, self.ids, self.interval = dsn, list(ids), interval
        self.acked: dict[str, dict] = {}
        self.resent = 0
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def send(self, wf_id: str, payload: dict) -> None:
        from ilr import signal_in

        while not self.stop.is_set():
            try:
                with _connect(self.dsn) as conn, conn.transaction():
                    signal_in(conn, wf_id, "go", payload, sender="failover-harness")
                self.acked[wf_id] = payload
                return
            except psycopg.OperationalError:
                time.sleep(0.1)  # the primary is gone and the standby not promoted yet

    def run(self) -> None:
        try:
            for wf_id in self.ids:
                if self.stop.wait(self.interval):
                    return
                self.send(wf_id, {"wf": wf_id, "attempt": 1})
        except BaseException as exc:  # noqa: BLE001 - reported by the harness
            self.error = exc

    def resend_lost(self, conn) -> int:
        """Re-send every acknowledged signal the database lacks; returns how many."""
        have = {r["workflow_id"] for r in conn.execute("select workflow_id from ilr.signals where name = 'go'")}
        lost = [w for w in list(self.acked) if w not in have]
        for wf_id in lost:
            self.send(wf_id, {"wf": wf_id, "attempt": self.acked[wf_id]["attempt"] + 1})
        self.resent += len(lost)
        return len(lost)


def _walsender_pid(primary: Cluster) -> int:
    return int(primary.psql("select pid from pg_stat_replication where application_name = 'standby1'"))


def _commit() -> str:
    """HEAD's short hash, with "+uncommitted" when the engine, the harness or the migrations differ from it."""
    git = lambda *a: subprocess.run(
        ["git", *a],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    ).stdout.strip()
    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+uncommitted" if git("status", "--porcelain", "--", "ilr", "prove") else "")


# -- the run ------------------------------------------------------------------------------------------


def run(
    mode: str = "async",
    workflows: int = 24,
    lag: float = 1.5,
    kill_after: float = 0.35,
    lease_ttl: float = 4.0,
    sync_commit: str = "on",
    workdir: Path | None = None,
    timeout: float = 180.0,
    signal_interval: float = 0.25,
    out=sys.stdout,
) -> dict:
    """One failover under load; returns the figures (see the module docstring).

    Args:
        mode: "sync" or "async".
        workflows: how many failover_pay workflows run.
        lag: async: seconds between stopping the WAL sender and the kill.
        kill_after: the kill (async: the WAL sender stop) comes once this share of the
            workflows completed.
        lease_ttl: the workers' lease.
        sync_commit: sync: synchronous_commit ("on" or "remote_apply").
        workdir: where the clusters, ledgers and logs go (mode 755; default a new temp dir,
            removed at the end).
        timeout: seconds the workflows have to end after the promotion.
        signal_interval: seconds between the harness's "go" signals (one workflow each).

    Raises:
        TimeoutError: the setup or the workflows did not finish in time (every process is
            stopped first).
    """
    from demo.peers.target import target_process
    from ilr import grant_in
    from ilr._invariants import check_all, violations
    from ilr.management.commands.ilr_check import load_target_evidence

    if mode not in ("sync", "async"):
        raise ValueError(f"mode must be sync or async, not {mode!r}")
    say = lambda s: (out.write(f"[{mode}] {s}\n"), out.flush())  # noqa: E731
    own_dir = workdir is None
    root = Path(workdir or tempfile.mkdtemp(prefix=f"ilr-failover-{mode}-")).resolve()
    root.mkdir(parents=True, exist_ok=True)
    os.chmod(root, 0o755)
    primary, standby = Cluster(root / "primary"), Cluster(root / "standby")
    (root / "logs").mkdir(exist_ok=True)
    url = (
        f"postgresql://postgres@127.0.0.1:{primary.port},127.0.0.1:{standby.port}/{DB_NAME}"
        "?target_session_attrs=read-write"
    )
    dsn = (
        f"host=127.0.0.1,127.0.0.1 port={primary.port},{standby.port} user=postgres dbname={DB_NAME} "
        "target_session_attrs=read-write"
    )
    workers = Workers(url, root / "logs", lease_ttl)
    signaller = None
    ids = [f"fo-{mode}-{i:03d}" for i in range(workflows)]
    result: dict = {
        "mode": mode,
        "workflows": workflows,
        "lease_ttl_s": lease_ttl,
        "send_timeout_s": SEND_TIMEOUT,
        "settle_margin_s": SETTLE_MARGIN,
        "dsn_form": url.replace(str(primary.port), "P1").replace(str(standby.port), "P2"),
    }
    with ExitStack() as stack:
        if own_dir:
            stack.callback(shutil.rmtree, root, ignore_errors=True)
        stack.callback(lambda: [c.kill() for c in (primary, standby)])
        stack.callback(workers.close)
        # 1. primary, schema, standby.
        primary.init()
        primary.launch(
            {"wal_level": "replica", "max_wal_senders": 10, "max_replication_slots": 10, "wal_sender_timeout": "60s"}
        )
        primary.createdb()
        migrate = subprocess.run(
            [sys.executable, str(ROOT / "manage.py"), "migrate", "-v", "0"],
            cwd=ROOT,
            env=workers.env(),
            capture_output=True,
            text=True,
            timeout=300,
        )
        if migrate.returncode != 0:
            raise RuntimeError(f"migrate failed: {migrate.stderr[-2000:]}")
        standby.standby_of(primary, slot="standby1", application_name="standby1")
        standby.launch({"hot_standby": "on"})
        until(
            lambda: (
                primary.psql("select state from pg_stat_replication where application_name = 'standby1'") == "streaming"
            ),
            60,
            "the standby streaming",
        )
        if mode == "sync":
            primary.psql("alter system set synchronous_standby_names = 'standby1'")
            primary.psql(f"alter system set synchronous_commit = '{sync_commit}'")
            primary.psql("select pg_reload_conf()")
            until(
                lambda: (
                    primary.psql("select sync_state from pg_stat_replication where application_name = 'standby1'")
                    == "sync"
                ),
                30,
                "the standby synchronous",
            )
        result["server"] = primary.version().split(" on ")[0]
        result["replication"] = (
            f"synchronous: synchronous_standby_names='standby1', synchronous_commit={sync_commit}"
            if mode == "sync"
            else f"asynchronous (WAL sender SIGSTOPped {lag} s before the kill)"
        )
        say(f"primary :{primary.port}, standby :{standby.port}, {result['replication']}")
        # 2. targets, payments, the grant, workers, workflows.
        ledgers = {tier: root / f"ledger-t{tier}.sqlite" for tier in (1, 2)}
        urls = {tier: stack.enter_context(target_process(tier=tier, ledger=ledgers[tier])) for tier in (1, 2)}
        for tier, turl in urls.items():
            http_json("POST", f"{turl}/admin/delay", {"seconds": TARGET_DELAY[tier]})
            for i in range(workflows):
                http_json("POST", f"{turl}/admin/payments", {"id": f"pay{i}", "paid": 100_000})
        with _connect(primary.conninfo()) as conn:
            with conn.transaction():
                grant = grant_in(conn, "failover_pay", "refund", by="failover-policy", max_cents=1_000_000)
        workers.start("fo-w1")
        workers.start("fo-w2")
        with _connect(primary.conninfo()) as conn:
            until(
                lambda: (
                    conn.execute("select count(distinct worker_id) as n from ilr.worker_deployments").fetchone()["n"]
                    == 2
                ),
                90,
                "both workers registered",
            )
            for i, wf_id in enumerate(ids):
                case = {
                    "id": wf_id,
                    "payment": f"pay{i}",
                    "grant_id": grant,
                    "t1": {"url": urls[1], "tier": 1},
                    "t2": {"url": urls[2], "tier": 2},
                }
                conn.execute(
                    "insert into ilr.workflows (id, name, version, input) values (%s, 'failover_pay', '1', %s::jsonb)",
                    (wf_id, json.dumps(case)),
                )
        signaller = Signaller(dsn, ids, interval=signal_interval)
        stack.callback(signaller.stop.set)
        signaller.start()
        # 3. the kill.
        with _connect(primary.conninfo()) as conn:
            done_sql = "select count(*) as n from ilr.workflows where status = 'completed'"
            until(
                lambda: conn.execute(done_sql).fetchone()["n"] >= max(1, int(workflows * kill_after)),
                120,
                "the first workflows completing",
            )
            if mode == "async":
                os.kill(_walsender_pid(primary), signal.SIGSTOP)
                say(f"WAL sender stopped; the primary runs {lag} s ahead of the standby")
                time.sleep(lag)  # the measured window of unreplicated commits, not a wait on a condition
            acked = snapshot(primary.conninfo())
            in_flight = conn.execute(
                "select count(*) as n from ilr.workflows where status not in ('completed','failed','cancelled','stuck')"
            ).fetchone()["n"]
            running = conn.execute("select count(*) as n from ilr.workflows where status = 'running'").fetchone()["n"]
        t_kill = time.monotonic()
        primary.kill()
        say(f"primary SIGKILLed with {in_flight} workflows in flight ({running} running)")
        # 4. what the standby holds, then the promotion.
        with _connect(standby.conninfo()) as sconn:
            until(
                lambda: sconn.execute("select pg_last_wal_replay_lsn() >= pg_last_wal_receive_lsn() as ok").fetchone()[
                    "ok"
                ],
                30,
                "the standby's replay catching up",
            )
        at_promote = snapshot(standby.conninfo())
        standby.promote()
        t_promote = time.monotonic()
        say(f"standby promoted {t_promote - t_kill:.2f} s after the kill")
        # 5. progress on the new primary.
        with _connect(standby.conninfo()) as conn:
            steps0 = conn.execute("select count(*) as n from ilr.steps").fetchone()["n"]
            until(
                lambda: conn.execute("select count(*) as n from ilr.steps").fetchone()["n"] > steps0,
                timeout,
                "the first step recorded on the new primary",
            )
            t_progress = time.monotonic()
            resend_at = time.monotonic()

            def all_done() -> bool:
                nonlocal resend_at
                if time.monotonic() >= resend_at:  # lost signals, re-sent every 2 s until none is missing
                    signaller.resend_lost(conn)
                    resend_at = time.monotonic() + 2.0
                row = conn.execute(
                    "select count(*) filter (where status in ('completed','failed','cancelled',"
                    "'stuck')) as ended, count(*) as n from ilr.workflows"
                ).fetchone()
                return row["ended"] == row["n"] and signaller.acked.keys() >= set(ids)

            until(all_done, timeout, "every workflow ending on the new primary", interval=0.1)
            t_all = time.monotonic()
            ended = conn.execute("select id, status, result, error from ilr.workflows").fetchall()
            statuses = dict(Counter(r["status"] for r in ended))
            results = {r["id"]: r["result"] for r in ended}
            errors = {r["id"]: r["error"] for r in ended if r["status"] != "completed"}
        signaller.stop.set()
        workers.close()
        if signaller.error is not None:
            raise signaller.error
        final = snapshot(standby.conninfo())
        # 6. the old primary's own WAL, recovered where nobody else can reach it.
        primary.launch(listen=False)
        held = snapshot(f"host={primary.sock} port={primary.port} user=postgres dbname={DB_NAME}")
        primary.stop("immediate")
        # 7. the ledgers, the invariants, the receipts.
        evidence = {"ledger": [], "access_log": []}
        apps_by_tier: dict[int, dict[str, int]] = {1: {}, 2: {}}
        for tier in (1, 2):
            ev = load_target_evidence(str(ledgers[tier]))
            evidence["ledger"] += ev["ledger"]
            evidence["access_log"] += ev["access_log"] or []
            for row in ev["ledger"]:
                if row["source"] == "api":
                    apps_by_tier[tier][row["effect_id"]] = apps_by_tier[tier].get(row["effect_id"], 0) + 1
        with _connect(standby.conninfo()) as conn:
            inv = check_all(conn, evidence)
            receipts_out = _check_receipts(conn, apps_by_tier)
            settle = _lost_send_rule(conn, evidence["access_log"])
            timelines = (
                [r["timeline_id"] for r in conn.execute("select timeline_id from ilr.timelines order by 1")]
                if conn.execute("select to_regclass('ilr.timelines') as t").fetchone()["t"]
                else None
            )
    reissued = [
        k
        for k, c in held["claims"].items()
        if k in final["claims"] and final["claims"][k]["claimed_at"] != c["claimed_at"]
    ]
    statuses_by_effect: dict[str, int] = {}
    for r in results.values():
        for key in ("t1", "t2"):
            s = (r or {}).get(key, "none")
            statuses_by_effect[f"tier{key[1]}:{s}"] = statuses_by_effect.get(f"tier{key[1]}:{s}", 0) + 1
    result.update(
        {
            "in_flight_at_kill": in_flight,
            "running_at_kill": running,
            "kill_to_promote_s": round(t_promote - t_kill, 3),
            "promote_to_first_progress_s": round(t_progress - t_promote, 3),
            "kill_to_all_ended_s": round(t_all - t_kill, 3),
            "acknowledged_before_kill": _sizes(acked),
            "held_at_promotion": _sizes(at_promote),
            "lost_acknowledged": _lost(acked, at_promote),
            "lost_in_old_wal": _lost(held, at_promote),
            "signals_resent": signaller.resent,
            "epochs_issued_twice": len(reissued),
            "timelines": timelines,
            "workflow_statuses": statuses,
            "workflow_errors": errors,
            "effect_statuses": dict(sorted(statuses_by_effect.items())),
            "applications": {f"tier{t}": sum(a.values()) for t, a in apps_by_tier.items()},
            "duplicates": {f"tier{t}": sum(1 for n in a.values() if n > 1) for t, a in apps_by_tier.items()},
            "invariant_violations": violations(inv),
            "invariants_checked": sum(1 for v in inv.values() if isinstance(v, list)),
            "receipts": receipts_out,
            "lost_send_rule": settle,
        }
    )
    say(json.dumps({k: result[k] for k in ("lost_acknowledged", "duplicates", "receipts")}, default=str))
    return result


def _check_receipts(conn, apps_by_tier: dict[int, dict[str, int]]) -> dict:
    """verify() every effect's receipt and hold it against the ledger: happened True needs an
    application, happened False none, happened_once True exactly one."""
    from ilr import receipt_bundle, verify_receipt

    untruthful = []
    n = 0
    for row in conn.execute("select effect_id, tier, state from ilr.effects order by effect_id").fetchall():
        n += 1
        v = verify_receipt(receipt_bundle(conn, row["effect_id"]))
        apps = apps_by_tier.get(row["tier"], {}).get(row["effect_id"], 0)
        if (
            (v["happened"] is True and apps == 0)
            or (v["happened"] is False and apps > 0)
            or (v["happened_once"] is True and apps != 1)
            or not v["chain_intact"]
        ):
            untruthful.append(
                {
                    "effect_id": row["effect_id"],
                    "tier": row["tier"],
                    "state": row["state"],
                    "happened": v["happened"],
                    "happened_once": v["happened_once"],
                    "applications": apps,
                }
            )
    return {"checked": n, "untruthful": len(untruthful), "examples": untruthful[:5]}


def _lost_send_rule(conn, access_log: list[dict]) -> dict:
    """The failover rule (ilr.failover): a DISPATCHED that carries ``failover`` was authorized
    only after seen_at + send_timeout + settle_margin, and every earlier request for its key had
    been answered (or dropped) before it."""
    bad = []
    n = 0
    posts: dict[str, list[dict]] = {}
    for e in access_log:
        if e.get("method") == "POST" and e.get("path") == "/refunds" and e.get("key"):
            posts.setdefault(e["key"], []).append(e)
    for r in conn.execute("select effect_id, body from ilr.journal where kind = 'DISPATCHED'").fetchall():
        e = json.loads(r["body"])
        fo = e.get("failover")
        if not fo:
            continue
        n += 1
        settled_at = fo["seen_at"] + (e["send_deadline"] - e["ts"]) + (e.get("settle_margin") or 0)
        overlapping = [
            p
            for p in posts.get(r["effect_id"], [])
            if p["t_wall"] < e["ts"] and (p.get("t_done_wall") or p["t_wall"]) > e["ts"]
        ]
        if e["ts"] < settled_at - 1e-3 or overlapping:
            bad.append(
                {"effect_id": r["effect_id"], "ts": e["ts"], "settled_at": settled_at, "overlapping": len(overlapping)}
            )
    return {"first_sends_after_switch": n, "broken": len(bad), "examples": bad[:5]}


# -- the report ---------------------------------------------------------------------------------------


def write_results(rows: list[dict], command: str) -> None:
    """results/runtime_failover.json (one row per mode, the newest kept) and .md rendered from it."""
    commit = _commit()
    path = RESULTS.with_suffix(".json")
    kept = json.loads(path.read_text()) if path.exists() else []
    for row in rows:
        row.update({"command": command, "commit": commit, "machine": f"{os.cpu_count()} cores"})
        kept = [r for r in kept if r["mode"] != row["mode"]] + [row]
    kept.sort(key=lambda r: r["mode"] != "sync")
    path.write_text(json.dumps(kept, indent=2, default=str) + "\n")
    lines = [
        "# Failover: a primary killed mid-run, its standby promoted",
        "",
        "Made by `manage.py failover` (prove/harness/failover.py; "
        "each row's command and commit below). Two clusters of "
        "Debian's PostgreSQL server package, a streaming standby over a replication slot; two `ilr_worker` "
        "processes reach them through one multi-host URL; each workflow records a step, consumes a signal, "
        "sends a tier-1 and a tier-2 refund to the local payment targets under a policy grant, and records two "
        "more steps. The primary's postmaster and every child are SIGKILLed mid-run, then the standby is "
        "promoted (`pg_ctl promote`).",
        "",
        "*Acknowledged*: what the old primary showed committed just before the kill. *In the old WAL*: what its "
        "own WAL held at its death (its data directory recovered afterwards). *Lost*: not on the standby when it "
        "was promoted. Duplicates: effects the target applied more than once. Receipts: `verify_receipt()` of "
        "every effect held against the ledger (happened True needs an application, False none, happened_once "
        "True exactly one).",
        "",
    ]
    for r in kept:
        la, lw = r["lost_acknowledged"], r["lost_in_old_wal"]
        lines += [
            f"## {r['mode']}: {r['replication']}",
            "",
            f"`{r['command']}` at {r['commit']} ({r['machine']}, {r['server']}); DSN `{r['dsn_form']}`.",
            "",
            "| figure | value |",
            "|---|---|",
            f"| workflows (in flight at the kill; running) | {r['workflows']} ({r['in_flight_at_kill']}; "
            f"{r['running_at_kill']}) |",
            f"| kill to promoted / promoted to first step / kill to all ended (s) | {r['kill_to_promote_s']} / "
            f"{r['promote_to_first_progress_s']} / {r['kill_to_all_ended_s']} |",
            f"| acknowledged before the kill: steps, journal, signals, COMMITTED effects | "
            f"{r['acknowledged_before_kill']['steps']}, {r['acknowledged_before_kill']['journal']}, "
            f"{r['acknowledged_before_kill']['signals']}, {r['acknowledged_before_kill']['effects_committed']} |",
            f"| lost of the acknowledged: steps, journal (by kind), signals, claims, COMMITTED effects | "
            f"{la['steps']}, {la['journal']} {json.dumps(la['journal_by_kind'])}, {la['signals']}, "
            f"{la['claims']}, {la['effects_committed']} |",
            f"| lost of the old WAL: steps, journal (by kind), signals, claims, COMMITTED effects | "
            f"{lw['steps']}, {lw['journal']} {json.dumps(lw['journal_by_kind'])}, {lw['signals']}, "
            f"{lw['claims']}, {lw['effects_committed']} |",
            f"| signals re-sent by the client (lost) | {r['signals_resent']} |",
            f"| epochs issued twice (a lost claim's epoch claimed again) | {r['epochs_issued_twice']} |",
            f"| applications tier 1 / tier 2 | {r['applications']['tier1']} / {r['applications']['tier2']} |",
            f"| **duplicates tier 1 / tier 2** | **{r['duplicates']['tier1']} / {r['duplicates']['tier2']}** |",
            f"| effect statuses | {', '.join(f'{k} {v}' for k, v in r['effect_statuses'].items())} |",
            f"| workflow statuses | {', '.join(f'{k} {v}' for k, v in r['workflow_statuses'].items())} |",
            f"| invariants checked / violated | {r['invariants_checked']} / "
            f"{', '.join(r['invariant_violations']) or 'none'} |",
            f"| receipts checked / untruthful | {r['receipts']['checked']} / {r['receipts']['untruthful']} |",
            f"| first sends after the switch / broke the wait-out rule | "
            f"{r['lost_send_rule']['first_sends_after_switch']} / {r['lost_send_rule']['broken']} |",
            f"| timelines recorded | {r['timelines']} |",
            "",
        ]
        if r["invariant_violations"]:
            lines += [
                "Violations (first rows):",
                "",
                "```",
                *[f"{k}: {json.dumps(v[:3], default=str)}" for k, v in r["invariant_violations"].items()],
                "```",
                "",
            ]
        if r["receipts"]["examples"]:
            lines += [
                "Untruthful receipts (first rows):",
                "",
                "```",
                *[json.dumps(e, default=str) for e in r["receipts"]["examples"]],
                "```",
                "",
            ]
    RESULTS.with_suffix(".md").write_text("\n".join(lines) + "\n")


__all__ = ["run", "write_results", "snapshot", "failover_pay", "free_port"]
