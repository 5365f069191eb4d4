"""The drivers of the race, delay and zombie scenarios (S07, S08a to S08c, S11r, S12, S13, and L0
with no fault; the table is prove/harness/scenarios.py): workers racing recovery, a late
response (a blackholed connection, a delayed target), a signal racing the suspend, a revoke
racing dispatch, a sender stopped by SIGSTOP while a second worker runs. Each ``d_*(run, s)``
acts on one system ``s`` (prove.peers.systems) through real signals and real HTTP admin calls, and
returns the system's own reported outcome."""

from __future__ import annotations

import random
import threading
import time

from prove.peers.systems import SEND_TIMEOUT, SETTLE_MARGIN


class StopMonitor:
    """S07: every worker stops itself at the point; the first one stopped is SIGKILLed (the
    owner's crash), every later one is continued (SIGCONT)."""

    def __init__(self, s):
        self.s = s
        self.killed = None
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.loop, daemon=True)
        self.thread.start()

    def loop(self):
        from prove.peers.systems import proc_state

        while not self.stop.is_set():
            for wid, p in list(self.s.procs.items()):
                if p.poll() is None and proc_state(p.pid) == "T":
                    if self.killed is None:
                        self.killed = wid
                        self.s.sigkill(wid)
                    else:
                        self.s.sigcont(wid)
            time.sleep(0.01)

    def close(self):
        self.stop.set()
        self.thread.join(5)


def d_s07(run, s):
    rng = random.Random(run.seed)
    mon = StopMonitor(s)
    try:
        for _ in range(3):
            s.start_worker(
                stop_at=s.point("effect_after_send"), **({} if s.name == "runtime" else {"wait_ready": False})
            )
            time.sleep(rng.uniform(0, POLL_PHASE))  # randomized poll phases per seed
        run.start_case(s)
        s.wait_proposal()
        s.approve()
        return s.result(timeout=run.result_timeout)
    finally:
        mon.close()


POLL_PHASE = 0.5


def _pg_upstream() -> tuple[str, str]:
    """(proxy upstream, DATABASE_URL template) for a worker reaching PostgreSQL via a proxy."""
    from django.conf import settings

    db = settings.DATABASES["default"]
    host, port = db.get("HOST") or "127.0.0.1", db.get("PORT") or "5432"
    upstream = f"unix:{host}/.s.PGSQL.{port}" if host.startswith("/") else f"{host}:{port}"
    return upstream, f"postgresql://{db.get('USER') or 'postgres'}@{{addr}}/{db['NAME']}"


def d_s08a(run, s):
    """Target delay 2 s; the sender's database (runtime, DBOS) or server (Temporal) connection is
    blackholed from 0.5 s after its send starts to 12 s."""
    from prove.peers.fault_control import proxy_process

    if s.name in ("runtime", "dbos"):
        upstream, url = _pg_upstream()
    else:
        upstream, url = s.server.address, None
    with proxy_process(upstream) as proxy:
        if s.name == "runtime":
            a = s.start_worker(stop_at="effect_after_dispatch@1", db_url=url.format(addr=proxy.address))
        elif s.name == "dbos":
            # DBOS's system database connection goes through the proxy (its store, as the
            # runtime's is); the sender stops right before its send, as Temporal's does.
            a = s.start_worker(stop_at="effect_before_dispatch@1", url=s.url_via(proxy.address))
        else:
            a = s.start_worker(stop_at="effect_before_dispatch@1", address=proxy.address)
        run.start_case(s)
        s.wait_proposal()
        s.approve()
        s.wait_stopped()
        b_kwargs = {} if s.name == "runtime" else {"wait_ready": False}
        s.start_worker(**b_kwargs)  # the successor
        t_send = time.monotonic()
        s.sigcont(a)
        time.sleep(max(0.0, t_send + 0.5 - time.monotonic()))
        proxy.set_mode("blackhole", direction="both")
        run.fault("blackhole_sender", proxy=proxy.address)
        time.sleep(max(0.0, t_send + 12.0 - time.monotonic()))
        proxy.set_mode("pass")
        run.fault("pass_sender")
        out = s.result(timeout=run.result_timeout)
        time.sleep(2.0)  # let the original's late T_commit (or completion) land
        return out


def d_delayed_once(run, s):
    """S08b, S08c: the first send is processed ``run.scenario.first_delay`` seconds after it arrives
    (the target's delay is read when a request arrives, and is switched back to 0 half a second
    after the sender is let go, so retries and resends are not delayed). Two workers: the runtime's
    sender exits by its send watchdog (docs/protocol.md §6.3), and the second recovers."""
    delay = run.scenario.first_delay
    a = s.start_worker(stop_at="effect_after_dispatch@1")
    run.start_case(s)
    s.wait_proposal()
    s.approve()
    s.wait_stopped()
    s.start_worker(**({} if s.name == "runtime" else {"wait_ready": False}))
    run.target_admin("delay", {"seconds": delay})
    run.fault("target_delay_first_send", seconds=delay)
    s.sigcont(a)
    time.sleep(0.5)
    run.target_admin("delay", {"seconds": 0})
    run.fault("target_delay_off")
    return s.result(timeout=run.result_timeout)


def d_plain(run, s):
    """No crash: one worker runs the case (S08b, S08c: the target's delay is the fault)."""
    s.start_worker()
    run.start_case(s)
    s.wait_proposal()
    s.approve()
    return s.result(timeout=run.result_timeout)


def d_s11r(run, s):
    rng = random.Random(run.seed)
    s.start_worker()
    run.start_case(s)
    # Wait for the step just before the suspend, then send the approve within ~+/-50 ms of the
    # suspend commit (the suspend follows the propose step by a few ms).
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if run.proposal_recorded(s):
            break
        time.sleep(0.002)
    time.sleep(rng.uniform(0.0, 0.1))
    s.signal_approval_raw(2000)
    return s.result(timeout=run.result_timeout)


def d_s12(run, s):
    rng = random.Random(run.seed * 7919 + run.tier)
    s.start_worker(stop_at="effect_before_dispatch@1")
    run.start_case(s)
    s.wait_proposal()
    s.approve()
    w = s.wait_stopped()
    offset = rng.uniform(-0.020, 0.020)
    run.extra["revoke_offset_ms"] = round(offset * 1000, 2)
    if offset < 0:
        run.revoke_returned = s.revoke()
        run.revoke_at = time.time()
        time.sleep(-offset)
        s.sigcont(w)
    else:
        s.sigcont(w)
        time.sleep(offset)
        run.revoke_returned = s.revoke()
        run.revoke_at = time.time()
    return s.result(timeout=run.result_timeout)


def d_s13(run, s):
    pause = 2.0 if run.variant == "short" else SEND_TIMEOUT + SETTLE_MARGIN + 3.0
    a = s.start_worker(stop_at="effect_after_dispatch@1")
    run.start_case(s)
    s.wait_proposal()
    s.approve()
    s.wait_stopped()
    s.start_worker(**({} if s.name == "runtime" else {"wait_ready": False}))
    run.fault("sigstop_hold", seconds=pause)
    time.sleep(pause)
    s.sigcont(a)
    out = s.result(timeout=run.result_timeout)
    time.sleep(SEND_TIMEOUT + 1.0)  # the resumed sender's send, if any, lands or times out
    return out


def d_l0(run, s):
    return d_plain(run, s)
