"""Reconciling an AMBIGUOUS effect through the runtime API (rt.reconcile / reconcile_in).

A person's attestation is recorded once: a second reconcile of the same effect is refused with
InvalidInput naming effect_id and who reconciled it when, and nothing is changed. ``applied``
is True, False or None, never a truthy string.

The effect row is written with plain SQL on the emptied test database (as tests/integration/test_approvals_views.py
does); no worker is needed to reach the ambiguous state for these checks.
"""

from __future__ import annotations

import json

import pytest

from ilr import InvalidInput
from ilr import _codec as codec
from tests.support.queries.deployments import SEED_DEPLOYMENTS_REFUND_V1
from tests.support.queries.effects import SEED_EFFECTS_LOCAL_REFUNDS, STATE_RECONCILED_OF_EFFECTS_BY_EFFECT_ID
from tests.support.queries.workflows import SEED_WORKFLOWS_REFUND_2

EID = "eff_amb_api"


def make_ambiguous(rt, effect_id=EID, wf_id="case-rec"):
    conn = rt.connection()
    conn.execute(SEED_DEPLOYMENTS_REFUND_V1)
    conn.execute(
        SEED_WORKFLOWS_REFUND_2,
        (wf_id,),
    )
    payload = {"payment": "pay_1", "amount": 2000}
    conn.execute(
        SEED_EFFECTS_LOCAL_REFUNDS,
        (effect_id, wf_id, json.dumps(payload), codec.payload_hash(payload)),
    )
    return effect_id


def stored(rt, effect_id=EID):
    return rt.connection().execute(STATE_RECONCILED_OF_EFFECTS_BY_EFFECT_ID, (effect_id,)).fetchone()


def test_a_second_reconcile_is_refused_and_the_first_attestation_stands(rt):
    make_ambiguous(rt)
    first = rt.reconcile(EID, evidence="ledger shows re_1", by="carol", applied=True)
    assert first["by"] == "carol" and first["applied"] is True and first["evidence"] == "ledger shows re_1"
    before = stored(rt)
    for applied in (False, True, None):
        with pytest.raises(InvalidInput) as err:
            rt.reconcile(EID, evidence="other", by="dave", applied=applied)
        assert err.value.field == "effect_id"
        assert "already reconciled by carol" in err.value.rule and "nothing was changed" in err.value.rule.lower()
        assert first["at"] in err.value.rule  # when
    assert stored(rt) == before
    # rt.ambiguous() still lists it (the state stays ambiguous), with the one attestation.
    [row] = rt.ambiguous()
    assert row["effect_id"] == EID and row["reconciled"]["by"] == "carol"


def test_applied_has_no_default_so_no_attestation_is_recorded_without_it(rt):
    """An attestation is never replaced, so one left at "unsure" by omission could never be
    corrected (a fresh user's find): ``applied`` must be given, and nothing is recorded
    without it."""
    make_ambiguous(rt)
    with pytest.raises(TypeError, match="applied"):
        rt.reconcile(EID, evidence="ledger shows re_1", by="carol")
    assert stored(rt)["reconciled"] is None
    assert rt.reconcile(EID, evidence="ledger shows re_1", by="carol", applied=True)["applied"] is True


@pytest.mark.parametrize("applied", ["yes", "no", 1, 0, "true", [], {}])
def test_applied_must_be_a_bool_or_none(rt, applied):
    make_ambiguous(rt)
    with pytest.raises(InvalidInput) as err:
        rt.reconcile(EID, evidence="ledger shows re_1", by="carol", applied=applied)
    assert err.value.field == "applied" and repr(applied) in err.value.rule
    assert stored(rt)["reconciled"] is None


@pytest.mark.parametrize("applied", [True, False, None])
def test_applied_true_false_or_none_is_recorded_as_given(rt, applied):
    make_ambiguous(rt)
    assert rt.reconcile(EID, evidence="ticket 42", by="carol", applied=applied)["applied"] is applied
    assert stored(rt)["reconciled"]["applied"] is applied
