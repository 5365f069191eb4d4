"""The local payment target (demo.peers.target) and its EffectTarget client (demo.peers.targets_client).

Real subprocesses started through ``manage.py demo_peer target`` and real HTTP; no database. One
server per tier variant for the module, wiped with /admin/reset before each test.
"""

from __future__ import annotations

import http.client
import time

import pytest

from demo.peers.target import target_process
from demo.peers.targets_client import LocalRefunds, LookupUnavailable, TargetHTTPError, http_json
from ilr._errors import TargetRejected
from tests.support.waits import wait_for

PAID = 10_000  # cents


@pytest.fixture(scope="module")
def servers(tmp_path_factory):
    """Base URLs of four targets: tier 1 queryable, tier 1 without lookup, tier 2, tier 3."""
    d = tmp_path_factory.mktemp("target")
    variants = {"t1q": (1, True), "t1": (1, False), "t2": (2, False), "t3": (3, False)}
    managers, urls = [], {}
    try:
        for name, (tier, queryable) in variants.items():
            cm = target_process(tier=tier, queryable=queryable, ledger=d / f"{name}.db")
            urls[name] = cm.__enter__()
            managers.append(cm)
        yield urls
    finally:
        for cm in reversed(managers):
            cm.__exit__(None, None, None)


def _fresh(url: str) -> str:
    assert http_json("POST", f"{url}/admin/reset")[0] == 200
    assert http_json("POST", f"{url}/admin/payments", {"id": "pay_1", "paid": PAID})[0] == 201
    return url


@pytest.fixture
def t1q(servers):
    return _fresh(servers["t1q"])


@pytest.fixture
def t1(servers):
    return _fresh(servers["t1"])


@pytest.fixture
def t2(servers):
    return _fresh(servers["t2"])


@pytest.fixture
def t3(servers):
    return _fresh(servers["t3"])


def post_refund(url, amount=2000, key="k1", payment="pay_1", effect_id=None, timeout=10.0):
    headers = {"Idempotency-Key": key} if key else {}
    body = {"payment": payment, "amount": amount, "effect_id": effect_id or key}
    return http_json("POST", f"{url}/refunds", body, headers=headers, timeout=timeout)


def rows(url) -> list[dict]:
    return http_json("GET", f"{url}/ledger")[1]["rows"]


def log(url) -> list[dict]:
    return http_json("GET", f"{url}/access_log")[1]["entries"]


# -- tiers ------------------------------------------------------------------------------------


def test_tier1_same_key_dedupes_and_new_key_applies(t1q):
    status, first = post_refund(t1q, key="k1")
    assert status == 200 and first["already_processed"] is False and first["amount"] == 2000
    status, again = post_refund(t1q, key="k1")
    assert status == 200 and again["already_processed"] is True and again["id"] == first["id"]
    status, other = post_refund(t1q, key="k2")
    assert status == 200 and other["already_processed"] is False and other["id"] != first["id"]
    assert [(r["key"], r["source"]) for r in rows(t1q)] == [("k1", "api"), ("k2", "api")]


def test_tier1_replay_is_answered_even_when_a_new_refund_would_not_fit(t1q):
    assert post_refund(t1q, amount=PAID, key="all")[0] == 200
    status, again = post_refund(t1q, amount=PAID, key="all")
    assert status == 200 and again["already_processed"] is True
    assert len(rows(t1q)) == 1


def test_tier1_same_key_with_other_parameters_is_refused(t1q):
    post_refund(t1q, amount=2000, key="k1")
    status, body = post_refund(t1q, amount=3000, key="k1")
    assert status == 409 and "different parameters" in body["error"]
    assert len(rows(t1q)) == 1


def test_tier1_lookup_only_when_queryable(t1q, t1):
    post_refund(t1q, key="k1")
    post_refund(t1, key="k1")
    status, found = http_json("GET", f"{t1q}/refunds?key=k1")
    assert status == 200 and found["key"] == "k1" and found["matches"] == 1
    assert http_json("GET", f"{t1q}/refunds?key=nope") == (404, {"error": "not found"})
    assert http_json("GET", f"{t1}/refunds?key=k1") == (404, {"error": "no lookup"})


def test_tier2_applies_every_post_and_answers_lookups(t2):
    assert post_refund(t2, key="k1")[1]["already_processed"] is False
    assert post_refund(t2, key="k1")[1]["already_processed"] is False
    assert len(rows(t2)) == 2
    status, found = http_json("GET", f"{t2}/refunds?key=k1")
    assert status == 200 and found["matches"] == 2 and found["amount"] == 2000
    assert http_json("GET", f"{t2}/refunds?key=other") == (404, {"error": "not found"})


