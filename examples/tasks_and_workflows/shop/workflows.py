"""The example's workflow, autodiscovered by ``ilr``: pack, wait a second (a durable timer), ship.
Each step's result is recorded once; after a crash the workflow replays and goes on."""

from __future__ import annotations

from ilr import workflow
from shop.models import Order


def set_status(order_id: int, status: str) -> str:
    Order.objects.filter(pk=order_id).update(status=status)
    return status


@workflow(name="fulfil_order", version="1")
def fulfil_order(ctx, order):
    ctx.step("pack", set_status, order["id"], "packed")
    ctx.sleep(1.0)
    return {"order": order["id"], "status": ctx.step("ship", set_status, order["id"], "shipped")}
