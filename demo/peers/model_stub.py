"""A local Anthropic Messages API stub with scripted amounts: EMULATED model variance.

No network here (docs/protocol.md §16.2), so the real ``anthropic`` SDK is pointed by ``base_url``
at this server. It answers ``POST /v1/messages`` the way the API does for a non-streaming request,
and what it "decides" is a script, not a model: that is the emulation, and every response says so in
its ``X-Interlock-Emulated`` header.

Script: the caller puts ``case_id: X`` in its user message; calls are counted per
case. By default every call answers 2000 cents. With ``{"redecide": true}`` the first call for a
case answers 2000 and every later call 3000 (the model changing its mind after a crash,
scenario S05). With ``{"amounts": [a0, a1, ...]}`` the n-th call for a case (from 0) answers
``amounts[n]``, and the last one once the list is used up; it overrides redecide.

The answer's text is a JSON object ``{"amount": cents, "reasoning": "..."}``.

Tool use (EMULATED, for ``ilr.agents``): a request with ``tools`` gets the agent script, one
deterministic answer per (conversation, turn, n), where the conversation is the ``case_id`` of
the user text, the turn is the number of assistant messages in the request, and n counts the
calls for that conversation and turn (from 0). The payment is ``payment: X`` in the user text,
else the case id. Scripts (``{"agent": NAME}``; default "refund"):

- "refund": turn 0 calls the lookup tool ``{"payment"}``; turn 1 calls the refund tool
  ``{"payment", "amount": 2000}``; turn 2 answers with text that quotes the refund's tool_result.
- "redecide": as "refund", but a second or later call of turn 1 proposes 3000 (the model
  proposing other arguments after a crash or a reset).
- "unknown_tool": turn 0 calls ``wire_money`` (no such tool); then a final text quoting the error.
- "bad_args": turn 0 calls the refund tool with ``{"payment", "amount": "all of it"}``; then a
  final text quoting the error.

Tool names: ``{"agent_tools": {"lookup": name, "refund": name}}`` (default ``lookup_payment``
and ``issue_refund``). A tool_use left without a tool_result in the next user message is a 400,
as the API answers. The final text is ``"Final answer: "`` followed by the last tool_result's
content (``"error: "`` before it when is_error).

Endpoints:

- ``POST /v1/messages``: needs ``x-api-key`` (or ``Authorization: Bearer``), ``anthropic-version``,
  and a body with ``model``, ``max_tokens`` and ``messages``; ``stream`` is not supported. Returns
  ``{"id", "type": "message", "role": "assistant", "model", "content": [{"type": "text", "text"}],
  "stop_reason": "end_turn", "stop_sequence": null, "usage": {"input_tokens",
  "output_tokens"}}``. Errors use the API's shape ``{"type": "error", "error": {"type",
  "message"}}``.
- ``POST /admin/script`` ``{"redecide": bool, "amounts": [cents, ...] | null, "agent": NAME | null,
  "agent_tools": {"lookup", "refund"}}``: any key may be given alone. ``POST /admin/reset``: counts
  and script back to their defaults.
- ``GET /admin/calls``: ``{"total", "by_case": {case_id: count}, "calls": [{"case_id", "n",
  "amount", "model", "user_agent", "anthropic_version", "t_mono", "t_wall"}], "script"}``.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from demo.peers.processes import parse_address, spawn_peer, stop_process

FIRST_AMOUNT = 2000  # cents
REDECIDED_AMOUNT = 3000  # cents
EMULATED_HEADER = "X-Interlock-Emulated"
EMULATED_VALUE = "model variance: scripted amounts from demo.peers.model_stub, not a model"
CASE_ID = re.compile(r"case_id:\s*([A-Za-z0-9_.:#/-]+)")
PAYMENT = re.compile(r"payment:\s*([A-Za-z0-9_.:#/-]+)")
AGENT_SCRIPTS = ("refund", "redecide", "unknown_tool", "bad_args")
DEFAULT_AGENT_TOOLS = {"lookup": "lookup_payment", "refund": "issue_refund"}
UNKNOWN_TOOL = "wire_money"


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
            parts.extend(b.get("text", "") for b in content if isinstance(b, dict) and b.get("type") == "text")
    return "\n".join(parts)


def _blocks(message) -> list:
    content = message.get("content") if isinstance(message, dict) else None
    return [b for b in content if isinstance(b, dict)] if isinstance(content, list) else []


def _check_tool_results(messages) -> None:
    """The API's rule: each assistant tool_use is answered by a tool_result in the next message."""
    for i, message in enumerate(messages):
        if not isinstance(message, dict) or message.get("role") != "assistant":
            continue
        wanted = {b.get("id") for b in _blocks(message) if b.get("type") == "tool_use"}
        if not wanted:
            continue
        nxt = messages[i + 1] if i + 1 < len(messages) else None
        got = (
            {b.get("tool_use_id") for b in _blocks(nxt) if b.get("type") == "tool_result"}
            if isinstance(nxt, dict) and nxt.get("role") == "user"
            else set()
        )
        if wanted - got:
            raise ApiError(
                400,
                "invalid_request_error",
                f"messages.{i + 1}: tool_use ids were found without "
                f"tool_result blocks immediately after: {sorted(wanted - got)}",
            )


