------------------------------- MODULE Signals -------------------------------
(***************************************************************************)
(* Suspend, signal and timer (docs/protocol.md section 5.1).               *)
(*                                                                         *)
(* A model check for the stated constants, not a proof of the Python or    *)
(* SQL.                                                                    *)
(*                                                                         *)
(* One workflow, two workers, and a sender that calls rt.signal.  The      *)
(* workflow code is                                                        *)
(*     seq 1:  a = ctx.wait_signal("approve")               no timeout     *)
(*     seq 2:  b = ctx.wait_signal("approve", timeout=WaitTimeout)         *)
(*     seq 3:  ctx.sleep(SleepFor)                                         *)
(*     return                                                              *)
(* so it covers a wait with available_at = infinity (NoLostWakeup), a wait *)
(* that may time out and a sleep (TimerNotEarly), and two waits consuming  *)
(* up to MaxSignals signals (SignalExactlyOnceConsumed).                   *)
(*                                                                         *)
(* What is modeled follows the code:                                      *)
(*  - The suspend transaction is one fenced transaction: the fence locks   *)
(*    the workflow row, then (for a wait) the oldest unconsumed signal is  *)
(*    consumed with the step row, else a due timer records its step, else  *)
(*    the row goes to sleeping with waiting = {seq, kind, until} and       *)
(*    available_at = until (infinity without a timeout).                   *)
(*  - rt.signal is one transaction that locks the workflow row, inserts    *)
(*    the signal and, when the row is sleeping on a signal, wakes it       *)
(*    (available_at = now()).  It never wakes a running row: the suspend   *)
(*    transaction will see the signal in the mailbox.                      *)
(*  CHOICE broken design: BROKEN = "wake_only_if_sleeping" keeps that      *)
(*    signal transaction but reads the mailbox before the suspend          *)
(*    transaction, outside the row lock (MailboxCheck, then SuspendTxn).   *)
(*    A signal that commits between the two finds the row running, so it   *)
(*    does not wake it, and the suspend does not look again: a lost        *)
(*    wakeup.  The fix is the single transaction above.                    *)
(*  CHOICE until: a wait or sleep computes until = now() + duration the    *)
(*    first time it suspends and keeps it in waiting; a re-run before any  *)
(*    suspend computes it again (nothing durable recorded it yet).         *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets, TLC

CONSTANTS Workers, Nobody, BROKEN, Payloads, MaxSignals, WaitTimeout, SleepFor,
          MaxClock, LeaseTTL, MaxCrashes

ASSUME BROKEN \in {"none", "wake_only_if_sleeping"}
ASSUME "timeout" \notin Payloads        \* a timeout is told apart from every payload

Inf      == MaxClock + 1                   \* available_at = 'infinity'
Seqs     == {1, 2, 3}
Kind(s)  == IF s = 3 THEN "sleep" ELSE "signal"
NoWait   == [seq |-> 0, kind |-> "none", until |-> 0]
NoRow    == [rec |-> FALSE, out |-> "none"]

VARIABLES
  now,
  wfStatus, wfEpoch, wfOwner, leaseExp, availAt, waiting,   \* ilr.workflows
  stepRow,        \* seq -> [rec, out]: ilr.steps
  signals,        \* ilr.signals: sequence of [payload, consumed] (consumed = seq or 0)
  up, pc, lw,     \* workers
  hist            \* [early, crashes, doubleConsume]

vars == <<now, wfStatus, wfEpoch, wfOwner, leaseExp, availAt, waiting, stepRow, signals,
          up, pc, lw, hist>>
wfVars == <<wfStatus, wfEpoch, wfOwner, leaseExp, availAt, waiting>>

Sym == Permutations(Workers)

L0 == [epoch |-> 0, seq |-> 0, mail |-> 0]

Init ==
  /\ now = 0
  /\ wfStatus = "pending" /\ wfEpoch = 0 /\ wfOwner = Nobody /\ leaseExp = 0 /\ availAt = 0
  /\ waiting = NoWait
  /\ stepRow = [s \in Seqs |-> NoRow]
  /\ signals = <<>>
  /\ up = [w \in Workers |-> TRUE] /\ pc = [w \in Workers |-> "idle"] /\ lw = [w \in Workers |-> L0]
  /\ hist = [early |-> FALSE, crashes |-> 0, doubleConsume |-> FALSE]

Fence(w) == up[w] /\ lw[w].epoch = wfEpoch /\ wfOwner = w /\ wfStatus = "running" /\ leaseExp > now
Reset(w) == pc' = [pc EXCEPT ![w] = "idle"] /\ lw' = [lw EXCEPT ![w] = L0]
Frontier == IF \E s \in Seqs : ~stepRow[s].rec
              THEN CHOOSE s \in Seqs : ~stepRow[s].rec /\ \A t \in Seqs : t < s => stepRow[t].rec
              ELSE 0
Unconsumed == {i \in DOMAIN signals : signals[i].consumed = 0}
Oldest == CHOOSE i \in Unconsumed : \A j \in Unconsumed : i <= j
\* The until this call uses: the durable one if it already suspended at this seq.
UntilFor(s) == IF waiting.seq = s THEN waiting.until
               ELSE CASE s = 1 -> Inf [] s = 2 -> now + WaitTimeout [] OTHER -> now + SleepFor

Claim(w) ==
  /\ up[w] /\ pc[w] = "idle"
  /\ \/ wfStatus \in {"pending", "sleeping"} /\ availAt <= now
     \/ wfStatus = "running" /\ leaseExp <= now
  /\ wfStatus' = "running" /\ wfEpoch' = wfEpoch + 1 /\ wfOwner' = w /\ leaseExp' = now + LeaseTTL
  /\ pc' = [pc EXCEPT ![w] = "replay"] /\ lw' = [lw EXCEPT ![w] = [L0 EXCEPT !.epoch = wfEpoch + 1]]
  /\ UNCHANGED <<now, availAt, waiting, stepRow, signals, up, hist>>

Heartbeat(w) ==
  /\ up[w] /\ pc[w] # "idle" /\ Fence(w) /\ leaseExp <= now + 1
  /\ leaseExp' = now + LeaseTTL
  /\ UNCHANGED <<now, wfStatus, wfEpoch, wfOwner, availAt, waiting, stepRow, signals, up, pc, lw, hist>>

\* Replay from the top: route to the first seq without a step row, or return (a fenced write).
Replay(w) ==
  /\ up[w] /\ pc[w] = "replay"
  /\ IF Frontier # 0
       THEN /\ pc' = [pc EXCEPT ![w] = IF BROKEN = "wake_only_if_sleeping" /\ Kind(Frontier) = "signal"
                                        THEN "mailbox" ELSE "suspend"]
            /\ lw' = [lw EXCEPT ![w].seq = Frontier]
            /\ UNCHANGED <<wfStatus, wfOwner, leaseExp>>
       ELSE /\ IF Fence(w)
                 THEN wfStatus' = "completed" /\ wfOwner' = Nobody /\ leaseExp' = 0
                 ELSE UNCHANGED <<wfStatus, wfOwner, leaseExp>>
            /\ Reset(w)
  /\ UNCHANGED <<now, wfEpoch, availAt, waiting, stepRow, signals, up, hist>>

