"""ILR_QUEUES' rules read without a database: rates, limits, and what a queue holds."""

from __future__ import annotations

import pytest

from ilr import InvalidInput
from ilr._queues import QueueRule, parse_rate, queue_problems, rule_for, rules


@pytest.mark.parametrize(
    ("text", "rate"),
    [
        ("100/m", (100, 60.0)),
        ("5/10s", (5, 10.0)),
        ("1000/hour", (1000, 3600.0)),
        ("3 / s", (3, 1.0)),
        ("2/minutes", (2, 60.0)),
        ("7/d", (7, 86400.0)),
    ],
)
def test_rates_read_as_starts_per_seconds(text, rate):
    assert parse_rate(text) == rate


@pytest.mark.parametrize(
    "text",
    ["fast", "0/m", "5/", "/m", "5/fortnight", "-1/s", 5, None, "5/0s", "100/ms", "5/10ms", "1/99999999d", "1/367d"],
)
def test_anything_else_is_not_a_rate(text):
    with pytest.raises(ValueError, match="a rate is"):
        parse_rate(text)


def test_a_queue_holds_slots_only_when_it_limits_or_rates():
    assert QueueRule("a", concurrency=3).slot_limit == 3
    assert QueueRule("b", rate=(5, 60.0)).slot_limit == 1000
    assert QueueRule("c").slot_limit is None and QueueRule("c").rates is None
    assert QueueRule("d", per_key_rate=(2, 1.0)).rates == {"per_key_rate": [2, 1.0]}
    assert QueueRule("a").key == "queue:a"


def test_malformed_entries_are_named_and_left_out():
    value = {"good": {"concurrency": 2}, "bad": {"concurrency": True}, "bad name!": {}}
    assert [entry for entry, _ in queue_problems(value)] == [
        "ILR_QUEUES['bad']['concurrency']",
        "ILR_QUEUES['bad name!']",
    ]
    assert list(rules(value)) == ["good"]
    assert queue_problems([1]) == [("ILR_QUEUES", "must be None or a dict from queue name to its rule, got list")]
    with pytest.raises(InvalidInput) as err:
        rule_for("bad", value)
    assert err.value.field == "queue" and "'bad' is in ILR_QUEUES but malformed" in err.value.rule
    with pytest.raises(InvalidInput) as err:
        rule_for("absent", value)
    assert err.value.field == "queue" and "known: good" in err.value.rule
