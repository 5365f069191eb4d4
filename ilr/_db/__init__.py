"""Connections and the fence (docs/protocol.md §3.2).

The engine speaks raw psycopg 3 on its own connections, opened from Django's DATABASES entry;
the ORM is never on a worker's write path. Connections are in autocommit mode: a one-statement
write is one transaction (one round trip), and longer transactions use ``conn.transaction()``,
or an ``ilr._db.batch.Batch`` on the hot paths.
"""

from __future__ import annotations

import datetime as dt
import select
from typing import Any, TypeAlias, TypeGuard, TypeVar, cast

import psycopg
from psycopg.adapt import Loader
from psycopg.conninfo import make_conninfo
from psycopg.rows import DictRow, dict_row

from ilr._errors import Fenced
from ilr._queries.workflows import FENCE_RESET_TAKEOVERS_SQL, FENCE_SQL

INFINITY = dt.datetime.max.replace(tzinfo=dt.UTC)
"""'infinity' timestamps load as datetime.max in UTC (psycopg has no infinite datetime)."""

Connection: TypeAlias = psycopg.Connection[DictRow]
"""A connection from ``connect``: its cursors return rows as dicts keyed by column name."""

Cursor: TypeAlias = psycopg.Cursor[DictRow]
"""A cursor of a ``Connection`` (dict rows)."""

_Conn = TypeVar("_Conn", bound="psycopg.Connection[Any]")


class _InfinityTimestamptzLoader(Loader):
    # psycopg cannot represent PostgreSQL's 'infinity'; a workflow sleeping forever has
    # available_at = 'infinity', so map it to datetime.max instead of raising DataError.
    # Every other value goes to the loader psycopg would use (its C one when psycopg[binary]
    # is installed): subclassing the pure-Python loader instead cost ~10x per value, on every
    # fence and claim row (issue 9).
    # cast: get_loader is typed Optional; psycopg always registers a text timestamptz loader.
    _default = cast(
        "type[Loader]", psycopg.adapters.get_loader(psycopg.adapters.types["timestamptz"].oid, psycopg.pq.Format.TEXT)
    )

    def __init__(self, oid: int, context=None):
        super().__init__(oid, context)
        self._load = self._default(oid, context).load

    def load(self, data):
        if data == b"infinity":
            return INFINITY
        if data == b"-infinity":
            return dt.datetime.min.replace(tzinfo=dt.UTC)
        return self._load(data)


def conninfo(alias: str = "default") -> str:
    """A libpq conninfo string for Django's database ``alias``, after calling ILR_BEFORE_CONNECT
    (ilr.conf) with its DATABASES entry when that is set."""
    from django.conf import settings
    from django.utils.module_loading import import_string

    from ilr import _conf as conf

    db = settings.DATABASES[alias]
    before_connect = conf.settings.BEFORE_CONNECT
    if before_connect:
        (import_string(before_connect) if isinstance(before_connect, str) else before_connect)(db)
    params = {
        "dbname": db.get("NAME"),
        "user": db.get("USER") or None,
        "password": db.get("PASSWORD") or None,
        "host": db.get("HOST") or None,
        "port": str(db["PORT"]) if db.get("PORT") else None,
    }
    # Any: make_conninfo types its first parameter (conninfo: str) as a possible keyword too.
    options: dict[str, Any] = {k: v for k, v in (db.get("OPTIONS") or {}).items() if isinstance(v, (str, int))}
    return make_conninfo(**{k: v for k, v in params.items() if v is not None}, **options)


def connect(dsn: str | None = None, *, application_name: str = "ilr", **kwargs: Any) -> Connection:
    """Open an autocommit connection with dict rows and the infinity-aware timestamptz loader.

    psycopg's own statement preparation is off (``prepare_threshold=None``): the hot paths
    prepare their statements through ``ilr.batch``, and psycopg answers any rollback of a
    connection on which it prepared something with DEALLOCATE ALL, which would drop those too.

    Args:
        dsn: a conninfo string or URL; default: Django's DATABASES["default"].
        application_name: shown in pg_stat_activity.
    """
    kwargs.setdefault("prepare_threshold", None)
    conn = psycopg.connect(
        dsn or conninfo(), autocommit=True, row_factory=dict_row, application_name=application_name, **kwargs
    )
    conn.adapters.register_loader("timestamptz", _InfinityTimestamptzLoader)
    return conn


