"""The report of ``manage.py bench_tasks``: report.md (tables, the command, the machine) and
raw.json (every figure of every round) in the output directory. Nothing here is typed by hand:
every number comes from the report the run returned."""

from __future__ import annotations

import json
from pathlib import Path

NAMES = {
    "interlock": "Interlock",
    "db_slots": "django-tasks-db, as many processes as Interlock's slots",
    "db_processes": "django-tasks-db, as many processes as Interlock's",
    "db_reconnect": "django-tasks-db, as many processes as Interlock's, CONN_MAX_AGE 0 (a connection per loop)",
}


def _s(x: dict) -> str:
    """median (min to max)"""
    return f"{x['median']:g} ({x['min']:g} to {x['max']:g})"


def _summary_table(configs: dict) -> list[str]:
    lines = [
        "| configuration | processes x threads | tasks/s | batch p50 ms | batch p95 ms | low-load p50 ms "
        "| low-load p95 ms |",
        "|---|---|---|---|---|---|---|",
    ]
    for key, c in configs.items():
        lines.append(
            f"| {NAMES.get(key, key)} | {c['processes']} x {c['concurrency']} | {_s(c['tasks_per_s'])} "
            f"| {_s(c['batch_p50_ms'])} | {c['batch_p95_ms']['median']:g} | {_s(c['low_load_p50_ms'])} "
            f"| {c['low_load_p95_ms']['median']:g} |"
        )
    return lines


def _cost_table(configs: dict) -> list[str]:
    lines = [
        "| configuration | enqueue ms/task (in one transaction) | commits/task | worker CPU ms/task "
        "| PostgreSQL CPU ms/task | busy cores (of the machine) |",
        "|---|---|---|---|---|---|",
    ]
    for key, c in configs.items():
        lines.append(
            f"| {NAMES.get(key, key)} | {c['enqueue_ms_per_task']['median']:g} | {c['commits_per_task']['median']:g} "
            f"| {c['worker_cpu_ms_per_task']['median']:g} | {c['postgres_cpu_ms_per_task']['median']:g} "
            f"| {c['machine_busy_cores']['median']:g} |"
        )
    return lines


