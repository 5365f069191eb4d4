-------------------------------- MODULE Slots --------------------------------
(***************************************************************************)
(* Concurrency slots: a concurrency key K with a limit L (docs/protocol.md *)
(* section 14).                                                            *)
(*                                                                         *)
(* A model check for the stated constants, not a proof of the Python or    *)
(* SQL.                                                                    *)
(*                                                                         *)
(* Workflows 1..N all carry the key K, limit Limit.  Two workers, a clock, *)
(* leases.  Each workflow's code is one step body and then a return (or a  *)
(* continue-as-new).  The slot belongs to the WORKFLOW, not to a worker:   *)
(* slot[x] is x's row of ilr.slots for K: a holder (slot_no in             *)
(* 0..Limit-1), a waiter (slot_no null), released (a holder row with       *)
(* released_at set: history), or none (no row).                           *)
(*                                                                         *)
(* What is modeled follows the protocol:                                  *)
(*  - Start(x): the transaction that inserts the workflow row, under the   *)
(*    per-key lock (pg_advisory_xact_lock on K): with fewer than Limit     *)
(*    live holders x becomes a holder and is due (available_at = now());   *)
(*    else a waiter (available_at = infinity), queued by (priority,        *)
(*    queued_at).                                                          *)
(*  - Claim and the fence as in Runtime.tla: a due workflow, or a running  *)
(*    one whose lease lapsed, is claimed with epoch + 1; every write is    *)
(*    fenced by (epoch, owner, running, lease > now()).                    *)
(*  - End(w): the fenced transaction that ends the workflow (completed;    *)
(*    failed and cancelled end the same way) releases its slot row and,    *)
(*    under the same key lock, admits the first waiter (holder, due now).  *)
(*    Or it continues as new: the successor (a new id) is inserted as a    *)
(*    holder of the same slot_no in that transaction, never as a waiter.   *)
(*  - CancelWaiter(x): the cancel of a waiter ends it at once (it never    *)
(*    ran) and deletes its waiter row, under the key lock.                 *)
(*                                                                         *)
(*  CHOICE transactions: every transaction is one atomic step (the key     *)
(*    lock and the workflow row lock serialize the ones that touch the     *)
(*    same rows).  The broken designs split the one whose lock they drop.  *)
(*  CHOICE body: the claim is followed at once by the step body: replay    *)
(*    and the local lease check (Runtime.tla's RunPlain) take no time, so  *)
(*    a worker stalled before its body is a worker stalled in it, which is *)
(*    the worse case for SlotMutex.  A takeover runs the body again (step  *)
(*    rows are Runtime.tla's concern and are not modeled).                 *)
(*  CHOICE pause: SIGSTOP is a worker that takes no step while the clock   *)
(*    moves; nothing forces a worker step, so a pause of any length (past  *)
(*    its lease, while a successor takes over) is in the model.  Crash is  *)
(*    SIGKILL and restart in one step: local state is lost.                *)
(*  CHOICE queue order: (priority, queued_at) is modeled as (priority,     *)
(*    the order in which the start transactions took the key lock): the   *)
(*    waiters are kept as a sequence, higher priority first, then by       *)
(*    arrival.  Priority is 1 for HighPrio, else 0.                        *)
(*  CHOICE cancel: only waiters are cancelled.  A cancel of a holder is    *)
(*    delivered to its run, which ends it through End (a normal release).  *)
(*                                                                         *)
(* BROKEN designs (each must violate what its config names):               *)
(*  "release_not_fenced": the worker releases the slot when its body       *)
(*    returns, in a statement not fenced by the epoch, so a stale owner    *)
(*    (lease lapsed, successor running) releases and admits the next       *)
(*    waiter while the successor still runs the workflow.                  *)
(*  "acquire_without_key_lock": the start reads the live holders and      *)
(*    inserts its row in a separate step (StartRead, StartInsert), so a    *)
(*    release between them finds no waiter to admit and the waiter is      *)
(*    then inserted behind a free slot (and two starts may both read a     *)
(*    free slot).                                                          *)
(*  "cancel_without_key_lock": the cancel of a waiter reads its row as a   *)
(*    waiter and deletes it in a separate step (CancelRead, CancelApply),  *)
(*    so an admission between them makes it a holder whose row the cancel  *)
(*    then deletes: the slot is lost and the next waiter is stranded.      *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets, TLC

CONSTANTS Workers, Nobody, BROKEN, URGENT, N, Limit, HighPrio, MaxCarries,
          MaxClock, LeaseTTL, MaxCrashes

ASSUME BROKEN \in {"none", "release_not_fenced", "acquire_without_key_lock",
                   "cancel_without_key_lock"}
ASSUME N \in Nat /\ Limit \in Nat \ {0} /\ MaxCarries \in Nat /\ HighPrio \subseteq 1..N
ASSUME \A n \in {MaxClock, LeaseTTL, MaxCrashes} : n \in Nat

Wfs   == 1..N                         \* the workflows a client starts
Ids   == 1..(N + MaxCarries)          \* and the successors continue-as-new inserts
Inf   == MaxClock + 1                 \* available_at = 'infinity'
Ended == {"completed", "cancelled", "continued"}
NoRow == [k |-> "none", no |-> -1]
NoLw  == [wf |-> 0, epoch |-> 0]
Prio(x) == IF x \in HighPrio THEN 1 ELSE 0

VARIABLES
  now,
  st, ep, own, lease, avail,   \* ilr.workflows, per id ("none": not inserted yet)
  slot,           \* id -> [k: "none" | "holder" | "waiter" | "released", no: slot_no or -1]
  queue,          \* the waiters in queue order
  nextId,         \* the id the next continue-as-new inserts
  pc, lw,         \* workers: "idle" | "body"; the claim [wf, epoch] they run under
  pend,           \* BROKEN only: a start between its read and its insert (x -> decision)
  cpend,          \* BROKEN only: the waiters a cancel has read and not yet deleted
  hist            \* [fifoBad, noSlotClaim, crashes] for the invariants; the rest for witnesses

vars == <<now, st, ep, own, lease, avail, slot, queue, nextId, pc, lw, pend, cpend, hist>>
wfVars == <<st, ep, own, lease, avail>>

Sym == Permutations(Workers)

NoPend == [d |-> "no", no |-> -1]

Init ==
  /\ now = 0
  /\ st = [x \in Ids |-> "none"] /\ ep = [x \in Ids |-> 0] /\ own = [x \in Ids |-> Nobody]
  /\ lease = [x \in Ids |-> 0] /\ avail = [x \in Ids |-> 0]
  /\ slot = [x \in Ids |-> NoRow] /\ queue = <<>> /\ nextId = N + 1
  /\ pc = [w \in Workers |-> "idle"] /\ lw = [w \in Workers |-> NoLw]
  /\ pend = [x \in Wfs |-> NoPend] /\ cpend = {}
  /\ hist = [fifoBad |-> FALSE, noSlotClaim |-> FALSE, crashes |-> 0, admitted |-> FALSE,
             prioJump |-> FALSE, tookOver |-> FALSE, cancelled |-> FALSE]

------------------------------------------------------------------------------
\* Helpers

Holders == {x \in Ids : slot[x].k = "holder"}
Waiting == {queue[i] : i \in DOMAIN queue}
Free    == Cardinality(Holders) < Limit
LowestFree(H) == CHOOSE n \in 0..(Limit - 1) : \A x \in H : slot[x].no # n
\* Waiters ranked ahead of x in queue order: before it in the queue; for x not queued, every
\* waiter of the same or a higher priority (they arrived earlier).
Ahead(x) == IF x \in Waiting
              THEN {queue[j] : j \in 1..((CHOOSE i \in DOMAIN queue : queue[i] = x) - 1)}
              ELSE {y \in Waiting : Prio(y) >= Prio(x)}
\* Insert a waiter after every waiter of the same or a higher priority (queue is sorted).
Enqueue(x) == LET k == Cardinality({i \in DOMAIN queue : Prio(queue[i]) >= Prio(x)})
              IN SubSeq(queue, 1, k) \o <<x>> \o SubSeq(queue, k + 1, Len(queue))
Dequeue(x) == SelectSeq(queue, LAMBDA y : y # x)

Fence(w) == LET x == lw[w].wf IN
            x # 0 /\ lw[w].epoch = ep[x] /\ own[x] = w /\ st[x] = "running" /\ lease[x] > now
Reset(w) == pc' = [pc EXCEPT ![w] = "idle"] /\ lw' = [lw EXCEPT ![w] = NoLw]

\* Release x's slot (released_at = now()) and, under the same key lock, admit the first waiter
\* if a slot is free.  A row already released is left alone (UPDATE ... WHERE released_at IS
\* NULL).  Used inside a transaction: sets slot', queue', avail', hist'.
ReleaseAndAdmit(x) ==
  LET rel   == IF slot[x].k = "holder" THEN [slot EXCEPT ![x].k = "released"] ELSE slot
      live  == {y \in Ids : rel[y].k = "holder"}
      admit == Cardinality(live) < Limit /\ queue # <<>>
      y     == Head(queue)
  IN IF admit
       THEN /\ slot' = [rel EXCEPT ![y] = [k |-> "holder",
                                           no |-> CHOOSE n \in 0..(Limit - 1) :
                                                    \A z \in live : rel[z].no # n]]
            /\ queue' = Tail(queue)
            /\ avail' = [avail EXCEPT ![y] = now]
            /\ hist' = [hist EXCEPT !.admitted = TRUE, !.fifoBad = @ \/ Ahead(y) # {}]
       ELSE /\ slot' = rel /\ UNCHANGED <<queue, avail, hist>>

------------------------------------------------------------------------------
\* The client: start and cancel

\* The start transaction's insert, given what it decided (holder with slot_no n, or waiter).
Insert(x, d, n) ==
  /\ st' = [st EXCEPT ![x] = "pending"]
  /\ IF d = "holder"
       THEN /\ slot' = [slot EXCEPT ![x] = [k |-> "holder", no |-> n]]
            /\ avail' = [avail EXCEPT ![x] = now]
            /\ hist' = [hist EXCEPT !.fifoBad = @ \/ Ahead(x) # {}]
            /\ UNCHANGED queue
       ELSE /\ slot' = [slot EXCEPT ![x] = [k |-> "waiter", no |-> -1]]
            /\ avail' = [avail EXCEPT ![x] = Inf]
            /\ queue' = Enqueue(x)
            \* witness: queued ahead of an earlier waiter of a lower priority
            /\ hist' = [hist EXCEPT !.prioJump = @ \/ \E z \in Waiting : Prio(z) < Prio(x)]

\* rt.start: one transaction under the per-key lock.
Start(x) ==
  /\ BROKEN # "acquire_without_key_lock" /\ st[x] = "none"
  /\ Insert(x, IF Free THEN "holder" ELSE "waiter", IF Free THEN LowestFree(Holders) ELSE -1)
  /\ UNCHANGED <<now, ep, own, lease, nextId, pc, lw, pend, cpend>>

\* BROKEN acquire_without_key_lock: the holders are read first, the row inserted later.
StartRead(x) ==
  /\ BROKEN = "acquire_without_key_lock" /\ st[x] = "none" /\ pend[x].d = "no"
  /\ pend' = [pend EXCEPT ![x] = IF Free THEN [d |-> "holder", no |-> LowestFree(Holders)]
                                         ELSE [d |-> "waiter", no |-> -1]]
  /\ UNCHANGED <<now, wfVars, slot, queue, nextId, pc, lw, cpend, hist>>
StartInsert(x) ==
  /\ pend[x].d # "no"
  /\ Insert(x, pend[x].d, pend[x].no)
  /\ pend' = [pend EXCEPT ![x] = NoPend]
  /\ UNCHANGED <<now, ep, own, lease, nextId, pc, lw, cpend>>

\* The cancel of a waiter: it ends at once and its waiter row is deleted (under the key lock).
Cancelled(x) ==
  /\ st' = [st EXCEPT ![x] = "cancelled"] /\ own' = [own EXCEPT ![x] = Nobody]
  /\ slot' = [slot EXCEPT ![x] = NoRow] /\ queue' = Dequeue(x)
  /\ hist' = [hist EXCEPT !.cancelled = TRUE]
CancelWaiter(x) ==
  /\ BROKEN # "cancel_without_key_lock" /\ slot[x].k = "waiter"
  /\ Cancelled(x)
  /\ UNCHANGED <<now, ep, lease, avail, nextId, pc, lw, pend, cpend>>

\* BROKEN cancel_without_key_lock: the row is read as a waiter, and deleted later.
CancelRead(x) ==
  /\ BROKEN = "cancel_without_key_lock" /\ slot[x].k = "waiter" /\ x \notin cpend
  /\ cpend' = cpend \cup {x}
  /\ UNCHANGED <<now, wfVars, slot, queue, nextId, pc, lw, pend, hist>>
CancelApply(x) ==
  /\ x \in cpend
  /\ IF st[x] \in Ended THEN UNCHANGED <<st, own, slot, queue, hist>> ELSE Cancelled(x)
  /\ cpend' = cpend \ {x}
  /\ UNCHANGED <<now, ep, lease, avail, nextId, pc, lw, pend>>

------------------------------------------------------------------------------
\* Workers

\* The claim (docs/protocol.md section 3.1), then the step body at once (CHOICE body).
Claim(w, x) ==
  /\ pc[w] = "idle"
  /\ \/ st[x] = "pending" /\ avail[x] <= now
     \/ st[x] = "running" /\ lease[x] <= now
  /\ st' = [st EXCEPT ![x] = "running"] /\ ep' = [ep EXCEPT ![x] = @ + 1]
  /\ own' = [own EXCEPT ![x] = w] /\ lease' = [lease EXCEPT ![x] = now + LeaseTTL]
  /\ pc' = [pc EXCEPT ![w] = "body"] /\ lw' = [lw EXCEPT ![w] = [wf |-> x, epoch |-> ep[x] + 1]]
  /\ hist' = [hist EXCEPT !.noSlotClaim = @ \/ slot[x].k # "holder",
                          !.tookOver = @ \/ st[x] = "running"]
  /\ UNCHANGED <<now, avail, slot, queue, nextId, pend, cpend>>

\* The heartbeat (fenced), renewing a lease within one tick of expiry (as in Runtime.tla).
Heartbeat(w) ==
  /\ pc[w] = "body" /\ Fence(w) /\ lease[lw[w].wf] <= now + 1
  /\ lease' = [lease EXCEPT ![lw[w].wf] = now + LeaseTTL]
  /\ UNCHANGED <<now, st, ep, own, avail, slot, queue, nextId, pc, lw, pend, cpend, hist>>

\* The body returns and the workflow ends: one fenced transaction that ends it and releases its
\* slot (admitting the first waiter).  A stale owner's fence matches nothing: it rolls back and
\* the run is abandoned, so it cannot release.  BROKEN release_not_fenced: the release is the
\* worker's own statement when the body returns, not fenced, so a stale owner releases too.
End(w) ==
  /\ pc[w] = "body"
  /\ LET x == lw[w].wf IN
     IF Fence(w)
       THEN /\ st' = [st EXCEPT ![x] = "completed"] /\ own' = [own EXCEPT ![x] = Nobody]
            /\ lease' = [lease EXCEPT ![x] = 0]
            /\ ReleaseAndAdmit(x)
            /\ UNCHANGED <<ep, nextId>>
     ELSE IF BROKEN = "release_not_fenced"
       THEN /\ ReleaseAndAdmit(x)
            /\ UNCHANGED <<st, ep, own, lease, nextId>>
     ELSE UNCHANGED <<st, ep, own, lease, avail, slot, queue, nextId, hist>>
  /\ Reset(w)
  /\ UNCHANGED <<now, pend, cpend>>

\* Continue-as-new (fenced): the run ends "continued" and its successor y is inserted as a
\* holder of the same slot_no in the same transaction: the slot is carried, never released.
Carry(w) ==
  /\ pc[w] = "body" /\ nextId <= N + MaxCarries /\ Fence(w)
  /\ LET x == lw[w].wf
         y == nextId
     IN /\ st' = [st EXCEPT ![x] = "continued", ![y] = "pending"]
        /\ own' = [own EXCEPT ![x] = Nobody] /\ lease' = [lease EXCEPT ![x] = 0]
        /\ avail' = [avail EXCEPT ![y] = now]
        /\ slot' = [slot EXCEPT ![x].k = "released", ![y] = [k |-> "holder", no |-> slot[x].no]]
        /\ nextId' = nextId + 1
  /\ Reset(w)
  /\ UNCHANGED <<now, ep, queue, pend, cpend, hist>>

\* SIGKILL and restart: local state lost; the workflow keeps its slot (it is the workflow's).
Crash(w) ==
  /\ pc[w] # "idle" /\ hist.crashes < MaxCrashes
  /\ Reset(w)
  /\ hist' = [hist EXCEPT !.crashes = @ + 1]
  /\ UNCHANGED <<now, wfVars, slot, queue, nextId, pend, cpend>>

WorkerStep(w) == \/ \E x \in Ids : Claim(w, x)
                 \/ Heartbeat(w) \/ End(w) \/ Carry(w)

ClientStep == \E x \in Wfs : Start(x) \/ StartRead(x) \/ StartInsert(x)

Quiet    == pend = [x \in Wfs |-> NoPend] /\ cpend = {}   \* no transaction mid-flight
AllEnded == \A x \in Wfs : st[x] \in Ended
Settled  == AllEnded /\ \A x \in Ids : st[x] \in Ended \cup {"none"}

\* The clock stops once everything has ended.  URGENT (liveness): it moves only when no
\* worker or client step can.
Tick ==
  /\ now < MaxClock /\ ~Settled
  /\ URGENT => ~(\E w \in Workers : ENABLED WorkerStep(w)) /\ ~ENABLED ClientStep
  /\ now' = now + 1
  /\ UNCHANGED <<wfVars, slot, queue, nextId, pc, lw, pend, cpend, hist>>

Next ==
  \/ Tick
  \/ ClientStep
  \/ \E x \in Wfs : CancelWaiter(x) \/ CancelRead(x) \/ CancelApply(x)
  \/ \E w \in Workers : WorkerStep(w) \/ Crash(w)

Spec == Init /\ [][Next]_vars

\* Liveness: workers and clients (the starts) are weakly fair; cancels are not.
LiveSpec == /\ Spec /\ WF_vars(Tick) /\ WF_vars(ClientStep)
            /\ \A w \in Workers : WF_vars(WorkerStep(w))

\* Exact state-space reduction: lease and available_at values at or before now behave alike
\* (Inf stays Inf), and an epoch enters only through whether a worker's claim is current.
Clamp(t) == IF t < now THEN now ELSE t
View == <<now, st, own, [x \in Ids |-> Clamp(lease[x])], [x \in Ids |-> Clamp(avail[x])], slot,
          queue, nextId, pc,
          [w \in Workers |-> <<lw[w].wf, lw[w].wf # 0 /\ lw[w].epoch = ep[lw[w].wf]>>],
          pend, cpend, hist>>

------------------------------------------------------------------------------
\* Invariants, identifiers exactly as docs/protocol.md section 11.

\* A worker is inside a step body of x under a current claim: its epoch is x's, lease live.
CurrentBody(w) == pc[w] = "body" /\ Fence(w)
InUse == {x \in Ids : slot[x].k \in {"holder", "released"} /\ st[x] \notin Ended}

\* At most Limit workflows of K admitted and not ended; live holders have distinct slot_no in
\* 0..Limit-1; and at most Limit distinct workflows have a worker inside a step body under a
\* current claim.
SlotHoldersMutex ==
  /\ Cardinality(InUse) <= Limit
  /\ \A x \in Holders : slot[x].no \in 0..(Limit - 1)
  /\ \A x, y \in Holders : x # y => slot[x].no # slot[y].no
SlotBodiesMutex == Cardinality({lw[w].wf : w \in {v \in Workers : CurrentBody(v)}}) <= Limit
SlotMutex == SlotHoldersMutex /\ SlotBodiesMutex

\* No claim of a workflow without a live holder row, and no claimable workflow without one.
NoRunWithoutSlot ==
  /\ ~hist.noSlotClaim
  /\ \A x \in Ids : (st[x] = "running" \/ (st[x] = "pending" /\ avail[x] # Inf))
                      => slot[x].k = "holder"

\* Between transactions, never a free slot while a waiter waits.
NoStrandedWaiter == Quiet => ~(Free /\ queue # <<>>)

\* A workflow becomes a holder (admitted or started as one) only when no waiter ranked ahead of
\* it in (priority, queued_at) order is waiting.  A carry is not an admission.
SlotFifo == ~hist.fifoBad

\* Liveness (LiveSpec, URGENT): a waiter is eventually admitted and claimed, or cancelled.
WaiterEventuallyRuns ==
  \A x \in Wfs : slot[x].k = "waiter" ~> (st[x] = "running" \/ st[x] \in Ended)

\* Reachability witnesses (must be violated), so that no hold above is vacuous.
Witness_Admitted    == ~hist.admitted
Witness_PrioJump    == ~hist.prioJump
Witness_Takeover    == ~hist.tookOver
Witness_Carried     == nextId = N + 1
Witness_Cancelled   == ~hist.cancelled
Witness_AllEnded    == ~Settled
Witness_FullBodies  == Cardinality({lw[w].wf : w \in {v \in Workers : CurrentBody(v)}}) < Limit
Witness_StaleInBody == ~(\E v, w \in Workers : v # w /\ pc[v] = "body" /\ CurrentBody(w)
                                               /\ lw[v].wf = lw[w].wf)
=============================================================================
