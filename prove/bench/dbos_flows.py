"""The benchmark's two shapes on DBOS Transact (docs/protocol.md §16.7), and a process entry point.

Kept free of Django and of ``ilr``: a DBOS process is a plain Python program on its own database
(DBOS's system database) of the same PostgreSQL cluster, as a Django project using DBOS runs it.

Each process configures DBOS, launches it, waits for the go file, then runs its share of the
workflows on ``--concurrency`` threads, each thread calling the workflow function directly (DBOS
runs a called workflow in the calling thread, checkpointing each step in the system database).
It prints one JSON line: its wall-clock start and end (time.time(), comparable across
processes), per-workflow latencies, and its CPU seconds.

    python -m prove.bench.dbos_flows run --url postgresql://... --shape steps4 --first 0 --n 500 \\
        --concurrency 8 --executor-id bench-0 --go /path/go
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import sys
import threading
import time
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

from dbos import DBOS, DBOSConfig, SetWorkflowID


@DBOS.step()
def noop(i: int) -> int:
    """A no-op step: the cost of the engine itself."""
    return i


@DBOS.workflow()
def steps4() -> list:
    """Four no-op steps."""
    return [noop(i) for i in range(4)]


_clients: dict = {}
_clients_lock = threading.Lock()


def _client(base_url: str):
    # One SDK client per process, as the runtime's call_model keeps one.
    import anthropic

    with _clients_lock:
        if base_url not in _clients:
            _clients[base_url] = anthropic.Anthropic(base_url=base_url, api_key="stub-key-not-a-secret", max_retries=0)
        return _clients[base_url]


@DBOS.step()
def decide(case: dict) -> dict:
    """One model call through the real anthropic SDK at the local stub (EMULATED model)."""
    response = _client(case["model_url"]).messages.create(
        model="claude-haiku-4-5-20251001",
        max_tokens=300,
        messages=[{"role": "user", "content": f"case_id: {case['id']}\nHow many cents should be refunded?"}],
    )
    text = "".join(b.text for b in response.content if getattr(b, "type", None) == "text")
    return json.loads(text[text.find("{") : text.rfind("}") + 1])


@DBOS.step()
def refund(req: dict) -> dict:
    """POST /refunds to the local target, keyed by the workflow id (DBOS's recommended
    idempotency key for a step's external call)."""
    url = urllib.parse.urlsplit(req["target_url"])
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        conn.request(
            "POST",
            "/refunds",
            body=json.dumps({"payment": req["payment"], "amount": req["amount"]}),
            headers={"Content-Type": "application/json", "Idempotency-Key": DBOS.workflow_id or ""},
        )
        resp = conn.getresponse()
        body = json.loads(resp.read() or b"{}")
    finally:
        conn.close()
    if resp.status >= 300:
        raise RuntimeError(f"target answered {resp.status}: {body}")
    return body


@DBOS.workflow()
def refund_shape(case: dict) -> dict:
    """The refund shape: one decide (model stub), one refund step."""
    d = decide(case)
    return refund({"target_url": case["target_url"], "payment": case["payment"], "amount": d["amount"]})


def configure(url: str, executor_id: str, pool_size: int) -> None:
    """Configure and launch DBOS on the system database at ``url`` (a SQLAlchemy URL)."""
    config: DBOSConfig = {
        "name": "ilr-bench",
        "system_database_url": url,
        "executor_id": executor_id,
        # One connection per workflow thread, plus DBOS's own background threads.
        "sys_db_pool_size": pool_size,
        "run_admin_server": False,
        "log_level": "WARNING",
        "application_version": "bench-1",
    }
    DBOS(config=config)
    DBOS.launch()


def _run(args) -> None:
    configure(args.url, args.executor_id, args.concurrency + 4)
    case_of = json.loads(args.case) if args.case else {}
    latencies: list[float] = []
    lock = threading.Lock()

    def one(i: int) -> None:
        wf_id = f"{args.executor_id}-{args.shape}-{i}"
        t = time.perf_counter()
        with SetWorkflowID(wf_id):
            if args.shape == "steps4":
                steps4()
            else:
                refund_shape({**case_of, "id": f"d{i}", "payment": f"pay{i}"})
        with lock:
            latencies.append(time.perf_counter() - t)

    print(json.dumps({"ready": True}), flush=True)
    while not os.path.exists(args.go):
        time.sleep(0.005)
    cpu0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.time()
    with ThreadPoolExecutor(max_workers=args.concurrency) as pool:
        for f in [pool.submit(one, i) for i in range(args.first, args.first + args.n)]:
            f.result()
    t1 = time.time()
    cpu1 = resource.getrusage(resource.RUSAGE_SELF)
    rss_mb = cpu1.ru_maxrss / 1024
    print(
        json.dumps(
            {
                "start": t0,
                "end": t1,
                "latencies_s": latencies,
                "rss_mb": rss_mb,
                "cpu_s": (cpu1.ru_utime + cpu1.ru_stime) - (cpu0.ru_utime + cpu0.ru_stime),
            }
        ),
        flush=True,
    )
    DBOS.destroy()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    r = sub.add_parser("run")
    r.add_argument("--url", required=True)
    r.add_argument("--shape", choices=("steps4", "refund"), required=True)
    r.add_argument("--first", type=int, default=0)
    r.add_argument("--n", type=int, required=True)
    r.add_argument("--concurrency", type=int, default=8)
    r.add_argument("--executor-id", required=True)
    r.add_argument("--go", required=True)
    r.add_argument("--case", default="", help="JSON: target_url and model_url for the refund shape")
    m = sub.add_parser("migrate", help="launch once (DBOS creates its tables), then exit")
    m.add_argument("--url", required=True)
    args = parser.parse_args(argv)
    if args.cmd == "migrate":
        configure(args.url, "migrate", 2)
        DBOS.destroy()
    else:
        _run(args)
    sys.exit(0)


if __name__ == "__main__":
    main()