def test_tier3_applies_every_post_and_has_no_lookup(t3):
    post_refund(t3, key="k1")
    post_refund(t3, key="k1")
    assert len(rows(t3)) == 2
    assert http_json("GET", f"{t3}/refunds?key=k1") == (404, {"error": "no lookup"})


# -- faults -----------------------------------------------------------------------------------


def test_delay_applies_after_the_client_gave_up(t1q):
    http_json("POST", f"{t1q}/admin/delay", {"seconds": 1.0})
    started = time.monotonic()
    with pytest.raises(TimeoutError):
        post_refund(t1q, key="late", timeout=0.3)
    assert rows(t1q) == []  # still sleeping in the server
    while not rows(t1q):
        assert time.monotonic() - started < 5, "the delayed request was never applied"
        time.sleep(0.05)
    assert time.monotonic() - started >= 0.9
    http_json("POST", f"{t1q}/admin/delay", {"seconds": 0})
    entry = next(e for e in log(t1q) if e["path"] == "/refunds")
    assert entry["applied"] is True and entry["delay"] == 1.0 and entry["key"] == "late"
    assert entry["t_done_mono"] - entry["t_mono"] >= 1.0


def test_prune_keys_makes_an_old_key_apply_again(t1q):
    post_refund(t1q, key="k1")
    assert http_json("POST", f"{t1q}/admin/prune_keys") == (200, {"pruned": 1})
    status, again = post_refund(t1q, key="k1")
    assert status == 200 and again["already_processed"] is False
    assert len(rows(t1q)) == 2
    # The lookup reads the ledger, so it still finds the refund after the key is forgotten.
    assert http_json("GET", f"{t1q}/refunds?key=k1")[1]["matches"] == 2


def test_hand_refund_is_a_keyless_row_counted_as_another_s(t1q):
    status, hand = http_json("POST", f"{t1q}/admin/hand_refund", {"payment": "pay_1", "amount": 2000})
    assert status == 200 and hand["source"] == "hand" and hand["key"] is None
    post_refund(t1q, amount=1000, key="eff_a")
    status, facts = http_json("GET", f"{t1q}/payments/pay_1?effect_id=eff_a")
    assert status == 200
    assert facts == {
        "payment": "pay_1",
        "paid": PAID,
        "refunded_total": 3000,
        "refunded_by_others": 2000,
        "eligible": True,
        "eligible_excluding_effect": True,
    }
    status, plain = http_json("GET", f"{t1q}/payments/pay_1")
    assert plain["refunded_by_others"] is None and "eligible_excluding_effect" not in plain
    assert http_json("POST", f"{t1q}/admin/hand_refund", {"payment": "pay_1", "amount": PAID})[0] == 402


def test_fail_next_without_apply_applies_nothing(t1q):
    http_json("POST", f"{t1q}/admin/fail_next", {"status": 500, "apply": False})
    assert post_refund(t1q, key="k1")[0] == 500
    assert rows(t1q) == []
    assert post_refund(t1q, key="k1")[0] == 200  # one-shot
    assert len(rows(t1q)) == 1


def test_fail_next_with_apply_loses_a_success(t1q):
    http_json("POST", f"{t1q}/admin/fail_next", {"status": 502, "apply": True})
    assert post_refund(t1q, key="k1")[0] == 502
    assert len(rows(t1q)) == 1
    status, retry = post_refund(t1q, key="k1")
    assert status == 200 and retry["already_processed"] is True
    http_json("POST", f"{t1q}/admin/fail_next", {"status": 400, "apply": False})
    assert post_refund(t1q, key="k2")[0] == 400
    assert len(rows(t1q)) == 1
    assert http_json("POST", f"{t1q}/admin/fail_next", {"status": 418})[0] == 400


def test_blackhole_holds_without_answer_and_applies_nothing(t1q):
    http_json("POST", f"{t1q}/admin/blackhole", {"on": True})
    with pytest.raises(TimeoutError):
        post_refund(t1q, key="held", timeout=0.5)
    assert rows(t1q) == []
    http_json("POST", f"{t1q}/admin/blackhole", {"on": False})
    assert post_refund(t1q, key="after")[0] == 200
    assert [r["key"] for r in rows(t1q)] == ["after"]
    held = next(e for e in log(t1q) if e["key"] == "held")
    assert held["blackholed"] is True and held["applied"] is False and held["status"] is None


