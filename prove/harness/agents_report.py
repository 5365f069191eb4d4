"""The agents kill-point x tier matrix (``manage.py agents_report``): results/agents.{md,json}, one
section per agent framework (demo.agent_frameworks: native ilr.agents, Pydantic AI, ...).

Each cell runs one refund case in the framework's workflow (lookup, an approval request, the
refund, a final answer) on a fresh database (``ilr_agents_report``) of the configured cluster,
against the real HTTP payment target of the cell's tier and the framework's EMULATED model (the
Messages API stub through the real ``anthropic`` SDK for the native loop; the framework's own
offline model otherwise). A first ``ilr_worker`` runs armed with
``ILR_KILL_AT=<point>`` and is SIGKILLed there; a second recovers; an approver approves the
request as soon as it is pending. Per cell: the refund's EffectResult status, applications at
the target (its ledger), duplicates (applications past one), unapproved sends (a POST /refunds
whose payment and amount are not the approved payload), discarded model calls
(``ilr.llm_calls`` rows minus recorded turns), and whether the transcript the recovering worker
rebuilt hashes to the fingerprints recorded per turn. The invariants registry runs over the
database and the targets' evidence at the end.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from demo.agent_frameworks import DRIVERS, FrameworkDriver, load
from ilr import Runtime
from ilr import _db as db
from prove.harness.waiting import until
from prove.queries import AGENTS_MODEL_CALL_COUNT

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results" / "agents.md"
REPORT_DB = "ilr_agents_report"
POINTS = (
    "decide_after_response@2",
    "step_after_record@2",
    "effect_after_dispatch",
    "effect_after_send",
    "effect_after_commit",
)
"""The kill points of a cell (``@2``: the turn that proposes the refund; the lookup step, the
agent's key step being the first)."""
TIERS = (1, 2, 3)
TERMINAL = ("completed", "failed", "stuck", "cancelled")


class Matrix:
    """Runs the cells (``run()``); see the module docstring."""

    def __init__(self, points=POINTS, tiers=TIERS, out=sys.stdout, driver: FrameworkDriver = DRIVERS["native"]):
        self.points, self.tiers, self.out, self.driver = tuple(points), tuple(tiers), out, driver
        self.work = Path(tempfile.mkdtemp(prefix="agents-report-"))
        self.procs: list[subprocess.Popen] = []

    def say(self, text: str) -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def _worker(self, name: str, **env) -> subprocess.Popen:
        with open(self.work / f"{name}.log", "ab") as log:
            proc = subprocess.Popen(
                [
                    sys.executable,
                    str(ROOT / "manage.py"),
                    "ilr_worker",
                    "--id",
                    name,
                    "--import",
                    self.driver.module,
                    "--only",
                    self.driver.only,
                    "--lease-ttl",
                    "2",
                    "--poll",
                    "0.1",
                    "--concurrency",
                    "2",
                ],
                cwd=ROOT,
                env={**self.env, **env},
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        self.procs.append(proc)
        return proc

    def _stop(self, proc: subprocess.Popen) -> None:
        if proc.poll() is None:
            proc.kill()
        proc.wait(10)

    def run(self) -> dict:
        from demo.peers.model_stub import model_stub_process
        from demo.peers.target import target_process
        from prove.bench.core import fresh_database

        importlib.import_module(self.driver.module)  # registers the workflow rt.start names
        self.env = fresh_database(REPORT_DB)
        base = db.conninfo()
        dsn = base.replace(f"dbname={base.split('dbname=')[1].split()[0]}", f"dbname={REPORT_DB}")
        self.rt = Runtime(dsn)
        cells, evidence = [], {"ledger": [], "access_log": []}
        t0 = time.monotonic()
        try:
            with model_stub_process() if self.driver.needs_model_stub else contextlib.nullcontext() as model_url:
                if model_url:
                    self.env["ILR_MODEL_BASE_URL"] = model_url
                self.model_url = model_url
                for tier in self.tiers:
                    ledger = self.work / f"ledger-t{tier}.sqlite"
                    with target_process(tier=tier, queryable=tier != 3, ledger=ledger) as url:
                        for point in self.points:
                            cell = self._cell(url, tier, point)
                            cells.append(cell)
                            self.say(
                                f"{self.driver.name} tier {tier} {point:24s} {cell['status']:22s} applications "
                                f"{cell['applications']} duplicates {cell['duplicates']} unapproved "
                                f"{cell['unapproved_sends']} discarded {cell['discarded_model_calls']} "
                                f"transcript {'same' if cell['transcript_replayed'] else 'DIFFERENT'}"
                            )
                        from demo.peers.targets_client import http_json

                        evidence["ledger"] += http_json("GET", f"{url}/ledger")[1]["rows"]
                        evidence["access_log"] += http_json("GET", f"{url}/access_log")[1]["entries"]
            from ilr._invariants import check_all, violations

            with db.connect(dsn) as conn:
                evidence["invocations"] = []
                bad = violations(check_all(conn, evidence))
        finally:
            for proc in self.procs:
                self._stop(proc)
            self.rt.close()
        return {
            "framework": self.driver.name,
            "title": self.driver.title,
            "model": self.driver.model,
            "cells": cells,
            "violations": bad,
            "seconds": round(time.monotonic() - t0, 1),
            "work_dir": str(self.work),
        }

    def _cell(self, url: str, tier: int, point: str) -> dict:
        from demo.peers.targets_client import http_json

        rt = self.rt
        wf_id = f"{self.driver.name}-t{tier}-{point.replace('@', '-')}"
        payment = f"pay_{wf_id}"
        assert http_json("POST", f"{url}/admin/payments", {"id": payment, "paid": 10_000})[0] in (200, 201)
        if self.driver.needs_model_stub:
            assert http_json("POST", f"{self.model_url}/admin/script", {"agent": "refund"})[0] == 200
        input = {
            "url": url,
            "tier": tier,
            "queryable": tier != 3,
            "case_id": wf_id,
            "payment": payment,
            "policy": "approval",
        }
        w1 = self._worker(f"{wf_id}-w1", ILR_KILL_AT=point)
        rt.start(self.driver.workflow, wf_id, input, version=self.driver.version)
        approved: list[dict] = []

        def approve_pending():
            if not approved:
                rows = [r for r in rt.approval_requests() if r["workflow_id"] == wf_id]
                if rows:
                    approved.append(rt.approve_request(rows[0]["id"], by="approver"))

        def killed():
            approve_pending()
            if rt.describe(wf_id)["status"] in TERMINAL:
                raise RuntimeError(f"agents_report: {wf_id} ended before the kill at {point}")
            return w1.poll() is not None

        until(killed, 90, f"the kill at {point}")
        killed_by_signal = w1.returncode == -signal.SIGKILL
        w2 = self._worker(f"{wf_id}-w2")
        until(lambda: (approve_pending(), rt.describe(wf_id)["status"] in TERMINAL)[1], 120, f"{wf_id} to end")
        self._stop(w2)
        d = rt.describe(wf_id)
        result = d["result"] or {}
        refund = [o for o in result.get("outcomes", []) if o["tool"] == "issue_refund"]
        ledger = [r for r in http_json("GET", f"{url}/ledger")[1]["rows"] if r["payment"] == payment]
        posts = [
            e
            for e in http_json("GET", f"{url}/access_log")[1]["entries"]
            if e["method"] == "POST"
            and e["path"] == "/refunds"
            and isinstance(e["body"], dict)
            and e["body"].get("payment") == payment
        ]
        payload = approved[0]["payload"] if approved else None
        unapproved = sum(
            1 for p in posts if {"payment": p["body"].get("payment"), "amount": p["body"].get("amount")} != payload
        )
        calls = rt.connection().execute(AGENTS_MODEL_CALL_COUNT, (wf_id,)).fetchone()["n"]
        turns = [s for s in rt.describe(wf_id)["steps"] if s["kind"] == "decide"]
        replayed = bool(result) and load(self.driver.replayed)(input, result, turns)
        return {
            "tier": tier,
            "point": point,
            "workflow_id": wf_id,
            "workflow_status": d["status"],
            "killed": killed_by_signal,
            "status": refund[0]["status"] if refund else "none",
            "applications": len(ledger),
            "duplicates": max(0, len(ledger) - 1),
            "sends": len(posts),
            "unapproved_sends": unapproved,
            "model_calls": calls,
            "turns": len(turns),
            "discarded_model_calls": calls - len(turns),
            "transcript_replayed": replayed,
            "model_told": bool(refund) and refund[0]["content"] in load(self.driver.answer)(result),
            "approved_payload": payload,
        }


def render_section(report: dict) -> list[str]:
    """One framework's section of agents.md."""
    cells = report["cells"]
    lines = [
        f"## {report.get('title', 'ilr.agents (native)')}",
        "",
        (
            f"{report['seconds']} s. The model is {report.get('model', 'EMULATED')}; the target is the real HTTP "
            "payment target of each tier; each cell SIGKILLs the first `ilr_worker` at the kill point (ILR_KILL_AT) "
            "and a second recovers. `@2`: the second hit (the request that proposes the refund; the lookup step)."
        ),
        "",
        (
            "| tier | kill point | refund status | applications | duplicates | sends | unapproved sends | "
            "model calls | discarded model calls | transcript replayed | model told |"
        ),
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for c in cells:
        lines.append(
            f"| {c['tier']} | `{c['point']}` | {c['status']} | {c['applications']} | {c['duplicates']} | "
            f"{c['sends']} | {c['unapproved_sends']} | {c['model_calls']} | {c['discarded_model_calls']} | "
            f"{'yes' if c['transcript_replayed'] else 'NO'} | {'yes' if c['model_told'] else 'NO'} |"
        )
    total = {k: sum(c[k] for c in cells) for k in ("duplicates", "unapproved_sends", "discarded_model_calls")}
    lines += [
        "",
        (
            f"Totals: {total['duplicates']} duplicates, {total['unapproved_sends']} unapproved sends, "
            f"{total['discarded_model_calls']} discarded model calls (counted in ilr.llm_calls, never recorded as "
            f"turns), {sum(1 for c in cells if not c['killed'])} cells whose first worker was not SIGKILLed."
        ),
        "Invariants registry over the run: "
        + (
            "no violation."
            if not report["violations"]
            else f"VIOLATED: {json.dumps(report['violations'], default=str)}"
        ),
        "",
    ]
    return lines


def render(report: dict) -> str:
    """agents.md: the command line, then one section per framework."""
    lines = [
        "# Agents: kill point x tier",
        "",
        (
            f"Command: `{report['command']}` (commit {report['commit']}, {report['machine']}). Generated by "
            "prove/harness/agents_report.py: per framework (demo/agent_frameworks.py), the same refund "
            "case (a lookup, an approval request for the refund's exact arguments, the refund, a final answer)."
        ),
        "",
    ]
    for section in report["frameworks"].values():
        lines += render_section(section)
    lines += [
        (
            "Applications are rows in the target's ledger; sends are POST /refunds that reached it (a tier-1 "
            "resend is a send that applies nothing). Tier 3 never resends: a send whose outcome is unknown is "
            "AMBIGUOUS (applied once after `effect_after_send`, not at all after `effect_after_dispatch`) and "
            'the model reads "outcome unknown; a person will reconcile it".'
        ),
    ]
    return "\n".join(lines)


def write_results(report: dict, command: str, out_dir: Path | None = None) -> Path:
    """Write agents.{json,md} to ``out_dir`` (default results/); returns the .md path.

    Args:
        report: {"frameworks": {name: Matrix.run() report}}.
    """
    commit = (
        subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, check=False
        ).stdout.strip()
        or "unknown"
    )
    dirty = subprocess.run(
        ["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT, capture_output=True, text=True, check=False
    ).stdout.strip()
    report = {
        **report,
        "command": command,
        "commit": commit + ("+uncommitted" if dirty else ""),
        "machine": f"{os.cpu_count()} cores",
    }
    base = (Path(out_dir) / RESULTS.name) if out_dir is not None else RESULTS
    base.parent.mkdir(parents=True, exist_ok=True)
    base.with_suffix(".json").write_text(json.dumps(report, indent=2, default=str) + "\n")
    base.write_text(render(report) + "\n")
    return base


def failed(report: dict) -> bool:
    """In any framework: a duplicate, an unapproved send, a transcript that differs, a cell not
    killed, a workflow that did not complete, or a violation."""
    return any(_failed(section) for section in report["frameworks"].values())


def _failed(report: dict) -> bool:
    return bool(report["violations"]) or any(
        c["duplicates"]
        or c["unapproved_sends"]
        or not c["transcript_replayed"]
        or not c["killed"]
        or c["workflow_status"] != "completed"
        for c in report["cells"]
    )
