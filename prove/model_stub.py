"""A local Anthropic Messages API stub with scripted amounts: EMULATED model variance.

No network here (design-notes §7), so the real ``anthropic`` SDK is pointed by ``base_url`` at
this server. It answers ``POST /v1/messages`` the way the API does for a non-streaming request,
and what it "decides" is a script, not a model: that is the emulation, and every response says
so in its ``X-Interlock-Emulated`` header.

Script (spec §11.2): the caller puts ``case_id: X`` in its user message; calls are counted per
case. By default every call answers 2000 cents. With ``{"redecide": true}`` the first call for a
case answers 2000 and every later call 3000 (the model changing its mind after a crash, spec
§11.3 S05). With ``{"amounts": [a0, a1, ...]}`` the n-th call for a case (from 0) answers
``amounts[n]``, and the last one once the list is used up; it overrides redecide.

The answer's text is a JSON object ``{"amount": cents, "reasoning": "..."}``.

Endpoints:

- ``POST /v1/messages``: needs ``x-api-key`` (or ``Authorization: Bearer``), ``anthropic-version``,
  and a body with ``model``, ``max_tokens`` and ``messages``; ``stream`` is not supported. Returns
  ``{"id", "type": "message", "role": "assistant", "model", "content": [{"type": "text", "text"}],
  "stop_reason": "end_turn", "stop_sequence": null, "usage": {"input_tokens",
  "output_tokens"}}``. Errors use the API's shape ``{"type": "error", "error": {"type",
  "message"}}``.
- ``POST /admin/script`` ``{"redecide": bool, "amounts": [cents, ...] | null}``: either key may be
  given alone. ``POST /admin/reset``: counts and script back to their defaults.
- ``GET /admin/calls``: ``{"total", "by_case": {case_id: count}, "calls": [{"case_id", "n",
  "amount", "model", "user_agent", "anthropic_version", "t_mono", "t_wall"}], "script"}``.
"""

from __future__ import annotations

import contextlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

FIRST_AMOUNT = 2000  # cents
REDECIDED_AMOUNT = 3000  # cents
EMULATED_HEADER = "X-Interlock-Emulated"
EMULATED_VALUE = "model variance: scripted amounts from prove.model_stub, not a model"
CASE_ID = re.compile(r"case_id:\s*([A-Za-z0-9_.:#/-]+)")


class ApiError(Exception):
    """An error answered in the Messages API's error shape."""

    def __init__(self, status: int, kind: str, message: str):
        self.status, self.kind, self.message = status, kind, message
        super().__init__(f"{status} {kind}: {message}")


def _user_text(messages) -> str:
    """The text of the user messages, content given as a string or as text blocks."""
    parts = []
    for message in messages:
        if not isinstance(message, dict) or message.get("role") != "user":
            continue
        content = message.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(
                b.get("text", "")
                for b in content
                if isinstance(b, dict) and b.get("type") == "text"
            )
    return "\n".join(parts)


class Script:
    """Which amount the n-th call for a case gets, and the record of every call."""

    def __init__(self):
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.redecide = False
            self.amounts: list[int] | None = None
            self.calls: list[dict] = []
            self.by_case: dict[str, int] = {}

    def configure(self, body: dict) -> dict:
        """Apply ``{"redecide"?, "amounts"?}``; returns the script.

        Raises:
            ApiError: 400 for a non-bool redecide or amounts that are not integer cents.
        """
        redecide, amounts = body.get("redecide"), body.get("amounts")
        if "redecide" in body and not isinstance(redecide, bool):
            raise ApiError(400, "invalid_request_error", "redecide must be true or false")
        if amounts is not None and (
            not isinstance(amounts, list)
            or not amounts
            or any(isinstance(a, bool) or not isinstance(a, int) for a in amounts)
        ):
            raise ApiError(
                400, "invalid_request_error", "amounts must be a non-empty list of integer cents"
            )
        with self._lock:
            if "redecide" in body:
                self.redecide = redecide
            if "amounts" in body:
                self.amounts = amounts
            return self.describe()

    def describe(self) -> dict:
        return {"redecide": self.redecide, "amounts": self.amounts}

    def next_amount(self, case_id: str, model: str, client: dict) -> tuple[int, int]:
        """Count a call for ``case_id``; return (amount in cents, n from 0).

        Args:
            case_id: from the user message.
            model: the requested model.
            client: what the caller's headers said, {"user_agent", "anthropic_version"}.
        """
        with self._lock:
            n = self.by_case.get(case_id, 0)
            self.by_case[case_id] = n + 1
            if self.amounts is not None:
                amount = self.amounts[min(n, len(self.amounts) - 1)]
            elif n > 0 and self.redecide:
                amount = REDECIDED_AMOUNT
            else:
                amount = FIRST_AMOUNT
            self.calls.append(
                {
                    "case_id": case_id,
                    "n": n,
                    "amount": amount,
                    "model": model,
                    **client,
                    "t_mono": time.monotonic(),
                    "t_wall": time.time(),
                }
            )
            return amount, n

    def report(self) -> dict:
        with self._lock:
            return {
                "total": len(self.calls),
                "by_case": dict(self.by_case),
                "calls": list(self.calls),
                "script": self.describe(),
            }


