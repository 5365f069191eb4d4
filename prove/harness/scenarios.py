"""Scenarios S01 to S14 (plus L0, the no-fault latency cell; docs/protocol.md §16.3), with their
predictions, the fault injection each system gets, and the oracle's "correct when".

A driver ``drive(run, s)`` acts on one system ``s`` (prove.peers.systems) through real signals and real
HTTP admin calls, and returns the system's own reported outcome. ``correct(c, outcome, run)``
decides from the oracle's counts ``c`` (target ledger and access log only); the one exception is
said where it applies (S05L, S10, S11: "recorded once" is a property of the system's record and
is checked from it, next to the ledger count).

Predictions: ``PRED[(scenario, variant)][system] = {tier: (predicted correct, "text")}``, written
before the runs; where no number was predicted for a tier the text says so.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from prove.peers.systems import SEND_TIMEOUT, SETTLE_MARGIN

SYSTEMS = ("runtime", "temporal", "temporal_check", "dbos")
"""The runtime and its three baselines: (a) Temporal with its recommended key, (b) Temporal with the
careful check, (c) DBOS Transact with the same check."""
DBOS_EXPECTED_AS = "temporal_check"
"""TLC has no DBOS mode: a DBOS cell is predicted as (b), the same pre-send check on a durable step."""


@dataclass
class Scenario:
    id: str
    variant: str
    tiers: tuple
    title: str
    fault: str
    oracle: str
    drive: Callable
    correct: Callable
    pred: dict
    refund_due: bool = True  # an application of the approved amount is the useful outcome
    queryable: bool = True  # tier-1 target answers lookups
    quiesce: float = 0.5  # seconds to wait after the outcome before reading the ledger
    target_delay: float = 0.0
    first_delay: float = 0.0  # S08b, S08c: the delay of the first send only
    systems: tuple = SYSTEMS
    notes: str = ""
    audited: bool = True  # the auditor's P1 to P5 apply (there is an effect)

    @property
    def key(self) -> str:
        return self.id + (f"/{self.variant}" if self.variant else "")


# -- helpers --------------------------------------------------------------------------------------


def _surfaced_unknown(outcome: dict) -> bool:
    return outcome.get("status") == "AMBIGUOUS"


def _refused(outcome: dict) -> bool:
    st = str(outcome.get("status") or "")
    return st.startswith("REFUSED") or st == "AMBIGUOUS"


def _completed(outcome: dict) -> bool:
    st = str(outcome.get("status") or "")
    return st.startswith("COMMITTED") or st in ("COMPLETED", "DUPLICATE_IGNORED", "REAPPLIED_AFTER_QUERY")


def at_most_once_surfaced(c, outcome, run) -> bool:
    """Tier 3 (S01, S09): at most one application, and the outcome is surfaced truthfully:
    AMBIGUOUS (unknown), or a completion that really happened once."""
    if c["our_applications"] > 1:
        return False
    if run.tier == 3 and run.scenario.id == "S01":
        return _surfaced_unknown(outcome) or (_completed(outcome) and c["our_applications"] == 1)
    return _surfaced_unknown(outcome) or (_completed(outcome) and c["our_applications"] == 1)


def one_application(c, outcome, run) -> bool:
    if run.tier == 3:
        return at_most_once_surfaced(c, outcome, run)
    return c["our_applications"] == 1 and c["wrong_amounts"] == 0


def hand_only(amount):
    def check(c, outcome, run) -> bool:
        return c["total_refunded"] == amount and c["our_applications"] == 0 and _refused(outcome)

    return check


def total_zero(c, outcome, run) -> bool:
    return c["total_refunded"] == 0


def total_twenty(c, outcome, run) -> bool:
    return c["total_refunded"] == 2000 and c["wrong_amounts"] == 0


def never_unapproved(c, outcome, run) -> bool:
    return c["wrong_amounts"] == 0 and c["total_refunded"] <= 2000


def revoke_race(c, outcome, run) -> bool:
    key = "sends_after_revoke_unlisted" if run.system == "runtime" else "sends_after_revoke"
    return c[key] == 0


# -- drivers --------------------------------------------------------------------------------------


def crash_recover(run, s, point, outage=None, kill_workers=1):
    for _ in range(kill_workers):
        s.start_worker(kill_at=point)
    run.start_case(s)
    s.wait_proposal()
    s.approve()
    s.wait_killed()
    s.down()
    if outage:
        outage(run, s)
    run.mark_restart()
    s.start_worker()
    return s.result(timeout=run.result_timeout)


def hand_refund(amount):
    def outage(run, s):
        run.target_admin("hand_refund", {"payment": run.payment, "amount": amount})
        run.hand_at = time.time()
        run.fault("hand_refund", amount=amount)

    return outage


def revoke_outage(run, s):
    run.revoke_returned = s.revoke()
    run.revoke_at = time.time()


def d_s01(run, s):
    return crash_recover(run, s, "effect_after_send")


def d_s02(run, s):
    return crash_recover(run, s, "effect_after_dispatch", hand_refund(2000))


def d_s03(run, s):
    return crash_recover(run, s, "effect_after_dispatch", revoke_outage)


def d_s06(run, s):
    return crash_recover(run, s, "effect_after_dispatch", hand_refund(1000))


def d_s09(run, s):
    return crash_recover(run, s, "effect_after_dispatch" if run.variant == "pre" else "effect_after_send")


def d_s04(run, s):
    def outage(run, s):
        # Real age: wait until dedup_window - DEDUP_MARGIN (612 - 600 = 12 s) has passed since
        # the first dispatch (the approval is a lower bound of it), then prune (EMULATED expiry).
        wait = run.approved_at + 12.0 + 1.0 - time.time()
        if wait > 0:
            time.sleep(wait)
        run.target_admin("prune_keys", {})
        run.fault("prune_keys")

    return crash_recover(run, s, "effect_after_send", outage)


def d_s05(run, s):
    run.model_admin("script", {"redecide": True})
    s.start_worker(kill_at="effect_after_send")
    run.start_case(s)
    s.wait_proposal()
    s.approve()
    s.wait_killed()
    s.down()
    if s.name in ("runtime", "dbos"):
        # Both fork from the decision: the runtime with rt.fork, DBOS with fork_workflow.
        fork_id = s.fork_at_decide(run.case_id + "-fork")
        run.mark_restart()
        s.start_worker()
        proposal = s.wait_proposal(wf_id=fork_id)
        # The person approves what the fork now proposes (3000): the strongest test of payload
        # binding, since the grant itself would allow it.
        s.approve(wf_id=fork_id, payload=proposal)
        original = s.result(timeout=run.result_timeout)
        forked = s.result(timeout=run.result_timeout, wf_id=fork_id)
        return {"status": forked["status"], "original": original, "fork": forked}
    s.reset_to_decide()
    run.mark_restart()
    s.start_worker()
    return s.result(timeout=run.result_timeout)


def d_s05b(run, s):
    run.model_admin("script", {"redecide": True})
    s.start_worker(kill_at="decide_after_response")
    run.start_case(s)
    s.wait_killed()
    s.down()
    run.mark_restart()
    s.start_worker()
    proposal = s.wait_proposal()
    # The person approves the amount the first (discarded) decision showed: 2000, while the
    # re-called model now proposes 3000.
    s.approve(payload={"payment": run.payment, "amount": 2000})
    out = s.result(timeout=run.result_timeout)
    out["proposed_after_recall"] = proposal["amount"]
    return out


def d_s05l(run, s):
    s.start_worker(kill_at="decide_after_response")
    run.start_case(s)
    s.wait_killed()
    s.down()
    s.start_worker(kill_at="effect_after_send")
    s.wait_proposal()
    s.approve()
    s.wait_killed()
    s.down()
    run.mark_restart()
    s.start_worker()
    return s.result(timeout=run.result_timeout)


def s05l_correct(c, outcome, run) -> bool:
    rec = run.records or {}
    if run.system == "runtime":
        decides = sum(1 for st in rec.get("steps", []) if st["kind"] == "decide")
    else:
        decides = sum(h.get("decide_completed", 0) for h in rec.get("histories", []))
    run.extra["decisions_recorded"] = decides
    return c["our_applications"] == 1 and decides == 1


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


def d_s10(run, s):
    s.start_worker()
    run.start_case(s, sleep_before_effect=20)
    s.wait_proposal()
    s.approve()
    t0 = time.monotonic()
    time.sleep(max(0.0, t0 + 5 - time.monotonic()))
    s.down()
    time.sleep(max(0.0, t0 + 8 - time.monotonic()))
    run.crash_store(s)
    time.sleep(max(0.0, t0 + 25 - time.monotonic()))
    run.mark_restart()
    s.start_worker()
    return s.result(timeout=run.result_timeout)


def s10_correct(c, outcome, run) -> bool:
    rec = run.records or {}
    if run.system == "runtime":
        steps = rec.get("steps", [])
        sleeps = [st for st in steps if st["kind"] == "sleep"]
        sig = [st for st in steps if st["kind"] in ("signal", "wait") or st["name"] == "approve"]
        fired = len(sleeps)
        lateness = (sleeps[0]["ts"] - (sig[0]["ts"] + 20)) if sleeps and sig else None
    else:
        h = (rec.get("histories") or [{}])[-1]
        # The 20 s timer, not the approval wait's 24 h timeout timer.
        st = [t for t in h.get("timer_started", []) if abs(t["seconds"] - 20) < 1]
        fi = h.get("timer_fired", [])
        fired = len(fi)
        lateness = (fi[0]["t"] - st[0]["t"] - st[0]["seconds"]) if st and fi else None
    restart_wall = next((f["wall"] for f in run.faults if f["what"] == "restart"), None)
    run.extra["timer_fired"] = fired
    run.extra["timer_lateness_s"] = lateness
    if lateness is not None and restart_wall is not None:
        if run.system == "runtime":
            fired_at, due = sleeps[0]["ts"], sig[0]["ts"] + 20
        else:
            fired_at, due = fi[0]["t"], st[0]["t"] + st[0]["seconds"]
        # The workers were down past the due time; what the system adds is the time after they return.
        run.extra["timer_lateness_after_return_s"] = round(fired_at - max(due, restart_wall), 3)
    return c["our_applications"] == 1 and fired == 1 and lateness is not None and lateness >= -0.05


def d_s11(run, s):
    s.start_worker()
    run.start_case(s)
    s.wait_proposal()
    t0 = time.monotonic()
    time.sleep(2)
    s.down()
    time.sleep(max(0.0, t0 + 4 - time.monotonic()))
    s.approve()
    time.sleep(max(0.0, t0 + 6 - time.monotonic()))
    run.mark_restart()
    s.start_worker()
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


def signal_once(c, outcome, run) -> bool:
    rec = run.records or {}
    if run.system == "runtime":
        consumed = [x for x in rec.get("signals", []) if x["name"] == "approve" and x["consumed_seq"] is not None]
        ok_sig = len(consumed) == 1
    else:
        ok_sig = sum(h.get("signals", 0) for h in rec.get("histories", [])) == 1
    return ok_sig and c["our_applications"] == 1 and _completed(outcome)


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


# -- the table ------------------------------------------------------------------------------------


def P(rt, a, b):
    """Predictions per system; (c) DBOS is predicted as (b) (DBOS_EXPECTED_AS)."""
    return {"runtime": rt, "temporal": a, "temporal_check": b, "dbos": b}


T = True
F = False

SCENARIOS: list[Scenario] = [
    Scenario(
        "S01",
        "",
        (1, 2, 3),
        "crash after commit",
        "kill at effect_after_send; restart",
        "our applications = 1 (tier 3: <= 1, surfaced as unknown)",
        d_s01,
        one_application,
        P(
            {1: (T, "$20 COMMITTED_BY_RETRY"), 2: (T, "$20 COMMITTED_ON_QUERY"), 3: (T, "$20 AMBIGUOUS")},
            {1: (T, "$20"), 2: (F, "$40"), 3: (F, "$40")},
            {1: (T, "$20"), 2: (T, "$20"), 3: (F, "$40")},
        ),
    ),
    Scenario(
        "S02",
        "",
        (1, 2, 3),
        "hand refund during the outage",
        "kill at effect_after_dispatch (nothing sent); hand_refund 2000 while down; restart",
        "total refunded = $20 (hand only); agent refund refused and surfaced",
        d_s02,
        hand_only(2000),
        P(
            {
                1: (T, "REFUSED:stale_premise_at_recovery $20"),
                2: (T, "REFUSED:stale_premise_at_recovery $20"),
                3: (T, "AMBIGUOUS $20"),
            },
            {t: (F, "$40") for t in (1, 2, 3)},
            {t: (F, "$40 (eligibility 20+20 <= 100 passes)") for t in (1, 2, 3)},
        ),
        refund_due=False,
    ),
    Scenario(
        "S03",
        "",
        (1, 2, 3),
        "approval revoked during the outage",
        "kill at effect_after_dispatch; revoke while down; restart",
        "total = $0",
        d_s03,
        total_zero,
        P(
            {1: (T, "REFUSED:lease_at_recovery $0"), 2: (T, "REFUSED:lease_at_recovery $0"), 3: (T, "AMBIGUOUS $0")},
            {t: (F, "$20") for t in (1, 2, 3)},
            {t: (T, "$0 (equal)") for t in (1, 2, 3)},
        ),
        refund_due=False,
    ),
    Scenario(
        "S04",
        "queryable",
        (1,),
        "key pruned (EMULATED), queryable target",
        "kill at effect_after_send; wait 12 s real age (dedup_window 612 - DEDUP_MARGIN 600); prune_keys; restart",
        "our applications = 1",
        d_s04,
        one_application,
        P({1: (T, "COMMITTED_ON_QUERY $20")}, {1: (F, "$40")}, {1: (T, "$20 (equal)")}),
    ),
    Scenario(
        "S04",
        "non-queryable",
        (1,),
        "key pruned (EMULATED), target without lookup",
        "as S04 queryable, the tier-1 target answers no lookup",
        "our applications = 1",
        d_s04,
        one_application,
        P({1: (T, "AMBIGUOUS $20")}, {1: (F, "$40")}, {1: (F, "$40")}),
        queryable=False,
    ),
    Scenario(
        "S05",
        "",
        (1, 2, 3),
        "model re-decides the amount",
        "stub answers 3000 after the first call; kill at effect_after_send; runtime: rt.fork at the decide "
        "seq (the fork's 3000 proposal approved); Temporal: reset to the first workflow task",
        "total = $20; never $50",
        d_s05,
        total_twenty,
        P(
            {t: (T, "REFUSED:conflicting_payload $20") for t in (1, 2, 3)},
            {t: (F, "$50 (new run id, new key)") for t in (1, 2, 3)},
            {t: (T, "$20 (amount != approved; equal)") for t in (1, 2, 3)},
        ),
    ),
    Scenario(
        "S05",
        "b",
        (1, 2, 3),
        "re-call after a crash at decide_after_response",
        "stub answers 3000 after the first call; kill at decide_after_response; restart; the person "
        "approves the $20 the discarded first answer showed while the re-call proposes $30",
        "no refund other than the approved $20 (never $30, never $50)",
        d_s05b,
        never_unapproved,
        P(
            {t: (T, "$20 (grant payload_hash refuses 3000)") for t in (1, 2, 3)},
            {
                1: (F, "$30 if the approval does not bind the amount"),
                2: (F, "$30 (not stated; as t1)"),
                3: (F, "$30 (not stated; as t1)"),
            },
            {t: (T, "$20") for t in (1, 2, 3)},
        ),
        refund_due=False,
    ),
    Scenario(
        "S05L",
        "EMULATED",
        (1,),
        "decision recorded once (EMULATED: model stub, real anthropic SDK)",
        "kill at decide_after_response, restart; then kill at effect_after_send, restart",
        "exactly one decision recorded; one refund",
        d_s05l,
        s05l_correct,
        P({1: (T, "one decide row; one refund")}, {1: (T, "recorded as an activity result")}, {1: (T, "same")}),
    ),
    Scenario(
        "S06",
        "",
        (1, 2, 3),
        "partial hand refund during the outage",
        "as S02 with hand_refund 1000",
        "agent refund refused; total = $10",
        d_s06,
        hand_only(1000),
        P(
            {t: (T, "$10 refused") for t in (1, 2, 3)},
            {t: (F, "$30") for t in (1, 2, 3)},
            {t: (F, "$30 (10+20 <= 100 passes)") for t in (1, 2, 3)},
        ),
        refund_due=False,
    ),
    Scenario(
        "S07",
        "",
        (1, 2, 3),
        "two workers racing recovery",
        "3 workers stop at effect_after_send; the first stopped (the owner) is SIGKILLed, later stops "
        "continue; start phases randomized per seed",
        "our applications = 1",
        d_s07,
        one_application,
        P(
            {t: (T, "one recovery") for t in (1, 2, 3)},
            {
                1: (T, "server schedules one retry"),
                2: (T, "server schedules one retry (equal)"),
                3: (T, "server schedules one retry (equal)"),
            },
            {t: (T, "same") for t in (1, 2, 3)},
        ),
    ),
    Scenario(
        "S08a",
        "",
        (1, 2),
        "late response after claim expiry, inside settle",
        "target delay 2 s; the sender's PostgreSQL (runtime) or Temporal-server (Temporal) connection "
        "blackholed through a fault proxy from 0.5 s after its send to 12 s",
        "one application",
        d_s08a,
        one_application,
        P(
            {1: (T, "COMMITTED_ON_QUERY plus LATE_RESULT"), 2: (T, "COMMITTED_ON_QUERY plus LATE_RESULT")},
            {1: (T, "$20"), 2: (F, "$40")},
            {1: (T, "$20 (lookup finds it)"), 2: (T, "$20 (equal)")},
        ),
        target_delay=2.0,
    ),
    Scenario(
        "S08b",
        "",
        (1, 2),
        "response arrives after timeout, inside settle",
        f"the first send is processed send_timeout + 2 s = {SEND_TIMEOUT + 2:.0f} s after it arrives "
        "(later sends undelayed); a second worker runs",
        "one application",
        d_delayed_once,
        one_application,
        P(
            {1: (T, "$20"), 2: (T, "$20")},
            {1: (T, "$20"), 2: (F, "$40")},
            {1: (T, "$20 (not stated)"), 2: (F, "$40 (the retry's lookup runs before processing ends)")},
        ),
        first_delay=SEND_TIMEOUT + 2,
        quiesce=SEND_TIMEOUT + 3,
    ),
    Scenario(
        "S08c",
        "",
        (1, 2),
        "response beyond settle (A2 violated)",
        f"the first send is processed send_timeout + settle_margin + 3 s = "
        f"{SEND_TIMEOUT + SETTLE_MARGIN + 3:.0f} s after it arrives (later sends undelayed); a second "
        "worker runs",
        "one application (recorded as the measured assumption boundary)",
        d_delayed_once,
        one_application,
        P(
            {1: (T, "not stated (tier-1 key dedupes)"), 2: (F, "$40 conceded; receipt keeps evidence")},
            {1: (T, "not stated (key dedupes)"), 2: (F, "$40 conceded")},
            {1: (T, "not stated (key dedupes)"), 2: (F, "$40 conceded")},
        ),
        first_delay=SEND_TIMEOUT + SETTLE_MARGIN + 3,
        quiesce=SEND_TIMEOUT + SETTLE_MARGIN + 4,
    ),
    Scenario(
        "S09",
        "pre",
        (3,),
        "tier-3 effect, crash before the send",
        "kill at effect_after_dispatch",
        "at most one application; outcome surfaced",
        d_s09,
        at_most_once_surfaced,
        P({3: (T, "AMBIGUOUS $0 (availability cost counted)")}, {3: (T, "$20")}, {3: (T, "$20")}),
    ),
    Scenario(
        "S09",
        "post",
        (3,),
        "tier-3 effect, crash after the send",
        "kill at effect_after_send",
        "at most one application; outcome surfaced",
        d_s09,
        at_most_once_surfaced,
        P({3: (T, "AMBIGUOUS $20")}, {3: (F, "$40")}, {3: (F, "$40")}),
    ),
    Scenario(
        "S10",
        "",
        (1, 2, 3),
        "durable timer across a crash (20 s, shortened from 3600)",
        "sleep 20 s before the effect; t=5 down; t=8 crash the store (runtime: ilr_db restart-immediate; "
        "Temporal: SIGKILL and restart the dev server on the same db file); t=25 restart workers",
        "timer recorded once at or after due; one application; lateness reported",
        d_s10,
        s10_correct,
        P(
            {t: (T, "equal; lateness <= poll after workers return") for t in (1, 2, 3)},
            {t: (T, "equal") for t in (1, 2, 3)},
            {t: (T, "equal") for t in (1, 2, 3)},
        ),
    ),
    Scenario(
        "S11",
        "",
        (1, 2, 3),
        "signal during an outage",
        "waiting on approve; down at t=2; approve at t=4; restart at t=6",
        "consumed exactly once; proceeds; one application",
        d_s11,
        signal_once,
        P(
            {t: (T, "equal") for t in (1, 2, 3)},
            {t: (T, "equal") for t in (1, 2, 3)},
            {t: (T, "equal") for t in (1, 2, 3)},
        ),
    ),
    Scenario(
        "S11",
        "r",
        (1, 2, 3),
        "signal racing the suspend (no crash)",
        "approve sent 0 to 100 ms after the step before the suspend (about +/-50 ms of its commit)",
        "consumed exactly once; proceeds; one application",
        d_s11r,
        signal_once,
        P(
            {t: (T, "equal") for t in (1, 2, 3)},
            {t: (T, "equal") for t in (1, 2, 3)},
            {t: (T, "equal") for t in (1, 2, 3)},
        ),
    ),
    Scenario(
        "S12",
        "",
        (1, 2, 3),
        "revoke racing dispatch",
        "sender stopped at effect_before_dispatch; revoke fired at a random offset in [-20 ms, +20 ms] "
        "around its continuation",
        "no send processed after the revoke returned that the revoke did not list (runtime) or at all (Temporal)",
        d_s12,
        revoke_race,
        P(
            {t: (T, "0") for t in (1, 2, 3)},
            {t: (F, "many") for t in (1, 2, 3)},
            {t: (F, "> 0 (measured)") for t in (1, 2, 3)},
        ),
        refund_due=False,
    ),
    Scenario(
        "S13",
        "short",
        (1, 2, 3),
        "zombie by SIGSTOP, 2 s",
        "SIGSTOP the sender at effect_after_dispatch (Temporal: before the send) for 2 s; a second worker runs",
        "one application",
        d_s13,
        one_application,
        P({t: (T, "$20") for t in (1, 2, 3)}, {t: (T, "$20") for t in (1, 2, 3)}, {t: (T, "$20") for t in (1, 2, 3)}),
    ),
    Scenario(
        "S13",
        "long",
        (1, 2, 3),
        "zombie by SIGSTOP, send_timeout + settle_margin + 3 s",
        "as short, held 11 s",
        "one application",
        d_s13,
        one_application,
        P(
            {1: (T, "not stated"), 2: (F, "$40 (A1, conceded)"), 3: (T, "not stated")},
            {1: (T, "not stated"), 2: (F, "$40 (A1, conceded)"), 3: (F, "not stated")},
            {1: (T, "not stated"), 2: (F, "$40 (A1, conceded)"), 3: (F, "not stated")},
        ),
    ),
    Scenario(
        "S14",
        "",
        (1,),
        "versioning (no ledger effect; tier not applicable, run once)",
        "10 v1 workflows sleeping; a v2-only worker (none may claim); a v1 worker (drains); then v1 code "
        "changed without a patch replays 3 v1 histories",
        "VersionPinned; NonDeterminismLoud (stuck or failed task, nothing run)",
        lambda run, s: __import__("prove.harness.s14", fromlist=["x"]).drive(run, s),
        lambda c, o, run: __import__("prove.harness.s14", fromlist=["x"]).correct(c, o, run),
        P(
            {1: (T, "equal")},
            {1: (T, "equal (Worker Versioning pinned plus NonDeterminismError task retry)")},
            {1: (T, "equal")},
        ),
        refund_due=False,
        audited=False,
        # DBOS's versioning (application_version) is not driven by prove/s14.py.
        systems=("runtime", "temporal", "temporal_check"),
    ),
    Scenario(
        "L0",
        "",
        (1,),
        "no fault (latency cell)",
        "none; target service delay 20 ms",
        "one application",
        d_l0,
        one_application,
        P({1: (T, "-")}, {1: (T, "-")}, {1: (T, "-")}),
        target_delay=0.02,
    ),
]

S14_NOTE = (
    "S14 (versioning) runs once per system (tier does not apply). Temporal pins versions by "
    "one task queue per version, not through the Worker Versioning API (labeled)."
)


def find(key: str) -> list[Scenario]:
    """Scenarios matching an id ("S01", "S08a") or id/variant ("S09/pre")."""
    key = key.strip()
    out = [s for s in SCENARIOS if s.key.lower() == key.lower() or s.id.lower() == key.lower()]
    if key.upper() in ("S05B",):
        out = [s for s in SCENARIOS if s.id == "S05" and s.variant == "b"]
    if key.upper() == "S11R":
        out = [s for s in SCENARIOS if s.id == "S11" and s.variant == "r"]
    return out
