"""journal.Chain on the real database: batched appends, and statements folded into the same
INSERT with ``Chain.also`` (issue 9), which the effect path's T_dispatch and T_commit use."""

from __future__ import annotations

import hashlib
import json

import psycopg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ilr import _codec as codec
from ilr import _db as db
from ilr._journal import journal, keys
from ilr._queries.journal import LAST_HASH_SQL
from tests.support.queries.deployments import SEED_DEPLOYMENTS_J
from tests.support.queries.effects import (
    SEED_EFFECTS_EFF_J,
    SENDS_OF_EFFECTS_BY_EFFECT_ID_EFF_J,
    TAMPER_EFFECTS_ONE_MORE_SEND_BY_EFFECT_ID,
    TAMPER_EFFECTS_SENDS_BY_EFFECT_ID,
    TAMPER_EFFECTS_STATE_BY_EFFECT_ID_NO_SUCH_STATE,
)
from tests.support.queries.journal import COUNT_JOURNAL, KIND_PREV_HASH_OF_JOURNAL
from tests.support.queries.workflows import SEED_WORKFLOWS_WF_J


@pytest.fixture
def conn(clean_db, django_db_blocker):
    with django_db_blocker.unblock():
        c = db.connect(clean_db)
        c.execute(SEED_DEPLOYMENTS_J)
        c.execute(SEED_WORKFLOWS_WF_J)
        c.execute(SEED_EFFECTS_EFF_J)
        yield c
        c.close()


def _sends(conn) -> int:
    return conn.execute(SENDS_OF_EFFECTS_BY_EFFECT_ID_EFF_J).fetchone()["sends"]


def test_batched_entries_link_in_order_and_the_staged_update_lands_with_them(conn):
    with conn.transaction():
        cur = conn.cursor()
        chain = journal.Chain("eff_j", None)
        with chain.batched(cur):
            first = chain.append(cur, "PROPOSED", 1.0, {"n": 1})
            chain.also(TAMPER_EFFECTS_SENDS_BY_EFFECT_ID, (5, "eff_j"))
            second = chain.append(cur, "AUTHORIZED", 1.0, {"n": 2})
            # Nothing is written until the block ends: one statement then.
            assert conn.execute(COUNT_JOURNAL).fetchone()["n"] == 0
            assert _sends(conn) == 0
    rows = conn.execute(KIND_PREV_HASH_OF_JOURNAL).fetchall()
    assert [(r["kind"], r["prev"], r["hash"]) for r in rows] == [
        ("PROPOSED", None, first["hash"]),
        ("AUTHORIZED", first["hash"], second["hash"]),
    ]
    assert _sends(conn) == 5


def test_a_failing_staged_statement_inserts_no_entry(conn):
    with pytest.raises(psycopg.errors.CheckViolation):
        with conn.transaction():
            cur = conn.cursor()
            chain = journal.Chain("eff_j", None)
            with chain.batched(cur):
                chain.append(cur, "PROPOSED", 1.0, {})
                chain.also(TAMPER_EFFECTS_STATE_BY_EFFECT_ID_NO_SUCH_STATE, ("eff_j",))
    assert conn.execute(COUNT_JOURNAL).fetchone()["n"] == 0


def test_a_staged_statement_runs_alone_when_no_entry_is_appended(conn):
    with conn.transaction():
        cur = conn.cursor()
        chain = journal.Chain("eff_j", None)
        with chain.batched(cur):
            chain.also(TAMPER_EFFECTS_ONE_MORE_SEND_BY_EFFECT_ID, ("eff_j",))
    assert _sends(conn) == 1
    assert conn.execute(COUNT_JOURNAL).fetchone()["n"] == 0


def test_also_outside_batched_is_refused(conn):
    with pytest.raises(RuntimeError, match="inside Chain.batched"):
        journal.Chain("eff_j", None).also("select 1", ())