def is_connection_fault(exc: BaseException) -> bool:
    """True when ``exc`` says the database, not the statement, is at fault: a broken connection
    (OperationalError), a server shutting down or not yet accepting work (57P01..57P03, class
    08), or a server that refuses writes (25006 read_only_sql_transaction: a demoted primary
    answers every write so). A worker treats each as a lost connection: drop it, reconnect,
    retry, and let the fence decide; never the workflow's failure."""
    if isinstance(exc, psycopg.OperationalError):
        return True
    sqlstate = getattr(exc, "sqlstate", None) or ""
    return sqlstate == "25006" or sqlstate.startswith("08") or sqlstate in ("57P01", "57P02", "57P03")


def usable(conn: _Conn | None) -> TypeGuard[_Conn]:
    """Whether an idle pooled connection may be handed out: open, not broken, idle, and with
    nothing waiting on its socket. No round trip: a zero-timeout poll of the socket.

    An idle connection that does not LISTEN receives nothing unprompted unless its server ended
    the session: a server that stopped or restarted sent the terminating ErrorResponse (57P01,
    57P02) and closed the socket, so the socket reads as ready. psycopg marks such a connection
    broken only when a statement meets it, and the first statement of a claimed run would then
    fail. Any unprompted data counts as dead here: a false alarm costs one reconnect.

    Returns:
        False for None, a closed or broken connection, one inside a transaction, or one whose
        socket has data or an error pending.
    """
    if conn is None or conn.closed or conn.broken:
        return False
    if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
        return False
    try:
        readable, _, failed = select.select([conn.fileno()], [], [conn.fileno()], 0)
    except (OSError, ValueError, psycopg.Error):
        return False
    return not readable and not failed


def discard(conn: psycopg.Connection[Any] | None) -> None:
    """Close ``conn`` (None is fine), ignoring the errors of a connection that already died."""
    if conn is not None:
        try:
            conn.close()
        except Exception:  # noqa: BLE001 - closing a dead connection may raise; it is gone either way
            pass


RECOVERY_OWNER = "$recovery"
"""The owner of an orphan recovery's synthetic claim (ilr.orphans) on a workflow that ended."""


def fence(cur: Cursor, wf_id: str, epoch: int, ttl: float) -> DictRow:
    """The first statement of every worker write (docs/protocol.md §3.2): renew the lease only
    while this epoch is current and the lease is live (FENCE_SQL), taking the workflow row lock.

    Returns:
        {"cancel_requested_at": datetime | None, "now": datetime} (database clock).

    Raises:
        Fenced: zero rows matched; the caller's transaction must roll back.
    """
    return fenced(cur.execute(FENCE_SQL, {"wf": wf_id, "epoch": epoch, "ttl": ttl}).fetchone(), wf_id, epoch)


def send_fence(batch, wf_id: str, epoch: int, ttl: float, *, reset_takeovers: bool = False):
    """Queue the fence as the first statement of an ``ilr._db.batch.Batch``, without waiting.

    The statements queued after it run on the server after it, so they run under the
    workflow row lock when it matched; the caller must pass the result's row to ``fenced``
    before the batch ends, and raise (the batch then rolls back) when it matched nothing.

    Args:
        batch: the Batch (anything with ``execute(sql, params)``).
        reset_takeovers: also set takeovers = 0 (the transaction records a step row).

    Returns:
        the fence's ``ilr._db.batch.Result``.
    """
    return batch.execute(
        FENCE_RESET_TAKEOVERS_SQL if reset_takeovers else FENCE_SQL, {"wf": wf_id, "epoch": epoch, "ttl": ttl}
    )


def fenced(row: DictRow | None, wf_id: str, epoch: int) -> DictRow:
    """The fence's row, or Fenced when it matched nothing (see ``fence``)."""
    if row is None:
        raise Fenced(f"workflow {wf_id}: epoch {epoch} no longer holds a live claim")
    return row
