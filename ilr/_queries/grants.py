"""Statements on ilr.grants: issuing, checking and revoking grants."""

from __future__ import annotations

RECOVER_SELECT_GRANTS = (
    "select revoked_at is null and (expires_at is null or expires_at > now()) as live from ilr.grants where id = %s"
)
"""Read from ilr.grants (``_effects.recovery.recover``)."""

INSERT_PAYLOAD_GRANT_INSERT_GRANTS = (
    "insert into ilr.grants (id, principal, action, max_cents, payload_hash, facts_seen, granted_by, "
    "expires_at) values (%s, %s, %s, %s, %s, %s::jsonb, %s, now() + make_interval(secs => %s))"
)
"""Insert into ilr.grants (``_ops.grants.insert_payload_grant``)."""

REVOKE_IN_UPDATE_GRANTS = "update ilr.grants set revoked_at = now(), revoked_by = %s where id = %s"
"""Set revoked_at, revoked_by on ilr.grants (``_ops.grants.revoke_in``)."""

GRANT_IN_INSERT_GRANTS = (
    "insert into ilr.grants (id, principal, action, max_cents, granted_by, expires_at) values (%s, %s, "
    "%s, %s, %s, now() + make_interval(secs => %s)) on conflict (id) do nothing returning id"
)
"""Insert into ilr.grants (``_ops.grants.grant_in``)."""

REVOKE_IN_SELECT_GRANTS = "select revoked_at, revoked_by from ilr.grants where id = %s for no key update"
"""Lock (shared) and read rows of ilr.grants (``_ops.grants.revoke_in``)."""


# -- from _effects/rules.py ---------------------------------------------------------------------

GRANT_FOR_SHARE = """
select id, principal, action, max_cents, payload_hash, granted_by, expires_at, revoked_at,
       (expires_at is null or expires_at > now()) as live_now
  from ilr.grants where id = %s for share
"""
"""Read a grant under a share lock for T_dispatch's re-check: a revoke (which takes the row for
update) waits for the dispatch, or the dispatch sees the revoke (``_effects.rules``)."""
