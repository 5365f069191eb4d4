"""The local-lease finding (docs/protocol.md §3.3, §14; issue 2, test 3).

A TCP fault proxy between worker A and PostgreSQL holds every response to A right after its
claim (blackhole "down", for lease_ttl + 2 s): A's step-row load executes at the server before
anything is recorded, but A reads its answer only later. Meanwhile B claims after the lease
expired, runs and records step 1. When the proxy passes again, A holds a stale "no rows yet"
and would start step 1's body a second time; the local lease check (monotonic() <
t0 + lease_ttl, t0 read before the claim) refuses, so the body ran exactly once.
"""

from __future__ import annotations

import os
import signal
import time

from prove.peers.fault_control import proxy_process
from tests.support.db import invocations, proxy_upstream
from tests.support.queries.claims import OWNER_OF_CLAIMS_BY_WORKFLOW_ID_F1
from tests.support.waits import wait_for

LEASE_TTL = 3.0


def test_stale_step_load_after_lease_expiry_does_not_rerun_the_body(rt, workers, test_dsn):
    upstream, params = proxy_upstream(test_dsn)
    with proxy_process(upstream) as proxy:
        url = f"postgresql://{params.get('user', 'postgres')}@127.0.0.1:{proxy.port}/{params['dbname']}"
        if params.get("password"):
            url = url.replace("@", f":{params['password']}@", 1)
        a = workers.start(
            "A",
            lease_ttl=LEASE_TTL,
            poll=0.1,
            concurrency=1,
            env={
                "DATABASE_URL": url,
                "ILR_TEST_DIRECT_DSN": test_dsn,
                "ILR_STOP_AT": "claimed",
                "ILR_LOG_LEVEL": "INFO",
            },
        )
        rt.start("three_steps", "f1", {})
        workers.wait_state("A", "T")  # A's claim committed and A read it; nothing else yet
        proxy.set_mode("blackhole", direction="down")
        held_at = time.monotonic()
        os.kill(a.pid, signal.SIGCONT)
        # A's step-row load reaches the server and executes (no rows yet); its answer is held.
        wait_for(lambda: proxy.status()["held_bytes"]["down"] > 0, message="A's load answer held")
        workers.start("B", lease_ttl=LEASE_TTL, env={"ILR_TEST_DIRECT_DSN": test_dsn})
        assert rt.result("f1", timeout=30) == {"counts": [1, 1, 1]}
        time.sleep(max(0.0, LEASE_TTL + 2 - (time.monotonic() - held_at)))
        proxy.set_mode("pass")
        wait_for(lambda: "fenced out of f1" in workers.log("A"), timeout=20, message="A abandons its run")
        time.sleep(0.5)
        assert invocations(rt, "f1", "step1") == 1, workers.log("A")
        assert invocations(rt, "f1") == 3
        claims = rt.connection().execute(OWNER_OF_CLAIMS_BY_WORKFLOW_ID_F1)
        assert [c["owner"] for c in claims.fetchall()] == ["A", "B"]
