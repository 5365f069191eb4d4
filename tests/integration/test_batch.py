"""ilr.batch on real PostgreSQL: one transaction of statements queued on psycopg's libpq handle
(issue 9), with an optional transaction committed ahead of it in the same round trip (the
effect path's response log). What commits, what rolls back, that one transaction spans the
round trips, that each statement is prepared once per connection, and that the connection is
usable afterwards, by psycopg too."""

from __future__ import annotations

import psycopg
import pytest

from ilr import _db as db
from ilr._db import batch
from ilr._db.batch import Batch
from tests.support.waits import wait_for


@pytest.fixture
def conn(test_dsn):
    c = db.connect(test_dsn)
    c.execute("drop table if exists public.ptx; create table public.ptx (x int primary key, t timestamptz)")
    yield c
    c.execute("drop table if exists public.ptx")
    c.close()


def rows(c) -> list[int]:
    return [r["x"] for r in c.execute("select x from public.ptx order by x").fetchall()]


def prepared(c, sql: str) -> int:
    """How many prepared statements of this session hold ``sql`` (in $n form)."""
    _, query, _ = batch._statement(sql)
    return c.execute(
        "select count(*) as n from pg_prepared_statements where statement = %s", (query.decode(),)
    ).fetchone()["n"]


def test_the_block_commits_and_reads_its_own_writes(conn):
    with Batch(conn) as b:
        assert b.execute("insert into public.ptx values (%s) returning x", (1,)).fetchone() == {"x": 1}
        b.execute("insert into public.ptx values (%(x)s)", {"x": 2})
        assert b.execute("select count(*) as n from public.ptx").fetchone()["n"] == 2
    assert rows(conn) == [1, 2]
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_one_transaction_spans_the_round_trips(conn):
    # No BEGIN is sent: the statements up to the Sync are one transaction, so the second
    # round trip still has the first one's transaction id and now().
    sql = "select txid_current() as xid, now() as now"
    with Batch(conn) as b:
        first = b.execute(sql).fetchone()
        b.execute("insert into public.ptx values (%s)", (1,))
        second = b.execute(sql).fetchone()
    assert first == second
    assert rows(conn) == [1]


def test_an_exception_in_the_block_rolls_everything_back(conn):
    with pytest.raises(KeyError):
        with Batch(conn) as b:
            b.execute("insert into public.ptx values (%s)", (3,))
            b.execute("select 1").fetchone()  # the insert has run on the server
            raise KeyError("fenced, say")
    assert rows(conn) == []
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_a_server_error_rolls_back_the_statements_before_it(conn):
    conn.execute("insert into public.ptx values (1)")
    with pytest.raises(psycopg.errors.UniqueViolation) as raised:
        with Batch(conn) as b:
            b.execute("insert into public.ptx values (%s)", (4,))
            b.execute("insert into public.ptx values (%s)", (1,))
            b.execute("insert into public.ptx values (%s)", (5,))
    assert raised.value.diag.constraint_name == "ptx_pkey"
    assert rows(conn) == [1]
    with Batch(conn) as b:  # the connection is usable again
        b.execute("insert into public.ptx values (%s)", (6,))
    assert rows(conn) == [1, 6]


def test_a_read_after_a_failed_statement_raises_the_failure(conn):
    conn.execute("insert into public.ptx values (1)")
    with pytest.raises(psycopg.errors.UniqueViolation):
        with Batch(conn) as b:
            b.execute("insert into public.ptx values (%s)", (1,))
            b.execute("select 1 as one").fetchone()
    assert rows(conn) == [1]


def test_before_commits_even_when_the_block_fails(conn):
    conn.execute("insert into public.ptx values (1)")
    with pytest.raises(psycopg.errors.UniqueViolation):
        with Batch(conn, before=[("insert into public.ptx values (%s)", (10,))]) as b:
            b.execute("insert into public.ptx values (%s)", (11,))
            b.execute("insert into public.ptx values (%s)", (1,)).fetchone()
    assert rows(conn) == [1, 10]
    with pytest.raises(RuntimeError):
        with Batch(conn, before=[("insert into public.ptx values (%s)", (20,))]) as b:
            b.execute("insert into public.ptx values (%s)", (21,))
            raise RuntimeError("after the send")
    assert rows(conn) == [1, 10, 20]


