"""The connection pooler a worker runs behind (``ILR_POOLER``): session pooling or none."""

from __future__ import annotations

from ilr._errors import PoolerRefused

POOLERS = (None, "session", "transaction")


def check_pooler(pooler) -> None:
    """Refuse transaction pooling at start, in one sentence naming what needs session mode.

    Behind a pool that hands the server connection back after each transaction, a LISTEN
    outlives the transaction that ran it on a server connection another client then holds, and
    the statements ilr._db.batch prepares on one server connection are missing on the next: wakeups
    would be lost and claims, effects and step records would fail at random.

    Raises:
        PoolerRefused: ``pooler`` is "transaction" or not one of POOLERS.
    """
    if pooler == "transaction":
        raise PoolerRefused(
            "ILR_POOLER is 'transaction', but a worker needs session pooling: it LISTENs for wakeups and keeps "
            "prepared statements (claims, effects, step records) on its connections for their lifetime; point "
            "the worker at a PgBouncer pool in pool_mode=session or straight at PostgreSQL"
        )
    if pooler not in POOLERS:
        raise PoolerRefused(f"ILR_POOLER must be unset, 'session' or 'transaction', got {pooler!r}")
