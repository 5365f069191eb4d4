"""failover.seen under the race every promotion starts: several workers open their claim
connections on the new primary at once, and all but one lose the insert of the new timeline's
row (ilr.failover, rule 1).

The loser's statement snapshot predates the winner's commit, so a read of ``ilr.timelines`` in
that statement misses the row its ``on conflict do nothing`` waited for. The switch it returns
must still carry the winner's ``seen_at``: a switch without one made every suspect first send
raise a TypeError (``failover.suspect`` adds CLOCK_MARGIN to it), and the workflow failed with
its lost dispatch unaccounted for (seen in prove.harness.failover's async run).

Real PostgreSQL: the second connection blocks on the first one's uncommitted insert.
"""

from __future__ import annotations

import threading

import pytest

from ilr import _db as db
from ilr._ops import failover
from ilr._queries.deployments import TIMELINE_SEEN_SQL
from tests.support.queries.misc import (
    DELETE_TIMELINES,
    SEED_TIMELINES,
    SEED_TIMELINES_AN_HOUR_AGO,
    TIMELINE_ID_SEEN_AT_OF_TIMELINES,
)
from tests.support.waits import wait_for


@pytest.fixture
def new_timeline(clean_db, django_db_blocker):
    """A database whose recorded baseline is the timeline before the current one, as on a
    promoted standby; the table is put back as it was afterwards."""
    with django_db_blocker.unblock():
        with db.connect(clean_db) as conn:
            saved = conn.execute(TIMELINE_ID_SEEN_AT_OF_TIMELINES).fetchall()
            current = conn.execute("select ilr.current_timeline() as t").fetchone()["t"]
            conn.execute(DELETE_TIMELINES)
            conn.execute(
                SEED_TIMELINES_AN_HOUR_AGO,
                (current - 1,),
            )
        try:
            yield clean_db, current
        finally:
            with db.connect(clean_db) as conn:
                conn.execute(DELETE_TIMELINES)
                for row in saved:
                    conn.execute(
                        SEED_TIMELINES,
                        (row["timeline_id"], row["seen_at"]),
                    )


def test_a_worker_that_loses_the_timeline_insert_still_reads_when_the_switch_was_seen(new_timeline):
    dsn, current = new_timeline
    winner = db.connect(dsn, application_name="seen-winner")
    loser = db.connect(dsn, application_name="seen-loser")
    got: dict = {}
    try:
        # The winner records the new timeline in a transaction it holds open.
        winner.execute("begin")
        won = winner.execute(TIMELINE_SEEN_SQL).fetchone()
        assert won["seen_at"] is not None and won["timeline"] == current

        def lose() -> None:
            try:
                got["switch"] = failover.seen(loser)
            except BaseException as exc:  # noqa: BLE001 - reported below
                got["error"] = exc

        thread = threading.Thread(target=lose, daemon=True)
        thread.start()
        with db.connect(dsn) as watch:
            wait_for(
                lambda: (
                    watch.execute(
                        "select count(*) as n from pg_stat_activity "
                        "where application_name = 'seen-loser' and wait_event_type = 'Lock'"
                    ).fetchone()["n"]
                    == 1
                ),
                message="the second connection waiting on the first one's insert",
            )
        winner.execute("commit")
        thread.join(30)
        assert not thread.is_alive()
        assert "error" not in got, got.get("error")
        assert got["switch"] == {"timeline": current, "at": won["seen_at"]}
        # and the switch is usable: a lineage born before it is suspect.
        run = type("Run", (), {"failover": got["switch"], "born_at": won["seen_at"] - failover.CLOCK_MARGIN * 2})()
        assert failover.suspect(run) == got["switch"]
    finally:
        db.discard(winner)
        db.discard(loser)
