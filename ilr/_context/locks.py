"""``ctx.lock``: a durable lock around part of a workflow (docs/protocol.md §5.4).

The slot belongs to the workflow, as a concurrency key's does: held through sleeps, waits and
takeovers inside the block, released at the block's end (a recorded step), when the workflow
ends, or when it continues as new. A gated effect sent inside the block re-checks in T_dispatch
that the workflow still holds every lock around it (``held_locks_premise``).
"""

from __future__ import annotations

from contextlib import contextmanager

from ilr._concurrency import check_key, check_limit
from ilr._context.replay import ReplayCursor
from ilr._db import locks
from ilr._errors import InvalidInput
from ilr._queries.slots import LOCKS_HELD_FOR_SHARE


class LockCalls(ReplayCursor):
    """``ctx.lock``, and the keys of the blocks the workflow code is inside."""

    @contextmanager
    def lock(self, key: str, limit: int = 1):
        """Hold a slot of ``key`` for the block: at most ``limit`` workflows are inside blocks
        of one key at once, across all workers, held through sleeps and approval waits.

        Entering takes a slot, or waits (the workflow sleeps, using no worker) until one frees;
        leaving the block, normally or by an exception, gives it back; so does the workflow's
        end or its continue-as-new inside the block. Both are recorded steps (kind "lock",
        names "lock:<key>" and "unlock:<key>"), so a replay holds it at the same calls. A gated
        effect inside the block is refused (REFUSED:stale_premise) if the slot was revoked
        (``rt.revoke_lock``).

        Args:
            key: 1 to 200 characters; not the workflow's own concurrency key.
            limit: slots of the key, 1 to 1000. Default 1.

        Raises:
            InvalidInput: a bad key or limit, the workflow's own concurrency key, or a key whose
                block this code is already inside; nothing is written.
            Cancelled: a cancel is pending (delivered once, at entry).
        """
        check_key(key, "key")
        check_limit(limit)
        if key in self._held_locks:
            raise InvalidInput("key", f"this workflow is already inside a ctx.lock({key!r}) block")
        seq = self._next_seq()
        name = f"lock:{key}"
        if self._replay(seq, "lock", name) is None:
            self._frontier(seq, "lock", name)
            try:
                locks.take(self._conn, self._run, seq=seq, name=name, key=key, limit=limit)
            except BaseException:
                self.suspended = self.suspended or self._run.released
                raise
        self._held_locks.append(key)
        try:
            yield
        except Exception:
            self._leave(key)
            raise
        except BaseException:
            # A suspend, continue-as-new or fence unwinds the run, not the block: the slot stays
            # with the workflow (continue-as-new and the workflow's end release it).
            self._held_locks.remove(key)
            raise
        else:
            self._leave(key)

    def _leave(self, key: str) -> None:
        """The block's end: give the slot back, as a recorded step (no cancel is delivered here:
        leaving a block is a release, like compensation)."""
        self._held_locks.remove(key)
        seq = self._next_seq()
        name = f"unlock:{key}"
        if self._replay(seq, "lock", name) is None:
            self._check_waiting(seq, "lock", name)
            locks.give_back(self._conn, self._run, seq=seq, name=name, key=key)

    def held_locks_premise(self):
        """A T_dispatch premise that refuses the send when a lock around it was lost, or None
        outside every block."""
        keys = list(self._held_locks)
        if not keys:
            return None
        wf_id = self.workflow_id

        def locks_held(cur) -> list[str]:
            held = {r["key"] for r in cur.execute(LOCKS_HELD_FOR_SHARE, (wf_id, keys)).fetchall()}
            return [f"ctx.lock({k!r}) is no longer held by this workflow (revoked)" for k in keys if k not in held]

        return locks_held