@pytest.mark.parametrize(
    ("body", "status"),
    [
        ({"payment": "pay_1", "amount": "2000"}, 400),
        ({"payment": "pay_1", "amount": 0}, 400),
        ({"payment": "pay_1", "amount": -5}, 400),
        ({"payment": "pay_1", "amount": 20.5}, 400),
        ({"payment": "pay_1", "amount": True}, 400),
        ({"payment": "pay_1"}, 400),
        ({"payment": "nope", "amount": 100}, 400),
        ({"payment": "pay_1", "amount": PAID + 1}, 402),
    ],
)
def test_bad_input_is_refused_with_nothing_applied(t2, body, status):
    got, answer = http_json("POST", f"{t2}/refunds", body, headers={"Idempotency-Key": "bad"})
    assert got == status and "error" in answer
    assert rows(t2) == []
    # The server appends a request to its log after the answer is written: wait for it.
    entry = wait_for(
        lambda: next((e for e in reversed(log(t2)) if e["path"] == "/refunds" and e["body"] == body), None),
        timeout=5,
        message="the refused request in the access log",
    )
    assert entry["applied"] is False and entry["status"] == status and entry["body"] == body


def test_amount_over_what_is_left_is_refused(t2):
    assert post_refund(t2, amount=9000, key="a")[0] == 200
    assert post_refund(t2, amount=1001, key="b")[0] == 402
    assert post_refund(t2, amount=1000, key="c")[0] == 200
    assert sum(r["amount"] for r in rows(t2)) == PAID


def test_malformed_json_is_refused(t2):
    conn = http.client.HTTPConnection(t2.removeprefix("http://").split(":")[0], int(t2.rsplit(":", 1)[1]), timeout=5)
    try:
        conn.request("POST", "/refunds", body=b"{not json", headers={"Content-Type": "application/json"})
        assert conn.getresponse().status == 400
    finally:
        conn.close()
    assert rows(t2) == []


def test_access_log_records_every_request(t1q):
    post_refund(t1q, key="k1", effect_id="eff_1")
    http_json("GET", f"{t1q}/payments/pay_1")
    entries = log(t1q)
    post = next(e for e in entries if e["path"] == "/refunds")
    assert post["method"] == "POST" and post["key"] == "k1" and post["status"] == 200
    assert post["body"] == {"payment": "pay_1", "amount": 2000, "effect_id": "eff_1"}
    assert post["applied"] is True and post["refund_id"] == rows(t1q)[0]["id"]
    assert post["delay"] == 0.0 and post["response_written"] is True
    assert post["t_wall"] > 1e9 and post["t_mono"] <= post["t_done_mono"] <= time.monotonic()
    assert any(e["path"] == "/payments/pay_1" and e["status"] == 200 for e in entries)
    # /admin/reset empties the log and is its own first entry; then the fixture's payment.
    assert [e["path"] for e in entries[:2]] == ["/admin/reset", "/admin/payments"]


def test_dedup_state_survives_a_restart(tmp_path):
    ledger = tmp_path / "ledger.db"
    with target_process(tier=1, ledger=ledger) as url:
        http_json("POST", f"{url}/admin/payments", {"id": "pay_1", "paid": PAID})
        assert post_refund(url, key="k1")[1]["already_processed"] is False
    with target_process(tier=1, ledger=ledger) as url:
        assert post_refund(url, key="k1")[1]["already_processed"] is True
        assert len(rows(url)) == 1


def test_tier3_cannot_be_queryable(tmp_path):
    with pytest.raises(RuntimeError, match="exited"):
        with target_process(tier=3, queryable=True, ledger=tmp_path / "l.db"):
            pass


# -- LocalRefunds -----------------------------------------------------------------------------


def test_local_refunds_reads_the_server_settings(servers):
    t = LocalRefunds.from_server(servers["t1q"], send_timeout=3.0)
    assert (t.name, t.tier, t.queryable, t.dedup_window, t.send_timeout) == (
        "local-refunds",
        1,
        True,
        float("inf"),
        3.0,
    )
    assert LocalRefunds(servers["t2"], tier=2).queryable is True
    assert LocalRefunds(servers["t1"], tier=1).queryable is False
    assert LocalRefunds.from_server(servers["t3"]).queryable is False
    defaults = LocalRefunds(servers["t1"])
    assert (defaults.send_timeout, defaults.settle_margin, defaults.premise_max_age) == (35, 10, 5)


