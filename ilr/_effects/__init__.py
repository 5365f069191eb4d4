"""Gated effects: T_dispatch, send, T_commit, recovery, orphans, targets (private)."""
