"""``manage.py bench_history [--steps 50000] [--baseline 1000] [--pad 100] [--rounds 1] [--out DIR]``:
the replay of a long history after a takeover (prove/bench/history.py), written to
results/history_bench.{md,json} (or DIR)."""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from prove.bench.core import ROOT
from prove.bench.full_measure import LABEL


class Command(BaseCommand):
    help = "Replay of a long workflow history after a takeover: worker RSS and time per step."

    def add_arguments(self, parser):
        parser.add_argument("--steps", type=int, default=50_000, help="the long history's steps")
        parser.add_argument("--baseline", type=int, default=1_000, help="the baseline history's steps")
        parser.add_argument("--pad", type=int, default=100, help="characters of padding in each step's output")
        parser.add_argument("--rounds", type=int, default=1, help="runs of each size; the medians are judged")
        parser.add_argument("--out", default=None, help="directory for history_bench.{md,json} (default results/)")

    def handle(self, *args, steps, baseline, pad, rounds, out, **options):
        from prove.bench.history import run

        for flag, value in (("--steps", steps), ("--baseline", baseline), ("--rounds", rounds)):
            if value < 1:
                raise CommandError(f"{flag} must be at least 1, got {value}")
        command = f"python manage.py bench_history --steps {steps} --baseline {baseline} --pad {pad} --rounds {rounds}"
        command += f" --out {out}" if out else ""
        report = run(steps, baseline, pad, rounds, command, out=self.stdout)
        path = write(report, Path(out) if out else None)
        s = report["summary"]
        self.stdout.write(
            f"{steps} steps: replay {s['long_replay_s_median']} s, {s['long_us_per_step_median']} us/step "
            f"({s['per_step_ratio']}x the {baseline}-step baseline), peak RSS {s['long_peak_rss_mb_median']} MB; "
            f"wrote {path}"
        )


def write(report: dict, out_dir: Path | None = None) -> Path:
    """Write history_bench.json and history_bench.md to ``out_dir`` (default results/); returns the .md."""
    results = Path(out_dir) if out_dir is not None else ROOT / "results"
    results.mkdir(parents=True, exist_ok=True)
    (results / "history_bench.json").write_text(json.dumps(report, indent=2) + "\n")
    p, m, s = report["params"], report["machine"], report["summary"]
    t = s["targets"]
    rows = [
        f"| {r['steps']:,} | {r['history_length']:,} | {r['seed_s']} | {r['replay_s']} | {r['replay_us_per_step']} | "
        f"{r['idle_rss_mb']} | {r['peak_rss_mb']} | {r['takeover_prev_status']} |"
        for key in ("baseline", "long")
        for r in report["runs"][key]
    ]
    lines = [
        "# Replay of a long history after a takeover (issue 43)",
        "",
        f"Command: `{report['command']}` (wall time {report['wall_s']} s), at commit {m['interlock_commit']}.",
        "",
        f"**{LABEL.split(';')[0]}.** {m['cpu_model']}, {m['nproc']} cores, {m['memory']}; Linux {m['kernel']}; "
        f"Python {m['python']}, PostgreSQL {m['postgresql']}, Django {m['django']}. Before the run: "
        f"{report['busy_cores_before_run']} cores busy (3 s of /proc/stat), load average "
        f"{', '.join(f'{x:.2f}' for x in report['loadavg_before_run'])}.",
        "",
        "## Method",
        "",
        f'`bench_history` (prove/bench/history_flows.py) records N steps, each output `{{"i": i, "pad": '
        f"<{p['pad']} x>}}`, on a fresh database, then hangs in its next step; the seeding worker is SIGKILLed "
        f"holding the claim and a fresh worker (concurrency 1, idle until then) takes the workflow over when the "
        f"lease ({p['lease_ttl']} s) lapses. It replays the N recorded steps: the claim reads seqs 1 to 500, "
        "then pages of 500 rows are read as the replay reaches them, and replayed rows are let go "
        "(docs/protocol.md §5.7). *replay* is from the takeover claim's `claimed_at` (ilr.claims) to the wall "
        "clock the step after the history took (the end of the replay); *peak RSS* is the worker's VmHWM "
        "after the workflow completed, *idle RSS* its VmRSS before the takeover. "
        f"{p['rounds']} round(s) of each size; the medians are judged.",
        "",
        "## Results",
        "",
        "| steps | history rows | seed s | replay s | replay us/step | idle RSS MB | peak RSS MB | taken from |",
        "|---:|---:|---:|---:|---:|---:|---:|---|",
        *rows,
        "",
        "## Targets",
        "",
        f"- Worker peak RSS under 150 MB replaying {p['steps']:,} steps: {s['long_peak_rss_mb_median']} MB "
        f"(the {p['baseline']:,}-step replay: {s['baseline_peak_rss_mb_median']} MB): "
        f"**{'met' if t['peak_rss_under_150_mb'] else 'not met'}**.",
        f"- Time per step near-linear: {s['long_us_per_step_median']} us/step against "
        f"{s['baseline_us_per_step_median']} us/step for {p['baseline']:,} steps, ratio {s['per_step_ratio']} "
        f"(near-linear read as at most 1.5): **{'met' if t['near_linear'] else 'not met'}**.",
        "",
    ]
    path = results / "history_bench.md"
    path.write_text("\n".join(lines))
    return path
