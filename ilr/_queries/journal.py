"""Statements on ilr.journal: the chained entries of each effect."""

from __future__ import annotations

ENTRIES_SELECT_JOURNAL = "select body from ilr.journal where effect_id = %s order by seq"
"""Read from ilr.journal (``_journal.journal.entries``)."""


# -- from _journal/journal.py -------------------------------------------------------------------

LAST_HASH_SQL = (
    "select hash, coalesce(n, (select count(*) from ilr.journal c where c.effect_id = j.effect_id))::int as n "
    "from ilr.journal j where effect_id = %s order by seq desc limit 1"
)
"""The chain's tail: its hash and position (an entry written before positions existed: the
chain's length, evaluated only then)."""


def journal_insert_sql(also: list[str], rows: int) -> str:
    """One INSERT of ``rows`` entries (effect_id, kind, body, prev, hash, n) into ilr.journal, with
    the ``also`` statements (statements of this package) as data-modifying CTEs ahead of it
    (``_journal.journal._insert``). The trigger journal_head writes the chain's head on the
    effect row after the statement."""
    ctes = ", ".join(f"also{i} as ({sql})" for i, sql in enumerate(also))
    values = ", ".join(["(%s, %s, %s, %s, %s, %s)"] * rows)
    head = f"with {ctes} " if ctes else ""
    return f"{head}insert into ilr.journal (effect_id, kind, body, prev, hash, n) values {values}"
