"""The shape of ILR_TELEMETRY (its keys are described in ``ilr._telemetry.setup``): checked by the
system check (``ilr._conf.setting_problems``) and by ``setup.configure``."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

KEYS = {
    "enabled": (bool, type(None)),
    "sdk": (bool,),
    "spans_file": (str,),
    "spans_memory": (bool,),
    "metrics_memory": (bool,),
    "prometheus": (bool,),
    "service_name": (str,),
    "state_gauges": (bool,),
}
"""Each key of ILR_TELEMETRY and the types its value may have."""

SDK_KEYS = ("sdk", "spans_file", "spans_memory", "metrics_memory", "prometheus")
"""The keys that install the OpenTelemetry SDK (the ``telemetry`` extra) when true."""


def telemetry_problems(value: Any, setting: str = "ILR_TELEMETRY") -> list[tuple[str, str]]:
    """What is wrong with ``value`` as ILR_TELEMETRY ([] when nothing is): (where, the rule)."""
    if value is None:
        return []
    if not isinstance(value, dict):
        return [(setting, f"must be None or a dict of {', '.join(KEYS)}, got {type(value).__name__}")]
    out = []
    for key, item in value.items():
        if key not in KEYS:
            out.append((setting, f"unknown key {key!r}; the keys are {', '.join(KEYS)}"))
        elif not isinstance(item, KEYS[key]) or (isinstance(item, str) and not item):
            wanted = " or ".join("None" if t is type(None) else t.__name__ for t in KEYS[key])
            wanted += " (non-empty)" if str in KEYS[key] else ""
            out.append((f"{setting}[{key!r}]", f"must be a {wanted}, got {item!r}"))
    if not out and value.get("spans_file"):
        problem = spans_file_problem(value["spans_file"])
        if problem:
            out.append((f"{setting}['spans_file']", problem))
    if not out and any(value.get(k) for k in SDK_KEYS) and not sdk_installed():
        keys = ", ".join(k for k in SDK_KEYS if value.get(k))
        out.append((setting, f"needs the OpenTelemetry SDK for {keys}: pip install 'interlock[telemetry]'"))
    return out


def spans_file_problem(path: str) -> str | None:
    """Why this process cannot append spans to ``path`` (None when it can): a directory, a
    missing directory, or one it may not write to. Reads the file system, writes nothing."""
    target = Path(path)
    if target.is_dir():
        return f"must be a file to append spans to, got the directory {path!r}"
    if target.exists():
        return None if os.access(target, os.W_OK) else f"{path!r} is not writable by this process"
    parent = target.parent
    if not parent.is_dir():
        return f"its directory {str(parent)!r} does not exist"
    return None if os.access(parent, os.W_OK | os.X_OK) else f"its directory {str(parent)!r} is not writable"


def sdk_installed() -> bool:
    """Whether the OpenTelemetry SDK (the ``telemetry`` extra) can be imported in this process."""
    try:
        import opentelemetry.sdk.metrics  # noqa: F401
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        return False
    return True
