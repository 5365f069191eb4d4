------------------------------ MODULE Schedules ------------------------------
(***************************************************************************)
(* The tick transaction of a schedule (docs/protocol.md section 5.7).      *)
(*                                                                         *)
(* A model check for the stated constants, not a proof of the Python or    *)
(* SQL.                                                                    *)
(*                                                                         *)
(* One schedule ticking at every integer time 1..MaxTick, Workers racing   *)
(* its ticks with no leader, a database clock `now`, and crashes (a worker *)
(* that dies mid-transaction: it rolls back).  What is modeled follows the *)
(* code (ilr/_schedules/ticks.py):                                         *)
(*  - Begin: the due query locks the schedule row FOR UPDATE SKIP LOCKED   *)
(*    when next_fire_at <= now(); txNow is the transaction's now().        *)
(*  - Tick: one due tick at a time: older than Window is recorded missed,  *)
(*    else its workflow row and tick row are inserted (the workflow id     *)
(*    derives from the tick: unique, on conflict do nothing).  The writes  *)
(*    are the transaction's own until it commits.                          *)
(*  - Commit: the writes become visible with next_tick_at past the last    *)
(*    tick handled, and the row lock is released.  Crash: all of it is     *)
(*    rolled back.                                                         *)
(*  CHOICE broken designs: BROKEN = "no_lock_no_key" reads next_tick_at    *)
(*    without the row lock and inserts without the unique key: two workers *)
(*    start one tick twice (violates TickOnce).  BROKEN = "worker_clock"   *)
(*    tests due-ness on a worker's own clock, Skew ahead of the database's *)
(*    (violates NotEarly).                                                 *)
(***************************************************************************)
EXTENDS Integers, FiniteSets, TLC

CONSTANTS Workers, Nobody, BROKEN, MaxTick, MaxClock, Window, Skew, MaxCrashes

ASSUME BROKEN \in {"none", "no_lock_no_key", "worker_clock"}

Ticks == 1..MaxTick
Inf   == MaxTick + 1

VARIABLES
  now,       \* the database clock
  next,      \* ilr.schedules.next_tick_at (Inf: none left)
  lock,      \* the schedule row's lock holder
  wfCount,   \* tick -> committed workflow rows of that tick
  startedAt, \* tick -> the database time its workflow row was inserted (0: none)
  missed,    \* committed missed tick rows
  pc, cur, txNow, pendStart, pendMissed,  \* workers: their open transaction
  crashes

vars == <<now, next, lock, wfCount, startedAt, missed, pc, cur, txNow, pendStart, pendMissed, crashes>>

Init ==
  /\ now = 0 /\ next = 1 /\ lock = Nobody
  /\ wfCount = [t \in Ticks |-> 0] /\ startedAt = [t \in Ticks |-> 0] /\ missed = {}
  /\ pc = [w \in Workers |-> "idle"] /\ cur = [w \in Workers |-> 0] /\ txNow = [w \in Workers |-> 0]
  /\ pendStart = [w \in Workers |-> {}] /\ pendMissed = [w \in Workers |-> {}]
  /\ crashes = 0

Clock == /\ now < MaxClock /\ now' = now + 1
         /\ UNCHANGED <<next, lock, wfCount, startedAt, missed, pc, cur, txNow, pendStart, pendMissed, crashes>>

DueNow(w) == IF BROKEN = "worker_clock" /\ w = CHOOSE x \in Workers : TRUE THEN now + Skew ELSE now

Begin(w) ==
  /\ pc[w] = "idle"
  /\ next <= MaxTick /\ next <= DueNow(w)
  /\ IF BROKEN = "no_lock_no_key" THEN TRUE ELSE lock = Nobody   \* skip locked: a held row is skipped
  /\ lock' = IF BROKEN = "no_lock_no_key" THEN lock ELSE w
  /\ pc' = [pc EXCEPT ![w] = "tick"] /\ cur' = [cur EXCEPT ![w] = next]
  /\ txNow' = [txNow EXCEPT ![w] = DueNow(w)]
  /\ UNCHANGED <<now, next, wfCount, startedAt, missed, pendStart, pendMissed, crashes>>

Tick(w) ==
  /\ pc[w] = "tick" /\ cur[w] <= MaxTick /\ cur[w] <= txNow[w]
  /\ IF txNow[w] - cur[w] > Window
       THEN /\ pendMissed' = [pendMissed EXCEPT ![w] = @ \cup {cur[w]}] /\ UNCHANGED pendStart
       ELSE /\ pendStart' = [pendStart EXCEPT ![w] = @ \cup {cur[w]}] /\ UNCHANGED pendMissed
  /\ cur' = [cur EXCEPT ![w] = @ + 1]
  /\ UNCHANGED <<now, next, lock, wfCount, startedAt, missed, pc, txNow, crashes>>

Inserted(w, t) == IF BROKEN = "no_lock_no_key" THEN wfCount[t] + 1
                  ELSE IF wfCount[t] > 0 THEN wfCount[t] ELSE 1        \* on conflict do nothing

Commit(w) ==
  /\ pc[w] = "tick" /\ (cur[w] > MaxTick \/ cur[w] > txNow[w])
  /\ wfCount' = [t \in Ticks |-> IF t \in pendStart[w] THEN Inserted(w, t) ELSE wfCount[t]]
  /\ startedAt' = [t \in Ticks |-> IF t \in pendStart[w] /\ startedAt[t] = 0 THEN now ELSE startedAt[t]]
  /\ missed' = missed \cup pendMissed[w]
  /\ next' = cur[w]
  /\ lock' = IF lock = w THEN Nobody ELSE lock
  /\ pc' = [pc EXCEPT ![w] = "idle"] /\ pendStart' = [pendStart EXCEPT ![w] = {}]
  /\ pendMissed' = [pendMissed EXCEPT ![w] = {}]
  /\ UNCHANGED <<now, cur, txNow, crashes>>

Crash(w) ==
  /\ pc[w] = "tick" /\ crashes < MaxCrashes
  /\ lock' = IF lock = w THEN Nobody ELSE lock
  /\ pc' = [pc EXCEPT ![w] = "idle"] /\ pendStart' = [pendStart EXCEPT ![w] = {}]
  /\ pendMissed' = [pendMissed EXCEPT ![w] = {}]
  /\ crashes' = crashes + 1
  /\ UNCHANGED <<now, next, wfCount, startedAt, missed, cur, txNow>>

\* The end of the modeled time with no transaction open: stutter (not a deadlock).
Done == /\ now = MaxClock
        /\ \A w \in Workers : pc[w] = "idle"
        /\ UNCHANGED vars

Next == Clock \/ Done \/ \E w \in Workers : Begin(w) \/ Tick(w) \/ Commit(w) \/ Crash(w)

Spec == Init /\ [][Next]_vars

(* ---- invariants (docs/protocol.md section 11) ---- *)
TypeOK == /\ next \in 1..Inf /\ lock \in Workers \cup {Nobody} /\ missed \subseteq Ticks
ScheduleTickOnce == \A t \in Ticks : wfCount[t] <= 1
ScheduleTickNotEarly == \A t \in Ticks : wfCount[t] > 0 => startedAt[t] >= t
MissedNotStarted == \A t \in missed : wfCount[t] = 0
\* Every tick before next_tick_at was recorded: started or missed (none lost).
NoTickLost == \A t \in Ticks : t < next => (wfCount[t] > 0 \/ t \in missed)
=============================================================================