def _last_result(messages) -> tuple[str, bool]:
    """(content text, is_error) of the last tool_result in the last user message; ("", False)."""
    for b in reversed(_blocks(messages[-1]) if messages else []):
        if b.get("type") == "tool_result":
            content = b.get("content")
            if isinstance(content, list):
                content = "".join(x.get("text", "") for x in content if isinstance(x, dict))
            return str(content or ""), bool(b.get("is_error"))
    return "", False


class Script:
    """Which amount the n-th call for a case gets, and the record of every call."""

    def __init__(self):
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self.redecide = False
            self.amounts: list[int] | None = None
            self.agent: str | None = None
            self.agent_tools: dict[str, str] = dict(DEFAULT_AGENT_TOOLS)
            self.by_turn: dict[tuple[str, int], int] = {}
            self.calls: list[dict] = []
            self.by_case: dict[str, int] = {}

    def configure(self, body: dict) -> dict:
        """Apply ``{"redecide"?, "amounts"?, "agent"?, "agent_tools"?}``; returns the script.

        Raises:
            ApiError: 400 for a non-bool redecide, amounts that are not integer cents, an agent
                script not in AGENT_SCRIPTS, or agent_tools that are not {"lookup", "refund"}
                names.
        """
        redecide, amounts = body.get("redecide"), body.get("amounts")
        agent, tools = body.get("agent"), body.get("agent_tools")
        if agent is not None and agent not in AGENT_SCRIPTS:
            raise ApiError(400, "invalid_request_error", f"agent must be one of {', '.join(AGENT_SCRIPTS)} or null")
        if tools is not None and (
            not isinstance(tools, dict)
            or set(tools) - set(DEFAULT_AGENT_TOOLS)
            or not all(isinstance(v, str) and v for v in tools.values())
        ):
            raise ApiError(400, "invalid_request_error", "agent_tools must map lookup and refund to tool names")
        if "redecide" in body and not isinstance(redecide, bool):
            raise ApiError(400, "invalid_request_error", "redecide must be true or false")
        if amounts is not None and (
            not isinstance(amounts, list)
            or not amounts
            or any(isinstance(a, bool) or not isinstance(a, int) for a in amounts)
        ):
            raise ApiError(400, "invalid_request_error", "amounts must be a non-empty list of integer cents")
        with self._lock:
            if "redecide" in body:
                self.redecide = redecide
            if "amounts" in body:
                self.amounts = amounts
            if "agent" in body:
                self.agent = agent
            if tools is not None:
                self.agent_tools = {**DEFAULT_AGENT_TOOLS, **tools}
            return self.describe()

    def describe(self) -> dict:
        out = {"redecide": self.redecide, "amounts": self.amounts}
        if self.agent is not None or self.agent_tools != DEFAULT_AGENT_TOOLS:
            out.update(agent=self.agent, agent_tools=dict(self.agent_tools))
        return out

    def next_turn(self, case_id: str, messages: list, prompt: str, model: str, client: dict) -> tuple[list, str]:
        """Count a tool-use call for ``case_id``; return (content blocks, stop_reason) of the
        agent script's answer. See the module docstring for the scripts.

        Raises:
            ApiError: 400 when a tool_use of the request has no tool_result after it.
        """
        _check_tool_results(messages)
        turn = sum(1 for m in messages if isinstance(m, dict) and m.get("role") == "assistant")
        found = PAYMENT.search(prompt)
        payment = found.group(1) if found else case_id
        with self._lock:
            n = self.by_turn.get((case_id, turn), 0)
            self.by_turn[(case_id, turn)] = n + 1
            self.by_case[case_id] = self.by_case.get(case_id, 0) + 1
            script, names = self.agent or "refund", dict(self.agent_tools)
            call = None
            if script in ("refund", "redecide") and turn == 0:
                call = (names["lookup"], {"payment": payment})
            elif script in ("refund", "redecide") and turn == 1 and not _last_result(messages)[1]:
                amount = REDECIDED_AMOUNT if script == "redecide" and n > 0 else FIRST_AMOUNT
                call = (names["refund"], {"payment": payment, "amount": amount})
            elif script == "unknown_tool" and turn == 0:
                call = (UNKNOWN_TOOL, {"payment": payment, "amount": FIRST_AMOUNT})
            elif script == "bad_args" and turn == 0:
                call = (names["refund"], {"payment": payment, "amount": "all of it"})
            self.calls.append(
                {
                    "case_id": case_id,
                    "n": n,
                    "turn": turn,
                    "amount": (call or (None, {}))[1].get("amount"),
                    "tool": call[0] if call else None,
                    "model": model,
                    **client,
                    "t_mono": time.monotonic(),
                    "t_wall": time.time(),
                }
            )
        if call is None:
            content, is_error = _last_result(messages)
            text = "Final answer: " + ("error: " if is_error else "") + content
            return [{"type": "text", "text": text}], "end_turn"
        digest = hashlib.sha256(f"{case_id}\x00{turn}\x00{n}".encode()).hexdigest()[:20]
        return [
            {"type": "text", "text": f"Calling {call[0]}."},
            {"type": "tool_use", "id": f"toolu_stub{digest}", "name": call[0], "input": call[1]},
        ], "tool_use"

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
            self._send(exc.status, {"type": "error", "error": {"type": exc.kind, "message": exc.message}})

    def do_GET(self):
        self._route({"/admin/calls": lambda: self._send(200, self.server.script.report())})

    def do_POST(self):
        self._route(
            {
                "/v1/messages": self._messages,
                "/admin/script": lambda: self._send(200, self.server.script.configure(self._body())),
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
            raise ApiError(400, "invalid_request_error", "max_tokens: a positive integer is required")
        if not isinstance(messages, list) or not messages:
            raise ApiError(400, "invalid_request_error", "messages: a non-empty list is required")
        if body.get("stream"):
            raise ApiError(400, "invalid_request_error", "the stub does not stream")
        prompt = _user_text(messages)
        found = CASE_ID.search(prompt)
        if found is None:
            raise ApiError(400, "invalid_request_error", "no 'case_id: X' in the user message")
        case_id = found.group(1)
        client = {
            "user_agent": self.headers.get("User-Agent"),
            "anthropic_version": self.headers.get("anthropic-version"),
        }
        tools = body.get("tools")
        if tools is not None:
            if not isinstance(tools, list) or not all(
                isinstance(t, dict) and isinstance(t.get("name"), str) and isinstance(t.get("input_schema"), dict)
                for t in tools
            ):
                raise ApiError(400, "invalid_request_error", "tools: each tool needs a name and an input_schema")
            content, stop_reason = self.server.script.next_turn(case_id, messages, prompt, model, client)
            self._message(model, content, stop_reason, prompt)
            return
        amount, n = self.server.script.next_amount(case_id, model, client)
        text = json.dumps(
            {
                "amount": amount,
                "reasoning": f"Scripted decision {n + 1} for case {case_id}: refund {amount} cents.",
            }
        )
        self._message(model, [{"type": "text", "text": text}], "end_turn", prompt)

    def _message(self, model: str, content: list, stop_reason: str, prompt: str) -> None:
        text = "".join(b["text"] if b["type"] == "text" else json.dumps(b["input"]) for b in content)
        number = self.server.next_id()
        self._send(
            200,
            {
                "id": f"msg_stub_{number:06d}",
                "type": "message",
                "role": "assistant",
                "model": model,
                "content": content,
                "stop_reason": stop_reason,
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
    """Run the stub until KeyboardInterrupt (SIGTERM in ``manage.py demo_peer model-stub``).

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
    """Run ``manage.py demo_peer model-stub`` as a subprocess for the duration of the block.

    Yields:
        The base URL for ``ILR_MODEL_BASE_URL``, e.g. "http://127.0.0.1:40125". The process is
        stopped (SIGTERM, then SIGKILL) on exit.
    """

    proc, line = spawn_peer("model-stub", ["--port", str(port)])
    try:
        host, bound = parse_address(line)
        yield f"http://{host}:{bound}"
    finally:
        stop_process(proc)
