"""One check (a module, a config, overrides, what must hold or be violated), the configs it runs,
the peeling run of one check, and the list of checks of a profile (full or quick)."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from prove.tlc.plan import (
    BROKEN,
    BROKEN_MODULE,
    LIVENESS,
    MODE_CFG,
    MODES,
    NOT_APPLICABLE,
    QUICK_OVERRIDES,
    SAFETY,
    SCHEDULES,
    SIGNALS,
    SIGNALS_WITNESSES,
    SLOTS,
    SLOTS_CASES,
    SLOTS_LIVENESS,
    SLOTS_WITNESSES,
    SPEC_DIR,
    TEMPORAL_GROUP_TIERS,
    TEMPORAL_GROUPS,
    TIER_CFG,
    TIER_TEXT,
    TIERS,
    WITNESSES,
)
from prove.tlc.tool import TlcRun, TraceStep, run_tlc

# ---------------------------------------------------------------------------------------------
# Configs


def read_cfg(path: Path) -> dict[str, Any]:
    """Read a TLC config file: constants (ordered), specification, symmetry, view, lists."""
    cfg: dict[str, Any] = {
        "constants": {},
        "specification": None,
        "symmetry": None,
        "view": None,
        "invariants": [],
        "properties": [],
    }
    section = None
    for raw in path.read_text().splitlines():
        line = raw.split("\\*", 1)[0].strip()
        if not line:
            continue
        word = line.split()[0]
        if word in ("CONSTANT", "CONSTANTS"):
            section = "constants"
            line = line[len(word) :].strip()
            if not line:
                continue
        elif word in ("INVARIANT", "INVARIANTS", "PROPERTY", "PROPERTIES"):
            section = "invariants" if word.startswith("INV") else "properties"
            cfg[section].extend(line.split()[1:])
            continue
        elif word in ("SPECIFICATION", "SYMMETRY", "VIEW"):
            cfg[word.lower()] = line.split()[1]
            section = None
            continue
        if section == "constants":
            name, _, val = line.partition("=")
            cfg["constants"][name.strip()] = val.strip()
        elif section in ("invariants", "properties"):
            cfg[section].extend(line.split())
    return cfg


def render_cfg(cfg: dict[str, Any], invariants: list[str], properties: list[str]) -> str:
    """Render a config with the given invariants and properties."""
    lines = ["CONSTANTS"]
    lines += [f"  {k} = {v}" for k, v in cfg["constants"].items()]
    lines.append(f"SPECIFICATION {cfg['specification']}")
    if cfg.get("symmetry"):
        lines.append(f"SYMMETRY {cfg['symmetry']}")
    if cfg.get("view"):
        lines.append(f"VIEW {cfg['view']}")
    if invariants:
        lines.append("INVARIANTS")
        lines += [f"  {i}" for i in invariants]
    if properties:
        lines.append("PROPERTIES")
        lines += [f"  {p}" for p in properties]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------------------
# Checks


@dataclasses.dataclass
class Check:
    """One thing to check: a module and config, constant overrides, what to check, and why."""

    id: str
    kind: str  # mode | broken | control | assumption | liveness | signals | slots | schedules | witness | sanity
    module: str
    cfg: str  # path relative to spec/
    overrides: dict[str, str] = dataclasses.field(default_factory=dict)
    invariants: list[str] = dataclasses.field(default_factory=list)
    properties: list[str] = dataclasses.field(default_factory=list)
    mode: str | None = None
    tier: str | None = None
    must_violate: list[str] = dataclasses.field(default_factory=list)
    must_hold: list[str] = dataclasses.field(default_factory=list)
    title: str = ""
    group: str | None = None


@dataclasses.dataclass
class CheckResult:
    """Per-invariant outcome of a check after peeling, with every TLC run it took."""

    check: Check
    constants: dict[str, str]
    outcome: dict[str, str]  # name -> "hold" | "V" | "error"
    traces: dict[str, list[TraceStep]]
    runs: list[TlcRun]
    distinct: int | None = None  # of the final, complete exploration
    depth: int | None = None
    wall_s: float = 0.0
    errors: list[str] = dataclasses.field(default_factory=list)


def effective_cfg(check: Check) -> dict[str, Any]:
    """The config of a check: its file's contents with the check's overrides applied."""
    cfg = read_cfg(SPEC_DIR / check.cfg)
    for key, value in check.overrides.items():
        if key == "SPECIFICATION":
            cfg["specification"] = value
        else:
            cfg["constants"][key] = value
    return cfg


def run_check(check: Check, java: str, jar: Path, log: Callable[[str], None] = lambda s: None) -> CheckResult:
    """Run one check, peeling violated invariants until the rest hold (see module docstring).

    Temporal properties, if any, are checked afterwards, each in a run of its own (TLC does not
    say which property a liveness counterexample violates).
    """
    cfg = effective_cfg(check)
    result = CheckResult(check=check, constants=dict(cfg["constants"]), outcome={}, traces={}, runs=[])
    safe_id = re.sub(r"[^A-Za-z0-9_.-]+", "_", check.id)

    def one(invariants: list[str], properties: list[str], tag: str) -> TlcRun:
        run = run_tlc(check.module, render_cfg(cfg, invariants, properties), f"{safe_id}-{tag}", java, jar)
        result.runs.append(run)
        result.wall_s += run.wall_s
        return run

    def settle(run: TlcRun, names: list[str]) -> None:
        if run.completed and not run.violated:
            for name in names:
                result.outcome[name] = "hold"
            result.distinct, result.depth = run.distinct, run.depth
        else:
            result.errors.append("; ".join(run.errors) or f"TLC exited {run.returncode} without a verdict")
            for name in names:
                result.outcome[name] = "error"

    pending = list(check.invariants)
    n = 0
    while pending:
        n += 1
        run = one(pending, [], str(n))
        if run.violation_kind == "invariant" and run.violated in pending:
            result.outcome[run.violated] = "V"
            result.traces[run.violated] = run.trace
            pending.remove(run.violated)
            log(f"    {check.id}: {run.violated} violated ({len(run.trace)} states, {run.wall_s:.1f} s)")
            continue
        settle(run, pending)
        break
    # TLC reports only "temporal properties were violated", so each property runs alone.
    for prop in check.properties:
        run = one([], [prop], prop)
        if run.violation_kind == "property":
            result.outcome[prop] = "V"
            result.traces[prop] = run.trace
            result.distinct, result.depth = run.distinct, run.depth
            log(f"    {check.id}: {prop} violated ({len(run.trace)} states, {run.wall_s:.1f} s)")
        else:
            settle(run, [prop])
    if result.distinct is None and result.runs:
        result.distinct, result.depth = result.runs[-1].distinct, result.runs[-1].depth
    log(f"  {check.id}: " + ", ".join(f"{k}={v}" for k, v in result.outcome.items()) + f"  [{result.wall_s:.1f} s]")
    return result


# ---------------------------------------------------------------------------------------------
# The suite


def build_checks(quick: bool) -> list[Check]:
    """Every check of the profile, in the order they run (cheap, decisive ones first).

    The quick profile (CI) keeps what must never regress: every broken config, the interlock
    mode at every tier, Signals.tla, everything of Slots.tla and Schedules.tla (small: their
    controls too) and the interlock liveness properties.
    """
    checks: list[Check] = []
    for name, invariants in BROKEN.items():
        module = BROKEN_MODULE.get(name, "Runtime")
        checks.append(
            Check(
                id=f"broken/{name}",
                kind="broken",
                module=module,
                cfg=f"broken/{name}.cfg",
                invariants=list(invariants),
                must_violate=list(invariants),
                title=name,
            )
        )
    for name, invariants in BROKEN.items():
        module = BROKEN_MODULE.get(name, "Runtime")
        if not quick or module in ("Slots", "Schedules"):
            checks.append(
                Check(
                    id=f"control/{name}",
                    kind="control",
                    module=module,
                    cfg=f"broken/{name}.cfg",
                    overrides={"BROKEN": '"none"'},
                    invariants=list(invariants),
                    must_hold=list(invariants),
                    title=name,
                )
            )
    checks.append(
        Check(
            id="signals",
            kind="signals",
            module="Signals",
            cfg="Signals.cfg",
            invariants=list(SIGNALS),
            must_hold=list(SIGNALS),
            title="Signals.tla",
        )
    )
    checks += slots_checks()
    checks.append(
        Check(
            id="schedules",
            kind="schedules",
            module="Schedules",
            cfg="Schedules.cfg",
            invariants=list(SCHEDULES),
            must_hold=list(SCHEDULES),
            title="Schedules.tla",
        )
    )
    if not quick:
        checks.append(
            Check(
                id="signals/witness",
                kind="witness",
                module="Signals",
                cfg="Signals.cfg",
                invariants=list(SIGNALS_WITNESSES),
                must_violate=list(SIGNALS_WITNESSES),
                title="Signals.tla reachability",
            )
        )
        for tier in TIERS:
            checks.append(
                Check(
                    id=f"interlock/{tier}/witness",
                    kind="witness",
                    module="Runtime",
                    cfg=TIER_CFG[tier],
                    overrides={"MaxCrashes": "1"},
                    invariants=list(WITNESSES[tier]),
                    must_violate=list(WITNESSES[tier]),
                    mode="interlock",
                    tier=tier,
                    title=f"interlock, {TIER_TEXT[tier]}",
                )
            )
    for tier in TIERS:
        checks.append(
            Check(
                id=f"interlock/{tier}",
                kind="mode",
                module="Runtime",
                cfg=TIER_CFG[tier],
                invariants=list(SAFETY),
                must_hold=list(SAFETY),
                mode="interlock",
                tier=tier,
            )
        )
    for mode in MODES if not quick else ["interlock"]:
        for tier, tier_constants in TIERS.items():
            checks.append(
                Check(
                    id=f"{mode}/{tier}/liveness",
                    kind="liveness",
                    module="Runtime",
                    cfg="RuntimeLive.cfg",
                    overrides={"MODE": f'"{mode}"', **tier_constants},
                    properties=list(LIVENESS),
                    must_hold=list(LIVENESS),
                    mode=mode,
                    tier=tier,
                )
            )
    if quick:
        return checks
    checks.append(
        Check(
            id="interlock/t2/liveness-without-fairness",
            kind="sanity",
            module="Runtime",
            cfg="RuntimeLive.cfg",
            overrides={"SPECIFICATION": "Spec"},
            properties=["Termination"],
            must_violate=["Termination"],
            mode="interlock",
            tier="t2",
            title="Spec without fairness must violate Termination",
        )
    )
    for mode in MODES[1:]:
        for tier, tier_constants in TIERS.items():
            for group, group_overrides in TEMPORAL_GROUPS.items():
                if tier not in TEMPORAL_GROUP_TIERS.get(group, TIERS):
                    continue
                checks.append(
                    Check(
                        id=f"{mode}/{tier}/{group}",
                        kind="mode",
                        module="Runtime",
                        cfg=MODE_CFG[mode],
                        overrides={**tier_constants, **group_overrides},
                        invariants=[i for i in SAFETY if i not in NOT_APPLICABLE],
                        mode=mode,
                        tier=tier,
                        group=group,
                    )
                )
    for cfg, extra in (
        ("assumptions/Pause.cfg", {"interlock": ["NoRerunAfterComplete"]}),
        ("assumptions/ServerSlow.cfg", {"interlock": ["Witness_LateAfterDuplicate"]}),
    ):
        toggle = "PAUSE" if "Pause" in cfg else "SERVER_SLOW"
        for mode in MODES:
            for tier, tier_constants in TIERS.items():
                checks.append(
                    Check(
                        id=f"{toggle}/{mode}/{tier}",
                        kind="assumption",
                        module="Runtime",
                        cfg=cfg,
                        overrides={"MODE": f'"{mode}"', **tier_constants},
                        invariants=["EffectAtMostOnceTier12", *extra.get(mode, [])],
                        mode=mode,
                        tier=tier,
                        title=toggle,
                    )
                )
    return checks


def slots_checks() -> list[Check]:
    """Slots.tla's checks (the same in both profiles): the invariants and witnesses at each
    limit case, WaiterEventuallyRuns under LiveSpec, and two runs that must violate it: Spec
    without fairness, and LiveSpec with the start's key lock dropped (a stranded waiter)."""
    checks: list[Check] = []
    for case, constants in SLOTS_CASES.items():
        limit = constants["Limit"]
        checks.append(
            Check(
                id=f"slots/{case}",
                kind="slots",
                module="Slots",
                cfg="Slots.cfg",
                overrides=dict(constants),
                invariants=list(SLOTS),
                must_hold=list(SLOTS),
                title=f"Slots.tla, Limit {limit}",
            )
        )
        checks.append(
            Check(
                id=f"slots/{case}/witness",
                kind="witness",
                module="Slots",
                cfg="Slots.cfg",
                overrides=dict(constants),
                invariants=list(SLOTS_WITNESSES[case]),
                must_violate=list(SLOTS_WITNESSES[case]),
                title=f"Slots.tla reachability, Limit {limit}",
            )
        )
    checks.append(
        Check(
            id="slots/liveness",
            kind="slots",
            module="Slots",
            cfg="SlotsLive.cfg",
            properties=list(SLOTS_LIVENESS),
            must_hold=list(SLOTS_LIVENESS),
            title="Slots.tla liveness (LiveSpec, URGENT)",
        )
    )
    checks.append(
        Check(
            id="slots/liveness-without-fairness",
            kind="sanity",
            module="Slots",
            cfg="SlotsLive.cfg",
            overrides={"SPECIFICATION": "Spec"},
            properties=list(SLOTS_LIVENESS),
            must_violate=list(SLOTS_LIVENESS),
            title="Slots.tla: Spec without fairness must violate WaiterEventuallyRuns",
        )
    )
    checks.append(
        Check(
            id="slots/liveness/SlotAcquireWithoutKeyLock",
            kind="slots",
            module="Slots",
            cfg="SlotsLive.cfg",
            overrides={"BROKEN": '"acquire_without_key_lock"'},
            properties=list(SLOTS_LIVENESS),
            must_violate=list(SLOTS_LIVENESS),
            title="Slots.tla liveness, the start without the key lock: must violate WaiterEventuallyRuns",
        )
    )
    return checks


def filter_witnesses(check: Check, constants: dict[str, str]) -> None:
    """Drop witnesses that the check's own constants make unreachable by construction.

    Key pruning needs an effect older than DedupAge + SendTimeout + SettleMargin (PruneOK), so
    it is reachable only when MaxClock exceeds that (the quick profile's MaxClock does not).
    """
    if "Witness_Pruned" in check.invariants:
        need = int(constants["DedupAge"]) + int(constants["SendTimeout"]) + int(constants["SettleMargin"])
        if int(constants["MaxClock"]) <= need:
            check.invariants.remove("Witness_Pruned")
            check.must_violate.remove("Witness_Pruned")


def quick_overrides(check: Check) -> dict[str, str]:
    """The quick profile's constants for a check: broken configs, Signals, Slots and Schedules keep their own
    (they are small), liveness keeps its long clock but one crash, the rest MaxClock 7 and one
    crash."""
    if check.kind in ("broken", "control") or check.module in ("Signals", "Slots", "Schedules"):
        return {}
    if check.kind == "liveness":
        return {"MaxCrashes": "1"}
    return dict(QUICK_OVERRIDES)
