"""What the approver sees is what the rules check (issue 40, items 2 and 5), in pure code.

One definition of a payload's amount (``ilr._amounts.payload_amount``: the target's
``amount_field``) feeds a grant's ``max_cents`` as it feeds the rules; approvers are identities
(stripped, NFKC, casefolded). The same items end to end, with the review UI in Chromium, are in
tests/browser/test_approval_amounts.py.
"""

from __future__ import annotations

import pytest

from ilr import InvalidInput
from ilr import _codec as codec
from ilr._effects.rules import lease_snapshot

# -- item 2: one definition of the amount --------------------------------------------------------


def test_payload_amount_reads_the_targets_amount_field_only():
    from ilr._amounts import payload_amount

    class Target:
        tier, amount_field = 1, "value"

        def apply(self, effect_id, payload):
            raise AssertionError("never sent")

    assert payload_amount(Target(), {"amount": 5, "value": 10_000_000}) == ("value", 10_000_000)
    assert payload_amount(None, {"amount": 5}) == ("amount", 5)
    # Not cents: a bool, a str, a float, a negative number, or nothing under the field.
    for bad in ({"value": True}, {"value": "100.00"}, {"value": 1.5}, {"value": -1}, {"amount": 5}, [1]):
        assert payload_amount(Target(), bad)[1] is None, bad


def test_a_grant_cap_reads_the_same_field_as_the_rule():
    """lease_snapshot (T_dispatch's grant check) reads the target's amount field: a policy grant
    capped at $10.00 refuses {"value": 5000} under amount_field="value", whatever "amount" says."""
    grant = {
        "id": "grant_cap",
        "principal": "p",
        "action": "refund",
        "max_cents": 1000,
        "payload_hash": None,
        "granted_by": "policy",
        "expires_at": None,
        "revoked_at": None,
        "live_now": True,
    }
    over = {"payment": "pay_1", "amount": 1, "value": 5000}
    allowed, snapshot = lease_snapshot(grant, "refund", over, codec.payload_hash(over), amount_field="value")
    assert allowed is False and snapshot["amount_field"] == "value"
    within = {"payment": "pay_1", "value": 500}
    assert lease_snapshot(grant, "refund", within, codec.payload_hash(within), amount_field="value")[0] is True
    # A bool is not cents (isinstance(True, int) holds): refused under a cap.
    flag = {"payment": "pay_1", "amount": True}
    assert lease_snapshot(grant, "refund", flag, codec.payload_hash(flag))[0] is False


# -- item 5: approvers are identities -------------------------------------------------------------


def test_approver_identity_is_stripped_nfkc_and_casefolded():
    from ilr._ops.approval_requests import approver_identity

    assert approver_identity(" Alice ") == approver_identity("ALICE") == approver_identity("alice") == "alice"
    assert approver_identity("ａｌｉｃｅ") == "alice"  # fullwidth letters, NFKC
    assert approver_identity("alice\u00a0smith") == approver_identity("Alice  Smith") == "alice smith"
    for bad in ("", "   ", "ali\u200bce", "alice\n", "\u202ealice", "al\x00ice", "\ud800", None, 7):
        with pytest.raises(InvalidInput) as err:
            approver_identity(bad)
        assert err.value.field == "by", bad
