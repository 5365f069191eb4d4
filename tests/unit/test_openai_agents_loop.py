"""ilr.contrib.openai_agents runs the SDK's coroutines (model calls, tools) on one event loop the
process keeps: an ``AsyncOpenAI`` client, whose connection pool is bound to the loop that first
used it, keeps working across model calls and across workflow executions (each one an
``asyncio.run`` of its own). A loop per call fails the second call with "Event loop is closed".
The client is the real ``openai`` SDK against a local HTTP server (keep-alive), no network."""

from __future__ import annotations

import asyncio
import http.server
import json
import threading

import pytest

from ilr.contrib.openai_agents._threads import run_coroutine


class _Models(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive: the client's pool keeps the connection

    def do_GET(self):
        body = json.dumps({"object": "list", "data": [{"id": "m", "object": "model", "created": 0, "owned_by": "x"}]})
        self.send_response(200)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args):
        pass


@pytest.fixture
def models_url():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Models)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    server.shutdown()
    server.server_close()


def test_one_client_serves_every_call_of_every_execution(models_url):
    from openai import AsyncOpenAI

    client = AsyncOpenAI(base_url=models_url, api_key="unused", max_retries=0, timeout=5)

    async def names():
        return [m.id for m in (await client.models.list()).data]

    async def execution():  # a workflow execution: its own loop, durable calls blocking inside it
        return [run_coroutine(names) for _ in range(2)]

    assert [asyncio.run(execution()) for _ in range(3)] == [[["m"], ["m"]]] * 3


def test_errors_and_contextvars_reach_the_caller():
    import contextvars

    var = contextvars.ContextVar("var", default="unset")
    var.set("the caller's")

    async def read():
        return var.get()

    async def fail():
        raise LookupError("no such payment")

    assert run_coroutine(read) == "the caller's"
    with pytest.raises(LookupError, match="no such payment"):
        run_coroutine(fail)
