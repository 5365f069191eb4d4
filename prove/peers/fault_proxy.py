"""A stdlib TCP fault proxy with real sockets and a small HTTP control API (docs/protocol.md §16.2).

One proxy sits between workers and the payment target; another between workers and PostgreSQL
(or the Temporal server) for partition scenarios. The upstream is ``HOST:PORT`` or
``unix:/path/to/socket`` (the embedded PostgreSQL listens on a Unix socket only); clients always
connect over TCP.

Modes (all EMULATED network faults), set with ``POST /mode`` or ``set_mode``:

- ``{"mode": "pass"}``: forward bytes as they arrive, and flush anything held, in order.
- ``{"mode": "delay", "ms": 200, "direction": "both|up|down"}``: each chunk is forwarded ``ms``
  milliseconds after it arrived (so a request-response round trip through "both" gains 2 x ms).
- ``{"mode": "blackhole", "direction": "both|up|down"}``: bytes in that direction are read and
  HELD, never dropped; the connection stays open. Switching to pass (or delay) releases them in
  order. ``up`` is client to upstream, ``down`` is upstream to client. Blackholing ``down``
  between a worker and PostgreSQL lets a query execute and commit at the server while its
  response is held (scenario S08a).
- ``{"mode": "reset"}``: abort every current connection (RST to both sides, held bytes
  discarded), then behave as pass.

Connection ends travel in order with the data: a FIN or an error from one side is held behind
the bytes before it and delivered (as a FIN, or as an RST) only when those are.

``GET /status``: ``{"mode", "listen", "upstream", "connections", "accepted", "resets",
"held_bytes": {"up", "down"}, "forwarded_bytes": {"up", "down"}}``.

Three ways to run it, one control surface (``FaultControl``, prove.peers.fault_control):
``FaultProxy`` in-process (a background thread), ``proxy_process`` as a ``manage.py prove proxy``
subprocess, and ``ProxyClient`` for any proxy whose control URL is known.
"""

from __future__ import annotations

import contextlib
import errno
import select
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from http.server import ThreadingHTTPServer

from prove.peers.fault_control import FaultControl, control_server, parse_mode

_EOF = "eof"  # markers travelling in a flow's queue after the data that preceded them
_RST = "rst"
_CHUNK = 65536


def parse_upstream(upstream: str) -> tuple[int, str | tuple[str, int]]:
    """``"HOST:PORT"`` -> (AF_INET, (host, port)); ``"unix:/path"`` -> (AF_UNIX, path)."""
    if upstream.startswith("unix:"):
        return socket.AF_UNIX, upstream[len("unix:") :]
    host, sep, port = upstream.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"upstream must be HOST:PORT or unix:/path, not {upstream!r}")
    return socket.AF_INET, (host or "127.0.0.1", int(port))


