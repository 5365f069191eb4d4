"""ORM reads of the ilr tables: a sleeping-forever workflow (available_at = infinity) loads."""

import pytest


@pytest.mark.django_db(transaction=True)
def test_orm_reads_infinity(rt, workers):
    from ilr.models import Workflow
    from tests.support.waits import wait_for

    workers.start("w1")
    rt.start("waiter", "inf", {})
    wait_for(lambda: rt.describe("inf")["status"] == "sleeping")
    w = Workflow.objects.get(id="inf")
    assert w.available_at == "infinity"
    assert list(Workflow.objects.values_list("available_at", flat=True)) == ["infinity"]
