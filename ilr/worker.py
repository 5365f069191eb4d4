"""The worker: claim loop, heartbeat with the local lease, and the run of one workflow
(docs/protocol.md §3.1 to §3.4; the local lease is §3.3).

Connection budget per worker process: ``concurrency`` run connections (one per run thread),
plus one each for claims, the heartbeat and LISTEN: ``concurrency + 3``. Eight workers of
concurrency 4 use 56 of PostgreSQL's default 100.

Wakeups: a trigger on ilr.workflows notifies channel ``ilr_claimable`` when a row becomes due
now (a start, a signal or cancel waking a sleeper, a child waking its parent); the listener
thread wakes the claim loop. Polling every ``poll`` seconds stays the fallback for what no
notification announces (a timer coming due, a lapsed lease) and for a lost notification: a
listener that reconnects claims at once, so nothing waits longer than one poll.

Database faults (``db.is_connection_fault``: a lost connection, a server shutting down, a
server refusing writes as read-only) never end the worker: the claim, heartbeat and listen
loops log a warning, drop the connection and retry on a new one; a run that meets one stops
where it is (never marked failed). A broken connection is not a lost lease and not a crash:

- every pooled connection is checked when it is taken (``db.usable``, no round trip), so the
  connections a database restart killed are replaced before a run's first statement meets one;
- a run abandoned for a fault, or fenced out after one, is released by this worker as soon as
  the database takes writes again (RELEASE_SQL, before its next claim): the workflow is due at
  once, and the claim that takes it counts no takeover toward the crash-loop guard.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import psycopg

from ilr import codec, conf, db, failover, killpoints, registry, store
from ilr.batch import Batch
from ilr.context import WorkflowContext, dumps_error
from ilr.errors import Cancelled, Fenced, InterlockError, InvalidInput, Suspend
from ilr.registry import WorkflowDefinition
from ilr.targets import check_target, registered_targets

log = logging.getLogger("ilr.worker")

CLAIM_SQL = """
with expired as (
  select id, status as prev_status, lease_expires_at as prev_lease
    from ilr.workflows
   where status = 'running' and lease_expires_at <= now()
     and (name, version) in (select * from unnest(%(names)s::text[], %(versions)s::text[]))
   order by id
   limit %(n)s
   for update skip locked),
due as (
  select id, status as prev_status, lease_expires_at as prev_lease
    from ilr.workflows
   where status in ('pending','sleeping') and available_at <= now()
     and (name, version) in (select * from unnest(%(names)s::text[], %(versions)s::text[]))
   order by available_at
   limit %(n)s
   for update skip locked),
c as (select * from expired union all select * from due limit %(n)s),
u as (
  update ilr.workflows w
     set status = 'running', epoch = ilr.next_epoch(w.epoch), owner = %(owner)s,
         takeovers = w.takeovers + (c.prev_status = 'running')::int,
         lease_expires_at = now() + make_interval(secs => %(ttl)s), updated_at = now()
    from c
   where w.id = c.id
  returning w.id, w.name, w.version, w.input, w.epoch, w.waiting, w.takeovers, w.parent_id,
            w.cancel_requested_at, w.lease_expires_at, c.prev_status, c.prev_lease,
            coalesce((w.waiting->>'until')::timestamptz <= now(), true) as waiting_due,
            case when w.parent_id is null and w.continued_from is null then w.created_at
                 else ilr.lineage_created_at(w.id) end as born_at,
            now() as now),
h as (
  insert into ilr.claims (workflow_id, epoch, owner, version, claimed_at, lease_expires_at,
                          prev_status, prev_lease_expires_at)
  select id, epoch, %(owner)s, version, now, lease_expires_at, prev_status, prev_lease from u)
select * from u
"""
"""The claim (docs/protocol.md §3.1), in two scans: lapsed leases (takeovers) first, then due
rows oldest first.