\* BROKEN only: the mailbox read before the suspend transaction, outside the row lock.
MailboxCheck(w) ==
  /\ up[w] /\ pc[w] = "mailbox"
  /\ lw' = [lw EXCEPT ![w].mail = IF Unconsumed = {} THEN 0 ELSE Oldest]
  /\ pc' = [pc EXCEPT ![w] = "suspend"]
  /\ UNCHANGED <<now, wfVars, stepRow, signals, up, hist>>

\* The suspend transaction, fenced (docs/protocol.md section 5.1).
SuspendTxn(w) ==
  /\ up[w] /\ pc[w] = "suspend"
  /\ LET s     == lw[w].seq
         until == UntilFor(s)
         mail  == IF Kind(s) # "signal" THEN 0
                  ELSE IF BROKEN = "wake_only_if_sleeping" THEN lw[w].mail
                  ELSE IF Unconsumed = {} THEN 0 ELSE Oldest
     IN IF ~Fence(w)
          THEN Reset(w) /\ UNCHANGED <<wfVars, stepRow, signals, hist>>
        ELSE IF stepRow[s].rec
          THEN Reset(w) /\ UNCHANGED <<wfVars, stepRow, signals, hist>>   \* primary key
        ELSE CASE mail # 0 ->
                    \* consume: consumed_seq = s and the step row, one transaction
                    /\ signals' = [signals EXCEPT ![mail].consumed = s]
                    /\ hist' = [hist EXCEPT !.doubleConsume = @ \/ signals[mail].consumed # 0]
                    /\ stepRow' = [stepRow EXCEPT ![s] = [rec |-> TRUE, out |-> signals[mail].payload]]
                    /\ leaseExp' = now + LeaseTTL
                    /\ pc' = [pc EXCEPT ![w] = "replay"] /\ lw' = [lw EXCEPT ![w].mail = 0]
                    /\ UNCHANGED <<wfStatus, wfEpoch, wfOwner, availAt, waiting>>
               [] until <= now ->
                    \* a due timer: sleep done, or the wait timed out (recorded as a timeout,
                    \* never as a payload: SignalTimeout, not a null output)
                    /\ stepRow' = [stepRow EXCEPT ![s] = [rec |-> TRUE,
                                                          out |-> IF s = 3 THEN "slept" ELSE "timeout"]]
                    /\ hist' = [hist EXCEPT !.early = @ \/ now < until]
                    /\ leaseExp' = now + LeaseTTL
                    /\ pc' = [pc EXCEPT ![w] = "replay"] /\ lw' = [lw EXCEPT ![w].mail = 0]
                    /\ UNCHANGED <<wfStatus, wfEpoch, wfOwner, availAt, waiting, signals>>
               [] OTHER ->
                    /\ wfStatus' = "sleeping" /\ wfOwner' = Nobody /\ leaseExp' = 0
                    /\ waiting' = [seq |-> s, kind |-> Kind(s), until |-> until]
                    /\ availAt' = until
                    /\ Reset(w)
                    /\ UNCHANGED <<wfEpoch, stepRow, signals, hist>>
  /\ UNCHANGED <<now, up>>

