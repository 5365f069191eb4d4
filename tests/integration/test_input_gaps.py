"""Input gaps (issue 40, item 9): what PostgreSQL or the encoder would choke on, or what would
grow without bound, is refused or bounded with an error naming the field, and nothing written.

Lone surrogates (``"\\ud800"``: a str Python holds but UTF-8 cannot encode) in ids, input, ``by``,
``principal`` and payloads; a signal's ``sender`` with NUL or not a string; reconcile evidence
over its bound. Real PostgreSQL.
"""

from __future__ import annotations

import pytest

from ilr import InvalidInput
from ilr import _codec as codec
from ilr._effects.reconcile import MAX_EVIDENCE_CHARS

LONE = "\ud800"


def _count(rt, table: str) -> int:
    return rt.connection().execute(f"select count(*) as n from ilr.{table}").fetchone()["n"]


def test_codec_refuses_lone_surrogates_naming_the_path():
    for call, field in (
        (lambda: codec.check_plain({"a": ["ok", "x" + LONE]}, "payload"), "payload.a[1]"),
        (lambda: codec.check_plain({"k" + LONE: 1}, "input"), "input"),
        (lambda: codec.dumps({"a": "\udfff"}, "output"), "output.a"),
        (lambda: codec.check_text("id" + LONE, "workflow_id"), "workflow_id"),
        (lambda: codec.check_who(LONE, "principal"), "principal"),
    ):
        with pytest.raises(InvalidInput) as err:
            call()
        assert err.value.field == field and "surrogate" in str(err.value), err.value


def test_lone_surrogates_are_refused_at_every_entry_point_and_nothing_is_written(rt):
    with pytest.raises(InvalidInput) as err:
        rt.start("three_steps", "wf" + LONE, {})
    assert err.value.field == "workflow_id"
    with pytest.raises(InvalidInput) as err:
        rt.start("three_steps", "wf-s", {"x": "a" + LONE})
    assert err.value.field == "input.x"
    assert _count(rt, "workflows") == 0

    rt.start("three_steps", "wf-ok", {})
    with pytest.raises(InvalidInput) as err:
        rt.signal("wf-ok", "poke", {"p": LONE})
    assert err.value.field == "payload.p"
    with pytest.raises(InvalidInput) as err:
        rt.signal("wf-ok", "poke" + LONE, None)
    assert err.value.field == "name"
    with pytest.raises(InvalidInput) as err:
        rt.cancel("wf-ok", by="ops" + LONE)
    assert err.value.field == "by"
    assert _count(rt, "signals") == 0
    with pytest.raises(InvalidInput) as err:
        rt.grant("agent" + LONE, "refund", by="ops")
    assert err.value.field == "principal"
    with pytest.raises(InvalidInput) as err:
        rt.grant("agent", "refund", by="ops" + LONE)
    assert err.value.field == "by"
    assert _count(rt, "grants") == 0


@pytest.mark.parametrize("sender", ["ops\x00", 7, True, "", "x" * (codec.MAX_TEXT_LENGTH + 1), "ops" + LONE])
def test_a_signal_sender_is_a_name_or_none(rt, sender):
    rt.start("three_steps", "wf-sender", {})
    with pytest.raises(InvalidInput) as err:
        rt.signal("wf-sender", "poke", None, sender=sender)
    assert err.value.field == "sender", sender
    assert _count(rt, "signals") == 0


def test_reconcile_evidence_over_its_bound_is_refused_not_cut(rt):
    """The bound is MAX_EVIDENCE_CHARS characters of canonical JSON (ilr.reconcile); 2 MB is
    refused naming ``evidence`` before anything is read or written."""
    for evidence in ("x" * (2 * 1024 * 1024), {"ticket": "y" * MAX_EVIDENCE_CHARS}):
        with pytest.raises(InvalidInput) as err:
            rt.reconcile("eff_missing", evidence, by="ops", applied=True)
        assert err.value.field == "evidence" and str(MAX_EVIDENCE_CHARS) in str(err.value)


@pytest.mark.django_db(transaction=True)
def test_an_admin_grant_with_an_absurd_lifetime_is_a_form_error_naming_the_field(rt):
    from django.contrib.auth.models import Permission, User
    from django.urls import reverse

    from tests.support.review import client_for, text

    ops = User.objects.create_user("ops", password="x", is_staff=True)
    ops.user_permissions.add(*Permission.objects.filter(codename__in=("grant", "view_grant")))
    c = client_for(ops)
    for hours, words in (("1e12", "at most 876000 hours"), ("inf", "Enter a number")):
        r = c.post(
            reverse("admin:ilr_grant_add"),
            {"principal": "refund", "action": "refund", "max_cents": "100", "expires_in_hours": hours},
        )
        assert r.status_code == 200, (hours, r.status_code)
        assert 'id="id_expires_in_hours_error"' in text(r) and words in text(r), hours
    r = c.post(reverse("admin:ilr_grant_add"), {"principal": "x" * 300, "action": "refund", "max_cents": "100"})
    assert r.status_code == 200 and "at most 200 characters" in text(r), r.status_code
    assert _count(rt, "grants") == 0
