"""Input gaps (issue 40, item 9): what PostgreSQL or the encoder would choke on, or what would
grow without bound, is refused or bounded with an error naming the field, and nothing written.

Lone surrogates (``"\\ud800"``: a str Python holds but UTF-8 cannot encode) in ids, input, ``by``,
``principal`` and payloads; a signal's ``sender`` with NUL or not a string; reconcile evidence
over its bound. Real PostgreSQL.
"""

from __future__ import annotations

import json

import pytest

from ilr import InvalidInput, codec, receipts
from ilr.reconcile import MAX_EVIDENCE_CHARS

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


@pytest.mark.slow
def test_a_huge_target_answer_is_journaled_bounded_with_its_size_and_hash(rt, workers):
    """A 5 MB answer: the COMMITTED entry (and the step, and what the workflow sees, on every
    replay alike) keeps the small fields whole and the big one as its first
    ANSWER_VALUE_HEAD_CHARS characters, its size and sha256; the receipt still verifies."""
    import hashlib

    from ilr.codec import ANSWER_VALUE_HEAD_CHARS, MAX_ANSWER_BYTES

    size = 5 * 1024 * 1024
    workers.start("w1")
    grant = rt.grant("huge_answer", "refund", max_cents=100, by="policy")
    rt.start("huge_answer", "huge-1", {"size": size, "grant": grant})
    out = rt.result("huge-1", timeout=60)
    assert out["status"] == "COMMITTED", out
    entry = (
        rt.connection()
        .execute(
            "select body, length(body) as n from ilr.journal where effect_id = %s and kind = 'COMMITTED'",
            (out["effect_id"],),
        )
        .fetchone()
    )
    assert entry["n"] < MAX_ANSWER_BYTES + 4096, entry["n"]
    answer = json.loads(entry["body"])["result"]
    assert answer["id"].startswith("ref_") and answer["status"] == "ok"
    echo = answer["echo"]["$bounded"]
    full = json.dumps("x" * size, ensure_ascii=False)
    assert echo["bytes"] == len(full.encode()) and echo["sha256"] == hashlib.sha256(full.encode()).hexdigest()
    assert echo["head"] == full[:ANSWER_VALUE_HEAD_CHARS]
    assert out["result"] == answer
    verdict = receipts.verify(rt.receipt(out["effect_id"]))
    assert verdict["chain_intact"] and verdict["happened"] is True, verdict
