"""The verdicts of ``manage.py bench --keys`` (prove/bench/keys.py ``summarize``) from made-up rounds:
medians of the rounds, the 0.8 ratio judged only at issue 42's 5,000 workflows over 50 keys, the
50 ms p50 and the limit of 1 holder."""

from __future__ import annotations

from prove.bench.keys import summarize


def _round(keyed: float, unkeyed: float, p50: float, holders: int = 1) -> dict:
    keys = {"latency": {"p50_ms": p50}, "max_holders": holders, "max_running": holders, "invariants": {"A": "held"}}
    return {
        "keyed": {"workflows_per_s": keyed, "failed": 0, "keys": keys},
        "unkeyed": {"workflows_per_s": unkeyed, "failed": 0},
        "ratio": round(keyed / unkeyed, 3),
    }


def test_the_targets_are_read_from_the_medians_of_the_rounds():
    rounds = [_round(400, 500, 30), _round(300, 600, 70), _round(410, 510, 45)]
    s = summarize(rounds)
    assert (s["keyed_wf_s_median"], s["unkeyed_wf_s_median"], s["ratio"]) == (400, 510, 0.784)
    assert s["latency_p50_ms_median"] == 45 and s["max_holders_by_round"] == [1, 1, 1]
    t = s["targets"]
    assert [t[k]["met"] for k in ("throughput_ratio", "waiter_start_p50_ms", "max_holders")] == [False, True, True]
    assert s["slot_invariants_held"] and s["failed"] == 0


def test_a_second_holder_fails_and_another_shape_is_not_judged():
    s = summarize([_round(450, 500, 60, holders=2)], applies=False)
    t = s["targets"]
    assert t["throughput_ratio"] == {"measured": 0.9, "target": ">= 0.8 at 5000 workflows over 50 keys", "met": None}
    assert t["waiter_start_p50_ms"]["met"] is False and t["max_holders"]["met"] is False
