-- A receipt's integrity (issue 40; docs/protocol.md §2 and §9, docs/security.md).
--
-- Each entry carries its position n in the chain (1 for the first; null in entries written
-- before this migration, whose position is their place in the chain). The effect row carries
-- the chain's head (head_hash, head_n): written by the database itself, in the statement that
-- appends, so no appender can forget it and the effect path keeps its round trips. A chain that
-- ends before its head was cut short (verify: "truncated").
alter table ilr.journal add column if not exists n int;
alter table ilr.effects add column if not exists head_hash text;
alter table ilr.effects add column if not exists head_n int;

-- The heads of the chains written so far: their last entry, and how many entries they hold.
update ilr.effects e set head_hash = t.hash, head_n = t.n
  from (select distinct on (effect_id) effect_id, hash, count(*) over (partition by effect_id) as n
          from ilr.journal order by effect_id, seq desc) t
 where e.effect_id = t.effect_id;

create or replace function ilr.journal_head() returns trigger language plpgsql as $$
begin
  -- The last entry each statement appended to each chain; an entry with no n (written by a
  -- worker older than this migration) counts its chain.
  update ilr.effects e
     set head_hash = h.hash,
         head_n = coalesce(h.n, (select count(*) from ilr.journal j where j.effect_id = h.effect_id))
    from (select distinct on (effect_id) effect_id, hash, n from appended order by effect_id, seq desc) h
   where e.effect_id = h.effect_id;
  return null;
end $$;
create or replace trigger journal_head after insert on ilr.journal
  referencing new table as appended for each statement execute function ilr.journal_head();

-- RECONCILED: a person's signed attestation of an AMBIGUOUS effect, at most one per effect.
alter table ilr.journal drop constraint if exists journal_kind_check;
alter table ilr.journal add constraint journal_kind_check check (kind in (
  'PROPOSED','AUTHORIZED','DISPATCHED','RESENT','COMMITTED','REFUSED','AMBIGUOUS','LATE_RESULT','RECONCILED'));
create unique index if not exists one_reconcile on ilr.journal (effect_id) where kind = 'RECONCILED';