def test_local_refunds_apply_and_query(t1q):
    t = LocalRefunds.from_server(t1q)
    first = t.apply("eff_1", {"payment": "pay_1", "amount": 2000})
    assert first["effect_id"] == "eff_1" and first["key"] == "eff_1" and first["already_processed"] is False
    assert t.apply("eff_1", {"payment": "pay_1", "amount": 2000})["already_processed"] is True
    assert t.query("eff_1", {"payment": "pay_1", "amount": 2000})["id"] == first["id"]
    assert t.query("eff_2", {"payment": "pay_1", "amount": 2000}) is None
    with pytest.raises(TargetRejected, match="402"):
        t.apply("eff_3", {"payment": "pay_1", "amount": PAID})
    with pytest.raises(TargetRejected, match="400"):
        t.apply("eff_4", {"payment": "nope", "amount": 100})
    with pytest.raises(TargetHTTPError) as conflict:
        t.apply("eff_1", {"payment": "pay_1", "amount": 999})
    assert conflict.value.status == 409 and not isinstance(conflict.value, TargetRejected)


def test_local_refunds_unknown_outcomes_are_not_rejections(t1q, t3):
    t = LocalRefunds.from_server(t1q, send_timeout=0.3)
    http_json("POST", f"{t1q}/admin/fail_next", {"status": 500, "apply": True})
    with pytest.raises(TargetHTTPError) as failed:
        t.apply("eff_5", {"payment": "pay_1", "amount": 100})
    assert failed.value.status == 500
    http_json("POST", f"{t1q}/admin/delay", {"seconds": 0.6})
    with pytest.raises(TimeoutError):
        t.apply("eff_6", {"payment": "pay_1", "amount": 100})
    http_json("POST", f"{t1q}/admin/delay", {"seconds": 0})
    with pytest.raises(LookupUnavailable):
        LocalRefunds.from_server(t3).query("eff_5", {})


def test_local_refunds_capture_and_validate_premises(t2):
    t = LocalRefunds.from_server(t2)
    premises = t.capture("pay_1")
    assert premises == {"payment": "pay_1", "eligible": True, "refunded_by_others": 0}
    t.apply("eff_1", {"payment": "pay_1", "amount": 2000})
    # The effect's own refund is not another's: a resend after a crash is not refused for it.
    assert t.validate_premises(premises, "eff_1") == []
    http_json("POST", f"{t2}/admin/hand_refund", {"payment": "pay_1", "amount": 1000})
    assert t.validate_premises(premises, "eff_1") == [
        "refunded_by_others of payment pay_1 was 0 cents when decided and is 1000 cents now"
    ]
    # For an effect that never landed, every refund is another's, and eff_1's plus the hand
    # refunds now use up the payment.
    http_json("POST", f"{t2}/admin/hand_refund", {"payment": "pay_1", "amount": 7000})
    assert t.validate_premises(premises, "eff_2") == [
        "eligible of payment pay_1 was true when decided and is false now",
        "refunded_by_others of payment pay_1 was 0 cents when decided and is 10000 cents now",
    ]
    assert t.validate_premises({"payment": "gone", "eligible": True}, "eff_1") == [
        "payment gone no longer exists at local-refunds"
    ]


@pytest.mark.parametrize("server", ["target", "model_stub"])
def test_a_burst_of_connections_is_queued_not_dropped(tmp_path, server):
    """Thirty-two clients connecting while the server is not accepting (its accept loop not
    started) all complete their handshake: the listen backlog holds them. With socketserver's
    default backlog of 5 the kernel dropped every SYN past the sixth, and those clients
    retried after 1 s, 3 s, 7 s: a refund's send could time out before it was accepted."""
    import socket

    from demo.peers.model_stub import StubServer
    from demo.peers.target_server import TargetServer

    if server == "target":
        srv = TargetServer(
            ("127.0.0.1", 0), tier=1, queryable=False, ledger=tmp_path / "l.sqlite", access_log=tmp_path / "a.jsonl"
        )
    else:
        srv = StubServer(("127.0.0.1", 0))
    clients = []
    try:
        for _ in range(32):
            clients.append(socket.create_connection(srv.server_address, timeout=0.5))
    finally:
        for c in clients:
            c.close()
        srv.server_close()
    assert len(clients) == 32