def _rounds_table(runs: dict) -> list[str]:
    lines = [
        "| round | configuration | tasks/s | wall s | drain tasks/s (from the commit) | batch p50 / p95 ms "
        "| from commit p50 ms | low-load p50 / p95 ms | checks (found, right value, ran once of enqueued) |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    ordered = sorted((r for rs in runs.values() for r in rs), key=lambda r: r["round"])
    for r in ordered:
        name = next(k for k, rs in runs.items() if r in rs)
        t, low, ch = r["throughput"], r["latency_low_load"], r["checks"]
        lines.append(
            f"| {r['round']} | {NAMES.get(name, name)} | {t['tasks_per_s']:g} | {t['wall_s']:g} "
            f"| {t['drain_tasks_per_s']:g} | {t['latency']['p50_ms']:g} / {t['latency']['p95_ms']:g} "
            f"| {t['latency_from_commit']['p50_ms']:g} | {low['p50_ms']:g} / {low['p95_ms']:g} "
            f"| {ch['found']}, {ch['right_value']}, {ch['ran_once']} of {ch['enqueued']} |"
        )
    return lines


def render(report: dict) -> str:
    p, m, cmp_ = report["params"], report["machine"], report["comparison"]
    configs = report["configurations"]
    il, best = configs["interlock"], configs[cmp_["db_best"]]
    busy = report["busy_cores_before_run"]
    shared = busy >= 0.2
    verdict = "**The target is met**" if cmp_["target_met"] else "**The target is not met**"
    lines = [
        "# Django Tasks: Interlock against django-tasks-db (issue 41)",
        "",
        f"Command: `{report['command']}`",
        "",
        f"One machine, {m['nproc']} cores ({m['cpu_model']}), PostgreSQL {m['postgresql']} embedded "
        "(Unix socket, fsync and synchronous_commit on); both backends in one database of it. "
        + (
            f"**Measured while other work ran on the machine**: {busy:g} of its {m['nproc']} cores were busy "
            "in the 3 s before the run started; the figures are this shared machine's, and a run alone "
            "would read higher on both sides."
            if shared
            else f"The machine was idle before the run ({busy:g} cores busy in the 3 s before it)."
        ),
        "",
        "## Result",
        "",
        f"Throughput, Interlock over django-tasks-db's best configuration ({NAMES[cmp_['db_best']]}): "
        f"**{cmp_['throughput_ratio']}x** ({il['tasks_per_s']['median']:g} against "
        f"{best['tasks_per_s']['median']:g} tasks/s, medians of {p['rounds']} rounds). Low-load p50: "
        f"{il['low_load_p50_ms']['median']:g} ms against {best['low_load_p50_ms']['median']:g} ms "
        f"(ratio {cmp_['low_load_p50_ratio']}); batch p50: {il['batch_p50_ms']['median']:g} ms against "
        f"{best['batch_p50_ms']['median']:g} ms (ratio {cmp_['batch_p50_ratio']}).",
        "",
        f"{verdict}: the issue asks for at least 3x django-tasks-db's throughput at no worse latency "
        "(here: Interlock's median low-load p50 and batch p50 no higher than those of every django-tasks-db "
        "configuration).",
        "",
        *_summary_table(configs),
        "",
        "Medians of the rounds, with the lowest and highest round in brackets. *tasks/s*: N / (the last "
        "task's finished_at - the clock just before the first enqueue). *batch*: each task of the batch, "
        "finished_at - enqueued_at; under a batch this is mostly time in the queue. *low-load*: tasks "
        "one at a time with every worker idle.",
        "",
        "## What each side costs",
        "",
        *_cost_table(configs),
        "",
        "Per task of the batch: the enqueue call inside the batch's transaction; every transaction "
        "committed in the bench database while the batch ran (claims, results, idle polls; the bench's own "
        "polls taken off); CPU of the worker processes and of every PostgreSQL process (from /proc), and "
        "the busy cores of the whole machine (from /proc/stat). PostgreSQL's CPU is read from the processes "
        "alive at both ends of the batch: under CONN_MAX_AGE 0 the backend of each db_worker loop exits, "
        "taking its CPU with it, so that row's PostgreSQL figure is too low.",
        "",
        *_where_time_goes(report),
        "## Method",
        "",
        "- Nothing is emulated: both backends are the installed packages, each run by its own worker command.",
        "- A trivial task, `add(a, b)` returning a + b, once per backend (prove/bench/tasks_defs.py): "
        "Interlock's on TASKS alias \"default\" (`ilr.tasks.InterlockBackend`), django-tasks-db's on alias "
        '"db" (`django_tasks_db.DatabaseBackend`), one settings module (prove/bench/tasks_settings.py), '
        "one database, migrated for both.",
        f"- Workers: Interlock `manage.py ilr_worker --queue default --concurrency {p['concurrency']} "
        f"--poll {p['poll_s']:g}`, {p['workers']} processes; it wakes on the row's NOTIFY and polls as a "
        f"fallback. django-tasks-db `manage.py db_worker --backend db --queue-name default --interval "
        f"{p['poll_s']:g} --no-startup-delay -v0`, one task at a time per process, polling every interval "
        f"when idle: run with {p['workers'] * p['concurrency']} processes (as many as Interlock's slots) and "
        + (
            f"with {p['workers']} (as many as Interlock's processes)."
            if "db_processes" in configs
            else "no other count."
        )
        + " Django's connections persist (CONN_MAX_AGE None, db_worker's best case) except in the CONN_MAX_AGE 0 "
        "row, the project's own setting, where db_worker opens a new connection on every loop. Workers are "
        "started for each measurement and stopped after it; the tables are emptied first.",
        f"- Each measurement: a warm-up of one task per slot (not counted); {p['latency_n']} tasks one at a "
        "time, each enqueued alone after a random 0 to 2 poll intervals' pause, waited for before the next "
        f"(low-load latency); then {p['n']} tasks enqueued in one transaction with the workers running "
        "(throughput, batch latency). Every task is read back: found, right return value, run once "
        "(Interlock: one attempt step; django-tasks-db: one worker id).",
        f"- {p['rounds']} rounds; each round runs every configuration, Interlock first in odd rounds and "
        "last in even ones.",
        "- Stamps are each backend's own: Interlock's enqueued_at is its workflow row's created_at "
        "(PostgreSQL now(), the start of the enqueuing transaction: in the batch, every task's is the "
        "batch's start) and its finished_at the row's updated_at; django-tasks-db's are timezone.now() at "
        "the row's create and at its final save. So in the batch Interlock's latency counts the whole "
        "enqueue and django-tasks-db's only what follows each task's own insert; *from commit* in the "
        "rounds' table takes the commit of the batch as both sides' origin.",
        "",
        "## The rounds",
        "",
        *_rounds_table(report["runs"]),
        "",
        "## Machine and versions",
        "",
        "| what | value |",
        "|---|---|",
        *[f"| {k} | {v} |" for k, v in m.items()],
        f"| busy cores before the run | {busy:g} |",
        f"| bench wall time | {report['wall_s']:g} s |",
        "",
        "Raw figures of every round: raw.json beside this file.",
    ]
    return "\n".join(lines) + "\n"


def _cpu_paragraph(report: dict) -> list[str]:
    cpu, configs = report["comparison"]["cpu"], report["configurations"]
    il = configs["interlock"]
    busy = il["machine_busy_cores"]["median"]
    text = (
        f"CPU per task (worker processes + PostgreSQL, medians): Interlock {cpu['interlock_cpu_ms_per_task']:g} ms "
        f"({il['worker_cpu_ms_per_task']['median']:g} + {il['postgres_cpu_ms_per_task']['median']:g}), "
        f"django-tasks-db's best configuration {cpu['db_cpu_ms_per_task']:g} ms: a cost ratio of "
        f"{cpu['cost_ratio']:g}. While Interlock's batch ran the machine had {busy:g} of "
        f"{report['machine']['nproc']} cores busy"
        + (", so throughput here is bound by CPU" if busy >= 0.9 * report["machine"]["nproc"] else "")
        + ". When both sides are bound by the machine's cores, the throughput ratio is the cost ratio "
        "(ceilings at every core: Interlock "
        f"{cpu['interlock_ceiling_tasks_per_s']:g} tasks/s, django-tasks-db {cpu['db_ceiling_tasks_per_s']:g}). "
        f"{cpu['target']:g}x would need Interlock at {cpu['budget_cpu_ms_per_task_for_target']:g} ms of CPU per "
        "task or less"
    )
    best = configs[report["comparison"]["db_best"]]
    pg, budget = cpu["interlock_postgres_cpu_ms_per_task"], cpu["budget_cpu_ms_per_task_for_target"]
    commits = (
        f"(the claim, the attempt's step row and the finish: {il['commits_per_task']['median']:g} commits per "
        f"task, against django-tasks-db's {best['commits_per_task']['median']:g})"
    )
    if budget <= pg:
        text += f", which Interlock's PostgreSQL work alone already spends ({pg:g} ms {commits})."
    else:
        text += (
            f"; Interlock's PostgreSQL work alone is {pg:g} ms of that {commits}, which leaves "
            f"{budget - pg:.3g} ms for its worker, which spends {il['worker_cpu_ms_per_task']['median']:g} ms."
        )
    text += (
        " Busy cores count every process on the machine, other sessions' included; CPU per task counts only "
        "this bench's workers and its PostgreSQL cluster."
    )
    return [text, ""]


def _where_time_goes(report: dict) -> list[str]:
    e, c = report["enqueue_cost"], report["claims"]
    lines = [
        "## Where the time goes",
        "",
        *_cpu_paragraph(report),
        "Enqueue, milliseconds per `Task.enqueue` call from this process (300 calls each way):",
        "",
        "| backend | each call its own transaction | 300 calls in one transaction |",
        "|---|---|---|",
    ]
    for key in ("interlock", "db"):
        lines.append(f"| {key} | {e[key]['autocommit_ms']:g} | {e[key]['in_one_transaction_ms']:g} |")
    lines += [
        "",
        f"Claim statement against a backlog of {c['backlog']} ready tasks (median of 50, each in a "
        "rolled-back transaction, sent unprepared from this process):",
        "",
        "| backend | statement | rows per claim | ms |",
        "|---|---|---|---|",
    ]
    for key in ("interlock", "db"):
        lines.append(f"| {key} | {c[key]['statement']} | {c[key]['rows_per_claim']} | {c[key]['claim_ms_p50']:g} |")
    for key in ("interlock", "db"):
        lines += ["", f"<details><summary>{key}: EXPLAIN (ANALYZE, BUFFERS) of the claim</summary>", "", "```"]
        lines += c[key]["plan"]
        lines += ["```", "", "</details>"]
    lines.append("")
    for key, prof in report.get("profiles", {}).items():
        lines += [
            f"py-spy on one worker process of {NAMES.get(key, key)} (`--gil`: where its Python CPU went, waits "
            f"on PostgreSQL left out), during an extra batch of {2 * report['params']['n']} tasks not counted "
            f"above ({prof['tasks_per_s_while_profiled']:g} tasks/s while profiled), {prof['samples']} samples:",
            "",
            "| innermost frame's area | share |",
            "|---|---|",
            *[f"| {a} | {s:g} |" for a, s in prof.get("areas", [])],
            "",
            "| on the stack (inclusive) | share |",
            "|---|---|",
            *[f"| `{f}` | {s:g} |" for f, s in prof.get("inclusive", [])],
            "",
            "| innermost line | share |",
            "|---|---|",
            *[f"| `{f}` | {s:g} |" for f, s in prof.get("innermost_lines", [])],
            "",
        ]
    return lines


def write(report: dict, out_dir: Path) -> None:
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "raw.json").write_text(json.dumps(report, indent=1) + "\n")
    (out_dir / "report.md").write_text(render(report))