Each scan follows one partial index and stops after the rows it locks: wf_due in available_at
order for the due rows, and wf_running in id order for the lapsed leases. A single
``where (due) or (lapsed) order by available_at`` can only be planned as a bitmap scan of both
indexes plus a sort of every due row, so each claim would read and sort the whole backlog
(tests/test_claim_plan.py reads the plan). ``order by id`` keeps the lapsed-lease scan a plain
index scan, which marks the index entries of rows that left 'running' dead as it passes them;
a bitmap scan would visit them again on every claim until vacuum. A CTE is read only as far as
its reader asks, so ``c``'s LIMIT stops the due scan, and its row locks, once lapsed leases and
due rows together fill ``n``. Takeovers first: a lapsed lease is work that was already started.
"""

STEPS_OF_THIS_CLAIM_SQL = """
select s.workflow_id, s.seq, s.name, s.kind, s.fingerprint, s.output, s.error
  from ilr.workflows w
  join ilr.steps s on s.workflow_id = w.id
 where w.status = 'running' and w.owner = %(owner)s
   and w.lease_expires_at = now() + make_interval(secs => %(ttl)s)
 order by s.workflow_id, s.seq
"""
"""The step rows of the workflows the claim statement before it (same transaction) took.

A claimed row has exactly this transaction's now() + ttl as its lease (wf_running serves the
lookup: the running rows, filtered by lease). The statement runs after the claim statement and
takes its own snapshot then (READ COMMITTED), so it sees every step committed before the claim
locked the rows; a previous owner's later write is refused by its fence. Rows of another
transaction with the same lease value would only add rows for ids this claim did not take; the
caller keeps only its ids.
"""


def claim_due(conn, params: dict) -> tuple[list[dict], list[dict]]:
    """The claim transaction: CLAIM_SQL, then STEPS_OF_THIS_CLAIM_SQL, in one Batch (one round
    trip, one commit; both statements prepared on ``conn`` as Batch prepares, below its cap).

    Args:
        conn: an idle autocommit connection from db.connect.
        params: CLAIM_SQL's parameters (names, versions, n, owner, ttl in seconds).

    Returns:
        (the claimed workflow rows, their step rows ordered by workflow and seq); no step rows
        when nothing was claimed.
    """
    with Batch(conn) as claim:
        claim_cur = claim.execute(CLAIM_SQL, params)
        steps_cur = claim.execute(STEPS_OF_THIS_CLAIM_SQL, params)
    rows = claim_cur.fetchall()
    return rows, (steps_cur.fetchall() if rows else [])


WAKEUP_CHANNEL = "ilr_claimable"
"""The NOTIFY channel of ilr.notify_claimable() (migration 0003)."""

HEARTBEAT_SQL = """
update ilr.workflows w
   set lease_expires_at = now() + make_interval(secs => %(ttl)s), updated_at = now()
  from unnest(%(ids)s::text[], %(epochs)s::bigint[]) as a(id, epoch)
 where w.id = a.id and w.epoch = a.epoch and w.status = 'running' and w.lease_expires_at > now()
returning w.id, w.epoch, w.cancel_requested_at
"""

RELEASE_SQL = """
update ilr.workflows w
   set status = 'pending', owner = null, lease_expires_at = null, available_at = now(), updated_at = now()
  from unnest(%(ids)s::text[], %(epochs)s::bigint[]) as a(id, epoch)
 where w.id = a.id and w.epoch = a.epoch and w.status = 'running' and w.owner = %(owner)s
returning w.id, w.epoch
"""
"""Give back claims this worker abandoned for a database fault: due now, epoch kept, takeovers
untouched (the next claim sees prev_status 'pending', so it counts no takeover).

No lease test, on purpose: a claim at this epoch that is still 'running' is held by nobody
else (every claim bumps the epoch), lapsed or not; releasing it is the takeover it would get,
without counting one. Races: a claim of the same row locks it FOR UPDATE SKIP LOCKED. When the
release holds the lock, the claim skips the row and the next claim finds it pending; when the
claim holds it, the release waits, re-reads the row at the new epoch and matches nothing. Only
runs that returned are released, so no body of that epoch is still executing when a successor
may start one (the local-lease argument of ``Run`` needs no lapse here)."""

DEPLOYMENT_REFRESH_MIN = 5.0
"""Seconds, the shortest default period of a worker's ilr.worker_deployments refresh: the
default period is max(lease_ttl, DEPLOYMENT_REFRESH_MIN) (``Worker(deployment_refresh=...)``,
``ilr_worker --deployment-refresh``, ILR_DEPLOYMENT_REFRESH (ilr.conf) override it)."""
DEPLOYMENT_STALE_AFTER = 3
"""Refresh periods a worker_deployments row stays live: each refresh writes live_until =
now() + DEPLOYMENT_STALE_AFTER * period, and a row is live while live_until > now()."""

SEEN_SQL = """
insert into ilr.worker_deployments (worker_id, name, version, seen_at, live_until)
select %(worker)s, a.name, a.version, now(), now() + make_interval(secs => %(live)s)
  from unnest(%(names)s::text[], %(versions)s::text[]) as a(name, version)
