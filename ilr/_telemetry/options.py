"""The shape of ILR_TELEMETRY (its keys are described in ``ilr._telemetry.setup``): checked by the
system check (``ilr._conf.setting_problems``) and by ``setup.configure``."""

from __future__ import annotations

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
    if not out and any(value.get(k) for k in SDK_KEYS) and not sdk_installed():
        keys = ", ".join(k for k in SDK_KEYS if value.get(k))
        out.append((setting, f"needs the OpenTelemetry SDK for {keys}: pip install 'interlock[telemetry]'"))
    return out


def sdk_installed() -> bool:
    """Whether the OpenTelemetry SDK (the ``telemetry`` extra) can be imported in this process."""
    try:
        import opentelemetry.sdk.metrics  # noqa: F401
        import opentelemetry.sdk.trace  # noqa: F401
    except ImportError:
        return False
    return True
