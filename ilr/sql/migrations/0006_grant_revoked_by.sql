-- Who revoked a grant. rt.revoke and the admin's revoke always named a person (revoke_in
-- requires `by`), but only revoked_at was stored, so the grant itself could not say who
-- ended it. Grants revoked before this migration keep a null revoked_by.
alter table ilr.grants add column if not exists revoked_by text;
alter table ilr.grants add constraint grants_revoked_by_with_revoked_at
  check (revoked_by is null or revoked_at is not null);
