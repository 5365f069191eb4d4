"""The oracle's "correct when" for the scenarios of prove/harness/scenarios.py: each takes the
oracle's counts ``c`` (target ledger and access log only), the system's reported outcome and the
run, and says whether the run came out correct. S05L, S10 and S11 also read the system's own
record ("recorded once" is a property of it), next to the ledger count."""

from __future__ import annotations


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


def s05l_correct(c, outcome, run) -> bool:
    rec = run.records or {}
    if run.system == "runtime":
        decides = sum(1 for st in rec.get("steps", []) if st["kind"] == "decide")
    else:
        decides = sum(h.get("decide_completed", 0) for h in rec.get("histories", []))
    run.extra["decisions_recorded"] = decides
    return c["our_applications"] == 1 and decides == 1


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


def signal_once(c, outcome, run) -> bool:
    rec = run.records or {}
    if run.system == "runtime":
        consumed = [x for x in rec.get("signals", []) if x["name"] == "approve" and x["consumed_seq"] is not None]
        ok_sig = len(consumed) == 1
    else:
        ok_sig = sum(h.get("signals", 0) for h in rec.get("histories", [])) == 1
    return ok_sig and c["our_applications"] == 1 and _completed(outcome)
