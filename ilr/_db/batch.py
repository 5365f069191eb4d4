"""One transaction of queued statements on psycopg's libpq layer (issue 9).

psycopg's pipeline mode runs every statement through its cursor machinery: a generator, the
connection lock, a socket poll and a send per statement, and the cursor's result handling.
On the effect path, whose transactions are a few short statements, that machinery is most of
the cost.

A Batch queues prepared statements on the same connection's libpq handle (``psycopg.pq``,
psycopg's documented libpq wrapper), adapts parameters and rows with psycopg's own
Transformer (so the connection's loaders apply, db's infinity-aware timestamptz among them),
and sends each round trip's statements in one write. Errors are psycopg's exception classes,
built from the server's error result.

Transactions follow the extended query protocol: with no BEGIN, the statements up to the Sync
that ends the batch form one transaction, which the Sync commits when every statement
succeeded and rolls back when one failed (PostgreSQL docs, "Pipelining"). When the block
raises, a ROLLBACK is queued ahead of the Sync, so nothing of it commits; the server answers it
with the WARNING "there is no transaction in progress", which only means there was no BEGIN.
"""

from __future__ import annotations

import hashlib
import re
import select
import sys
import weakref
from collections import deque
from collections.abc import Sequence
from functools import lru_cache
from typing import Any, cast

import psycopg
from psycopg import errors as e
from psycopg import pq
from psycopg.adapt import PyFormat, Transformer

_TUPLES_OK = pq.ExecStatus.TUPLES_OK
_COMMAND_OK = pq.ExecStatus.COMMAND_OK
_SYNC = pq.ExecStatus.PIPELINE_SYNC
_ABORTED = pq.ExecStatus.PIPELINE_ABORTED
_IDLE = pq.TransactionStatus.IDLE
_DUPLICATE_PREPARED = "42P05"
_UNKNOWN_PREPARED = "26000"

_prepared: weakref.WeakKeyDictionary[psycopg.BaseConnection[Any], set[bytes]] = weakref.WeakKeyDictionary()
"""The statement names prepared on each connection (prepared statements live as long as the
session; a name is added only when the server acknowledged its Parse)."""

MAX_PREPARED = 200
"""Statements prepared per connection at most; the engine's own are a few dozen."""

_PLACEHOLDER = re.compile(r"%(?:\((\w+)\))?s|%%")


@lru_cache(maxsize=512)
def _statement(sql: str, with_params: bool = True) -> tuple[bytes, bytes, tuple[str, ...] | int]:
    """(name, query in $n form, parameter keys in order or the count of %s placeholders).

    As psycopg: without parameters the text goes as written (no placeholders, ``%`` kept)."""
    name = b"ilr_" + hashlib.sha1(sql.encode()).hexdigest()[:20].encode() + (b"" if with_params else b"_raw")
    if not with_params:
        return name, sql.encode(), 0
    keys: list[str] = []
    count = 0

    def sub(m: re.Match) -> str:
        nonlocal count
        if m.group(0) == "%%":
            return "%"
        if m.group(1) is None:
            count += 1
            return f"${count}"
        if m.group(1) not in keys:
            keys.append(m.group(1))
        return f"${keys.index(m.group(1)) + 1}"

    query = _PLACEHOLDER.sub(sub, sql)
    if keys and count:
        raise psycopg.ProgrammingError("a statement mixes %s and %(name)s placeholders")
    return name, query.encode(), tuple(keys) if keys else count


class Result:
    """The answer to one queued statement; its rows are read when the batch has fetched.

    ``fetchone()`` and ``fetchall()`` return dict rows, like the engine's psycopg cursors;
    called before the batch fetched, they make it fetch (one round trip).
    """

    __slots__ = ("_batch", "_res", "_error", "_aborted", "_rows")

    def __init__(self, batch: Batch):
        self._batch = batch
        self._res: pq.abc.PGresult | None = None
        self._error: psycopg.Error | None = None
        self._aborted = False
        self._rows: list[dict] | None = None

    def _ready(self) -> None:
        if self._res is None and self._error is None and not self._aborted:
            self._batch.fetch()
        if self._error is not None:
            raise self._error
        if self._aborted:
            raise e.PipelineAborted("an earlier statement of this transaction failed")

    def fetchall(self) -> list[dict]:
        """Every row, as dicts keyed by column name.

        Raises:
            psycopg.Error: the server's error for this statement, or PipelineAborted when an
                earlier statement of the batch failed.
        """
        self._ready()
        if self._rows is None:
            self._rows = self._batch._load(self._res)
        return self._rows

    def fetchone(self) -> dict | None:
        """The first row, or None when the statement returned none (see ``fetchall``)."""
        rows = self.fetchall()
        return rows[0] if rows else None

    @property
    def rowcount(self) -> int:
        self._ready()
        assert self._res is not None  # _ready returned: the statement succeeded, so _settle set _res
        status = self._res.command_status or b""
        tail = status.rsplit(b" ", 1)[-1]
        return int(tail) if tail.isdigit() else -1


