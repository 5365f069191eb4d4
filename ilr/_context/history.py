"""A run's history as its replay reads it: the recorded step rows in pages, and its size
(docs/protocol.md §5.7).

The claim reads the rows of seq 1 to CLAIM_PRELOAD_SEQS with the workflow; a longer history is
read on, page by page (keyset pagination on seq), as the replay reaches each page, and a row is
released once replayed: a worker holds at most about two pages of a history, however long.

The size is counted as the run goes, from what it reads and writes, with no statement of its
own: ``length``, the step rows at or before the replay's position, and ``bytes``, the sum over
them of ``payload_bytes`` of their output and error. Both are functions of the history, so a
replay finds the same figures at the same call as the run that recorded it.
"""

from __future__ import annotations

import json
from typing import Any

from ilr import _killpoints as killpoints
from ilr._conf import settings
from ilr._errors import HistoryLimitExceeded
from ilr._queries.claims import CLAIM_PRELOAD_SEQS
from ilr._queries.steps import HISTORY_PAGE_SELECT_STEPS

PAGE_ROWS = 500
"""Step rows read per page past the claim's preload."""


def payload_bytes(value: Any) -> int:
    """The size of one stored payload (a step's output or error; None counts 0): the bytes of its
    UTF-8 JSON text as ``json.dumps(value, ensure_ascii=False)`` writes it (``, `` and ``: ``
    separators), so the same value measures the same however its keys are ordered."""
    if value is None:
        return 0
    return len(json.dumps(value, ensure_ascii=False).encode())


def text_bytes(text: str | None) -> int:
    """``payload_bytes`` of the JSON text a write sends (re-read: writers differ in escaping)."""
    return 0 if text is None else payload_bytes(json.loads(text))


class History:
    """The recorded step rows of one run, by seq, read in pages; and the history's size so far.

    Args:
        conn: a callable returning the run's connection for the next page's statement.
        workflow_id: the run's workflow.
        preloaded: the rows the claim read ({seq: row}, seqs 1 to CLAIM_PRELOAD_SEQS), or None
            (read from the first page).
    """

    def __init__(self, conn, workflow_id: str, preloaded: dict[int, dict] | None):
        self._conn = conn
        self._workflow_id = workflow_id
        self._rows: dict[int, dict] = preloaded if preloaded is not None else {}
        # Every row of seq <= _read_through is in _rows (or was, and was replayed); None: all of them.
        self._read_through: int | None = CLAIM_PRELOAD_SEQS if preloaded is not None else 0
        self._counted_through = 0
        self.length = 0
        """Step rows of the history at or before the replay's position."""
        self.bytes = 0
        """``payload_bytes`` of their outputs and errors, summed."""
        self.pages = 0
        """Pages read after the claim (for the benchmark and tests)."""
        self.warn_steps = settings.HISTORY_WARN_STEPS
        self.warn_bytes = settings.HISTORY_WARN_BYTES
        self.limit_steps = settings.HISTORY_LIMIT_STEPS
        self.limit_bytes = settings.HISTORY_LIMIT_BYTES

    def get(self, seq: int) -> dict | None:
        """The recorded row at ``seq``, or None; reads the pages up to ``seq`` first."""
        while self._read_through is not None and seq > self._read_through:
            self._read_page()
        return self._rows.get(seq)

    def __contains__(self, seq: int) -> bool:
        return self.get(seq) is not None

    def __setitem__(self, seq: int, row: dict) -> None:
        """Keep a row this run recorded (already counted by ``recorded``)."""
        self._rows[seq] = row

    def _read_page(self) -> None:
        after = self._read_through or 0
        rows = self._conn().execute(HISTORY_PAGE_SELECT_STEPS, (self._workflow_id, after, PAGE_ROWS)).fetchall()
        # The rows of earlier pages were replayed: the dict is replaced, not grown.
        self._rows = {row["seq"]: row for row in rows}
        self._read_through = rows[-1]["seq"] if len(rows) == PAGE_ROWS else None
        self.pages += 1
        killpoints.hit("replay_page")

    def replayed(self, row: dict) -> None:
        """The replay consumed ``row``: count it and release it."""
        seq = row["seq"]
        self._rows.pop(seq, None)
        if seq > self._counted_through:
            self._counted_through = seq
            self.length += 1
            self.bytes += payload_bytes(row["output"]) + payload_bytes(row.get("error"))

    def recorded(self, seq: int, output_json: str | None, error_json: str | None) -> None:
        """This run wrote the row at ``seq`` with this output and error text: count it."""
        if seq > self._counted_through:
            self._counted_through = seq
            self.length += 1
            self.bytes += text_bytes(output_json) + text_bytes(error_json)

    @property
    def continue_as_new_suggested(self) -> bool:
        """True past ILR_HISTORY_WARN_STEPS or ILR_HISTORY_WARN_BYTES."""
        return past(self.length, self.warn_steps) or past(self.bytes, self.warn_bytes)

    def limit_exceeded(self) -> HistoryLimitExceeded | None:
        """The error of the next durable call at the frontier: a call that would record step row
        ILR_HISTORY_LIMIT_STEPS + 1, or any call once the payloads exceed ILR_HISTORY_LIMIT_BYTES;
        None when it may run."""
        if self.limit_steps is not None and self.length + 1 > self.limit_steps:
            return HistoryLimitExceeded(
                "ILR_HISTORY_LIMIT_STEPS", self.limit_steps, self.length + 1, self.length, self.bytes
            )
        if past(self.bytes, self.limit_bytes):
            return HistoryLimitExceeded(
                "ILR_HISTORY_LIMIT_BYTES", self.limit_bytes, self.bytes, self.length, self.bytes
            )
        return None


def past(figure: int, threshold: int | None) -> bool:
    """``figure`` is past ``threshold`` (None: never)."""
    return threshold is not None and figure > threshold
