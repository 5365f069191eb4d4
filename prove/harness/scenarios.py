"""Scenarios S01 to S14 (plus L0, the no-fault latency cell; docs/protocol.md §16.3), with their
predictions, the fault injection each system gets, and the oracle's "correct when".

A driver ``drive(run, s)`` acts on one system ``s`` (prove.peers.systems) through real signals and real
HTTP admin calls, and returns the system's own reported outcome: the crash and outage drivers are in
prove/harness/crash_scenarios.py, the race, delay and zombie drivers in
prove/harness/race_scenarios.py (S14's in prove/harness/s14.py). ``correct(c, outcome, run)``
(prove/harness/correctness.py) decides from the oracle's counts ``c`` (target ledger and access
log only); the one exception is said where it applies (S05L, S10, S11: "recorded once" is a
property of the system's record and is checked from it, next to the ledger count).

Predictions: ``PRED[(scenario, variant)][system] = {tier: (predicted correct, "text")}``, written
before the runs; where no number was predicted for a tier the text says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from prove.harness.correctness import (
    at_most_once_surfaced,
    hand_only,
    never_unapproved,
    one_application,
    revoke_race,
    s05l_correct,
    s10_correct,
    signal_once,
    total_twenty,
    total_zero,
)
from prove.harness.crash_scenarios import d_s01, d_s02, d_s03, d_s04, d_s05, d_s05b, d_s05l, d_s06, d_s09, d_s10, d_s11
from prove.harness.race_scenarios import d_delayed_once, d_l0, d_s07, d_s08a, d_s11r, d_s12, d_s13
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
