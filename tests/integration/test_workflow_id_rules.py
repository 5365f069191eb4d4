"""Issue 39: a started workflow's id may not hold the separators the runtime derives ids with, a
child's ``<parent id>/<seq>`` and a successor's ``<id>#<n>``; one that did could take the id a
child or a continue-as-new of another workflow is given. Ids the runtime derived stay usable."""

from __future__ import annotations

import pytest

from ilr import InvalidInput
from tests.support.db import count_workflows


@pytest.mark.parametrize("wf_id", ["order-7/1", "order-7#1", "a/b", "#", "x#y/z"])
def test_start_refuses_the_child_and_successor_separators(rt, wf_id):
    with pytest.raises(InvalidInput) as err:
        rt.start("three_steps", wf_id, {})
    assert err.value.field == "workflow_id"
    assert "'/'" in err.value.rule and "'#'" in err.value.rule, err.value.rule
    assert count_workflows(rt) == 0


def test_derived_ids_stay_readable(rt):
    """The rule is a start's: an id the runtime derived is still described and signalled."""
    from ilr import WorkflowNotFound

    rt.start("three_steps", "plain-id.v2:x", {})
    assert rt.describe("plain-id.v2:x")["status"] == "pending"
    for derived in ("plain-id.v2:x/1", "plain-id.v2:x#1"):
        with pytest.raises(WorkflowNotFound):
            rt.describe(derived)
