"""Run SDK coroutines (a model call, a read-only tool) off the workflow's event loop.

The durable calls of a workflow context are synchronous and belong to the workflow's thread; the
SDK's are coroutines. While a durable call runs, the workflow's event loop is blocked inside it,
so a coroutine it has to await (the real model's ``get_response``, a tool's ``on_invoke_tool``)
runs to completion on a fresh event loop in a helper thread, with the caller's contextvars.
"""

from __future__ import annotations

import asyncio
import contextvars
import threading
from collections.abc import Callable, Coroutine
from typing import Any


def run_coroutine(factory: Callable[[], Coroutine[Any, Any, Any]]) -> Any:
    """``factory()``'s coroutine run to completion on its own event loop in a helper thread.

    Returns:
        the coroutine's value.

    Raises:
        whatever the coroutine raised.
    """
    box: dict[str, Any] = {}
    context = contextvars.copy_context()

    def target() -> None:
        try:
            box["value"] = context.run(asyncio.run, factory())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread as is
            box["error"] = exc

    thread = threading.Thread(target=target, name="ilr-openai-agents-call", daemon=True)
    thread.start()
    thread.join()
    if "error" in box:
        raise box["error"]
    return box.get("value")
