"""What rt.cancel says about sends it cannot stop: a send authorized before the cancel (its
T_dispatch committed) may still land, and the cancel names its effect (real worker paused by
SIGSTOP at effect_after_dispatch, real HTTP target)."""

from __future__ import annotations

import signal

from ilr import CancelRequest
from ilr import _codec as codec
from tests.support.refund_harness import refund_env
from tests.support.waits import wait_for


def test_cancel_names_an_authorized_send_that_still_lands(rt, workers, tmp_path):
    amount_file = tmp_path / "amount"
    amount_file.write_text("500")
    with refund_env(tmp_path, tier=1) as env:
        grant = rt.grant("agent", "refund", max_cents=1000, by="ops")
        case = env.case("cancel-late", amount_file=str(amount_file), grant_id=grant)
        a = workers.start("A", lease_ttl=30, env=env.worker_env(ILR_STOP_AT="effect_after_dispatch"))
        rt.start("live_amount", case["id"], case)
        workers.wait_state("A", "T", timeout=30)  # paused between T_dispatch and the send
        answer = rt.cancel(case["id"], by="ops")
        effect_id = codec.effect_id_for({"request_id": f"live:{case['id']}"})
        assert isinstance(answer, CancelRequest) and answer  # truthy: this call requested it
        assert answer.requested and answer.may_still_land == (effect_id,)
        a.send_signal(signal.SIGCONT)
        # The send authorized before the cancel lands, as the answer said it might.
        wait_for(lambda: env.ledger(case["payment"]), timeout=30, message="the refund on the ledger")
        out = rt.result(case["id"], timeout=30)
        assert out["status"] == "COMMITTED"
        # A second cancel requests nothing; the effect has resolved, so nothing may still land.
        again = rt.cancel(case["id"], by="ops")
        assert not again and again.may_still_land == ()


def test_cancel_with_no_open_send_lists_nothing(rt, workers):
    workers.start("A")
    rt.start("waiter", "cancel-idle", {})
    wait_for(lambda: rt.describe("cancel-idle")["status"] == "sleeping", message="waiter asleep")
    answer = rt.cancel("cancel-idle", by="ops")
    assert answer.requested and answer.may_still_land == ()
    assert rt.describe("cancel-idle")["cancel_requested_by"] == "ops"
