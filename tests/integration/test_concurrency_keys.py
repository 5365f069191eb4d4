"""Concurrency keys at the start (issue 42), on the real database without workers: who holds,
who queues and in what order, the four conflict policies, limits above one, idempotent starts,
and bad input refused naming its field with nothing written. Workers racing keys are in
tests/faults/test_concurrency_keys.py."""

from __future__ import annotations

import pytest

from ilr import Concurrency, ConcurrencyLimitReached, InvalidInput, WorkflowNotFound, workflow
from tests.support.flows_flow_control import TEST_QUEUES
from tests.support.queries.deployments import SEED_DEPLOYMENTS_ELSEWHERE, SEED_DEPLOYMENTS_ROLLING


def holders(rt, key: str) -> list[str]:
    return [h["workflow_id"] for h in rt.concurrency(key)["holders"]]


def queue(rt, key: str) -> list[str]:
    return [w["workflow_id"] for w in rt.concurrency(key)["waiting"]]


def test_the_first_start_holds_and_the_next_queue_in_priority_then_start_order(rt):
    rt.start("keyed", "a", {"account": "acct:1"})
    rt.start("keyed", "b", {"account": "acct:1"})
    rt.start("keyed", "c", {"account": "acct:1"}, priority=5)
    rt.start("keyed", "d", {"account": "acct:1"})
    assert holders(rt, "acct:1") == ["a"]
    assert queue(rt, "acct:1") == ["c", "b", "d"]
    a, b = rt.describe("a"), rt.describe("b")
    assert a["waiting"] is None and a["concurrency"][0]["state"] == "holding"
    assert b["status"] == "pending" and b["waiting"] == {"kind": "slot", "key": "acct:1"}
    assert b["concurrency"] == [
        {"key": "acct:1", "limit": 1, "state": "queued", "slot_no": None, "position": 2, "holders": ["a"]}
    ]
    assert a["concurrency_key"] == "acct:1" and a["concurrency_limit"] == 1 and rt.describe("c")["priority"] == 5


def test_a_start_again_with_the_same_id_changes_nothing(rt):
    rt.start("keyed", "a", {"account": "acct:1"})
    rt.start("keyed", "b", {"account": "acct:1"}, on_conflict="cancel_running")
    assert rt.start("keyed", "b", {"account": "acct:1"}, on_conflict="cancel_running") == "b"
    assert queue(rt, "acct:1") == ["b"]
    assert rt.describe("a")["cancel_requested_by"] == "$concurrency:b"  # once, by the first start


def test_a_limit_above_one_admits_that_many(rt):
    for wf in ("a", "b", "c"):
        rt.start("keyed", wf, {"account": "acct:2"}, concurrency_limit=2)
    assert holders(rt, "acct:2") == ["a", "b"]
    assert queue(rt, "acct:2") == ["c"]
    assert [h["slot_no"] for h in rt.concurrency("acct:2")["holders"]] == [0, 1]


def test_an_explicit_key_overrides_the_rule_and_works_without_one(rt):
    rt.start("three_steps", "x1", {}, concurrency_key="batch")
    rt.start("three_steps", "x2", {}, concurrency_key="batch")
    rt.start("three_steps", "free", {})
    assert holders(rt, "batch") == ["x1"] and queue(rt, "batch") == ["x2"]
    assert rt.describe("free")["concurrency"] == [] and rt.describe("free")["concurrency_key"] is None
    rt.start("keyed", "k1", {"account": "acct:3"}, concurrency_key="other")
    assert holders(rt, "other") == ["k1"] and rt.concurrency("acct:3")["holders"] == []


def test_reject_raises_naming_the_holder_and_writes_nothing(rt):
    rt.start("keyed", "a", {"account": "acct:4"})
    with pytest.raises(ConcurrencyLimitReached) as err:
        rt.start("keyed", "b", {"account": "acct:4"}, on_conflict="reject")
    assert err.value.key == "acct:4" and err.value.holders == ["a"] and err.value.limit == 1
    assert "'acct:4' is held by a" in str(err.value) and "Nothing was started" in str(err.value)
    with pytest.raises(WorkflowNotFound):
        rt.describe("b")
    assert queue(rt, "acct:4") == []
    rt.start("keyed", "other", {"account": "acct:5"}, on_conflict="reject")  # a free key: it holds
    assert holders(rt, "acct:5") == ["other"]


