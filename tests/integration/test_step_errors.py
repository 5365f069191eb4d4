"""A step that keeps raising (issue 20): a long message is truncated, and each attempt is a
WARNING record (logger "ilr.steps"). Real PostgreSQL, one in-process worker, for the log record."""

from __future__ import annotations

import threading

from tests.support.waits import failing, wait_for


def test_a_long_message_is_truncated_and_each_attempt_is_a_warning(rt, test_dsn, caplog):
    """An in-process worker, so the log record itself is seen: level WARNING, logger ilr.steps."""
    from ilr import _registry as registry
    from ilr._worker.worker import Worker

    worker = Worker(
        "inproc-af", [registry.get("always_fails", "1")], concurrency=1, lease_ttl=5, poll=0.1, dsn=test_dsn
    )
    thread = threading.Thread(target=worker.run, daemon=True)
    caplog.set_level("WARNING", logger="ilr.steps")
    thread.start()
    try:
        rt.start("always_fails", "af-long", {"message": "x" * 5000})
        err = failing(rt, "af-long", 2)["last_error"]
        assert err["type"] == "ValueError" and len(err["message"]) == 2000, len(err["message"])
        records = wait_for(
            lambda: [r for r in caplog.records if r.name == "ilr.steps" and "af-long" in r.getMessage()],
            message="the warning record",
        )
        assert all(r.levelname == "WARNING" for r in records)
        assert len(records[0].getMessage()) < 2400
        rt.cancel("af-long", by="test")
        wait_for(lambda: rt.describe("af-long")["status"] == "cancelled", message="af-long cancelled")
    finally:
        worker.stop()
        thread.join(30)
    assert not thread.is_alive()
