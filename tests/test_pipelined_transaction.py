"""db.pipelined_transaction on real PostgreSQL: one transaction in pipeline mode with BEGIN and
COMMIT queued (issue 9), and an optional transaction committed ahead of it in the same round
trip (the effect path's response log). What commits, what rolls back, and that the connection
is usable afterwards."""

from __future__ import annotations

import psycopg
import pytest

from ilr import db


@pytest.fixture
def conn(test_dsn):
    c = db.connect(test_dsn)
    c.execute("drop table if exists public.ptx; create table public.ptx (x int primary key)")
    yield c
    c.execute("drop table if exists public.ptx")
    c.close()


def rows(c) -> list[int]:
    return [r["x"] for r in c.execute("select x from public.ptx order by x").fetchall()]


def test_the_block_commits_and_reads_its_own_writes(conn):
    with db.pipelined_transaction(conn):
        assert conn.execute("insert into public.ptx values (1) returning x").fetchone()["x"] == 1
        conn.execute("insert into public.ptx values (2)")
        assert conn.execute("select count(*) as n from public.ptx").fetchone()["n"] == 2
    assert rows(conn) == [1, 2]
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_an_exception_in_the_block_rolls_everything_back(conn):
    with pytest.raises(KeyError):
        with db.pipelined_transaction(conn):
            conn.execute("insert into public.ptx values (3)")
            conn.execute("select 1").fetchone()  # the insert has run on the server
            raise KeyError("fenced, say")
    assert rows(conn) == []
    assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE


def test_a_server_error_rolls_back_the_statements_before_it(conn):
    conn.execute("insert into public.ptx values (1)")
    with pytest.raises(psycopg.errors.UniqueViolation):
        with db.pipelined_transaction(conn):
            conn.execute("insert into public.ptx values (4)")
            conn.execute("insert into public.ptx values (1)")
            conn.execute("insert into public.ptx values (5)")
    assert rows(conn) == [1]
    with db.pipelined_transaction(conn):  # the connection is usable again
        conn.execute("insert into public.ptx values (6)")
    assert rows(conn) == [1, 6]


def test_before_commits_even_when_the_block_fails(conn):
    conn.execute("insert into public.ptx values (1)")
    with pytest.raises(psycopg.errors.UniqueViolation):
        with db.pipelined_transaction(conn, before=[("insert into public.ptx values (%s)", (10,))]):
            conn.execute("insert into public.ptx values (11)")
            conn.execute("insert into public.ptx values (1)").fetchone()
    assert rows(conn) == [1, 10]
    with pytest.raises(RuntimeError):
        with db.pipelined_transaction(conn, before=[("insert into public.ptx values (%s)", (20,))]):
            conn.execute("insert into public.ptx values (21)")
            raise RuntimeError("after the send")
    assert rows(conn) == [1, 10, 20]


def test_a_failing_before_stops_the_block_and_raises(conn):
    conn.execute("insert into public.ptx values (1)")
    with pytest.raises(psycopg.errors.UniqueViolation):
        with db.pipelined_transaction(conn, before=[("insert into public.ptx values (%s)", (1,))]):
            conn.execute("insert into public.ptx values (30)")
            conn.execute("select 1").fetchone()
    assert rows(conn) == [1]


def test_it_refuses_a_connection_inside_a_transaction(conn):
    conn.execute("begin")
    with pytest.raises(psycopg.ProgrammingError, match="idle autocommit"):
        with db.pipelined_transaction(conn):
            pass
    conn.execute("rollback")