class StubServer(ThreadingHTTPServer):
    # socketserver's default listen backlog is 5. Sixteen workflows connecting at once overflow
    # it, and the kernel drops the SYNs past it: the client retries after 1 s, 3 s, 7 s, so a
    # send could time out before it was ever accepted (seen as TcpExtListenOverflows).
    request_queue_size = 128
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, address: tuple[str, int]):
        self.script = Script()
        self._ids = 0
        self._ids_lock = threading.Lock()
        super().__init__(address, StubHandler)

    def next_id(self) -> int:
        with self._ids_lock:
            self._ids += 1
            return self._ids


class StubHandler(BaseHTTPRequestHandler):
    server: StubServer
    protocol_version = "HTTP/1.1"  # the SDK's httpx client keeps connections alive

    def log_message(self, format, *args):
        pass

    def _body(self) -> dict:
        raw = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        try:
            body = json.loads(raw or b"{}")
        except ValueError:
            raise ApiError(400, "invalid_request_error", "body is not JSON") from None
        if not isinstance(body, dict):
            raise ApiError(400, "invalid_request_error", "body must be a JSON object")
        return body

    def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.send_header(EMULATED_HEADER, EMULATED_VALUE)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(data)

    def _route(self, routes: dict[str, Callable[[], None]]) -> None:
        path = self.path.split("?", 1)[0].rstrip("/")
        try:
            handler = routes.get(path)
            if handler is None:
                # Read the body anyway so a kept-alive connection stays in step.
                self.rfile.read(int(self.headers.get("Content-Length") or 0))
                raise ApiError(404, "not_found_error", f"no route {self.command} {path}")
            handler()
        except ApiError as exc:
            self._send(
                exc.status, {"type": "error", "error": {"type": exc.kind, "message": exc.message}}
            )

    def do_GET(self):
        self._route({"/admin/calls": lambda: self._send(200, self.server.script.report())})

    def do_POST(self):
        self._route(
            {
                "/v1/messages": self._messages,
                "/admin/script": lambda: self._send(
                    200, self.server.script.configure(self._body())
                ),
                "/admin/reset": self._reset,
            }
        )

    def _reset(self) -> None:
        self._body()
        self.server.script.reset()
        self._send(200, {"reset": True, "script": self.server.script.describe()})

    def _messages(self) -> None:
        body = self._body()
        auth = self.headers.get("x-api-key") or self.headers.get("Authorization")
        if not auth:
            raise ApiError(401, "authentication_error", "x-api-key header is required")
        if not self.headers.get("anthropic-version"):
            raise ApiError(400, "invalid_request_error", "anthropic-version header is required")
        model, max_tokens, messages = (
            body.get("model"),
            body.get("max_tokens"),
            body.get("messages"),
        )
        if not isinstance(model, str) or not model:
            raise ApiError(400, "invalid_request_error", "model: field required")
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 1:
            raise ApiError(
                400, "invalid_request_error", "max_tokens: a positive integer is required"
            )
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "invalid_request_error", "messages: a non-empty list is required")
        if body.get("stream"):
            raise ApiError(400, "invalid_request_error", "the stub does not stream")
        prompt = _user_text(messages)
        found = CASE_ID.search(prompt)
        if found is None:
            raise ApiError(400, "invalid_request_error", "no 'case_id: X' in the user message")
        case_id = found.group(1)
        amount, n = self.server.script.next_amount(
            case_id,
            model,
            {
                "user_agent": self.headers.get("User-Agent"),
                "anthropic_version": self.headers.get("anthropic-version"),
            },
        )
        text = json.dumps(
            {
                "amount": amount,
                "reasoning": f"Scripted decision {n + 1} for case {case_id}: "
                f"refund {amount} cents.",
            }
        )
        number = self.server.next_id()
        self._send(
            200,
            {
                "id": f"msg_stub_{number:06d}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": [{"type": "text", "text": text}],
                "stop_reason": "end_turn",
                "stop_sequence": None,
                # Rough counts (4 characters a token): the shape matters here, not the numbers.
                "usage": {
                    "input_tokens": max(1, len(prompt) // 4),
                    "output_tokens": max(1, len(text) // 4),
                },
            },
            headers={"request-id": f"req_stub_{number:06d}"},
        )


def serve(*, host: str = "127.0.0.1", port: int = 0, ready: Callable[[str], None] = print) -> None:
    """Run the stub until KeyboardInterrupt (SIGTERM in ``manage.py prove model-stub``).

    Args:
        host, port: where to listen; port 0 picks a free port.
        ready: called once with "listening HOST:PORT".
    """
    server = StubServer((host, port))
    try:
        ready(f"listening {host}:{server.server_address[1]}")
        server.serve_forever(poll_interval=0.2)
    finally:
        server.server_close()


@contextlib.contextmanager
def model_stub_process(*, port: int = 0) -> Iterator[str]:
    """Run ``manage.py prove model-stub`` as a subprocess for the duration of the block.

    Yields:
        The base URL for ``ILR_MODEL_BASE_URL``, e.g. "http://127.0.0.1:40125". The process is
        stopped (SIGTERM, then SIGKILL) on exit.
    """
    from prove.management.commands.prove import parse_address, spawn_subcommand, stop_process

    proc, line = spawn_subcommand("model-stub", ["--port", str(port)])
    try:
        host, bound = parse_address(line)
        yield f"http://{host}:{bound}"
    finally:
        stop_process(proc)