class Batch:
    """Context manager: one transaction of statements queued on ``conn``'s libpq handle.

    Inside the block, ``execute`` queues a statement and returns its Result; the first read of
    a Result (or ``fetch``) costs one round trip for everything queued so far. The block's end
    sends a Sync: one more round trip, and the commit. Statements run on the server in the
    order queued, each with its own snapshot (READ COMMITTED), all in one transaction.

    Args:
        conn: an autocommit connection (``db.connect``'s) with no transaction open; the
            batch holds its lock until the end.
        before: statements ``(sql, params)`` committed as their own transaction (BEGIN ...
            COMMIT) ahead of the batch, in its first round trip; an error in the batch cannot
            undo them, and if one of them fails nothing after it runs and its error is raised.

    The batch holds the connection's lock from start to end: code inside the block (a local
    premise, say) must use the batch, not the connection. Statements are prepared by name
    once per connection, so a connection used here should not let psycopg prepare its own
    (``db.connect`` turns that off): psycopg answers a rollback with DEALLOCATE ALL.

    Raises:
        psycopg.ProgrammingError: the connection is not idle in autocommit mode.
        psycopg.Error: the first server error of the batch, at the read that meets it or at
            the end of the block; the transaction was then rolled back.
        psycopg.OperationalError: the connection broke.
    """

    def __init__(self, conn: psycopg.Connection[Any], *, before: Sequence[tuple[str, Any]] = ()):
        self.conn = conn
        self.pg = conn.pgconn
        self._before = before
        self._tx = Transformer(conn)
        self._awaiting: deque[Result | bytes | None] = deque()  # Result, a statement name (Parse), None (Sync)
        self._error: psycopg.Error | None = None
        self._unsent = False
        # Keyed by the connection itself (a wrapper's ``connection`` is the one it wraps).
        self._names = _prepared.setdefault(conn.connection, set())
        self._parsing: set[bytes] = set()

    # -- the block ---------------------------------------------------------------------------

    def __enter__(self) -> Batch:
        if not self.conn.autocommit or self.pg.transaction_status != _IDLE or self.conn.closed:
            raise psycopg.ProgrammingError("a Batch needs an idle autocommit connection")
        self.conn.lock.acquire()
        try:
            self.pg.enter_pipeline_mode()
        except BaseException:
            self.conn.lock.release()
            raise
        if self._before:
            try:
                self.execute("begin")
                for sql, params in self._before:
                    self.execute(sql, params)
                self.execute("commit")
            except BaseException:
                self.__exit__(*sys.exc_info())  # leave pipeline mode and release the lock
                raise
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        try:
            if self.pg.status == pq.ConnStatus.OK:
                if exc_type is not None and self._error is None:
                    self.execute("rollback")  # else the Sync below would commit what ran
                self.pg.pipeline_sync()
                self._awaiting.append(None)
                self._unsent = True
                try:
                    self._read_all()
                except psycopg.Error:
                    if exc_type is None:
                        raise
        finally:
            try:
                if self.pg.status == pq.ConnStatus.OK:
                    self.pg.exit_pipeline_mode()
            finally:
                self.conn.lock.release()
            # A failed ``before`` leaves its explicit BEGIN block open and aborted: a Sync does
            # not end an explicit block.
            if self.pg.status == pq.ConnStatus.OK and self.pg.transaction_status != _IDLE:
                self.conn.rollback()
        if exc_type is None and self._error is not None:
            raise self._error
        if exc_type is None and self.pg.status != pq.ConnStatus.OK:
            raise e.OperationalError("the connection broke before the batch committed")

    # -- statements -------------------------------------------------------------------------

    def execute(self, sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> Result:
        """Queue ``sql`` (``%s`` or ``%(name)s`` placeholders, as psycopg's) with ``params``.

        Parameters go as text, typed by the server from the statement (cast a parameter whose
        type the statement does not fix, as in ``%s::jsonb``).

        Returns:
            the statement's Result.
        """
        name, query, keys = _statement(sql, params is not None)
        if isinstance(keys, tuple):
            named = cast("dict[str, Any]", params)  # %(name)s placeholders: params is the mapping
            values = [named[k] for k in keys]
        else:
            values = list(params) if params is not None else []
            if len(values) != keys:
                raise psycopg.ProgrammingError(f"the statement has {keys} placeholders but {len(values)} parameters")
        dumped = self._tx.dump_sequence(values, [PyFormat.TEXT] * len(values)) if values else None
        if name in self._names or name in self._parsing:
            self.pg.send_query_prepared(name, dumped)
        elif len(self._names) + len(self._parsing) < MAX_PREPARED:
            self.pg.send_prepare(name, query)
            self._awaiting.append(name)
            self._parsing.add(name)
            self.pg.send_query_prepared(name, dumped)
        else:  # past the cap (dynamic SQL, say a local premise's): parsed and planned each time
            self.pg.send_query_params(query, dumped)
        result = Result(self)
        self._awaiting.append(result)
        self._unsent = True
        return result

    def send(self) -> None:
        """Send what is queued without waiting for the answers: the server works on it while
        the caller does something else, and the first read then waits for what is left."""
        if self._unsent:
            self.pg.send_flush_request()
            self._flush()

    def fetch(self) -> None:
        """Send what is queued and read every answer to it: one round trip."""
        if not self._awaiting:
            return
        if self._unsent:  # else send() has sent it all, with its flush request
            self.pg.send_flush_request()
        self._read_all()

    # -- the wire ---------------------------------------------------------------------------

    def _flush(self) -> None:
        pg = self.pg
        while pg.flush():  # 1: more to send, the socket buffer is full
            _wait(pg.socket, select.POLLOUT)
        self._unsent = False

    def _read_all(self) -> None:
        if self._unsent:
            self._flush()
        pg = self.pg
        group: list = []
        while self._awaiting:
            if pg.is_busy():
                _wait(pg.socket, select.POLLIN)
                pg.consume_input()
                continue
            res = pg.get_result()
            if res is None:
                if group:  # the end of one statement's results
                    # cast: a None (the Sync) is popped only at its PIPELINE_SYNC result, below.
                    self._settle(cast("Result | bytes", self._awaiting.popleft()), group)
                    group = []
                else:  # nothing for the next item yet: read more
                    _wait(pg.socket, select.POLLIN)
                    pg.consume_input()
                continue
            if res.status == _SYNC:
                item = self._awaiting.popleft()
                if item is not None:  # a Sync is the last item; anything else is a bug here
                    raise e.InternalError(f"unexpected pipeline sync while awaiting {item!r}")
                continue
            group.append(res)
        if self._error is not None:
            raise self._error

    def _settle(self, item: Result | bytes, group: list) -> None:
        res = group[-1]
        status = res.status
        if isinstance(item, bytes):  # a Parse
            self._parsing.discard(item)
            if status == _COMMAND_OK:
                self._names.add(item)
            elif status != _ABORTED:
                error = e.error_from_result(res, encoding=self.conn.info.encoding)
                if error.sqlstate == _DUPLICATE_PREPARED:
                    # Prepared by a batch that ended before reading the answer (an interrupt).
                    self._names.add(item)
                if self._error is None:
                    self._error = error
            return
        if status in (_TUPLES_OK, _COMMAND_OK):
            item._res = res
        elif status == _ABORTED:
            item._aborted = True
        else:
            item._error = e.error_from_result(res, encoding=self.conn.info.encoding)
            if item._error.sqlstate == _UNKNOWN_PREPARED:
                # Something dropped this session's prepared statements (DEALLOCATE ALL, say):
                # this batch fails, and the next prepares afresh.
                self._names.clear()
            if self._error is None:
                self._error = item._error

    def _load(self, res) -> list[dict]:
        if res.status != _TUPLES_OK or not res.ntuples:
            return []
        tx = self._tx
        tx.set_pgresult(res)
        names = [res.fname(i).decode() for i in range(res.nfields)]
        return tx.load_rows(0, res.ntuples, lambda values: dict(zip(names, values)))


def _wait(fd: int, event: int) -> None:
    # poll releases the GIL while it waits, as psycopg's own wait does.
    poller = select.poll()
    poller.register(fd, event | select.POLLERR | select.POLLHUP)
    poller.poll()


def one(conn: psycopg.Connection[Any], sql: str, params: Sequence[Any] | dict[str, Any] | None = None) -> Result:
    """Run one statement as its own transaction through a Batch: one round trip, one commit.

    For the worker's one-statement fenced writes (record a step, finish), where psycopg's
    cursor path costs more worker CPU than the statement costs the server (issue 9).

    Returns:
        the statement's Result, already read.

    Raises:
        as Batch.
    """
    with Batch(conn) as batch:
        result = batch.execute(sql, params)
    return result
