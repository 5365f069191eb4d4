"""Workflow registration: ``@workflow(name, version)`` and autodiscovery of ``workflows`` modules.

Workflows are found like admin sites: ``ilr`` imports a ``workflows`` module from every installed
app when Django starts (``IlrConfig.ready``); ``ilr_worker --import MODULE`` adds others.
"""

from __future__ import annotations

import hashlib
import inspect
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ilr._concurrency import Concurrency
from ilr._errors import InvalidInput, UnknownWorkflow


@dataclass(frozen=True)
class WorkflowDefinition:
    """A registered workflow type."""

    name: str
    """The workflow type name (Temporal's workflow type)."""
    version: str
    """An explicit version; a worker claims only the (name, version) pairs it registered."""
    fn: Callable[..., Any]
    """The workflow function ``fn(ctx, input)``."""
    input_object: bool
    """When true (the default), the input must be a JSON object."""
    concurrency: Concurrency | None = None
    """Its concurrency rule: each start takes a slot of its key, or waits (docs/protocol.md §5.4)."""
    queue: str | None = None
    """Its queue of ILR_QUEUES (global limit, rates; the workers that serve it), or None."""
    continue_as_new_at_history_limit: bool = False
    """At a history limit, continue as new with the run's input instead of failing (§5.7)."""

    @property
    def code_sha256(self) -> str:
        """sha256 of the workflow function's module source bytes (docs/protocol.md §4)."""
        module = sys.modules.get(self.fn.__module__)
        try:
            source = inspect.getsource(module) if module else inspect.getsource(self.fn)
        except (OSError, TypeError):
            source = self.fn.__qualname__
        return hashlib.sha256(source.encode()).hexdigest()

    @property
    def key(self) -> str:
        return f"{self.name}@{self.version}"


_REGISTRY: dict[tuple[str, str], WorkflowDefinition] = {}


def workflow(
    name: str | None = None,
    version: str = "1",
    *,
    input_object: bool = True,
    concurrency: Concurrency | None = None,
    queue: str | None = None,
    continue_as_new_at_history_limit: bool = False,
):
    """Register a workflow function ``fn(ctx, input)`` under (name, version).

    Args:
        name: the workflow type name; defaults to the function's name.
        version: an explicit version string (docs/protocol.md §4, versions). Default "1".
        input_object: require the input to be a JSON object (dict). Default True.
        concurrency: a ``Concurrency`` rule: at most ``limit`` runs per key at once, a start
            past it queues (or what ``on_conflict`` says). Default None (no key).
        queue: a queue of ``ILR_QUEUES``: its concurrency limit and rates apply to every start,
            and ``ilr_worker --queue`` picks it. Checked at each start (settings may load later).
        continue_as_new_at_history_limit: at ILR_HISTORY_LIMIT_STEPS or ILR_HISTORY_LIMIT_BYTES,
            continue as new (``ctx.continue_as_new(ctx.input)``: the input this run was started
            with) at the durable call that would cross it, instead of failing with
            HistoryLimitExceeded. Default False (docs/protocol.md §5.7).

    Returns:
        A decorator that returns the function unchanged, with ``__ilr_workflow__`` set.

    Raises:
        InvalidInput: name or version empty, the same (name, version) registered twice by
            two different functions, ``concurrency`` not a Concurrency, or ``queue`` not a
            non-empty str.
    """

    def decorate(fn):
        wf_name = name or fn.__name__
        if not wf_name or not version:
            raise InvalidInput("name", "a workflow needs a non-empty name and version")
        if concurrency is not None and not isinstance(concurrency, Concurrency):
            raise InvalidInput("concurrency", f"must be an ilr.Concurrency, got {type(concurrency).__name__}")
        if queue is not None and (not isinstance(queue, str) or not queue):
            raise InvalidInput("queue", f"must be a queue name of ILR_QUEUES (a non-empty str), got {queue!r}")
        definition = WorkflowDefinition(
            wf_name, str(version), fn, input_object, concurrency, queue, bool(continue_as_new_at_history_limit)
        )
        existing = _REGISTRY.get((wf_name, definition.version))
        if existing and existing.fn.__qualname__ != fn.__qualname__:
            raise InvalidInput("name", f"{definition.key} is already registered by {existing.fn.__qualname__}")
        _REGISTRY[(wf_name, definition.version)] = definition
        fn.__ilr_workflow__ = definition
        return fn

    return decorate


def get(name: str, version: str) -> WorkflowDefinition:
    """The definition registered in this process for (name, version).

    Raises:
        UnknownWorkflow: nothing is registered under that pair.
    """
    try:
        return _REGISTRY[(name, version)]
    except KeyError:
        raise UnknownWorkflow(name, version) from None


def versions(name: str) -> list[WorkflowDefinition]:
    """Every registered version of ``name`` in this process."""
    return [d for (n, _), d in _REGISTRY.items() if n == name]


def all_definitions() -> list[WorkflowDefinition]:
    return list(_REGISTRY.values())


def autodiscover() -> None:
    """Import the ``workflows`` module of every installed app (like admin.autodiscover)."""
    from django.utils.module_loading import autodiscover_modules

    autodiscover_modules("workflows")