def test_the_tail_read_is_one_backward_index_step_even_with_a_generic_plan(conn):
    # Every appender reads its chain's tail (twice per gated effect). Without journal_tail
    # the generic plan scanned (effect_id, prev) and sorted, and PostgreSQL kept re-planning
    # the prepared statement with custom plans (issue 9).
    with conn.transaction():
        cur = conn.cursor()
        chain = journal.Chain("eff_j", None)
        with chain.batched(cur):
            for kind in ("PROPOSED", "AUTHORIZED", "DISPATCHED"):
                chain.append(cur, kind, 1.0, {})
    conn.execute("set plan_cache_mode = force_generic_plan")
    conn.execute("prepare tail(text) as " + LAST_HASH_SQL.replace("%s", "$1"))
    plan = "\n".join(r["QUERY PLAN"] for r in conn.execute("explain execute tail('eff_j')").fetchall())
    assert "Index Scan Backward using journal_tail" in plan, plan
    assert "Sort" not in plan, plan
    assert conn.execute("execute tail('eff_j')").fetchone()["hash"] == chain.last_hash


# -- the sealed text, put together from its members' texts --------------------------------------

_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=5), children, max_size=3),
    max_leaves=8,
)
_fields = st.dictionaries(
    st.sampled_from(["kind", "effect_id", "ts", "prev", "hash", "sig", "a", "é", "b\u2028", "z"]) | st.text(),
    _json,
    max_size=6,
)


def _oracle(value) -> str:
    # The canonical text as docs/protocol.md §9 defines it, spelled with json.dumps here so the
    # test does not lean on codec's own encoder.
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


@settings(max_examples=300, deadline=None)
@given(
    fields=_fields,
    more=_fields,
    ts=st.floats(0, 4e9),
    prev=st.none() | st.text("0123456789abcdef", min_size=64, max_size=64),
)
def test_an_entry_sealed_from_encoded_members_is_the_canonical_text_of_the_whole(fields, more, ts, prev):
    # Chain.append puts the body together from each member's canonical text (journal.Encoded,
    # issue 9); it must be byte for byte the canonical text of the whole entry, with the hash
    # over the entry without hash and sig, whether the fields came as a dict or Encoded.
    for given_fields in ({**fields, **more}, journal.Encoded(fields).merged(more)):
        chain = journal.Chain("eff_p", prev, 4 if prev else None)
        chain._staged = []  # as inside Chain.batched: the row is staged, not inserted
        entry = chain.append(None, "PROPOSED", ts, given_fields)
        ((_, kind, body, row_prev, digest, n),) = chain._staged
        # The position and the key id are the chain's (journal.RESERVED), whatever the fields say.
        chained = {"n": 5 if prev else 1, **({"kid": keys.current_key_id()} if keys.signing_key() else {})}
        unsigned = {
            k: v
            for k, v in {
                "kind": "PROPOSED",
                "effect_id": "eff_p",
                "ts": ts,
                "prev": prev,
                **{k: v for k, v in {**fields, **more}.items() if k not in journal.RESERVED},
                **chained,
            }.items()
            if k not in ("hash", "sig")
        }
        assert n == chained["n"]
        assert digest == hashlib.sha256(_oracle(unsigned).encode()).hexdigest()
        assert body == _oracle({**unsigned, "hash": digest, "sig": entry["sig"]})
        assert json.loads(body) == entry
        assert (kind, row_prev, chain.last_hash) == ("PROPOSED", unsigned["prev"], digest)
        assert journal.seal(unsigned, keys.signing_key()) == entry


@settings(max_examples=300, deadline=None)
@given(value=_json)
def test_canonical_is_json_dumps_with_the_design_notes_options(value):
    # codec.canonical writes scalars itself (issue 9); every value must come out as the
    # json.dumps with the canonical options (_oracle, docs/protocol.md §9) writes it.
    assert codec.canonical(value) == _oracle(value)


@pytest.mark.parametrize("bad", [float("nan"), float("inf"), -float("inf"), {"a": [float("nan")]}])
def test_canonical_refuses_what_json_refuses(bad):
    with pytest.raises(ValueError, match="Out of range float"):
        codec.canonical(bad)
