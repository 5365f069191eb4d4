"""The fault proxy's control surface (the modes and the ``GET /status`` of
prove/peers/fault_proxy.py): ``FaultControl``, its HTTP API (``control_server``), ``ProxyClient``
for any proxy whose control URL is known, and ``proxy_process``, a ``manage.py prove proxy``
subprocess driven through it."""

from __future__ import annotations

import contextlib
import json
import urllib.error
import urllib.request
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from demo.peers.processes import parse_address, stop_process
from prove.peers.processes import spawn_subcommand

DIRECTIONS = ("both", "up", "down")


def parse_mode(body: dict) -> dict:
    """Validate a mode request.

    Args:
        body: {"mode": "pass" | "delay" | "blackhole" | "reset", "ms": number (delay),
            "direction": "both" | "up" | "down" (delay and blackhole; default "both")}.

    Returns:
        The normalised mode {"mode", "ms", "direction"}.

    Raises:
        ValueError: an unknown mode or direction, or a delay without a non-negative ms.
    """
    mode = body.get("mode")
    direction = body.get("direction", "both")
    if mode in ("pass", "reset"):
        return {"mode": mode, "ms": 0, "direction": "both"}
    if direction not in DIRECTIONS:
        raise ValueError(f"direction must be one of {', '.join(DIRECTIONS)}, not {direction!r}")
    if mode == "blackhole":
        return {"mode": mode, "ms": 0, "direction": direction}
    if mode == "delay":
        ms = body.get("ms")
        if isinstance(ms, bool) or not isinstance(ms, (int, float)) or ms < 0:
            raise ValueError("delay needs ms, a non-negative number of milliseconds")
        return {"mode": mode, "ms": ms, "direction": direction}
    raise ValueError(f"mode must be pass, delay, blackhole or reset, not {mode!r}")


class FaultControl:
    """The control surface shared by the in-process proxy, the subprocess and the HTTP client."""

    def set_mode(self, mode: str, **params) -> dict:
        """Set the mode (see prove.peers.fault_proxy); returns the status after the change."""
        raise NotImplementedError

    def status(self) -> dict:
        raise NotImplementedError

    def pass_through(self) -> dict:
        return self.set_mode("pass")

    def delay(self, ms: float, direction: str = "both") -> dict:
        return self.set_mode("delay", ms=ms, direction=direction)

    def blackhole(self, direction: str = "both") -> dict:
        return self.set_mode("blackhole", direction=direction)

    def reset(self) -> dict:
        return self.set_mode("reset")


def control_server(proxy: FaultControl, host: str, port: int) -> ThreadingHTTPServer:
    """The HTTP control API of ``proxy`` (``POST /mode``, ``GET /status``), not yet serving."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, format, *args):
            pass

        def _send(self, status: int, payload: dict) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            if self.path.rstrip("/") == "/status":
                self._send(200, proxy.status())
            else:
                self._send(404, {"error": f"no route GET {self.path}"})

        def do_POST(self):
            if self.path.rstrip("/") != "/mode":
                self._send(404, {"error": f"no route POST {self.path}"})
                return
            try:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length") or 0)) or b"{}")
                if not isinstance(body, dict):
                    raise ValueError("body must be a JSON object")
                mode = body.pop("mode", None)
                self._send(200, proxy.set_mode(mode, **body))
            except (ValueError, TypeError) as exc:
                self._send(400, {"error": str(exc)})

    server = ThreadingHTTPServer((host, port), Handler)
    server.daemon_threads = True
    return server


class ProxyClient(FaultControl):
    """Controls a running proxy through its HTTP control API.

    Args:
        control_url: e.g. "http://127.0.0.1:40124".
        address: the proxy's listen address "HOST:PORT", when known.
    """

    def __init__(self, control_url: str, address: str | None = None):
        self.control_url = control_url.rstrip("/")
        self.address = address

    @property
    def port(self) -> int | None:
        return int(self.address.rpartition(":")[2]) if self.address else None

    def _call(self, method: str, path: str, body: dict | None = None) -> dict:
        data = None if body is None else json.dumps(body).encode()
        req = urllib.request.Request(
            self.control_url + path,
            data=data,
            method=method,
            headers={"Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(req, timeout=15) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as exc:
            detail = exc.read().decode("utf-8", "replace")
            exc.close()
            raise ValueError(f"fault proxy {method} {path}: HTTP {exc.code}: {detail}") from None

    def set_mode(self, mode: str, **params) -> dict:
        return self._call("POST", "/mode", {"mode": mode, **params})

    def status(self) -> dict:
        return self._call("GET", "/status")


@contextlib.contextmanager
def proxy_process(upstream: str, *, listen_port: int = 0, control_port: int = 0) -> Iterator[ProxyClient]:
    """Run ``manage.py prove proxy`` as a subprocess for the duration of the block.

    Args:
        upstream: "HOST:PORT" or "unix:/path/to/socket".
        listen_port, control_port: 0 picks free ports.

    Yields:
        A ProxyClient with ``address`` set (clients connect there) and ``proc`` (the Popen). The
        process is stopped (SIGTERM, then SIGKILL) on exit.
    """

    proc, line = spawn_subcommand(
        "proxy",
        [
            "--listen-port",
            str(listen_port),
            "--upstream",
            upstream,
            "--control-port",
            str(control_port),
        ],
    )
    try:
        host, port = parse_address(line, "listening")
        chost, cport = parse_address(line, "control")
        client = ProxyClient(f"http://{chost}:{cport}", f"{host}:{port}")
        client.proc = proc
        yield client
    finally:
        stop_process(proc)
