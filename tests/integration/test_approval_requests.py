"""Approval requests (``ctx.request_approval``): an unknown request is named. The requests
themselves, on real workers and the real payment target, are in
tests/faults/test_approval_requests.py.
"""

from __future__ import annotations

import pytest

from ilr import ApprovalRequestNotFound, InvalidInput


def test_unknown_request_is_named(rt):
    with pytest.raises(ApprovalRequestNotFound) as err:
        rt.approve_request("apr_nope", by="alice")
    assert str(err.value) == "request_id: no approval request with id 'apr_nope'"  # the field, then the rule
    with pytest.raises(InvalidInput, match="status"):
        rt.approval_requests(status="waiting")