def test_a_failing_before_stops_the_block_and_raises(conn):
    conn.execute("insert into public.ptx values (1)")
    with pytest.raises(psycopg.errors.UniqueViolation):
        with Batch(conn, before=[("insert into public.ptx values (%s)", (1,))]) as b:
            b.execute("insert into public.ptx values (%s)", (30,))
            b.execute("select 1").fetchone()
    assert rows(conn) == [1]


def test_it_refuses_a_connection_inside_a_transaction(conn):
    conn.execute("begin")
    with pytest.raises(psycopg.ProgrammingError, match="idle autocommit"):
        with Batch(conn):
            pass
    conn.execute("rollback")


def test_a_statement_is_prepared_once_per_connection(conn):
    sql = "insert into public.ptx values (%s)"
    for x in (1, 2, 3):
        with Batch(conn) as b:
            b.execute(sql, (x,))
    assert prepared(conn, sql) == 1
    assert rows(conn) == [1, 2, 3]


def test_a_parse_skipped_after_an_error_is_not_taken_as_prepared(conn):
    # The first use of a statement sends its Parse in the same batch. When an earlier
    # statement failed, the server skips that Parse; the next batch must send it again.
    conn.execute("insert into public.ptx values (1)")
    later = "select x from public.ptx where x >= %s order by x"
    with pytest.raises(psycopg.errors.UniqueViolation):
        with Batch(conn) as b:
            b.execute("insert into public.ptx values (%s)", (1,))
            b.execute(later, (0,))
    assert prepared(conn, later) == 0
    with Batch(conn) as b:
        assert b.execute(later, (0,)).fetchall() == [{"x": 1}]


def test_a_syntax_error_raises_and_leaves_the_connection_usable(conn):
    with pytest.raises(psycopg.errors.SyntaxError):
        with Batch(conn) as b:
            b.execute("selec 1")
    with Batch(conn) as b:
        assert b.execute("select %s::int + 1 as v", (41,)).fetchone() == {"v": 42}
    assert conn.execute("select 1 as one").fetchone() == {"one": 1}  # and psycopg's own path


def test_placeholders(conn):
    with Batch(conn) as b:
        assert b.execute("select %(a)s::int + %(a)s::int + %(b)s::int as v", {"a": 1, "b": 5}).fetchone() == {"v": 7}
        assert b.execute("select '100%%'::text as v, %s::text as w", ("x",)).fetchone() == {"v": "100%", "w": "x"}
        assert b.execute("select %s::text[] as v", (["a", "b"],)).fetchone() == {"v": ["a", "b"]}
    with pytest.raises(psycopg.ProgrammingError, match="placeholders"):
        with Batch(conn) as b:
            b.execute("select %s::int, %(a)s::int", {"a": 1})
    with pytest.raises(psycopg.ProgrammingError, match="2 placeholders but 1"):
        with Batch(conn) as b:
            b.execute("select %s::int, %s::int", (1,))


def test_rows_load_through_the_connections_loaders(conn):
    # db.connect registers the infinity-aware timestamptz loader; a Batch uses it too.
    with Batch(conn) as b:
        b.execute("insert into public.ptx values (%s, 'infinity')", (1,))
        row = b.execute("select t from public.ptx where x = %s", (1,)).fetchone()
    assert row == {"t": db.INFINITY}


def test_one_runs_a_statement_as_its_own_transaction(conn):
    result = batch.one(conn, "insert into public.ptx values (%s), (%s) returning x", (7, 8))
    assert result.fetchall() == [{"x": 7}, {"x": 8}]
    assert result.rowcount == 2
    assert rows(conn) == [7, 8]
    with pytest.raises(psycopg.errors.UniqueViolation):
        batch.one(conn, "insert into public.ptx values (%s)", (7,))
    assert rows(conn) == [7, 8]


def test_past_the_cap_statements_run_unprepared(conn, monkeypatch):
    monkeypatch.setattr(batch, "MAX_PREPARED", 0)
    sql = "select %s::int * 2 as v"
    with Batch(conn) as b:
        assert b.execute(sql, (21,)).fetchone() == {"v": 42}
    assert prepared(conn, sql) == 0


