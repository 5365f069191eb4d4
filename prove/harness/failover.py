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

The reads and checks are in prove/harness/failover_checks.py, the worker subprocesses and the
signalling thread in prove/harness/failover_workers.py, the report (``write_results``) in
prove/harness/failover_report.py.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import ExitStack
from pathlib import Path

from demo.peers.targets_client import LocalRefunds, http_json
from ilr import workflow
from prove.harness.failover_checks import check_receipts, connect, lost, lost_send_rule, sizes, snapshot
from prove.harness.failover_workers import Signaller, Workers, walsender_pid
from prove.harness.waiting import until
from prove.peers.pg_cluster import DB_NAME, Cluster, free_port
from prove.queries import (
    FAILOVER_ACTIVE_COUNT,
    FAILOVER_COMPLETED_COUNT,
    FAILOVER_ENDED_AND_TOTAL,
    FAILOVER_HAS_TIMELINES,
    FAILOVER_OUTCOMES,
    FAILOVER_RUNNING_COUNT,
    FAILOVER_START,
    FAILOVER_STEP_COUNT,
    FAILOVER_TIMELINES,
    FAILOVER_WORKER_COUNT,
)

ROOT = Path(__file__).resolve().parents[2]
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
        with connect(primary.conninfo()) as conn:
            with conn.transaction():
                grant = grant_in(conn, "failover_pay", "refund", by="failover-policy", max_cents=1_000_000)
        workers.start("fo-w1")
        workers.start("fo-w2")
        with connect(primary.conninfo()) as conn:
            until(
                lambda: conn.execute(FAILOVER_WORKER_COUNT).fetchone()["n"] == 2,
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
                conn.execute(FAILOVER_START, (wf_id, json.dumps(case)))
        signaller = Signaller(dsn, ids, interval=signal_interval)
        stack.callback(signaller.stop.set)
        signaller.start()
        # 3. the kill.
        with connect(primary.conninfo()) as conn:
            until(
                lambda: conn.execute(FAILOVER_COMPLETED_COUNT).fetchone()["n"] >= max(1, int(workflows * kill_after)),
                120,
                "the first workflows completing",
            )
            if mode == "async":
                os.kill(walsender_pid(primary), signal.SIGSTOP)
                say(f"WAL sender stopped; the primary runs {lag} s ahead of the standby")
                time.sleep(lag)  # the measured window of unreplicated commits, not a wait on a condition
            acked = snapshot(primary.conninfo())
            in_flight = conn.execute(FAILOVER_ACTIVE_COUNT).fetchone()["n"]
            running = conn.execute(FAILOVER_RUNNING_COUNT).fetchone()["n"]
        t_kill = time.monotonic()
        primary.kill()
        say(f"primary SIGKILLed with {in_flight} workflows in flight ({running} running)")
        # 4. what the standby holds, then the promotion.
        with connect(standby.conninfo()) as sconn:
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
        with connect(standby.conninfo()) as conn:
            steps0 = conn.execute(FAILOVER_STEP_COUNT).fetchone()["n"]
            until(
                lambda: conn.execute(FAILOVER_STEP_COUNT).fetchone()["n"] > steps0,
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
                row = conn.execute(FAILOVER_ENDED_AND_TOTAL).fetchone()
                return row["ended"] == row["n"] and signaller.acked.keys() >= set(ids)

            until(all_done, timeout, "every workflow ending on the new primary", interval=0.1)
            t_all = time.monotonic()
            ended = conn.execute(FAILOVER_OUTCOMES).fetchall()
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
        with connect(standby.conninfo()) as conn:
            inv = check_all(conn, evidence)
            receipts_out = check_receipts(conn, apps_by_tier)
            settle = lost_send_rule(conn, evidence["access_log"])
            timelines = (
                [r["timeline_id"] for r in conn.execute(FAILOVER_TIMELINES)]
                if conn.execute(FAILOVER_HAS_TIMELINES).fetchone()["t"]
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
            "acknowledged_before_kill": sizes(acked),
            "held_at_promotion": sizes(at_promote),
            "lost_acknowledged": lost(acked, at_promote),
            "lost_in_old_wal": lost(held, at_promote),
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


__all__ = ["run", "failover_pay", "free_port"]
