"""``manage.py bench [--quick] [--n N] [--workers W] [--concurrency C] [--rounds R] [--out DIR]``: the benchmark of
docs/protocol.md §16.7 (runtime vs the Temporal dev server vs the pgbench commit bound), written to
results/runtime_bench.{md,json} (or DIR). ``--core`` runs only the three-step runtime benchmark
(results/runtime_bench_core.*). ``--keys K`` runs only the concurrency-keys benchmark
(prove/bench/keys.py: N workflows over K keys of limit 1 against the same N without keys, ``--rounds``
pairs), written to results/keys_bench.{md,json} (or DIR). ``--telemetry`` runs only the telemetry
benchmark (prove/bench/telemetry.py: the 4-step shape with spans and metrics on against off),
written to results/telemetry_bench.{md,json} (or DIR).
"""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError


class Command(BaseCommand):
    help = "Benchmark the runtime against Temporal and the PostgreSQL commit bound."

    def add_arguments(self, parser):
        parser.add_argument("--n", type=int, default=1000)
        parser.add_argument("--workers", type=int, default=2)
        parser.add_argument("--concurrency", type=int, default=8)
        parser.add_argument("--quick", action="store_true", help="N = 200 and a smaller scale run")
        parser.add_argument(
            "--rounds",
            type=int,
            default=1,
            help="repeat the 4-step run with its pgbench, and the serial gated effect, this many "
            "times; the targets are read from the median round",
        )
        parser.add_argument("--core", action="store_true", help="only the three-step runtime benchmark")
        parser.add_argument(
            "--keys",
            type=int,
            default=None,
            help="only the concurrency-keys benchmark: N workflows over this many keys (limit 1) against N "
            "without keys, --rounds times each, alternating",
        )
        parser.add_argument(
            "--telemetry",
            action="store_true",
            help="only the telemetry benchmark: the 4-step shape with spans and metrics on (the SDK, in-memory "
            "exporters) against off, --rounds pairs in alternating order (results/telemetry_bench.*)",
        )
        parser.add_argument(
            "--out", default=None, help="directory for runtime_bench.{md,json} and the PNG (default: results/)"
        )

    def handle(self, *args, n, workers, concurrency, quick, core, keys, rounds, out, telemetry=False, **options):
        if telemetry:
            self._telemetry(n, workers, concurrency, rounds, out)
            return
        if keys is not None:
            self._keys(n, keys, workers, concurrency, rounds, out)
            return
        if core:
            from prove.bench.core import run_core, write_results

            write_results(run_core(200 if quick else n, workers, concurrency, out=self.stdout))
            return
        from prove.bench.full import run

        if rounds < 1:
            raise CommandError(f"--rounds must be at least 1, got {rounds}")
        report = run(n, workers, concurrency, quick, rounds, out=self.stdout, out_dir=Path(out) if out else None)
        self.stdout.write(
            f"ratio_vs_temporal {report['ratio_vs_temporal']}, ratio_vs_dbos {report['ratio_vs_dbos']}, "
            f"ratio_vs_commit_bound {report['ratio_vs_commit_bound']}"
        )

    def _telemetry(self, n: int, workers: int, concurrency: int, rounds: int, out: str | None) -> None:
        from prove.bench.telemetry import run, write

        for flag, value in (("--n", n), ("--workers", workers), ("--concurrency", concurrency), ("--rounds", rounds)):
            if value < 1:
                raise CommandError(f"{flag} must be at least 1, got {value}")
        command = f"python manage.py bench --telemetry --n {n} --workers {workers} --concurrency {concurrency} " + (
            f"--rounds {rounds}" + (f" --out {out}" if out else "")
        )
        report = run(n, workers, concurrency, rounds, command, out=self.stdout)
        path = write(report, Path(out) if out else None)
        s = report["summary"]
        self.stdout.write(
            f"telemetry on {s['on_wf_s_median']} wf/s, off {s['off_wf_s_median']} wf/s, ratio {s['ratio']} "
            f"(target {s['target_ratio']}); {path}"
        )

    def _keys(self, n: int, keys: int, workers: int, concurrency: int, rounds: int, out: str | None) -> None:
        from prove.bench.keys import run
        from prove.bench.keys_write import write

        for flag, value in (("--n", n), ("--keys", keys), ("--workers", workers), ("--concurrency", concurrency)):
            if value < 1:
                raise CommandError(f"{flag} must be at least 1, got {value}")
        if rounds < 1:
            raise CommandError(f"--rounds must be at least 1, got {rounds}")
        command = (
            f"python manage.py bench --keys {keys} --n {n} --workers {workers} --concurrency {concurrency} "
            f"--rounds {rounds}" + (f" --out {out}" if out else "")
        )
        report = run(n, keys, workers, concurrency, rounds, command, out=self.stdout)
        path = write(report, Path(out) if out else None)
        s = report["summary"]
        self.stdout.write(
            f"keyed {s['keyed_wf_s_median']} wf/s, unkeyed {s['unkeyed_wf_s_median']} wf/s, ratio {s['ratio']}; "
            f"waiter start p50 {s['latency_p50_ms_median']} ms; max holders {max(s['max_holders_by_round'])}; "
            f"wrote {path}"
        )