on conflict (worker_id, name, version) do update set seen_at = excluded.seen_at, live_until = excluded.live_until
"""
"""Upsert every (name, version) this worker serves as seen now: at register and on each refresh."""


class CodeChanged(InterlockError):
    """A deployment's code_sha256 differs from the running code; the worker exits 2
    (docs/protocol.md §4, versions).

    Attributes:
        name, version: the deployment.
        deployed: the code_sha256 recorded for it; running: this worker's.
    """

    code = "ILR-040"

    def __init__(self, name: str, version: str, deployed: str, running: str):
        self.name = name
        self.version = version
        self.deployed = deployed
        self.running = running
        super().__init__(
            f"workflow {name!r} version {version!r} ({name}@{version}) is deployed with code_sha256 {deployed} "
            f"but this worker's code has code_sha256 {running}: the module source changed under the same "
            f"version. Bump the version, guard the change with ctx.patched, or pass --allow-code-change")


class PoolerRefused(InterlockError):
    """ILR_POOLER declares a pooler the worker cannot run behind (ilr.conf); the worker exits 2."""

    code = "ILR-041"


POOLERS = (None, "session", "transaction")


def check_pooler(pooler) -> None:
    """Refuse transaction pooling at start, in one sentence naming what needs session mode.

    Behind a pool that hands the server connection back after each transaction, a LISTEN
    outlives the transaction that ran it on a server connection another client then holds, and
    the statements ilr.batch prepares on one server connection are missing on the next: wakeups
    would be lost and claims, effects and step records would fail at random.

    Raises:
        PoolerRefused: ``pooler`` is "transaction" or not one of POOLERS.
    """
    if pooler == "transaction":
        raise PoolerRefused(
            "ILR_POOLER is 'transaction', but a worker needs session pooling: it LISTENs for wakeups and keeps "
            "prepared statements (claims, effects, step records) on its connections for their lifetime; point "
            "the worker at a PgBouncer pool in pool_mode=session or straight at PostgreSQL")
    if pooler not in POOLERS:
        raise PoolerRefused(f"ILR_POOLER must be unset, 'session' or 'transaction', got {pooler!r}")


class Run:
    """One claim of one workflow, as the worker holds it.

    The local lease (docs/protocol.md §3.3): ``t0 = time.monotonic()`` is read before each
    transaction that renews the lease (the claim, every fenced write, every heartbeat), and
    ``local_lease = t0 + lease_ttl``. t0 precedes the transaction's now(), so under A5 (a
    worker's monotonic clock runs no faster than the database clock) local_lease <=
    lease_expires_at. A body that checks ``monotonic() < local_lease`` therefore starts before
    any successor could claim, so before any successor's step row exists (NoRerunAfterComplete).
    Residual, A1: a pause between the check and the body start.
    """

    def __init__(self, row: dict, lease_ttl: float, t0: float, steps: dict[int, dict] | None = None):
        self.workflow_id: str = row["id"]
        self.name: str = row["name"]
        self.version: str = row["version"]
        self.input = row["input"]
        self.epoch: int = row["epoch"]
        self.waiting: dict | None = row["waiting"]
        self.waiting_due: bool = row["waiting_due"]
        self.takeovers: int = row["takeovers"]
        self.parent_id: str | None = row.get("parent_id")
        self.cancel_requested = row["cancel_requested_at"] is not None
        self.lease_ttl = lease_ttl
        self.claimed_t0 = t0  # monotonic time before the claim transaction
        self.local_lease = t0 + lease_ttl
        self.fenced = False
        self.released = False
        self.steps = steps  # the step rows read with the claim, by seq; None: load them
        self.born_at = row.get("born_at")  # the earliest created_at of its lineage (ilr.failover)
        self.failover: dict | None = None  # the worker's last timeline switch at the claim (ilr.failover)
        self.context: WorkflowContext | None = None  # set when the run starts; holds its connection

    clock = staticmethod(time.monotonic)

    def renewed(self, t0: float, cancel_requested_at) -> None:
        """A lease-renewing transaction that began at monotonic ``t0`` committed."""
        self.local_lease = max(self.local_lease, t0 + self.lease_ttl)
        if cancel_requested_at is not None:
            self.cancel_requested = True

    def require_local_lease(self) -> None:
        """Raise Fenced unless this claim is still live by the local clock (docs/protocol.md §3.3).

        Called right before a step body, a decide call or a send starts.
        """
        if self.fenced or time.monotonic() >= self.local_lease:
            self.fenced = True
            raise Fenced(f"workflow {self.workflow_id}: local lease of epoch {self.epoch} ran out")


class Worker:
    """Claims and runs workflows of the registered (name, version) pairs.

    Args:
        worker_id: the owner name written on claims.
        definitions: the workflows this worker runs; default every registered one. A worker
            never claims a pair it did not register (VersionPinned).
        concurrency: runs in flight at once (threads). Default 4.
        lease_ttl: seconds a claim lives without renewal. Default 30.
        poll: seconds between claim attempts when idle. Default 1.0.
        max_takeovers: crash-loop guard (docs/protocol.md §3.4). Default 5.
        allow_code_change: accept a changed code_sha256 for an existing (name, version).
        dsn: conninfo; default Django's DATABASES["default"].
        deployment_refresh: seconds between refreshes of this worker's ilr.worker_deployments
            rows; default max(lease_ttl, DEPLOYMENT_REFRESH_MIN). A row is live for
            DEPLOYMENT_STALE_AFTER periods after its last refresh.
    """

    def __init__(self, worker_id: str, definitions: Iterable[WorkflowDefinition] | None = None, *,
                 concurrency: int = 4, lease_ttl: float = 30.0, poll: float = 1.0, max_takeovers: int = 5,
                 allow_code_change: bool = False, dsn: str | None = None, deployment_refresh: float | None = None):
        if concurrency < 1 or lease_ttl <= 0 or poll <= 0:
            raise InvalidInput("worker", "concurrency >= 1, lease_ttl > 0 and poll > 0 are required")
        if deployment_refresh is not None and not deployment_refresh > 0:
            raise InvalidInput("deployment_refresh", "a positive number of seconds is required")
        self.worker_id = worker_id
        self.definitions = list(definitions) if definitions is not None else registry.all_definitions()
        if not self.definitions:
            raise InvalidInput("definitions", "this worker has no registered workflows to run")
        self.concurrency = concurrency
        self.lease_ttl = float(lease_ttl)
        self.poll = poll
        self.max_takeovers = max_takeovers
        self.allow_code_change = allow_code_change
        self.deployment_refresh = float(deployment_refresh or max(self.lease_ttl, DEPLOYMENT_REFRESH_MIN))
        self.dsn = dsn or db.conninfo()
        self._stop = threading.Event()
        self._wake = threading.Event()
        # In-flight runs by (workflow id, epoch), not by id alone: a run whose lease lapsed is
        # still inside its step when this worker claims the workflow again, so two runs of one
        # workflow can be in flight here at once, and each must add, renew and remove only itself.
        self._active: dict[tuple[str, int], Run] = {}
        self._conns: queue.SimpleQueue = queue.SimpleQueue()
        self._claim_conn: db.Connection | None = None
        # Claims (workflow id, epoch) whose run ended on a database fault, to release (RELEASE_SQL)
        # from the claim loop, before its next claim, once the database takes writes again.
        self._abandoned: list[tuple[str, int]] = []
        self._abandoned_lock = threading.Lock()
        self._last_fault = float("-inf")  # monotonic time any thread of this worker last met a fault
        self.failover: dict | None = None  # the last timeline switch (ilr.failover.seen), read per claim connection
        self.heartbeats = 0
        self.worst_heartbeat_gap = 0.0
        """Seconds, the longest time between two lease renewals by the heartbeat thread while
        runs were held (schedule: lease_ttl / 3); a starved thread shows here first."""

    # -- lifecycle -------------------------------------------------------------------------------

    def stop(self) -> None:
        """Stop claiming; ``run`` returns once in-flight runs finish (SIGTERM does this)."""
        self._stop.set()
        self._wake.set()

    def register(self) -> None:
        """Insert this worker's deployments; refuse a changed code hash (docs/protocol.md §4).

        A new (name, version) is inserted with this worker's code_sha256. An existing one with
        another hash is refused (CodeChanged: the worker exits 2, naming the name, the version
        and both hashes) unless allow_code_change, which records the new hash. A worker claims
        only the pairs it registered here (VersionPinned). Then every pair is upserted into
        ilr.worker_deployments as served by this worker (SEEN_SQL); the heartbeat thread
        refreshes them and ``run`` deletes them on a clean exit.

        Raises:
            CodeChanged: an existing (name, version) has another code_sha256 and
                allow_code_change is false.
        """
        check_pooler(conf.settings.POOLER)
        for target in registered_targets().values():
            # docs/protocol.md §6.5: refuse a tier-1 target with a thin dedup margin.
            check_target(target)
        with db.connect(self.dsn, application_name=f"ilr-worker-{self.worker_id}") as conn:
            for d in self.definitions:
                digest = d.code_sha256
                row = conn.execute(
                    "insert into ilr.deployments (name, version, code_sha256) values (%s, %s, %s) "
                    "on conflict (name, version) do update set name = excluded.name "
                    "returning code_sha256", (d.name, d.version, digest)).fetchone()
                assert row is not None  # ON CONFLICT DO UPDATE: RETURNING yields the inserted or updated row
                if row["code_sha256"] != digest:
                    if not self.allow_code_change:
                        raise CodeChanged(d.name, d.version, row["code_sha256"], digest)
                    log.warning("%s: %s@%s code_sha256 %s replaces %s (--allow-code-change)", self.worker_id,
                                d.name, d.version, digest, row["code_sha256"])
                    conn.execute("update ilr.deployments set code_sha256 = %s where name = %s and version = %s",
                                 (digest, d.name, d.version))
            conn.execute(SEEN_SQL, self._seen_params())

    def run(self) -> None:
        """Claim and run until ``stop()``; then wait for in-flight runs and return."""
        self.register()
        # Open the run connections up front: a claim is then followed by nothing but the step
        # load on an open connection, and a slow connect can never stall a claimed run.
        for _ in range(self.concurrency):
            self._conns.put(db.connect(self.dsn, application_name=f"ilr-worker-{self.worker_id}"))
        heartbeat = threading.Thread(target=self._heartbeat_loop, name=f"{self.worker_id}-heartbeat", daemon=True)
        heartbeat.start()
        threading.Thread(target=self._listen_loop, name=f"{self.worker_id}-listen", daemon=True).start()
        with ThreadPoolExecutor(self.concurrency, thread_name_prefix=self.worker_id) as pool:
            while not self._stop.is_set():
                free = self.concurrency - len(self._active)
                claimed: list[tuple[dict, float, dict[int, dict]]] = []
                released = True
                if self._abandoned:
                    try:
                        # Before the claim, on the same connection: this worker's own claim never
                        # takes one of its abandoned rows as a lapsed-lease takeover.
                        self._release_abandoned()
                    except psycopg.Error as exc:
                        if not db.is_connection_fault(exc):
                            raise
                        self._fault()
                        released = False
                        log.warning("%s: release of abandoned runs failed (%s); retrying", self.worker_id, exc)
                        self._drop_claim_conn()
                if free > 0 and released:
                    try:
                        claimed = self._claim(free)
                    except psycopg.Error as exc:
                        if not db.is_connection_fault(exc):
                            raise
                        self._fault()
                        log.warning("%s: claim failed (%s); retrying", self.worker_id, exc)
                        self._drop_claim_conn()
                for row, t0, steps in claimed:
                    run = Run(row, self.lease_ttl, t0, steps)
                    run.failover = self.failover
                    # The claim took the row at a newer epoch, so a run of ours still holding an
                    # older one lost its lease: fence it now, so it starts no body before its next
                    # write is refused (it keeps its slot until its thread returns).
                    for older in list(self._active.values()):
                        if older.workflow_id == run.workflow_id:
                            older.fenced = True
                    self._active[(run.workflow_id, run.epoch)] = run
                    pool.submit(self._execute, run)
                if not claimed or len(claimed) < free:
                    self._wake.wait(self.poll)
                    self._wake.clear()
        self._drop_claim_conn()
        heartbeat.join(timeout=self.lease_ttl)  # its last refresh of worker_deployments comes before the delete
        self._unregister()
        while not self._conns.empty():
            self._conns.get().close()

    # -- claims and heartbeats ---------------------------------------------------------------

    def _claim(self, n: int) -> list[tuple[dict, float, dict[int, dict]]]:
        """Claim up to ``n`` due workflows and read their step rows: one transaction, one round
        trip (one Batch), one commit. Returns [(claimed row, t0, {seq: step row})]."""
        conn = self._claim_connection()
        params = {"names": [d.name for d in self.definitions], "versions": [d.version for d in self.definitions],
                  "n": n, "owner": self.worker_id, "ttl": self.lease_ttl}
        t0 = time.monotonic()  # before the claim transaction: the local lease starts here
        rows, step_rows = claim_due(conn, params)
        if not rows:
            return []
        steps: dict[str, dict[int, dict]] = {row["id"]: {} for row in rows}
        for step in step_rows:
            if step["workflow_id"] in steps:
                steps[step["workflow_id"]][step["seq"]] = step
        killpoints.hit("claimed")
        return [(row, t0, steps[row["id"]]) for row in rows]

    def _claim_connection(self) -> db.Connection:
        """The claim connection; a new one reads the server's timeline first (failover.seen): a
        claim on a promoted standby is made only after this worker knows of the switch."""
        if not db.usable(self._claim_conn):
            db.discard(self._claim_conn)
            self._claim_conn = None
            conn = db.connect(self.dsn, application_name=f"ilr-worker-{self.worker_id}-claim")
            try:
                self.failover = failover.seen(conn)
            except BaseException:
                db.discard(conn)
                raise
            self._claim_conn = conn
        return self._claim_conn

    def _drop_claim_conn(self) -> None:
        db.discard(self._claim_conn)
        self._claim_conn = None

    def _fault(self) -> None:
        """Note that a thread of this worker met a database fault now (see ``_execute``)."""
        self._last_fault = time.monotonic()

    def _abandon(self, run: Run) -> None:
        """Queue ``run``'s claim for RELEASE_SQL (the run has returned)."""
        with self._abandoned_lock:
            self._abandoned.append((run.workflow_id, run.epoch))
        self._wake.set()

    def _release_abandoned(self) -> None:
        """Release every queued abandoned claim in one statement on the claim connection; the
        queue keeps them when the statement fails (a connection fault: retried next loop)."""
        with self._abandoned_lock:
            pending = list(self._abandoned)
        if not pending:
            return
        rows = self._claim_connection().execute(RELEASE_SQL, {
            "ids": [wf for wf, _ in pending], "epochs": [epoch for _, epoch in pending], "owner": self.worker_id,
        }).fetchall()
        with self._abandoned_lock:
            self._abandoned = [c for c in self._abandoned if c not in pending]
        for row in rows:
            log.info("%s: released %s (epoch %s) after a database fault", self.worker_id, row["id"], row["epoch"])

    def _listen_loop(self) -> None:
        """LISTEN on WAKEUP_CHANNEL and wake the claim loop on each notification."""
        conn = None
        while not self._stop.is_set():
            try:
                if conn is None or conn.closed:
                    conn = db.connect(self.dsn, application_name=f"ilr-worker-{self.worker_id}-listen")
                    conn.execute(f"listen {WAKEUP_CHANNEL}")
                    self._wake.set()  # whatever was announced while nobody listened: claim now
                for _ in conn.notifies(timeout=1.0):
                    self._wake.set()
            except psycopg.Error as exc:
                if not db.is_connection_fault(exc):
                    raise
                self._fault()
                log.warning("%s: listen connection failed (%s); polling meanwhile", self.worker_id, exc)
                if conn is not None:
                    conn.close()
                conn = None
                self._stop.wait(min(self.poll, 1.0))
        if conn is not None:
            conn.close()

    def _heartbeat_loop(self) -> None:
        conn = None
        last_beat: float | None = None  # monotonic time of the last renewal while runs were held
        interval = self.lease_ttl / 3
        next_beat = time.monotonic() + interval
        next_seen = time.monotonic() + self.deployment_refresh  # register() wrote the first one
        while not (self._stop.is_set() and not self._active):
            # Short naps so a stopping worker exits soon after its last run; beats every ttl/3.
            time.sleep(min(0.1, max(0.0, next_beat - time.monotonic())))
            if time.monotonic() >= next_seen:  # low frequency, beside the lease renewals
                next_seen = time.monotonic() + self.deployment_refresh
                conn = self._refresh_deployments(conn)
            if time.monotonic() < next_beat:
                continue
            next_beat = time.monotonic() + interval
            runs = [r for r in list(self._active.values()) if not r.fenced and not r.released]
            if not runs:
                last_beat = None
                continue
            try:
                if not db.usable(conn):
                    db.discard(conn)
                    conn = db.connect(self.dsn, application_name=f"ilr-worker-{self.worker_id}-heartbeat")
                t0 = time.monotonic()
                rows = conn.execute(HEARTBEAT_SQL, {
                    "ttl": self.lease_ttl, "ids": [r.workflow_id for r in runs], "epochs": [r.epoch for r in runs],
                }).fetchall()
            except psycopg.Error as exc:
                if not db.is_connection_fault(exc):
                    raise
                # Renewed nothing: each run's local lease runs out on its own, and the fence
                # refuses its writes once its lease lapsed. A fresh connection next beat (a
                # read-only server may be a demoted primary; the next one may reach its successor).
                self._fault()
                log.warning("%s: heartbeat failed (%s)", self.worker_id, exc)
                if conn is not None:
                    conn.close()
                conn = None
                continue
            done = time.monotonic()
            if last_beat is not None:
                self.worst_heartbeat_gap = max(self.worst_heartbeat_gap, done - last_beat)
            last_beat = done
            self.heartbeats += 1
            live = {(row["id"], row["epoch"]): row for row in rows}
            for r in runs:
                if (r.workflow_id, r.epoch) in live:
                    r.renewed(t0, live[(r.workflow_id, r.epoch)]["cancel_requested_at"])
                elif not r.released:
                    r.fenced = True  # zero rows: another epoch owns it, or the lease lapsed
        if conn is not None:
            conn.close()

    def _seen_params(self) -> dict:
        return {"worker": self.worker_id, "names": [d.name for d in self.definitions],
                "versions": [d.version for d in self.definitions],
                "live": DEPLOYMENT_STALE_AFTER * self.deployment_refresh}

    def _refresh_deployments(self, conn: db.Connection | None) -> db.Connection | None:
        """Mark every pair this worker serves as seen now (SEEN_SQL, one statement) on the
        heartbeat connection ``conn`` (opened when None or closed).

        Returns:
            the connection, or None after a database error (logged; the next refresh retries).
        """
        try:
            if not db.usable(conn):
                db.discard(conn)
                conn = db.connect(self.dsn, application_name=f"ilr-worker-{self.worker_id}-heartbeat")
            conn.execute(SEEN_SQL, self._seen_params())
            return conn
        except psycopg.Error as exc:
            log.warning("%s: worker_deployments refresh failed (%s)", self.worker_id, exc)
            if conn is not None:
                conn.close()
            return None

    def _unregister(self) -> None:
        """Delete this worker's ilr.worker_deployments rows (a clean exit); a database error is
        logged and the rows go stale by themselves."""
        try:
            with db.connect(self.dsn, application_name=f"ilr-worker-{self.worker_id}") as conn:
                conn.execute("delete from ilr.worker_deployments where worker_id = %s", (self.worker_id,))
        except psycopg.Error as exc:
            log.warning("%s: could not delete its worker_deployments rows (%s)", self.worker_id, exc)

    # -- one run -----------------------------------------------------------------------------

    def _get_conn(self) -> db.Connection:
        """A pooled run connection that is still usable (``db.usable``), else a new one.

        A database restart kills every pooled connection while it sits idle; each dead one is
        dropped here, before a claimed run's first statement could meet it."""
        while True:
            try:
                conn = self._conns.get_nowait()
            except queue.Empty:
                break
            if db.usable(conn):
                return conn
            db.discard(conn)
        return db.connect(self.dsn, application_name=f"ilr-worker-{self.worker_id}")

    def _execute(self, run: Run) -> None:
        healthy = True
        conn = None
        try:
            conn = self._get_conn()
            self._run_workflow(conn, run)
        except Fenced:
            log.info("%s: fenced out of %s (epoch %s)", self.worker_id, run.workflow_id, run.epoch)
            if self._last_fault >= run.claimed_t0:
                # Fenced after a database fault during this claim: the lease ran out while the
                # database was away. If nobody claimed since, give it back without a takeover;
                # if somebody did, the epoch test makes the release a no-op.
                self._abandon(run)
        except Exception as exc:  # noqa: BLE001 - a worker never dies of one workflow
            if db.is_connection_fault(exc):
                # The run stops here: a write that committed is replayed from its row, one that
                # did not (or whose outcome is unknown: the error came after its commit was
                # sent) is redone by the next claim. The release makes that claim come at once
                # and count no takeover; a write that did commit a terminal or sleeping status
                # leaves the row not 'running', and the release matches nothing.
                healthy = False
                self._fault()
                self._abandon(run)
                log.warning("%s: database error in %s (%s); abandoning the run", self.worker_id, run.workflow_id,
                            exc)
            else:
                log.exception("%s: unexpected error running %s", self.worker_id, run.workflow_id)
        finally:
            self._active.pop((run.workflow_id, run.epoch), None)  # only this run: a newer epoch may be in flight
            if run.context is not None:
                conn = run.context._conn_now  # the context may have replaced a connection that died
            if conn is None:
                pass
            elif healthy and not conn.closed and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                self._conns.put(conn)
            else:
                db.discard(conn)
            self._wake.set()

    def _run_workflow(self, conn: db.Connection, run: Run) -> None:
        if run.takeovers > self.max_takeovers:
            store.finish(conn, run, "stuck", error_json=json.dumps({
                "type": "CrashLoop", "message": f"crash loop: {run.takeovers} takeovers since the last recorded step "
                                                f"(max_takeovers {self.max_takeovers})"}))
            return
        definition = registry.get(run.name, run.version)
        steps = run.steps if run.steps is not None else {row["seq"]: row for row in conn.execute(
            "select seq, name, kind, fingerprint, output, error from ilr.steps where workflow_id = %s order by seq",
            (run.workflow_id,)).fetchall()}
        ctx = run.context = WorkflowContext(run, conn, steps, reconnect=lambda: db.connect(
            self.dsn, application_name=f"ilr-worker-{self.worker_id}"))
        try:
            result = definition.fn(ctx, run.input)
        except Suspend:
            return
        except Fenced:
            if ctx.suspended:
                self._suspend_swallowed(ctx._conn, run)
            raise
        except BaseException as exc:  # noqa: BLE001
            if db.is_connection_fault(exc):
                raise  # a database that lost or refuses the connection is not the workflow's failure
            if ctx.suspended:
                self._suspend_swallowed(ctx._conn, run)
                return
            if ctx.nondeterminism is not None:
                store.finish(ctx._conn, run, "stuck", error_json=dumps_error(ctx.nondeterminism))
            elif isinstance(exc, Cancelled):
                store.finish(ctx._conn, run, "cancelled", error_json=dumps_error(exc))
            elif isinstance(exc, (KeyboardInterrupt, SystemExit)):
                raise
            else:
                store.finish(ctx._conn, run, "failed", error_json=dumps_error(exc))
            return
        if ctx.suspended:
            self._suspend_swallowed(ctx._conn, run)
        elif ctx.nondeterminism is not None:
            store.finish(ctx._conn, run, "stuck", error_json=dumps_error(ctx.nondeterminism))
        else:
            try:
                result_json = codec.dumps(result, "result")
            except InvalidInput as exc:
                store.finish(ctx._conn, run, "failed", error_json=dumps_error(exc))
                return
            store.finish(ctx._conn, run, "completed", result_json=result_json)

    def _suspend_swallowed(self, conn, run: Run) -> None:
        log.error("%s: workflow %s swallowed Suspend (a bare except?); marking it stuck", self.worker_id,
                  run.workflow_id)
        store.mark_stuck_unfenced(conn, run, json.dumps({
            "type": "SuspendSwallowed", "message": "Suspend swallowed: workflow code caught the runtime's "
                                                   "Suspend (a bare except: or except BaseException:)"}))