def test_replace_queued_ends_the_waiting_starts_and_takes_their_place(rt):
    rt.start("keyed", "a", {"account": "acct:6"})
    rt.start("keyed", "b", {"account": "acct:6"})
    rt.start("keyed", "c", {"account": "acct:6"})
    rt.start("keyed", "d", {"account": "acct:6"}, on_conflict="replace_queued")
    assert holders(rt, "acct:6") == ["a"] and queue(rt, "acct:6") == ["d"]
    for wf in ("b", "c"):
        ended = rt.describe(wf)
        assert ended["status"] == "cancelled" and ended["cancel_requested_by"] == "$concurrency:d"
        assert ended["error"]["message"] == "cancelled while queued for its concurrency key: replaced by d"
    assert rt.describe("a")["cancel_requested_at"] is None  # the holder runs on


def test_cancel_running_requests_the_holders_cancel_and_queues(rt):
    rt.start("keyed", "a", {"account": "acct:7"})
    rt.start("keyed", "b", {"account": "acct:7"}, on_conflict="cancel_running")
    assert rt.describe("a")["cancel_requested_by"] == "$concurrency:b"
    assert holders(rt, "acct:7") == ["a"] and queue(rt, "acct:7") == ["b"]  # a holds until it ends


def test_cancel_running_decides_full_by_the_keys_live_limit_not_its_own(rt):
    """A start asking limit 2 of a key whose live rows say 1 joins under 1 (the insert trigger):
    it queues, so the holder must be cancelled, though the start's own limit is not reached."""
    rt.start("keyed", "a", {"account": "acct:27"})
    rt.start("keyed", "b", {"account": "acct:27"}, concurrency_limit=2, on_conflict="cancel_running")
    assert holders(rt, "acct:27") == ["a"] and queue(rt, "acct:27") == ["b"]
    assert rt.describe("a")["cancel_requested_by"] == "$concurrency:b"
    rt.start("keyed", "c", {"account": "acct:28"}, concurrency_limit=2)
    rt.start("keyed", "d", {"account": "acct:28"}, concurrency_limit=1, on_conflict="cancel_running")
    assert holders(rt, "acct:28") == ["c", "d"]  # the live limit 2 holds: room, nobody cancelled
    assert rt.describe("c")["cancel_requested_at"] is None


def test_cancel_running_of_a_holder_queued_for_its_queue_does_not_hand_the_key_to_an_older_start(rt, settings):
    """The holder of the key is queued for its queue's slot (it never ran), so its cancel ends it
    at once, and that release admitted the key's older waiter inside the deciding transaction.
    The decision then found that waiter holding, uncancelled: it retried, and the retry undid
    the admission, forever (OperationalError "its holders kept changing")."""
    settings.ILR_QUEUES = TEST_QUEUES
    rt.start("in_two_at_a_time", "x1", {})
    rt.start("in_two_at_a_time", "x2", {})  # the queue's two slots are taken
    rt.start("in_two_at_a_time", "a", {"account": "acct:29"})  # holds the key, queued for the queue
    rt.start("in_two_at_a_time", "b", {"account": "acct:29"})  # waits for the key
    assert holders(rt, "acct:29") == ["a"] and queue(rt, "acct:29") == ["b"]
    rt.start("in_two_at_a_time", "c", {"account": "acct:29"}, on_conflict="cancel_running")
    assert rt.describe("a")["status"] == "cancelled"  # it never ran: ended at once
    assert rt.describe("b")["cancel_requested_by"] == "$concurrency:c"
    assert rt.describe("c")["status"] == "pending"


def test_cancel_running_also_ends_the_starts_waiting_so_the_newest_takes_the_released_slot(rt):
    """A start that cancels the holder must get the slot the holder releases: an older start still
    waiting took it (the holder was cancelled for nothing the new start gained)."""
    rt.start("keyed", "a", {"account": "acct:17"})
    rt.start("keyed", "b", {"account": "acct:17"})
    rt.start("keyed", "c", {"account": "acct:17"}, on_conflict="cancel_running")
    assert rt.describe("a")["cancel_requested_by"] == "$concurrency:c"
    assert holders(rt, "acct:17") == ["a"] and queue(rt, "acct:17") == ["c"]
    ended = rt.describe("b")
    assert ended["status"] == "cancelled" and ended["cancel_requested_by"] == "$concurrency:c"
    assert ended["error"]["message"] == "cancelled while queued for its concurrency key: replaced by c"


def test_a_workflow_rule_sets_the_limit_and_the_policy(rt):
    @workflow(name="one_report", version="1", concurrency=Concurrency(key="reports", limit=1, on_conflict="reject"))
    def one_report(ctx, input):
        return None

    rt.start("one_report", "r1", {})
    with pytest.raises(ConcurrencyLimitReached):
        rt.start("one_report", "r2", {})
    rt.start("one_report", "r3", {}, on_conflict="queue")  # the start's argument wins
    assert queue(rt, "reports") == ["r3"]


