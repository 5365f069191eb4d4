"""Bad input for effects, grants and receipts (issue 3): clear errors, nothing sent or written."""

from __future__ import annotations

import pytest

from ilr import InvalidInput
from ilr._errors import EffectNotFound, GrantNotFound
from tests.support.db import write_counts
from tests.support.queries.grants import COUNT_REVOKED_OF_GRANTS, REVOKED_AT_REVOKED_BY_OF_GRANTS_BY_ID


def test_revoke_unknown_and_twice(rt):
    with pytest.raises(GrantNotFound):
        rt.revoke("grant_nope", by="bob")
    g = rt.grant("agent", "refund", max_cents=100, by="policy")
    assert rt.revoke(g, by="bob") == []
    first = rt.connection().execute(REVOKED_AT_REVOKED_BY_OF_GRANTS_BY_ID, (g,)).fetchone()
    assert first["revoked_at"] is not None and first["revoked_by"] == "bob"
    # A second revoke is refused, names the first one, and changes nothing (the guide: a revoke
    # of a revoked grant is bad input).
    with pytest.raises(InvalidInput) as err:
        rt.revoke(g, by="carol")
    assert err.value.field == "grant_id"
    assert "already revoked by bob" in err.value.rule and first["revoked_at"].isoformat() in err.value.rule
    assert "may land: none" in err.value.rule
    assert rt.connection().execute(REVOKED_AT_REVOKED_BY_OF_GRANTS_BY_ID, (g,)).fetchone() == first


def test_grant_bad_input(rt):
    for kwargs, field in (
        ({"max_cents": -1}, "max_cents"),
        ({"max_cents": 1.5}, "max_cents"),
        ({"max_cents": 2**63}, "max_cents"),
        ({"expires_in": -3}, "expires_in"),
        ({"by": ""}, "by"),
    ):
        with pytest.raises(InvalidInput) as err:
            rt.grant("agent", "refund", **{"by": "policy", **kwargs})
        assert err.value.field == field
    assert write_counts(rt)["grants"] == 0


@pytest.mark.parametrize("action", [None, "   ", 5])
def test_a_bad_grant_action_is_named_with_its_own_rule(rt, action):
    """The action's error states the action's rule (it read "must name the person or service
    acting", the rule of ``by``: a fresh user's find)."""
    with pytest.raises(InvalidInput) as err:
        rt.grant("agent", action, max_cents=5, by="policy")
    assert err.value.field == "action" and "the action the grant allows" in err.value.rule, err.value
    assert "person" not in err.value.rule
    assert write_counts(rt)["grants"] == 0


def test_receipt_for_unknown_effect(rt):
    with pytest.raises(EffectNotFound) as err:
        rt.receipt("eff_unknown")
    assert "eff_unknown" in str(err.value)


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda rt, g: rt.revoke("gr\x00ant", by="bob"), "grant_id"),
        (lambda rt, g: rt.revoke(g, by="bo\x00b"), "by"),
        (lambda rt, g: rt.revoke("g" * 100_000, by="bob"), "grant_id"),
        (lambda rt, g: rt.revoke("   ", by="bob"), "grant_id"),
        (lambda rt, g: rt.revoke(g, by="b" * 100_000), "by"),
        (lambda rt, g: rt.reconcile("eff\x00", "ledger", by="carol", applied=True), "effect_id"),
        (lambda rt, g: rt.reconcile(5, "ledger", by="carol", applied=True), "effect_id"),
        (lambda rt, g: rt.reconcile("eff_x", "ledger", by="ca\x00rol", applied=True), "by"),
        (lambda rt, g: rt.receipt("a\x00"), "effect_id"),
        (lambda rt, g: rt.receipt(None), "effect_id"),
        (lambda rt, g: rt.grant("p\x00", "refund", by="x"), "principal"),
        (lambda rt, g: rt.grant("p", "refund", by="x", grant_id="g\x00"), "grant_id"),
        (lambda rt, g: rt.grant("p", "refund", by="x", grant_id=5), "grant_id"),
        (lambda rt, g: rt.grant("p", "refund", by="x", grant_id="   "), "grant_id"),
        (lambda rt, g: rt.grant("p", "refund", by="x", grant_id=""), "grant_id"),
        (lambda rt, g: rt.grant("p", "refund", by="x", grant_id="g" * 201), "grant_id"),
        (lambda rt, g: rt.grant("p", "refund", by="x", expires_in=float("inf")), "expires_in"),
        (lambda rt, g: rt.grant("p", "refund", by="x", expires_in=1e300), "expires_in"),
        (lambda rt, g: rt.list(status="bogus"), "status"),
        (lambda rt, g: rt.list(status=5), "status"),
        (lambda rt, g: rt.list(limit=-1), "limit"),
        (lambda rt, g: rt.list(limit="x"), "limit"),
        (lambda rt, g: rt.list(name="n\x00"), "name"),
        (lambda rt, g: rt.result("wf", timeout="5"), "timeout"),
        (lambda rt, g: rt.result("wf", timeout=float("nan")), "timeout"),
        (lambda rt, g: rt.result("wf", timeout=1, poll=0), "poll"),
        (lambda rt, g: rt.cancel("wf", by=""), "by"),
        (lambda rt, g: rt.cancel("wf", by=5), "by"),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_ids_names_and_numbers_are_checked_before_the_database(rt, call, field):
    """An id or a name with a NUL, over 200 characters, blank or not a str, a lifetime past a
    hundred years, an unknown status, a bad limit or timeout: InvalidInput naming the field,
    nothing written. Each was a raw psycopg error, a silent empty answer, a TypeError or a wait
    that never ended (a fresh user's finds)."""
    g = rt.grant("agent", "refund", max_cents=100, by="policy")
    before = rt.connection().execute(COUNT_REVOKED_OF_GRANTS).fetchone()
    with pytest.raises(InvalidInput) as err:
        call(rt, g)
    assert err.value.field == field, err.value
    assert len(str(err.value)) < 400  # a 100 kB id is not repeated back
    assert rt.connection().execute(COUNT_REVOKED_OF_GRANTS).fetchone() == before
