"""The payment target's HTTP server (demo/peers/target.py describes it): its ledger, access
log, injected faults and tier settings, and ``serve``, the body of ``manage.py demo_peer target``."""

from __future__ import annotations

import math
import threading
from collections.abc import Callable
from http.server import ThreadingHTTPServer
from pathlib import Path

from demo.peers.target_handler import TargetHandler
from demo.peers.target_ledger import AccessLog, Ledger


class Faults:
    """The injected faults (all EMULATED): delay, blackhole, one-shot failure (optionally saved for
    its key), key conflicts, and a held first request per key."""

    def __init__(self):
        self._lock = threading.Lock()
        self.delay = 0.0
        self.fail_next: dict | None = None
        self.key_conflict = "409"
        self.hold_first = 0.0
        self._in_progress: set[str] = set()
        self._held: set[str] = set()
        self._saved: dict[str, int] = {}
        # Set while the blackhole is OFF, so held handlers can simply wait on it.
        self.open = threading.Event()
        self.open.set()

    @property
    def blackhole(self) -> bool:
        return not self.open.is_set()

    def set_blackhole(self, on: bool) -> None:
        if on:
            self.open.clear()
        else:
            self.open.set()

    def take_fail_next(self) -> dict | None:
        with self._lock:
            failure, self.fail_next = self.fail_next, None
            return failure

    def begin(self, key: str) -> str:
        """Start a POST for ``key`` under hold_first: "hold" (the key's first request: hold it),
        "busy" (another request with the key is in progress: answer 409) or "go"."""
        with self._lock:
            if key in self._in_progress:
                return "busy"
            if self.hold_first > 0 and key not in self._held:
                self._held.add(key)
                self._in_progress.add(key)
                return "hold"
            return "go"

    def end(self, key: str) -> None:
        with self._lock:
            self._in_progress.discard(key)

    def save_failure(self, key: str, status: int) -> None:
        """Answer ``status`` to every later POST with ``key`` (Stripe saves a key's first result,
        5xx included)."""
        with self._lock:
            self._saved.setdefault(key, status)

    def saved_failure(self, key: str) -> int | None:
        with self._lock:
            return self._saved.get(key)

    def reset(self) -> None:
        with self._lock:
            self.delay = 0.0
            self.fail_next = None
            self.key_conflict = "409"
            self.hold_first = 0.0
            self._in_progress.clear()
            self._held.clear()
            self._saved.clear()
        self.open.set()


class TargetServer(ThreadingHTTPServer):
    """The HTTP server with its ledger, access log, faults and tier settings.

    Args:
        address: (host, port); port 0 picks a free port.
        tier: 1, 2 or 3.
        queryable: tier 1 only: answer lookups. Tier 2 always answers, tier 3 never.
        ledger: the SQLite file.
        access_log: the JSON-lines file.
        dedup_window: tier 1: seconds a key counts; None or inf: until prune_keys.

    Raises:
        ValueError: a tier outside 1..3, or queryable with tier 3 (which has no lookup by
            definition).
    """

    # socketserver's default listen backlog is 5. Sixteen workflows connecting at once overflow
    # it, and the kernel drops the SYNs past it: the client retries after 1 s, 3 s, 7 s, so a
    # send could time out before it was ever accepted (seen as TcpExtListenOverflows).
    request_queue_size = 128
    daemon_threads = True
    allow_reuse_address = True

    def __init__(
        self,
        address: tuple[str, int],
        *,
        tier: int,
        queryable: bool,
        ledger: str | Path,
        access_log: str | Path,
        dedup_window: float | None = None,
    ):
        if tier not in (1, 2, 3):
            raise ValueError(f"tier must be 1, 2 or 3, not {tier!r}")
        if tier == 3 and queryable:
            raise ValueError("tier 3 has no lookup; --queryable applies to tier 1 only")
        self.tier = tier
        self.queryable = tier == 2 or (tier == 1 and queryable)
        self.dedup_window = math.inf if dedup_window is None else float(dedup_window)
        self.ledger = Ledger(ledger)
        self.log = AccessLog(access_log)
        self.faults = Faults()
        self.stopping = threading.Event()
        super().__init__(address, TargetHandler)

    def settings(self) -> dict:
        return {
            "tier": self.tier,
            "queryable": self.queryable,
            "dedup_window": None if math.isinf(self.dedup_window) else self.dedup_window,
            "delay": self.faults.delay,
            "blackhole": self.faults.blackhole,
            "fail_next": self.faults.fail_next,
            "key_conflict": self.faults.key_conflict,
            "ledger": self.ledger.path,
            "access_log": self.log.path,
        }

    def close(self) -> None:
        """Release held requests, stop listening, close the files."""
        self.stopping.set()
        self.faults.open.set()
        self.server_close()
        self.ledger.close()
        self.log.close()


def serve(
    *,
    host: str = "127.0.0.1",
    port: int = 0,
    tier: int,
    queryable: bool = False,
    ledger: str | Path,
    access_log: str | Path | None = None,
    dedup_window: float | None = None,
    ready: Callable[[str], None] = print,
) -> None:
    """Run the target until KeyboardInterrupt (SIGTERM in ``manage.py demo_peer target``).

    Args:
        host, port: where to listen; port 0 picks a free port.
        tier, queryable, dedup_window: see TargetServer.
        ledger: the SQLite file.
        access_log: the JSON-lines file; default ``<ledger>.access.jsonl``.
        ready: called once with ``"listening HOST:PORT"`` when accepting connections.
    """
    access_log = access_log or f"{ledger}.access.jsonl"
    server = TargetServer(
        (host, port),
        tier=tier,
        queryable=queryable,
        ledger=ledger,
        access_log=access_log,
        dedup_window=dedup_window,
    )
    try:
        ready(f"listening {host}:{server.server_address[1]}")
        server.serve_forever(poll_interval=0.2)
    finally:
        server.close()