def test_without_parameters_the_text_goes_as_written(conn):
    # As psycopg's execute: no placeholder processing when no parameters are passed.
    with Batch(conn) as b:
        assert b.execute("select '100%' as v, '%s' as w").fetchone() == {"v": "100%", "w": "%s"}


def test_psycopgs_rollback_cannot_drop_the_batch_statements(conn):
    # psycopg answers a rollback with DEALLOCATE ALL once it has prepared statements of its
    # own; db.connect turns its preparation off, so a Batch's named statements survive.
    sql = "select x from public.ptx where x = %s"
    with Batch(conn) as b:
        b.execute(sql, (1,))
    for _ in range(8):  # past psycopg's default prepare_threshold of 5
        conn.execute("select count(*) from public.ptx where x > %s", (0,)).fetchone()
    with pytest.raises(KeyError):
        with conn.transaction():
            conn.execute("insert into public.ptx values (1)")
            raise KeyError("fenced, say")
    with Batch(conn) as b:
        assert b.execute(sql, (1,)).fetchall() == []
    assert prepared(conn, sql) == 1


def test_after_a_deallocate_the_next_batch_prepares_again(conn):
    sql = "select %s::int as v"
    with Batch(conn) as b:
        b.execute(sql, (1,))
    conn.execute("deallocate all")
    with pytest.raises(psycopg.errors.InvalidSqlStatementName):
        with Batch(conn) as b:
            b.execute(sql, (2,))
    with Batch(conn) as b:
        assert b.execute(sql, (3,)).fetchone() == {"v": 3}


def test_a_statement_prepared_but_not_recorded_is_taken_as_prepared(conn):
    # An interrupt between the server's ParseComplete and the batch reading it leaves the
    # statement prepared on the server and unknown here: its next Parse fails with 42P05.
    sql = "select %s::int + 10 as v"
    name, query, _ = batch._statement(sql)
    conn.execute(f'prepare "{name.decode()}" as {query.decode()}')
    with pytest.raises(psycopg.errors.DuplicatePreparedStatement):
        with Batch(conn) as b:
            b.execute(sql, (1,))
    with Batch(conn) as b:
        assert b.execute(sql, (1,)).fetchone() == {"v": 11}


def test_a_before_that_cannot_be_queued_releases_the_connection(conn):
    with pytest.raises(psycopg.ProgrammingError):
        with Batch(conn, before=[("insert into public.ptx values (%s)", (object(),))]):
            pass
    assert conn.lock.acquire(blocking=False), "the batch kept the connection's lock"
    conn.lock.release()
    assert conn.pgconn.pipeline_status == psycopg.pq.PipelineStatus.OFF
    assert conn.execute("select 1 as one").fetchone() == {"one": 1}


def test_a_connection_that_broke_inside_the_block_does_not_look_committed(conn, test_dsn):
    victim = db.connect(test_dsn)
    try:
        with pytest.raises(psycopg.OperationalError):
            with Batch(victim) as b:
                b.execute("insert into public.ptx values (%s)", (1,))
                pid = b.execute("select pg_backend_pid() as pid").fetchone()["pid"]
                conn.execute("select pg_terminate_backend(%s)", (pid,))
                try:  # a block that swallows the error of the broken connection
                    b.execute("select 1").fetchone()
                except psycopg.OperationalError:
                    pass
        assert rows(conn) == []
    finally:
        victim.close()


def test_send_puts_the_queued_statements_on_the_wire_before_any_read(conn, test_dsn):
    # What send() is for: the server runs the statements while the caller does other work
    # (the effect path encodes its entries then). Before send() nothing has left the client.
    other = db.connect(test_dsn)
    held = "select count(*) as n from pg_locks where locktype = 'advisory' and classid = 0 and objid = 4242 and granted"
    try:
        with Batch(conn) as b:
            lock = b.execute("select true as taken from pg_advisory_xact_lock(%s)", (4242,))
            assert other.execute(held).fetchone()["n"] == 0
            b.send()
            wait_for(lambda: other.execute(held).fetchone()["n"] == 1, timeout=10, message="the lock, with no read")
            assert lock.fetchone() == {"taken": True}
            b.execute("insert into public.ptx values (%s)", (7,))
        assert other.execute(held).fetchone()["n"] == 0  # the transaction ended
        assert rows(conn) == [7]
    finally:
        other.close()
