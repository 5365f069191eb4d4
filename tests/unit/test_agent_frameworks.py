"""The agent-framework registry (demo.agent_frameworks) and the commands that take
``--framework``: every driver names a workflow module that registers its workflow and functions
that exist; an unknown name is refused before anything starts, with the known names."""

from __future__ import annotations

import importlib

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError

from demo.agent_frameworks import DRIVERS, drivers, load
from ilr._registry import get


@pytest.mark.parametrize("name", list(DRIVERS))
def test_every_driver_names_a_registered_workflow_and_real_functions(name):
    d = DRIVERS[name]
    importlib.import_module(d.module)
    assert get(d.workflow, d.version) is not None
    for ref in (d.answer, d.replayed, d.bench, d.conversation):
        if ref is not None:
            assert callable(load(ref)), ref


def test_framework_names():
    assert [d.name for d in drivers("all")] == list(DRIVERS)
    assert [d.name for d in drivers("pydantic-ai")] == ["pydantic-ai"]
    with pytest.raises(ValueError, match=r"unknown framework 'nope'; known: native, pydantic-ai"):
        drivers("nope")


@pytest.mark.parametrize("command", ["agents_report", "bench_agent_tools"])
def test_an_unknown_framework_is_refused_before_anything_runs(command):
    with pytest.raises(CommandError, match="unknown framework 'nope'") as exc:
        call_command(command, "--framework", "nope")
    assert exc.value.returncode == 2