\* rt.signal: one transaction; it locks the workflow row, inserts, and wakes a row sleeping on
\* a signal.  (Every transaction here is atomic, so the row lock is implicit.)
Signal(p) ==
  /\ Len(signals) < MaxSignals /\ wfStatus # "completed"
  /\ signals' = Append(signals, [payload |-> p, consumed |-> 0])
  /\ availAt' = IF wfStatus = "sleeping" /\ waiting.kind = "signal" THEN now ELSE availAt
  /\ UNCHANGED <<now, wfStatus, wfEpoch, wfOwner, leaseExp, waiting, stepRow, up, pc, lw, hist>>

Crash(w) ==
  /\ up[w] /\ pc[w] # "idle" /\ hist.crashes < MaxCrashes
  /\ up' = [up EXCEPT ![w] = FALSE] /\ Reset(w)
  /\ hist' = [hist EXCEPT !.crashes = @ + 1]
  /\ UNCHANGED <<now, wfVars, stepRow, signals>>

Restart(w) ==
  /\ ~up[w] /\ up' = [up EXCEPT ![w] = TRUE]
  /\ UNCHANGED <<now, wfVars, stepRow, signals, pc, lw, hist>>

Tick ==
  /\ now < MaxClock /\ wfStatus # "completed"
  /\ now' = now + 1
  /\ UNCHANGED <<wfVars, stepRow, signals, up, pc, lw, hist>>

Next ==
  \/ Tick
  \/ \E p \in Payloads : Signal(p)
  \/ \E w \in Workers : \/ Claim(w) \/ Heartbeat(w) \/ Replay(w) \/ MailboxCheck(w)
                        \/ SuspendTxn(w) \/ Crash(w) \/ Restart(w)

Spec == Init /\ [][Next]_vars

\* Exact state-space reduction: lease and available_at values at or before now behave alike
\* (see Runtime.tla's View).  Inf stays Inf.
Clamp(t) == IF t < now THEN now ELSE t
View == <<now, wfStatus, wfEpoch, wfOwner, Clamp(leaseExp), Clamp(availAt), waiting, stepRow,
          signals, up, pc, lw, hist>>

\* Invariants, identifiers exactly as docs/protocol.md section 11.
NoLostWakeup ==
  ~(wfStatus = "sleeping" /\ availAt = Inf /\ waiting.kind = "signal" /\ Unconsumed # {})
SignalExactlyOnceConsumed ==
  /\ ~hist.doubleConsume
  /\ \A i, j \in DOMAIN signals :
       (i # j /\ signals[i].consumed # 0) => signals[i].consumed # signals[j].consumed
  /\ \A i \in DOMAIN signals :
       signals[i].consumed # 0 => stepRow[signals[i].consumed].out = signals[i].payload
TimerNotEarly == ~hist.early

\* Reachability witnesses (must be violated).
Witness_Completed == wfStatus # "completed"
Witness_Timeout   == stepRow[2].out # "timeout"
Witness_BothConsumed == ~(stepRow[1].rec /\ stepRow[2].rec /\ stepRow[2].out # "timeout")
Witness_WokenBySignal == ~(wfStatus = "sleeping" /\ waiting.kind = "signal" /\ availAt <= now
                           /\ Unconsumed # {})
=============================================================================