def _abort(sock: socket.socket) -> None:
    """Close with an RST (SO_LINGER 0), as a crashed peer or a middlebox reset would."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


class _Flow:
    """One direction of one connection: bytes read from ``src``, held, then written to ``dst``."""

    def __init__(self, name: str, src: socket.socket, dst: socket.socket):
        self.name = name  # "up" (client to upstream) or "down"
        self.src, self.dst = src, dst
        self.held: deque[tuple[float, bytes | str]] = deque()  # (arrival monotonic, chunk|marker)
        self.out = bytearray()  # released, not yet written
        self.end: str | None = None  # a released marker, acted on once out is written
        self.reading = True
        self.done = False  # FIN delivered, or the destination is gone
        self.forwarded = 0

    def held_bytes(self) -> int:
        return len(self.out) + sum(len(c) for _, c in self.held if isinstance(c, bytes))

    def release(self, now: float, mode: dict) -> float | None:
        """Move chunks whose time has come to ``out``; return the next release time or None."""
        applies = mode["direction"] in ("both", self.name)
        if mode["mode"] == "blackhole" and applies:
            return None
        wait = mode["ms"] / 1000.0 if mode["mode"] == "delay" and applies else 0.0
        while self.held and self.end is None:
            arrived, chunk = self.held[0]
            if arrived + wait > now:
                return arrived + wait
            self.held.popleft()
            if isinstance(chunk, bytes):
                self.out += chunk
            else:
                self.end = chunk
        return None


class _Conn:
    def __init__(self, client: socket.socket, upstream: socket.socket):
        self.client, self.upstream = client, upstream
        self.connecting = True
        self.up = _Flow("up", client, upstream)
        self.down = _Flow("down", upstream, client)
        self.closed = False

    def flows(self) -> tuple[_Flow, _Flow]:
        return self.up, self.down

    def close(self, rst: bool) -> None:
        if self.closed:
            return
        self.closed = True
        for sock in (self.client, self.upstream):
            if rst:
                _abort(sock)
            else:
                sock.close()


class FaultProxy(FaultControl):
    """The proxy, run in a background thread of this process.

    Args:
        upstream: "HOST:PORT" or "unix:/path/to/socket".
        listen_host: the TCP address clients connect to.
        listen_port: 0 picks a free port.
        control_port: None serves no HTTP control API; 0 picks a free port.

    Attributes (after start): ``port``, ``address`` ("HOST:PORT"), ``control_url`` (or None).
    """

    def __init__(
        self,
        upstream: str,
        *,
        listen_host: str = "127.0.0.1",
        listen_port: int = 0,
        control_port: int | None = None,
    ):
        self.upstream = upstream
        self._family, self._upstream_addr = parse_upstream(upstream)
        self.listen_host = listen_host
        self._listen_port = listen_port
        self._control_port = control_port
        self._lock = threading.Lock()
        self._mode = {"mode": "pass", "ms": 0, "direction": "both"}
        self._conns: list[_Conn] = []
        self._accepted = 0
        self._resets = 0
        self._forwarded = {"up": 0, "down": 0}
        self._reset_done: threading.Event | None = None
        self._stopping = False
        self._thread: threading.Thread | None = None
        self._control: ThreadingHTTPServer | None = None
        self.port = 0
        self.control_url: str | None = None

    @property
    def address(self) -> str:
        return f"{self.listen_host}:{self.port}"

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> FaultProxy:
        """Bind, start the forwarding thread and (if asked) the control server; returns self."""
        self._listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._listener.bind((self.listen_host, self._listen_port))
        self._listener.listen(128)
        self._listener.setblocking(False)
        self.port = self._listener.getsockname()[1]
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._thread = threading.Thread(target=self._loop, name=f"fault-proxy-{self.port}", daemon=True)
        self._thread.start()
        if self._control_port is not None:
            self._control = control_server(self, self.listen_host, self._control_port)
            self.control_url = f"http://{self.listen_host}:{self._control.server_address[1]}"
            threading.Thread(
                target=self._control.serve_forever,
                kwargs={"poll_interval": 0.2},
                name=f"fault-proxy-control-{self.port}",
                daemon=True,
            ).start()
        return self

    def stop(self) -> None:
        """Abort every connection, stop listening, stop the control server."""
        if self._control is not None:
            self._control.shutdown()
            self._control.server_close()
            self._control = None
        if self._thread is not None:
            with self._lock:
                self._stopping = True
            self._wake()
            self._thread.join(timeout=10)
            self._thread = None
            self._wake_r.close()
            self._wake_w.close()

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    # -- control -----------------------------------------------------------------------------

    def set_mode(self, mode: str, **params) -> dict:
        new = parse_mode({"mode": mode, **params})
        done = None
        with self._lock:
            if new["mode"] == "reset":
                # The forwarding thread owns the sockets; closing them here could race its poll.
                done = self._reset_done = threading.Event()
                self._mode = {"mode": "pass", "ms": 0, "direction": "both"}
            else:
                self._mode = new
        self._wake()
        if done is not None and not done.wait(10):
            raise TimeoutError("fault proxy: reset not carried out within 10 s")
        return self.status()

    def status(self) -> dict:
        with self._lock:
            return {
                "mode": dict(self._mode),
                "listen": self.address,
                "upstream": self.upstream,
                "connections": len(self._conns),
                "accepted": self._accepted,
                "resets": self._resets,
                "held_bytes": {
                    "up": sum(c.up.held_bytes() for c in self._conns),
                    "down": sum(c.down.held_bytes() for c in self._conns),
                },
                "forwarded_bytes": dict(self._forwarded),
            }

    def _wake(self) -> None:
        with contextlib.suppress(OSError):
            self._wake_w.send(b"x")

    # -- the forwarding loop (one thread owns every socket) ----------------------------------

    def _loop(self) -> None:
        try:
            while True:
                with self._lock:
                    if self._stopping:
                        break
                    if self._reset_done is not None:
                        for conn in self._conns:
                            conn.close(rst=True)
                        self._resets += len(self._conns)
                        self._conns.clear()
                        self._reset_done.set()
                        self._reset_done = None
                    timeout = self._advance(time.monotonic())
                    self._conns = [c for c in self._conns if not c.closed]
                    poller, handlers = self._poller()
                # poll outside the lock so set_mode and status never wait on the network.
                events = poller.poll(None if timeout is None else max(0, int(timeout * 1000) + 1))
                with self._lock:
                    for fd, ev in events:
                        handlers[fd](ev)
                    self._conns = [c for c in self._conns if not c.closed]
        finally:
            with self._lock:
                for conn in self._conns:
                    conn.close(rst=True)
                self._conns.clear()
                self._listener.close()

    def _advance(self, now: float) -> float | None:
        """Release due chunks and act on released ends; return seconds until the next release."""
        next_at = None
        for conn in self._conns:
            for flow in conn.flows():
                due = flow.release(now, self._mode)
                if due is not None:
                    next_at = due if next_at is None else min(next_at, due)
                if not flow.out and flow.end is not None and not flow.done and not conn.connecting:
                    self._deliver_end(conn, flow)
            if conn.up.done and conn.down.done:
                conn.close(rst=False)
        return None if next_at is None else max(0.0, next_at - now)

    def _deliver_end(self, conn: _Conn, flow: _Flow) -> None:
        if flow.end == _RST:
            conn.close(rst=True)
            return
        flow.done = True
        try:
            flow.dst.shutdown(socket.SHUT_WR)
        except OSError:
            conn.close(rst=True)

    def _poller(self) -> tuple[select.poll, dict[int, Callable[[int], None]]]:
        poller = select.poll()
        handlers: dict[int, Callable[[int], None]] = {}
        poller.register(self._wake_r, select.POLLIN)
        handlers[self._wake_r.fileno()] = self._drain_wake
        poller.register(self._listener, select.POLLIN)
        handlers[self._listener.fileno()] = self._accept
        for conn in self._conns:
            if conn.closed:
                continue
            for sock in (conn.client, conn.upstream):
                mask = 0
                for flow in conn.flows():
                    if flow.src is sock and flow.reading and not (conn.connecting and sock is conn.upstream):
                        mask |= select.POLLIN
                    if flow.dst is sock and (flow.out or (conn.connecting and sock is conn.upstream)):
                        mask |= select.POLLOUT
                if mask:
                    poller.register(sock, mask)
                    handlers[sock.fileno()] = lambda ev, c=conn, s=sock: self._on_event(c, s, ev)
        return poller, handlers

    def _drain_wake(self, ev: int) -> None:
        with contextlib.suppress(BlockingIOError):
            while self._wake_r.recv(4096):
                pass

    def _accept(self, ev: int) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except (BlockingIOError, InterruptedError):
                return
            client.setblocking(False)
            upstream = socket.socket(self._family, socket.SOCK_STREAM)
            upstream.setblocking(False)
            if self._family == socket.AF_INET:
                client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                upstream.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            code = upstream.connect_ex(self._upstream_addr)
            self._accepted += 1
            # A Unix socket answers EAGAIN when its backlog is full: that is a refusal here.
            if code not in (0, errno.EINPROGRESS):
                _abort(client)
                upstream.close()
                continue
            self._conns.append(_Conn(client, upstream))

    def _on_event(self, conn: _Conn, sock: socket.socket, ev: int) -> None:
        if conn.closed:
            return
        if conn.connecting and sock is conn.upstream:
            if not ev & (select.POLLOUT | select.POLLERR | select.POLLHUP):
                return
            if sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
                conn.close(rst=True)  # upstream refused: the client sees a reset
                return
            conn.connecting = False
            return
        now = time.monotonic()
        for flow in conn.flows():
            if flow.src is sock and flow.reading and ev & (select.POLLIN | select.POLLHUP | select.POLLERR):
                self._read(conn, flow, now)
            if conn.closed:
                return
            if flow.dst is sock and flow.out and ev & (select.POLLOUT | select.POLLERR | select.POLLHUP):
                self._write(conn, flow)
            if conn.closed:
                return

    def _read(self, conn: _Conn, flow: _Flow, now: float) -> None:
        try:
            data = flow.src.recv(_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            # The source side is gone: the other end learns it as a reset, in order, after the
            # bytes already held for it; what was on its way to the dead side is dropped.
            flow.reading = False
            flow.held.append((now, _RST))
            self._kill_towards(conn, flow.src)
            return
        if data:
            flow.held.append((now, data))
        else:
            flow.reading = False
            flow.held.append((now, _EOF))

    def _write(self, conn: _Conn, flow: _Flow) -> None:
        try:
            sent = flow.dst.send(flow.out)
        except (BlockingIOError, InterruptedError):
            return
        except OSError:
            # The destination reset: the surviving side still gets what is held for it, then
            # the reset.
            self._kill_towards(conn, flow.dst)
            return
        del flow.out[:sent]
        flow.forwarded += sent
        self._forwarded[flow.name] += sent

    def _kill_towards(self, conn: _Conn, dead: socket.socket) -> None:
        """``dead`` failed: nothing more can be written to it; the other side gets an RST."""
        for flow in conn.flows():
            if flow.dst is dead:
                flow.out.clear()
                flow.held.clear()
                flow.done = True
            if flow.src is dead and flow.reading:
                flow.reading = False
                flow.held.append((time.monotonic(), _RST))


def serve(
    *,
    host: str = "127.0.0.1",
    listen_port: int = 0,
    upstream: str,
    control_port: int = 0,
    ready: Callable[[str], None] = print,
) -> None:
    """Run a proxy with its control API until KeyboardInterrupt (SIGTERM in ``manage.py``).

    Args:
        host: where both the proxy and the control API listen.
        listen_port, control_port: 0 picks free ports.
        upstream: "HOST:PORT" or "unix:/path/to/socket".
        ready: called once with "listening HOST:PORT control HOST:PORT".
    """
    proxy = FaultProxy(upstream, listen_host=host, listen_port=listen_port, control_port=control_port)
    proxy.start()
    try:
        ready(f"listening {proxy.address} control {proxy.control_url.removeprefix('http://')}")
        threading.Event().wait()
    finally:
        proxy.stop()
