"""Run SDK coroutines (a model call, a read-only tool) off the workflow's event loop, on one
event loop the process keeps.

The durable calls of a workflow context are synchronous and belong to the workflow's thread; the
SDK's are coroutines. While a durable call runs, the workflow's event loop is blocked inside it
(so nothing else of the run moves, and the durable calls keep their order), and a coroutine it
has to await (the real model's ``get_response``, a tool's ``on_invoke_tool``) runs on a loop of
its own in a helper thread. That loop lives as long as the process: an ``AsyncOpenAI`` client
(its connection pool is bound to the loop that first used it) keeps working from one model call
to the next and from one workflow to the next, as it does in a plain SDK program.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextvars
import threading
from collections.abc import Callable, Coroutine
from typing import Any

_lock = threading.Lock()
_loop: asyncio.AbstractEventLoop | None = None
_thread: threading.Thread | None = None


def shared_loop() -> asyncio.AbstractEventLoop:
    """The process's helper event loop, started on first use (a daemon thread)."""
    global _loop, _thread
    with _lock:
        if _loop is None or _thread is None or not _thread.is_alive():
            _loop = asyncio.new_event_loop()
            _thread = threading.Thread(target=_loop.run_forever, name="ilr-openai-agents-loop", daemon=True)
            _thread.start()
        return _loop


def run_coroutine(factory: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """``factory()``'s coroutine run to completion on the shared loop, with the caller's
    contextvars; blocks the calling thread until it ends.

    Returns:
        the coroutine's value.

    Raises:
        whatever the coroutine raised.
    """
    loop = shared_loop()
    context = contextvars.copy_context()
    done: concurrent.futures.Future = concurrent.futures.Future()

    def start() -> None:
        try:
            task = loop.create_task(factory(), context=context)
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread as is
            done.set_exception(exc)
            return

        def finished(t: asyncio.Task) -> None:
            if t.cancelled():
                done.cancel()
            elif t.exception() is not None:
                done.set_exception(t.exception())
            else:
                done.set_result(t.result())

        task.add_done_callback(finished)

    loop.call_soon_threadsafe(start)
    return done.result()
