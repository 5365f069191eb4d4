"""The TCP fault proxy (prove.peers.fault_proxy): pass, delay, blackhole, reset.

Real sockets: an echo server in a thread of this process as upstream (over TCP and over a Unix
socket), the proxy in-process and as a ``manage.py prove proxy`` subprocess. No database.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import threading
import time

import pytest

from prove.peers.fault_control import ProxyClient, parse_mode, proxy_process
from prove.peers.fault_proxy import FaultProxy


class Echo:
    """An echo server that also records what it received, so a test can see that a request
    reached the upstream while its answer is still held by the proxy.

    Args:
        family: socket.AF_INET (127.0.0.1, free port) or socket.AF_UNIX (``path``).
    """

    def __init__(self, family: int = socket.AF_INET, path: str | None = None):
        self.received = bytearray()
        self._lock = threading.Lock()
        self.sock = socket.socket(family, socket.SOCK_STREAM)
        if family == socket.AF_UNIX:
            self.sock.bind(path)
            self.upstream = f"unix:{path}"
        else:
            self.sock.bind(("127.0.0.1", 0))
            self.upstream = f"127.0.0.1:{self.sock.getsockname()[1]}"
        self.sock.listen()
        self._conns: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self._conns.append(conn)
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with contextlib.suppress(OSError), conn:
            while data := conn.recv(4096):
                with self._lock:
                    self.received += data
                conn.sendall(data)

    def got(self) -> bytes:
        with self._lock:
            return bytes(self.received)

    def close(self) -> None:
        self.sock.close()
        for conn in self._conns:
            with contextlib.suppress(OSError):
                conn.close()


@pytest.fixture
def echo():
    server = Echo()
    yield server
    server.close()


@pytest.fixture
def unix_echo():
    # A short directory: a Unix socket path is limited to 107 bytes.
    d = tempfile.mkdtemp(prefix="ilr-echo-", dir="/tmp")
    server = Echo(socket.AF_UNIX, os.path.join(d, "echo.sock"))
    yield server
    server.close()
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def proxy(echo):
    with FaultProxy(echo.upstream) as p:
        yield p


def connect(port: int, timeout: float = 5.0) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.settimeout(timeout)
    return s


def recv_exactly(s: socket.socket, n: int) -> bytes:
    out = b""
    while len(out) < n:
        chunk = s.recv(n - len(out))
        if not chunk:
            break
        out += chunk
    return out


def wait_for(predicate, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < deadline, "condition not reached"
        time.sleep(0.01)


def test_pass_forwards_both_ways(proxy, echo):
    with connect(proxy.port) as s:
        s.sendall(b"hello")
        assert recv_exactly(s, 5) == b"hello"
    assert echo.got() == b"hello"
    assert proxy.status()["mode"] == {"mode": "pass", "ms": 0, "direction": "both"}


def test_delay_down_adds_latency_to_answers(proxy):
    proxy.delay(200, "down")
    with connect(proxy.port) as s:
        started = time.monotonic()
        s.sendall(b"ping")
        assert recv_exactly(s, 4) == b"ping"
        assert time.monotonic() - started >= 0.19
        proxy.pass_through()
        started = time.monotonic()
        s.sendall(b"pong")
        assert recv_exactly(s, 4) == b"pong"
        assert time.monotonic() - started < 0.15


def test_blackhole_down_executes_upstream_but_holds_the_answer(proxy, echo):
    proxy.blackhole("down")
    with connect(proxy.port) as s:
        for part in (b"one,", b"two,", b"three"):  # several chunks: released in order
            s.sendall(part)
            time.sleep(0.02)
        wait_for(lambda: echo.got() == b"one,two,three")  # the upstream did the work
        s.settimeout(0.4)
        with pytest.raises(TimeoutError):
            s.recv(100)
        assert proxy.status()["held_bytes"]["down"] == len(b"one,two,three")
        proxy.pass_through()
        s.settimeout(5)
        assert recv_exactly(s, 13) == b"one,two,three"
    assert proxy.status()["held_bytes"] == {"up": 0, "down": 0}


def test_blackhole_up_holds_requests_until_pass(proxy, echo):
    proxy.blackhole("up")
    with connect(proxy.port) as s:
        s.sendall(b"request")
        time.sleep(0.3)
        assert echo.got() == b""
        assert proxy.status()["held_bytes"]["up"] == 7
        proxy.set_mode("pass")
        assert recv_exactly(s, 7) == b"request"
    assert echo.got() == b"request"


def test_blackhole_holds_the_close_behind_the_data(proxy, echo):
    proxy.blackhole("up")
    with connect(proxy.port) as s:
        s.sendall(b"last words")
        s.shutdown(socket.SHUT_WR)
        time.sleep(0.2)
        proxy.pass_through()
        assert recv_exactly(s, 10) == b"last words"
        assert s.recv(10) == b""  # the upstream saw our FIN after the data and closed in turn
    assert echo.got() == b"last words"


def test_reset_closes_current_connections_then_passes(proxy):
    proxy.blackhole("down")
    s = connect(proxy.port)
    try:
        s.sendall(b"doomed")
        wait_for(lambda: proxy.status()["held_bytes"]["down"] == 6)
        after = proxy.reset()
        assert after["mode"]["mode"] == "pass" and after["connections"] == 0 and after["resets"] == 1
        with pytest.raises((ConnectionResetError, BrokenPipeError)):
            s.sendall(b"x")
            s.recv(10)
    finally:
        s.close()
    with connect(proxy.port) as fresh:
        fresh.sendall(b"alive")
        assert recv_exactly(fresh, 5) == b"alive"


def test_refused_upstream_resets_the_client():
    with socket.socket() as unused:
        unused.bind(("127.0.0.1", 0))
        dead = unused.getsockname()[1]
    with FaultProxy(f"127.0.0.1:{dead}") as p:
        # The reset may already land while connect() waits for the handshake to finish.
        with pytest.raises((ConnectionResetError, BrokenPipeError)), connect(p.port) as s:
            s.sendall(b"x")
            s.recv(10)


def test_unix_socket_upstream_in_process(unix_echo):
    with FaultProxy(unix_echo.upstream) as p, connect(p.port) as s:
        p.blackhole("down")
        s.sendall(b"select 1")
        wait_for(lambda: unix_echo.got() == b"select 1")
        s.settimeout(0.3)
        with pytest.raises(TimeoutError):
            s.recv(100)
        p.pass_through()
        s.settimeout(5)
        assert recv_exactly(s, 8) == b"select 1"


def test_http_control_in_process(echo):
    with FaultProxy(echo.upstream, control_port=0) as p:
        control = ProxyClient(p.control_url, p.address)
        assert control.delay(50, "up")["mode"] == {"mode": "delay", "ms": 50, "direction": "up"}
        assert p.status()["mode"]["mode"] == "delay"
        with pytest.raises(ValueError, match="400"):
            control.set_mode("blackhole", direction="sideways")
        with pytest.raises(ValueError, match="400"):
            control.set_mode("teleport")
        assert control.pass_through()["mode"]["mode"] == "pass"


def test_subprocess_proxy_to_a_unix_socket(unix_echo):
    with proxy_process(unix_echo.upstream) as control:
        assert control.status()["upstream"] == unix_echo.upstream
        with connect(control.port) as s:
            s.sendall(b"a")
            assert recv_exactly(s, 1) == b"a"
            control.blackhole("down")
            s.sendall(b"b")
            wait_for(lambda: unix_echo.got() == b"ab")
            s.settimeout(0.3)
            with pytest.raises(TimeoutError):
                s.recv(10)
            control.pass_through()
            s.settimeout(5)
            assert recv_exactly(s, 1) == b"b"
        control.blackhole("both")
        assert control.reset()["mode"]["mode"] == "pass"
    assert control.proc.poll() is not None  # stopped and reaped on exit


def test_parse_mode_rejects_nonsense():
    assert parse_mode({"mode": "blackhole"}) == {"mode": "blackhole", "ms": 0, "direction": "both"}
    for bad in (
        {"mode": "delay"},
        {"mode": "delay", "ms": -1},
        {"mode": "delay", "ms": True},
        {"mode": "blackhole", "direction": "left"},
        {},
    ):
        with pytest.raises(ValueError):
            parse_mode(bad)
