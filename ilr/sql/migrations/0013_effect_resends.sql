-- Resends that back off and converge (docs/protocol.md §6.5): the last unknown-outcome answer
-- of a send, and the earliest time recovery may act again. Written by the sender that saw the
-- failure, in the statement that releases its workflow; read by the next recovery. Neither is
-- signed: the journal's RESENT entries are the signed record of every send.
alter table ilr.effects add column if not exists last_error jsonb;
alter table ilr.effects add column if not exists next_attempt_at timestamptz;
-- RESENT: the signed record of a recovery resend, appended before its bytes leave.
alter table ilr.journal drop constraint if exists journal_kind_check;
alter table ilr.journal add constraint journal_kind_check check (kind in (
  'PROPOSED','AUTHORIZED','DISPATCHED','RESENT','COMMITTED','REFUSED','AMBIGUOUS','LATE_RESULT'));
