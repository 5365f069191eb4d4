"""Patches: ``ctx.patched`` and ``ctx.deprecate_patch``, branching new code without breaking
old histories (docs/protocol.md §4, patches).
"""

from __future__ import annotations

from typing import Any

from ilr._context.replay import ReplayCursor
from ilr._db import store
from ilr._errors import InvalidInput

MAX_PATCH_ID_LENGTH = 200


class Versioning(ReplayCursor):
    """``ctx.patched`` and ``ctx.deprecate_patch``."""

    def _check_patch_id(self, patch_id: Any, call: str) -> int:
        if not isinstance(patch_id, str) or not patch_id.strip():
            raise InvalidInput("patch_id", f"{call} needs a non-empty patch id string, got {patch_id!r}")
        if len(patch_id) > MAX_PATCH_ID_LENGTH:
            raise InvalidInput("patch_id", f"a patch id is at most {MAX_PATCH_ID_LENGTH} characters")
        seq = self._seq + 1
        first = self._patches.get(patch_id)
        if first is not None:
            raise InvalidInput(
                "patch_id",
                f"patch {patch_id!r} is used at two places in workflow {self.name}@"
                f"{self.version} (first at seq {first}, again at seq {seq}); a patch id "
                f"marks exactly one change: give each place its own id",
            )
        self._patches[patch_id] = seq
        return seq

    def patched(self, patch_id: str) -> bool:
        """Temporal's ``workflow.patched``: branch new code without breaking old histories
        (docs/protocol.md §4, patches).

        Write ``if ctx.patched("add-check"): <new code> else: <old code>``. At the frontier (a
        run that has not got this far before) it records a ``patch`` step row and returns True.
        In replay it returns True when the row at this seq is this patch (the history took the
        new branch), and False without consuming a seq otherwise: the row there belongs to the
        old code's next call, or the old code suspended at this seq (``waiting``). A call that
        suspended never wrote its row, so a history sleeping at this point replays down the old
        branch too.

        Retiring a patch (Temporal's ``deprecate_patch``), in three deployments:
          1. ``if ctx.patched(id): new else: old`` while histories from before the patch may be
             open;
          2. once ``rt.drain_report()`` / ``rt.list`` show none of those is open, replace the
             branch with ``ctx.deprecate_patch(id)`` followed by the new code alone: histories
             that recorded the patch replay, new runs record nothing;
          3. once no open history holds the patch row, delete the ``deprecate_patch`` line.
        Each step changes the module source, so deploy it with ``--allow-code-change`` (the
        patch is what makes the change safe to replay).

        Args:
            patch_id: a non-empty string (at most 200 characters), used at one place only.

        Returns:
            True to run the new code, False to run the old code.

        Raises:
            InvalidInput: an empty or over-long id, or an id already checked at another place
                in this workflow (field "patch_id"); nothing is recorded.
        """
        seq = self._check_patch_id(patch_id, "patched")
        row = self._steps.get(seq)
        if row is not None:
            if row["kind"] == "patch" and row["name"] == patch_id:
                self._steps.replayed(row)
                self._seq = seq
                return True
            return False
        waiting = self._run.waiting or {}
        if waiting.get("seq") == seq:
            return False  # the old code suspended here: its history predates the patch
        self._history_gate()
        store.record_step(self._conn, self._run, seq=seq, kind="patch", name=patch_id)
        self._steps[seq] = {
            "seq": seq,
            "kind": "patch",
            "name": patch_id,
            "fingerprint": None,
            "output": None,
            "error": None,
        }
        self._seq = seq
        return True

    def deprecate_patch(self, patch_id: str) -> None:
        """Temporal's ``workflow.deprecate_patch``: the second step of retiring a patch (see
        ``patched``). Consumes the ``patch`` row of ``patch_id`` when the history has one at
        this seq, records nothing at the frontier, and returns None.

        Raises:
            InvalidInput: as ``patched`` (field "patch_id").
        """
        seq = self._check_patch_id(patch_id, "deprecate_patch")
        row = self._steps.get(seq)
        if row is not None and row["kind"] == "patch" and row["name"] == patch_id:
            self._steps.replayed(row)
            self._seq = seq
