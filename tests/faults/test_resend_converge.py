"""Recovery resends back off and converge, and every request on the wire is on the signed record
(docs/protocol.md §6.5).

Real worker subprocesses against the real HTTP payment target (tier 1, EMULATED faults): a
provider that holds a key's first request and answers every other request with the key 409
"in progress" (Stripe's rule), and one that saved its 500 for the key and replays it. The
invariants registry runs over each test at teardown (the ``workers`` fixture).
"""

from __future__ import annotations

from ilr._journal import receipts
from tests.support.refund_harness import refund_env


def _posts(env, key: str):
    # In arrival order (the access log appends a request when it finishes: a held one comes late).
    posts = [e for e in env.access_log() if e["method"] == "POST" and e["path"] == "/refunds" and e["key"] == key]
    return sorted(posts, key=lambda e: e["t_mono"])


def _start(rt, workers, env, tmp_path, case_id: str, **target):
    amount_file = tmp_path / f"{case_id}.amount"
    amount_file.write_text("500")
    grant = rt.grant("agent", "refund", max_cents=1000, by="ops")
    case = env.case(case_id, amount_file=str(amount_file), grant_id=grant)
    case["target"].update(target)
    workers.start("A", lease_ttl=2, env=env.worker_env())
    rt.start("live_amount", case_id, case)
    return case


def test_a_silent_provider_gets_resends_that_back_off_and_all_are_signed(rt, workers, tmp_path):
    # send_timeout 1.5 s, settle_margin 1 s: without backoff a resend every 2.5 s, 12 in 30 s.
    with refund_env(tmp_path, tier=1, queryable=False, send_timeout=1.5, settle_margin=1.0) as env:
        env.admin("hold_first", {"seconds": 30})
        case = _start(rt, workers, env, tmp_path, "silent")
        out = rt.result(case["id"], timeout=120)
        assert out["status"] == "COMMITTED_BY_RETRY", out
        key = out["effect_id"]
        posts = _posts(env, key)
        first = min(p["t_mono"] for p in posts)
        within = [p for p in posts if p["t_mono"] - first <= 30]
        assert len(within) <= 8, [(round(p["t_mono"] - first, 2), p["status"]) for p in posts]
        # Every resend while the first was held was answered "in progress", and none applied.
        assert all(p["status"] == 409 for p in posts[1:-1]), [p["status"] for p in posts]
        assert [r["amount"] for r in env.ledger(case["payment"])] == [500]
        v = receipts.verify(rt.receipt(key))
        assert v["sends"] == len(posts), (v, len(posts))
        assert v["chain_intact"] and v["unsigned"] == 0, v
        assert v["happened"] is True and v["happened_once"] is True, v
        assert v["authorized_when_fired"] is True and v["assumptions_held"] is True, v
        entries = _entries(rt, key)
        resent = [e for e in entries if e["kind"] == "RESENT"]
        assert len(resent) == len(posts) - 1
        # Each resend carries the re-check that authorized it, and the send number it is.
        assert [e["send"] for e in resent] == list(range(2, len(posts) + 1))
        assert all(e["rechecked"]["lease_live"] and e["rechecked"]["violations"] == [] for e in resent)
        # The answers that kept it waiting are named: the last one before the resend that landed.
        assert resent[-1]["after"]["type"] == "SendInProgress" and resent[-1]["after"]["in_progress"] is True


def _entries(rt, effect_id):
    import json

    return [json.loads(b) for b in rt.receipt(effect_id)["entries"]]


def test_a_replayed_500_is_resolved_by_the_lookup(rt, workers, tmp_path):
    # The provider applies the refund, answers 500, and answers that saved 500 to every later
    # request with the key. The target has a lookup: after two sends answered alike, ask it.
    with refund_env(tmp_path, tier=1, queryable=True) as env:
        env.admin("fail_next", {"status": 500, "apply": True, "save": True})
        case = _start(rt, workers, env, tmp_path, "saved500")
        out = rt.result(case["id"], timeout=20)
        assert out["status"] == "COMMITTED_ON_QUERY", out
        key = out["effect_id"]
        posts = _posts(env, key)
        assert [p["status"] for p in posts] == [500, 500], posts
        assert [r["amount"] for r in env.ledger(case["payment"])] == [500]
        lookups = [e for e in env.access_log() if e["method"] == "GET" and e["path"] == "/refunds"]
        assert lookups, "the lookup was never used"
        v = receipts.verify(rt.receipt(key))
        assert v["sends"] == 2 and v["happened"] is True and v["happened_once"] is True, v
        # The lookup's answer is kept, as a send's is: the provider's reference.
        committed = [e for e in _entries(rt, key) if e["kind"] == "COMMITTED"][0]
        assert committed["via"] == "recovery-query" and committed["result"]["key"] == key, committed
        step = [s for s in rt.describe(case["id"])["steps"] if s["kind"] == "effect"][0]
        assert step["output"]["result"]["id"] == committed["result"]["id"], step


def test_a_target_without_lookup_ends_ambiguous_when_its_resend_policy_is_spent(rt, workers, tmp_path):
    # A saved 500 and no lookup: three sends in all (max_attempts 3), then a person decides.
    with refund_env(tmp_path, tier=1, queryable=False) as env:
        env.admin("fail_next", {"status": 500, "apply": True, "save": True})
        case = _start(rt, workers, env, tmp_path, "spent", resend_policy={"initial": 0.5, "max_attempts": 3})
        out = rt.result(case["id"], timeout=60)
        assert out["status"] == "AMBIGUOUS", out
        posts = _posts(env, out["effect_id"])
        assert len(posts) == 3, posts
        [amb] = [e for e in _entries(rt, out["effect_id"]) if e["kind"] == "AMBIGUOUS"]
        assert amb["reason"].startswith("resend policy spent: 3 sends"), amb
        assert "HTTP 500" in amb["reason"] and "no lookup" in amb["reason"], amb
        v = receipts.verify(rt.receipt(out["effect_id"]))
        assert v["sends"] == 3 and v["happened"] == "unknown", v


def test_describe_shows_the_effects_last_error_and_next_attempt(rt, workers, tmp_path):
    from tests.support.waits import wait_for

    with refund_env(tmp_path, tier=1, queryable=False, send_timeout=1.5, settle_margin=1.0) as env:
        env.admin("hold_first", {"seconds": 20})
        case = _start(rt, workers, env, tmp_path, "described")

        def waiting_on_in_progress():
            d = rt.describe(case["id"])
            err = d["last_error"] or {}
            return d if err.get("type") == "SendInProgress" else None

        d = wait_for(waiting_on_in_progress, timeout=30, message="a resend answered in progress")
        assert "in progress" in d["last_error"]["message"] and d["last_error"]["attempt"] >= 2, d["last_error"]
        assert d["waiting"]["kind"] == "effect" and d["waiting"]["until"], d["waiting"]
        [eff] = d["effects"]
        assert eff["last_error"]["in_progress"] is True and eff["next_attempt_at"] is not None, eff
        rt.result(case["id"], timeout=60)