def test_cancelling_a_queued_start_ends_it_and_leaves_the_queue(rt):
    rt.start("keyed", "a", {"account": "acct:8"})
    rt.start("keyed", "b", {"account": "acct:8"})
    request = rt.cancel("b", by="ops")
    assert request and request.may_still_land == ()
    assert rt.describe("b")["status"] == "cancelled" and queue(rt, "acct:8") == []
    assert not rt.cancel("b", by="ops")  # ended already


@pytest.mark.parametrize(
    ("kwargs", "field", "rule"),
    [
        ({"concurrency_key": ""}, "concurrency_key", "1 to 200 characters"),
        ({"concurrency_key": 42}, "concurrency_key", "must be a str, got int"),
        ({"concurrency_key": "k" * 201}, "concurrency_key", "1 to 200 characters"),
        ({"concurrency_key": "k", "concurrency_limit": 0}, "concurrency_limit", "from 1 to 1000"),
        ({"concurrency_key": "k", "concurrency_limit": True}, "concurrency_limit", "from 1 to 1000"),
        ({"concurrency_key": "k", "concurrency_limit": 1001}, "concurrency_limit", "from 1 to 1000"),
        ({"concurrency_key": "k", "on_conflict": "wait"}, "on_conflict", "must be one of queue, reject"),
        ({"concurrency_limit": 2}, "concurrency_limit", "has none"),
        ({"on_conflict": "reject"}, "on_conflict", "has none"),
        ({"priority": 101}, "priority", "from -100 to 100"),
        ({"priority": "high"}, "priority", "from -100 to 100"),
    ],
)
def test_bad_concurrency_input_is_refused_naming_the_field(rt, kwargs, field, rule):
    with pytest.raises(InvalidInput) as err:
        rt.start("three_steps", "bad", {}, **kwargs)
    assert err.value.field == field and rule in err.value.rule, err.value
    with pytest.raises(WorkflowNotFound):
        rt.describe("bad")


def test_a_key_function_that_returns_a_non_key_or_raises_is_refused(rt):
    with pytest.raises(InvalidInput) as err:
        rt.start("keyed", "bad", {"account": 7})
    assert err.value.field == "concurrency_key" and "must be a str, got int" in err.value.rule
    # The start passed no key: the message says it was the rule's function that returned it.
    assert err.value.rule.startswith("the workflow's key function returned 7: ")
    with pytest.raises(InvalidInput) as err:
        rt.start("keyed", "bad", {"account": ""})
    assert err.value.field == "concurrency_key" and "key function returned ''" in err.value.rule

    @workflow(name="broken_key", version="1", concurrency=Concurrency(key=lambda input: input["missing"]))
    def broken_key(ctx, input):
        return None

    with pytest.raises(InvalidInput) as err:
        rt.start("broken_key", "bad", {})
    assert err.value.field == "concurrency_key" and "raised KeyError" in err.value.rule
    with pytest.raises(WorkflowNotFound):
        rt.describe("bad")


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"limit": 0}, "limit"), ({"on_conflict": "later"}, "on_conflict"), ({"key": ""}, "concurrency_key")],
)
def test_a_bad_rule_is_refused_when_it_is_declared(kwargs, field):
    with pytest.raises(InvalidInput) as err:
        Concurrency(**{"key": "k", **kwargs})
    assert err.value.field == field


def test_a_rule_that_is_not_a_concurrency_is_refused():
    with pytest.raises(InvalidInput) as err:
        workflow(name="not_a_rule", concurrency={"key": "k"})(lambda ctx, input: None)
    assert err.value.field == "concurrency"


def test_a_second_start_inside_the_dedup_window_returns_the_first_and_says_so(rt):
    first = rt.start("three_steps", "order-1", {}, dedup_key="order:1", dedup_window=60)
    assert first == "order-1" and first.deduplicated is False
    again = rt.start("three_steps", "order-1-retry", {}, dedup_key="order:1", dedup_window=60)
    assert again == "order-1" and again.deduplicated is True
    with pytest.raises(WorkflowNotFound):
        rt.describe("order-1-retry")
    same = rt.start("three_steps", "order-1", {}, dedup_key="order:1", dedup_window=60)
    assert same == "order-1" and same.deduplicated is False  # the same id: idempotent, not a duplicate
    other = rt.start("three_steps", "order-2", {}, dedup_key="order:2", dedup_window=60)
    assert other == "order-2" and not other.deduplicated
    assert rt.describe("order-1")["dedup_key"] == "order:1"


