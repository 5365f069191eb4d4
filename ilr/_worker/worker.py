"""The worker: claim loop, heartbeat with the local lease, and the run of one workflow
(docs/protocol.md §3.1 to §3.4; the local lease is §3.3). The statements of a claim and ``Run``
are in ``ilr.claims``, the code of one run in ``ilr.run_workflow``, the worker_deployments rows in
``ilr.worker_deployments``; their names stay importable from here.

Connection budget per worker process: ``concurrency`` run connections (one per run thread),
plus one each for claims, the heartbeat, LISTEN and the schedule ticker (``ilr._worker.ticker``;
none with ``schedules=False``): ``concurrency + 4``. Eight workers of concurrency 4 use 64 of PostgreSQL's default 100.

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

import logging
import queue
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import psycopg

from ilr import _conf as conf
from ilr import _db as db
from ilr import _killpoints as killpoints
from ilr import _registry as registry
from ilr._effects.targets import check_target, registered_targets
from ilr._errors import CodeChanged, Fenced, InvalidInput
from ilr._ops import failover
from ilr._queries.claims import LISTEN_WAKEUPS_SQL, RELEASE_SQL
from ilr._queries.deployments import (
    REGISTER_DEPLOYMENTS_INSERT_DEPLOYMENTS,
    REGISTER_DEPLOYMENTS_UPDATE_DEPLOYMENTS,
    SEEN_SQL,
)
from ilr._queries.slots import SLOT_WAKE
from ilr._registry import WorkflowDefinition
from ilr._worker.backoff import ClaimBackoff
from ilr._worker.claims import Run, claim_due
from ilr._worker.deployments import DEPLOYMENT_REFRESH_MIN, retake_worker_id, take_worker_id, unregister
from ilr._worker.deployments import seen_params as deployment_rows
from ilr._worker.heartbeat import heartbeat_loop
from ilr._worker.pooler import check_pooler
from ilr._worker.run import run_workflow
from ilr._worker.tally import Tally
from ilr._worker.ticker import ticker_loop

log = logging.getLogger("ilr.worker")

SLOT_WAKE_EVERY = 0.1
"""Seconds between two sweeps (``ilr.slot_wake``) of one busy worker: a start that its key's rate
put off takes its queue's slot within this (or one poll, when idle) of its turn."""


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
        schedules: tick schedules every ``poll`` seconds on a thread of its own (docs/protocol.md
            §5.8); default True. Any worker may: at least one must.
    """

    def __init__(
        self,
        worker_id: str,
        definitions: Iterable[WorkflowDefinition] | None = None,
        *,
        concurrency: int = 4,
        lease_ttl: float = 30.0,
        poll: float = 1.0,
        max_takeovers: int = 5,
        allow_code_change: bool = False,
        dsn: str | None = None,
        deployment_refresh: float | None = None,
        schedules: bool = True,
    ):
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
        self.schedules = schedules
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
        self._id_conn: db.Connection | None = None  # holds the id's lock from register() to the listen loop
        # Claims (workflow id, epoch) whose run ended on a database fault, to release (RELEASE_SQL)
        # from the claim loop, before its next claim, once the database takes writes again.
        self._abandoned: list[tuple[str, int]] = []
        self._abandoned_lock = threading.Lock()
        self._last_fault = float("-inf")  # monotonic time any thread of this worker last met a fault
        self._claim_backoff = ClaimBackoff(self.worker_id)
        self._next_slot_wake = 0.0  # monotonic time of the next sweep of put-off starts (SLOT_WAKE)
        self.failover: dict | None = (
            None  # the last timeline switch (ilr._ops.failover.seen), read per claim connection
        )
        self.tally = Tally()
        """What this worker did: runs claimed, takeovers, how each run ended (its exit line)."""
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
        """Take this worker's id, insert its deployments; refuse a taken id or a changed code
        hash (docs/protocol.md §4).

        The id is a session-level lock (``ilr._worker.deployments.take_worker_id``) held by the
        listen connection for the worker's life: a second live process with the id is refused,
        one whose predecessor died is not (the server ends a dead process's session and its
        lock). A new (name, version) is inserted with this worker's code_sha256. An existing one with
        another hash is refused (CodeChanged: the worker exits 2, naming the name, the version
        and both hashes) unless allow_code_change, which records the new hash. A worker claims
        only the pairs it registered here (VersionPinned). Then every pair is upserted into
        ilr.worker_deployments as served by this worker (SEEN_SQL); the heartbeat thread
        refreshes them and ``run`` deletes them on a clean exit.

        Raises:
            InvalidInput: field "worker_id": a live worker holds this id.
            CodeChanged: an existing (name, version) has another code_sha256 and
                allow_code_change is false.
        """
        check_pooler(conf.settings.POOLER)
        for target in registered_targets().values():
            # docs/protocol.md §6.5: refuse a tier-1 target with a thin dedup margin.
            check_target(target)
        # The id's lock before any write, on the connection the listen loop keeps (no extra
        # connection): a second live process with this id is refused here.
        id_conn = db.connect(self.dsn, application_name=f"ilr-worker-{self.worker_id}-listen")
        try:
            take_worker_id(id_conn, self.worker_id)
            self._register_deployments()
        except BaseException:
            db.discard(id_conn)
            raise
        self._id_conn = id_conn

    def _register_deployments(self) -> None:
        with db.connect(self.dsn, application_name=f"ilr-worker-{self.worker_id}") as conn:
            for d in self.definitions:
                digest = d.code_sha256
                row = conn.execute(
                    REGISTER_DEPLOYMENTS_INSERT_DEPLOYMENTS,
                    (d.name, d.version, digest),
                ).fetchone()
                assert row is not None  # ON CONFLICT DO UPDATE: RETURNING yields the inserted or updated row
                if row["code_sha256"] != digest:
                    if not self.allow_code_change:
                        raise CodeChanged(d.name, d.version, row["code_sha256"], digest)
                    log.warning(
                        "%s: %s@%s code_sha256 %s replaces %s (--allow-code-change)",
                        self.worker_id,
                        d.name,
                        d.version,
                        digest,
                        row["code_sha256"],
                    )
                    conn.execute(
                        REGISTER_DEPLOYMENTS_UPDATE_DEPLOYMENTS,
                        (digest, d.name, d.version),
                    )
            conn.execute(SEEN_SQL, self.seen_params())

    def run(self) -> None:
        """Claim and run until ``stop()``; then wait for in-flight runs and return."""
        self.register()
        # Open the run connections up front: a claim is then followed by nothing but the step
        # load on an open connection, and a slow connect can never stall a claimed run.
        for _ in range(self.concurrency):
            self._conns.put(db.connect(self.dsn, application_name=f"ilr-worker-{self.worker_id}"))
        heartbeat = threading.Thread(
            target=heartbeat_loop, args=(self,), name=f"{self.worker_id}-heartbeat", daemon=True
        )
        heartbeat.start()
        threading.Thread(target=self._listen_loop, name=f"{self.worker_id}-listen", daemon=True).start()
        if self.schedules:
            threading.Thread(target=ticker_loop, args=(self,), name=f"{self.worker_id}-ticker", daemon=True).start()
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
                        self._claim_backoff.ok()
                    except psycopg.Error as exc:
                        released = False
                        self._claim_failed("release of abandoned runs", exc)
                if free > 0 and released:
                    try:
                        claimed = self._claim(free)
                        self._claim_backoff.ok()
                    except psycopg.Error as exc:
                        released = False
                        self._claim_failed("claim", exc)
                # After the claim: an outage is announced by the claim's line. A start the sweep
                # admits is announced by its NOTIFY and claimed by the next turn of any worker.
                if released and time.monotonic() >= self._next_slot_wake:
                    try:
                        self._slot_wake()
                    except psycopg.Error as exc:
                        self._claim_failed("sweep of put-off starts", exc)
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
                    self.tally.claimed(run, self.worker_id)
                    pool.submit(self._execute, run)
                if not claimed or len(claimed) < free:
                    # After a failure, the backoff instead of the poll; a wakeup still cuts it
                    # short (the listen loop's reconnect is the first sign the database is back).
                    self._wake.wait(self._claim_backoff.wait or self.poll)
                    self._wake.clear()
        self._drop_claim_conn()
        heartbeat.join(timeout=self.lease_ttl)  # its last refresh of worker_deployments comes before the delete
        unregister(self.dsn, self.worker_id)
        while not self._conns.empty():
            self._conns.get().close()

    # -- claims and heartbeats ---------------------------------------------------------------

    def _claim(self, n: int) -> list[tuple[dict, float, dict[int, dict]]]:
        """Claim up to ``n`` due workflows and read their step rows: one transaction, one round
        trip (one Batch), one commit. Returns [(claimed row, t0, {seq: step row})]."""
        conn = self._claim_connection()
        params = {
            "names": [d.name for d in self.definitions],
            "versions": [d.version for d in self.definitions],
            "n": n,
            "owner": self.worker_id,
            "ttl": self.lease_ttl,
        }
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

    def _slot_wake(self) -> None:
        """Run the sweep (SLOT_WAKE) on the claim connection, its own transaction: the starts it
        admits are due after its commit, which notifies the workers (this one too). Any worker
        sweeps every queue; two sweeps serialize on the key's lock."""
        self._next_slot_wake = time.monotonic() + SLOT_WAKE_EVERY
        self._claim_connection().execute(SLOT_WAKE)

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

    def note_fault(self) -> None:
        """Note that a thread of this worker met a database fault now (see ``_execute``)."""
        self._last_fault = time.monotonic()

    def stopping(self) -> bool:
        """True once ``stop()`` was called."""
        return self._stop.is_set()

    def wait_stop(self, seconds: float) -> bool:
        """Sleep up to ``seconds``, less when ``stop()`` is called; returns ``stopping()``."""
        return self._stop.wait(seconds)

    def done(self) -> bool:
        """True once ``stop()`` was called and the worker holds no run."""
        return self._stop.is_set() and not self._active

    def held_runs(self) -> list:
        """The runs whose claim is still this worker's (not fenced or released): its leases."""
        return [r for r in list(self._active.values()) if not r.fenced and not r.released]

    def _claim_failed(self, what: str, exc: psycopg.Error) -> None:
        """A statement of the claim loop failed: drop the claim connection, back off
        (``ClaimBackoff``) and, for a lost connection, note the fault."""
        self._drop_claim_conn()
        if self._claim_backoff.failed(what, exc):
            self.note_fault()

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
        rows = (
            self._claim_connection()
            .execute(
                RELEASE_SQL,
                {
                    "ids": [wf for wf, _ in pending],
                    "epochs": [epoch for _, epoch in pending],
                    "owner": self.worker_id,
                },
            )
            .fetchall()
        )
        with self._abandoned_lock:
            self._abandoned = [c for c in self._abandoned if c not in pending]
        self.tally.add("released", len(rows))
        for row in rows:
            log.info("%s: released %s (epoch %s) after a database fault", self.worker_id, row["id"], row["epoch"])

    def _listen_loop(self) -> None:
        """LISTEN on WAKEUP_CHANNEL and wake the claim loop on each notification. The connection
        holds this worker id's lock (register() opened the first one); a new one takes it again."""
        conn, self._id_conn = self._id_conn, None
        holds_id = conn is not None
        id_warned = False
        listening = False
        failing = False  # a failure was logged and nothing has listened since: log no more
        while not self._stop.is_set():
            try:
                if conn is None or conn.closed:
                    conn = db.connect(self.dsn, application_name=f"ilr-worker-{self.worker_id}-listen")
                    holds_id = listening = False
                if not holds_id:
                    # Retried each turn while another session has it: it may be this worker's
                    # own old session, which the server has not yet ended.
                    holds_id = retake_worker_id(conn, self.worker_id)
                    if not holds_id and not id_warned:
                        log.warning(
                            "%s: another database session holds this worker id; a second worker with "
                            "this id may be running",
                            self.worker_id,
                        )
                    id_warned = not holds_id
                if not listening:
                    conn.execute(LISTEN_WAKEUPS_SQL)
                    listening = True
                    if failing:
                        log.info("%s: reconnected: listening for wakeups again", self.worker_id)
                    failing = False
                    self._wake.set()  # whatever was announced while nobody listened: claim now
                for _ in conn.notifies(timeout=1.0):
                    self._wake.set()
            except psycopg.Error as exc:
                # Logged once until it listens again (the claim loop says when the database is
                # back); an error that is not a lost connection with its traceback, and retried
                # too: the claim loop would lose its wakeups to a dead thread.
                if db.is_connection_fault(exc):
                    self.note_fault()
                    if not failing:
                        log.warning("%s: listen connection failed (%s); polling meanwhile", self.worker_id, exc)
                elif not failing:
                    log.exception("%s: listen connection failed; polling meanwhile", self.worker_id)
                failing = True
                db.discard(conn)
                conn = None
                self._stop.wait(min(self.poll, 1.0))
        if conn is not None:
            conn.close()

    def seen_params(self) -> dict:
        """The parameters of this worker's worker_deployments rows (``SEEN_SQL``)."""
        return deployment_rows(self.worker_id, self.definitions, self.deployment_refresh)

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
            run_workflow(conn, run, worker_id=self.worker_id, dsn=self.dsn, max_takeovers=self.max_takeovers)
            self.tally.add(run.ended or "suspended")
        except Fenced as exc:
            self.tally.add("fenced")
            # The reason: a write refused by the fence, or the local lease run out before a body.
            log.info("%s: fenced out of %s (epoch %s): %s", self.worker_id, run.workflow_id, run.epoch, exc)
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
                self.note_fault()
                self.tally.add("abandoned")
                self._abandon(run)
                log.warning("%s: database error in %s (%s); abandoning the run", self.worker_id, run.workflow_id, exc)
            else:
                self.tally.add("errors")
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
