"""The benchmark's two shapes on Temporal (docs/protocol.md §16.7), and a worker entry point.

Kept free of Django imports: Temporal's workflow sandbox re-imports this module.

    python -m prove.bench.temporal_flows worker --address 127.0.0.1:PORT --task-queue Q --concurrency C
"""

from __future__ import annotations

import argparse
import asyncio
import json
from datetime import timedelta

from temporalio import activity, workflow

with workflow.unsafe.imports_passed_through():
    import http.client
    import urllib.parse


@activity.defn
async def noop(i: int) -> int:
    """A no-op step: the cost of the engine itself."""
    return i


_clients: dict = {}


def _client(base_url: str):
    # One SDK client per process, as the runtime's call_model keeps one.
    import anthropic

    if base_url not in _clients:
        _clients[base_url] = anthropic.Anthropic(base_url=base_url, api_key="stub-key-not-a-secret", max_retries=0)
    return _clients[base_url]


@activity.defn
def decide(case: dict) -> dict:
    """One model call through the real anthropic SDK at the local stub (EMULATED model)."""
    response = _client(case["model_url"]).messages.create(
        model="claude-haiku-4-5-20251001",
        max_tokens=300,
        messages=[{"role": "user", "content": f"case_id: {case['id']}\nHow many cents should be refunded?"}],
    )
    text = "".join(b.text for b in response.content if getattr(b, "type", None) == "text")
    return json.loads(text[text.find("{") : text.rfind("}") + 1])


@activity.defn
def refund(req: dict) -> dict:
    """POST /refunds to the local target with Temporal's recommended key (run id + activity id)."""
    info = activity.info()
    key = f"{info.workflow_run_id}-{info.activity_id}"
    url = urllib.parse.urlsplit(req["target_url"])
    conn = http.client.HTTPConnection(url.hostname, url.port, timeout=30)
    try:
        conn.request(
            "POST",
            "/refunds",
            body=json.dumps({"payment": req["payment"], "amount": req["amount"]}),
            headers={"Content-Type": "application/json", "Idempotency-Key": key},
        )
        resp = conn.getresponse()
        body = json.loads(resp.read() or b"{}")
    finally:
        conn.close()
    if resp.status >= 300:
        raise RuntimeError(f"target answered {resp.status}: {body}")
    return body


@workflow.defn
class Steps4:
    @workflow.run
    async def run(self) -> list:
        return [
            await workflow.execute_activity(noop, i, start_to_close_timeout=timedelta(seconds=30)) for i in range(4)
        ]


@workflow.defn
class RefundShape:
    @workflow.run
    async def run(self, case: dict) -> dict:
        d = await workflow.execute_activity(decide, case, start_to_close_timeout=timedelta(seconds=30))
        return await workflow.execute_activity(
            refund,
            {"target_url": case["target_url"], "payment": case["payment"], "amount": d["amount"]},
            start_to_close_timeout=timedelta(seconds=30),
        )


async def _worker(address: str, task_queue: str, concurrency: int) -> None:
    from concurrent.futures import ThreadPoolExecutor

    from temporalio.client import Client
    from temporalio.worker import Worker

    client = await Client.connect(address)
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        worker = Worker(
            client,
            task_queue=task_queue,
            workflows=[Steps4, RefundShape],
            activities=[noop, decide, refund],
            activity_executor=pool,
            max_concurrent_activities=concurrency,
            max_concurrent_workflow_tasks=concurrency,
        )
        await worker.run()


def main() -> None:
    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(dest="cmd", required=True)
    w = sub.add_parser("worker")
    w.add_argument("--address", required=True)
    w.add_argument("--task-queue", required=True)
    w.add_argument("--concurrency", type=int, default=4)
    args = parser.parse_args()
    asyncio.run(_worker(args.address, args.task_queue, args.concurrency))


if __name__ == "__main__":
    main()