def test_after_the_dedup_window_a_start_starts_a_new_workflow(rt):
    from tests.support.waits import wait_for

    assert not rt.start("three_steps", "tick-0", {}, dedup_key="tick", dedup_window=0.3).deduplicated
    n = iter(range(1, 1000))
    # Each try inside the window returns tick-0; the first one past it starts its own workflow.
    started = wait_for(
        lambda: (lambda s: s if not s.deduplicated else None)(
            rt.start("three_steps", f"tick-{next(n)}", {}, dedup_key="tick", dedup_window=0.3)
        ),
        message="a start past the window",
    )
    assert started != "tick-0" and rt.describe(started)["status"] == "pending"


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"dedup_key": "k"}, "dedup_window"),
        ({"dedup_window": 5}, "dedup_key"),
        ({"dedup_key": "", "dedup_window": 5}, "dedup_key"),
        ({"dedup_key": 7, "dedup_window": 5}, "dedup_key"),
        ({"dedup_key": "k", "dedup_window": 0}, "dedup_window"),
        ({"dedup_key": "k", "dedup_window": 31 * 86400}, "dedup_window"),
        ({"dedup_key": "k", "dedup_window": True}, "dedup_window"),
    ],
)
def test_bad_dedup_input_is_refused_naming_the_field(rt, kwargs, field):
    with pytest.raises(InvalidInput) as err:
        rt.start("three_steps", "bad", {}, **kwargs)
    assert err.value.field == field, err.value
    with pytest.raises(WorkflowNotFound):
        rt.describe("bad")


def test_describe_shows_a_workflow_waiting_on_its_queue_behind_its_key(rt, settings):
    """A workflow with a concurrency key and a queue: describe() lists both rows (it failed on
    the queue's key), and rt.concurrency reads a queue's key too."""
    settings.ILR_QUEUES = {"two_at_a_time": {"concurrency": 2}}
    for wf, account in (("qa", "a"), ("qb", "b"), ("qc", "c")):
        rt.start("in_two_at_a_time", wf, {"account": f"acct:{account}"})
    rows = {r["key"]: r for r in rt.describe("qc")["concurrency"]}
    assert rows["acct:c"]["state"] == "holding" and rows["queue:two_at_a_time"]["state"] == "queued"
    assert rows["queue:two_at_a_time"]["holders"] == ["qa", "qb"] and rows["queue:two_at_a_time"]["position"] == 1
    assert rt.describe("qc")["waiting"] == {"kind": "slot", "key": "queue:two_at_a_time"}
    assert queue(rt, "queue:two_at_a_time") == ["qc"]


def test_a_start_asking_another_limit_joins_under_the_keys_live_limit(rt):
    """Two holders under limit 2, then a start asking limit 1 (a rule changed between deploys):
    it queues under the key's limit, 2, instead of running beside them as a second 'limit 1'
    holder; once the key drains, the next start's own limit applies."""
    from ilr import _db as db
    from ilr._invariants import check_all, violations

    for wf, limit in (("m1", 2), ("m2", 2), ("m3", 1), ("m4", 3)):
        rt.start("three_steps", wf, {}, concurrency_key="mx", concurrency_limit=limit)
    assert holders(rt, "mx") == ["m1", "m2"] and queue(rt, "mx") == ["m3", "m4"]
    with db.connect(rt._dsn or db.conninfo()) as conn:
        assert violations(check_all(conn, names={"SlotMutex", "SlotFifo", "NoStrandedWaiter"})) == {}


def test_cancelling_a_start_the_rate_delays_ends_it_before_it_runs(rt, settings):
    """A start the queue's rate delays is cancelled: it ends at once, never claimed early to be
    told (ilr_check reported that claim as a rate violation)."""
    settings.ILR_QUEUES = {"three_per_second": {"rate": "3/s"}}
    for i in range(4):
        rt.start("in_three_per_second", f"rd-{i}", {})
    assert rt.describe("rd-3")["waiting"]["kind"] == "rate"
    assert rt.cancel("rd-3", by="ops")
    ended = rt.describe("rd-3")
    assert ended["status"] == "cancelled" and "cancelled while queued" in ended["error"]["message"]
    assert [r["key"] for r in rt.describe("rd-2")["concurrency"]] == ["queue:three_per_second"]
    assert rt.describe("rd-3")["concurrency"] == []


def test_a_malformed_queue_and_an_unconfigured_declared_queue_are_named(rt, settings):
    from ilr._checks import declared_queues_are_configured

    settings.ILR_QUEUES = {"three_per_second": {"rate": "3/0s"}}
    with pytest.raises(InvalidInput) as err:
        rt.start("in_three_per_second", "mal", {})
    assert err.value.field == "queue" and "'three_per_second' is in ILR_QUEUES but malformed" in err.value.rule
    assert "ILR_QUEUES['three_per_second']['rate']" in err.value.rule
    warned = {m.msg.split(" declares")[0] for m in declared_queues_are_configured() if m.id == "ilr.W004"}
    assert {"workflow in_two_at_a_time@1", "workflow in_three_per_second@1"} <= warned
    settings.ILR_QUEUES = {q: {"concurrency": 1} for q in TEST_QUEUES}
    assert declared_queues_are_configured() == []


def test_a_start_of_a_version_this_process_does_not_register_keeps_the_workflows_rule(rt, settings):
    """A rolling deploy: the web process runs the new code (version 2) while the newest deployed
    version is the workers' 1. The start runs version 1 and must still take the account's key
    and the queue (it took neither: two refunds of one account ran at once on the old workers)."""
    settings.ILR_QUEUES = TEST_QUEUES

    @workflow(
        name="rolling",
        version="2",
        queue="two_at_a_time",
        concurrency=Concurrency(key=lambda input: f"account:{input['account']}"),
    )
    def rolling(ctx, input):
        return None

    rt.connection().execute(SEED_DEPLOYMENTS_ROLLING)
    rt.start("rolling", "r1", {"account": 42})
    rt.start("rolling", "r2", {"account": 42})
    assert rt.describe("r1")["version"] == "1"
    assert holders(rt, "account:42") == ["r1"] and queue(rt, "account:42") == ["r2"]
    assert rt.describe("r1")["queue"] == "two_at_a_time"
    # A workflow no version of which is registered here (another codebase's) takes only the
    # start's explicit arguments, as before.
    rt.connection().execute(SEED_DEPLOYMENTS_ELSEWHERE)
    rt.start("elsewhere", "e1", {"account": 42})
    assert rt.describe("e1")["concurrency"] == [] and rt.describe("e1")["queue"] is None


def test_a_queue_whose_concurrency_was_lowered_shows_the_limit_still_in_force(rt, settings):
    """An operator lowers a busy queue's concurrency from 2 to 1: the queue's live workflows keep
    the limit 2 until they drain (one limit per key), and rt.queues() and the admin said only
    "concurrency 1" beside 2 holders, which reads as the limit broken."""
    from django.contrib.auth.models import User
    from django.test import Client

    from tests.support.review import admin_page

    rated = {"three_per_second": {"rate": "3/s"}}
    settings.ILR_QUEUES = {"two_at_a_time": {"concurrency": 2}, **rated}
    three, two = rt.queues()  # by name
    assert two["limit_in_force"] is None and two["limit_changed"] is False  # nothing live
    for wf in ("lo1", "lo2", "lo3"):
        rt.start("in_two_at_a_time", wf, {})
    rt.start("in_three_per_second", "rated", {})
    settings.ILR_QUEUES = {"two_at_a_time": {"concurrency": 1}, **rated}
    rt.start("in_two_at_a_time", "lo4", {})
    three, two = rt.queues()  # by name
    assert (two["concurrency"], two["holding"], two["waiting"]) == (1, 2, 2)
    assert two["limit_in_force"] == 2 and two["limit_changed"] is True
    # A rated queue without a concurrency holds its slots under 1000: not a change.
    assert three["limit_in_force"] == 1000 and three["limit_changed"] is False
    admin = Client()
    admin.force_login(User.objects.create_superuser("root", password="pw"))
    page = admin_page(admin, "admin:ilr_slot_changelist")
    assert "1 (2 in force until its live workflows drain)" in page and "1000 in force" not in page


def test_the_admin_shows_no_wait_for_a_workflow_cancelled_while_queued(rt, settings):
    """A start cancelled while queued keeps the 'infinity' it waited with, and the admin's
    "available at" said "never by itself (waits for a signal)" of a workflow that had ended."""
    from django.contrib.auth.models import User
    from django.test import Client
    from django.urls import reverse

    rt.start("keyed", "a", {"account": "acct:31"})
    rt.start("keyed", "b", {"account": "acct:31"})
    rt.cancel("b", by="ops")
    assert rt.describe("b")["status"] == "cancelled"
    admin = Client()
    admin.force_login(User.objects.create_superuser("root", password="pw"))
    r = admin.get(reverse("admin:ilr_workflow_change", args=["b"]))
    assert r.status_code == 200
    page = r.content.decode()
    assert "never by itself" not in page and "when a slot of" not in page
    r = admin.get(reverse("admin:ilr_workflow_change", args=["a"]))
    assert "never by itself" not in r.content.decode()  # a holder, due now
