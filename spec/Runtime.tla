------------------------------- MODULE Runtime -------------------------------
(***************************************************************************)
(* The Interlock runtime's claims, step journal, gated effect, recovery by *)
(* tier, and the two Temporal baselines it is measured against            *)
(* (docs/protocol.md section 14; the code itself: sections 3 to 8).       *)
(*                                                                         *)
(* A model check for the stated constants, not a proof of the Python or    *)
(* SQL.                                                                    *)
(*                                                                         *)
(* One workflow runs one plain step, then one gated refund effect (the    *)
(* approved payload is 20), then returns.  Two workers.  The world may     *)
(* revoke the grant, refund by hand (fully or partly), cancel the          *)
(* workflow, prune the target's idempotency keys, and re-decide the        *)
(* amount (a fork or reset offers 30).                                     *)
(*                                                                         *)
(* MODE "interlock"          the runtime (docs/protocol.md sections 3-6)  *)
(*                           with the fixes of both findings (section     *)
(*                           14): the local lease guard on RunPlain, and  *)
(*                           PruneOK (the target may forget a key only    *)
(*                           once DEDUP_MARGIN exceeds send_timeout +     *)
(*                           settle_margin).                              *)
(* MODE "temporal_idem"      a Temporal activity, key <run id>-<act id>.   *)
(* MODE "temporal_precheck"  the same activity with the pre-send check of *)
(*                           Prove's system (b) (docs/protocol.md 16.1),  *)
(*                           key <workflow id>-refund.                    *)
(*                                                                         *)
(* Where this module had to choose how to model the code, the choice is   *)
(* written as a comment that starts with "CHOICE".  The main ones:        *)
(*                                                                         *)
(*  CHOICE time.  now is Postgres now(), the transaction's start time.    *)
(*    T_dispatch is two steps (TDispatchBegin takes the fence and the     *)
(*    workflow row lock and fixes now(); TDispatchCommit runs the checks  *)
(*    of T_dispatch (docs/protocol.md 6.2) atomically), so the clock can  *)
(*    advance inside it; that is what StopwatchAfterDispatch needs.       *)
(*    Every other transaction is one atomic step.                         *)
(*  CHOICE journal.  The journal is kept as counters (DISPATCHED,         *)
(*    COMMITTED, resolutions, LATE_RESULT) plus the reason of the last    *)
(*    AMBIGUOUS, not as a sequence: no invariant reads the order of       *)
(*    PROPOSED and AUTHORIZED, and a sequence multiplies the state space. *)
(*  CHOICE target.  A request that leaves at time s is processed by the   *)
(*    target at the latest at s + SettleMargin (A2); the clock cannot     *)
(*    pass that bound while the request is in flight.  With SERVER_SLOW   *)
(*    the bound is MaxClock.  A request that never arrives is the same,   *)
(*    for every invariant, as a crash before Send, so it is not a         *)
(*    separate action.  The response reaches the sender only if it is     *)
(*    still waiting for that request; a lost response is a sender that    *)
(*    never takes its next step.                                          *)
(*  CHOICE crash.  Crash(w) is SIGKILL: local state is lost and an open   *)
(*    transaction rolls back (the row lock is released).  Restart(w)      *)
(*    brings the process back.  The watchdog's os._exit is a crash and    *)
(*    restart that does not spend the MaxCrashes budget, and it is forced: *)
(*    the clock cannot pass a waiting sender's local deadline.            *)
(*  CHOICE heartbeat.  The heartbeat thread renews only when the lease is *)
(*    within one tick of expiry (coarsened from ttl/3 to cut states), and *)
(*    it may always fail to run: a missed heartbeat is a partition.       *)
(*  CHOICE history.  Counters and flags replace claim and write logs:     *)
(*    each records exactly the fact its invariant reads, at the           *)
(*    step where it happens.  cancelAt and revokeAt are booleans: only    *)
(*    the order of the cancel or revoke against other steps matters.      *)
(*    sendLog stays a sequence; plainStarts is left out (only             *)
(*    plainStartsAfterRow is read); localOk (the SQL premise) is constant *)
(*    TRUE, since no event changes it and it is checked at the same       *)
(*    commit as the grant.                                                 *)
(*  CHOICE reductions.  Three exact reductions keep the base constants    *)
(*    checkable: VIEW View (clock values past every threshold, epochs,    *)
(*    ids and the send history enter only through what is read), world   *)
(*    events offered only where a step that reads them is next ("read     *)
(*    points"), and the clock stopping once everything has ended.  Each   *)
(*    is argued where it is defined.  None removes a behavior that any    *)
(*    invariant could tell apart.                                          *)
(*  CHOICE wording.  Each invariant follows its wording in                *)
(*    docs/protocol.md section 11, also where a first formula sketch      *)
(*    read otherwise (Tier3NeverResends, SendRequiresLiveClaim), as       *)
(*    noted.                                                              *)
(***************************************************************************)
EXTENDS Integers, Sequences, FiniteSets, TLC

CONSTANTS
  Workers,        \* {w1, w2}
  Nobody,         \* a model value: no owner, no lock holder
  Tier,           \* 1, 2 or 3
  Queryable,      \* BOOLEAN: the target answers query(effect_id)
  MODE,           \* "interlock" | "temporal_idem" | "temporal_precheck"
  BROKEN,         \* "none" or the name of one deliberately broken design
  PAUSE,          \* BOOLEAN: A1 may be violated (one SIGSTOP after a local check)
  SERVER_SLOW,    \* BOOLEAN: A2 may be violated (processing any time up to MaxClock)
  URGENT,         \* BOOLEAN: liveness configs only; time advances only when nothing else can
  Events,         \* subset of {"revoke", "hand_refund_full", "hand_refund_partial",
                  \*            "cancel", "prune_keys", "redecide"}
  MaxClock, LeaseTTL, SendTimeout, SettleMargin, DedupAge, MaxCrashes

ASSUME MODE \in {"interlock", "temporal_idem", "temporal_precheck"}
ASSUME BROKEN \in {"none", "naive_recovery", "no_fencing", "grant_check_outside_txn",
                   "commit_without_checkpoint", "recover_before_deadline",
                   "stopwatch_after_dispatch", "late_ack_dropped",
                   "no_local_lease_check", "thin_dedup_margin", "unjournaled_resend"}
ASSUME Tier \in {1, 2, 3} /\ (Tier = 2 => Queryable) /\ (Tier = 3 => ~Queryable)
ASSUME Events \subseteq {"revoke", "hand_refund_full", "hand_refund_partial",
                         "cancel", "prune_keys", "redecide"}
ASSUME \A n \in {MaxClock, LeaseTTL, SendTimeout, SettleMargin, DedupAge, MaxCrashes} : n \in Nat

Interlock == MODE = "interlock"
Approved  == 20          \* the payload the decision chose and the approval bound
Redecided == 30          \* what a fork or reset offers after the model re-decides
Terminal  == {"completed", "cancelled", "failed", "stuck"}

VARIABLES
  now,               \* database clock, 0..MaxClock
  \* ilr.workflows
  wfStatus, wfEpoch, wfOwner, leaseExp, availAt,
  rowLock,           \* holder of the workflow row lock across an open T_dispatch, or Nobody
  cancelRequested,   \* cancel_requested_at is set (CHOICE history: a boolean, not the clock)
  \* ilr.steps
  stepRow,           \* [{"plain","effect"} -> BOOLEAN]
  \* ilr.effects and ilr.journal
  effState,          \* "none" | "proposed" | "dispatched" | "committed" | "ambiguous"
  boundPayload,      \* 0 (unbound), 20 or 30
  dispWorkerEpoch,   \* <<worker, epoch>> of the current dispatch pair
  firstDispatch,     \* -1 or the clock at the first dispatch (tier-1 window age)
  sendDeadline,
  journal,           \* [dispatched, committed, resolutions, lateResults, ambig] (CHOICE journal)
  \* world
  grantRevoked, revokeReturned, handRefund, offer, done,
  \* target
  wire,              \* requests in flight
  ledger,            \* number of our applications at the target (OurApplications)
  keyStore,          \* tier-1 dedup store: set of <<key, payload>>
  appliedKeys,       \* keys whose request the target applied (what query/lookup sees)
  pruned,            \* the target forgot its keys
  \* workers
  up, paused, pc,
  lw,                \* per-worker local state, lost on crash (epoch, local deadlines, reads)
  \* history for invariants
  sendLog,           \* one record per request put on the wire
  hist,
  \* Temporal server state of the refund activity (temporal modes only)
  tmp

wfVars     == <<wfStatus, wfEpoch, wfOwner, leaseExp, availAt, rowLock, cancelRequested, stepRow>>
effVars    == <<effState, boundPayload, dispWorkerEpoch, firstDispatch, sendDeadline, journal>>
worldVars  == <<grantRevoked, revokeReturned, handRefund, offer, done>>
targetVars == <<wire, ledger, keyStore, appliedKeys, pruned>>
workerVars == <<up, paused, pc, lw>>
vars == <<now, wfVars, effVars, worldVars, targetVars, workerVars, sendLog, hist, tmp>>

Sym == Permutations(Workers)

\* The facts a send carries, fixed at the step that authorized it (docs/protocol.md section 11).
\* journaled: the transaction that authorized the send appended its signed entry (DISPATCHED for a
\* first send, RESENT for a resend) before the bytes left (EverySendJournaled).
NoAuth == [liveClaim |-> FALSE, grantOk |-> FALSE, premiseOk |-> FALSE, resend |-> FALSE,
           recheckOk |-> FALSE, afterRevoke |-> FALSE, inReturned |-> FALSE,
           afterCancel |-> FALSE, pastWindow |-> FALSE, journaled |-> FALSE]

\* Per-worker local state.  epoch: the claim's epoch (Temporal: the attempt number);
\* lease: local_lease (docs/protocol.md section 3.3); deadline: the send watchdog deadline;
\* txn: now() of the open T_dispatch; fenceOk: its fence matched a live claim;
\* readOk / readGrant: what the premise read saw; recPrem, found: recovery (c);
\* auth: the authorization of the pending send; late: resumed from a pause past a local
\* check (A1 violated); await: id of the request awaited; ackOk: the response was a success;
\* run: Temporal run number of the attempt.
L0 == [epoch |-> 0, lease |-> 0, deadline |-> 0, txn |-> 0, fenceOk |-> FALSE,
       readOk |-> FALSE, readGrant |-> FALSE, recPrem |-> FALSE, found |-> FALSE,
       auth |-> NoAuth, late |-> FALSE, await |-> 0, ackOk |-> FALSE, run |-> 0]

Init ==
  /\ now = 0
  \* CHOICE temporal: the baselines start at the refund activity (the plain step and the
  \* decision are already in the history); the interlock workflow starts pending.
  /\ wfStatus = IF Interlock THEN "pending" ELSE "running"
  /\ wfEpoch = 0 /\ wfOwner = Nobody /\ leaseExp = 0 /\ availAt = 0
  /\ rowLock = Nobody /\ cancelRequested = FALSE
  /\ stepRow = [s \in {"plain", "effect"} |-> s = "plain" /\ ~Interlock]
  /\ effState = "none" /\ boundPayload = 0 /\ dispWorkerEpoch = <<Nobody, 0>>
  /\ firstDispatch = -1 /\ sendDeadline = 0
  /\ journal = [dispatched |-> 0, committed |-> 0, resolutions |-> 0, lateResults |-> 0,
                ambig |-> "none"]
  /\ grantRevoked = FALSE /\ revokeReturned = FALSE /\ handRefund = 0 /\ offer = Approved
  /\ done = {}
  /\ wire = {} /\ ledger = 0 /\ keyStore = {} /\ appliedKeys = {} /\ pruned = FALSE
  /\ up = [w \in Workers |-> TRUE] /\ paused = [w \in Workers |-> FALSE]
  /\ pc = [w \in Workers |-> "idle"] /\ lw = [w \in Workers |-> L0]
  /\ sendLog = <<>>
  /\ hist = [plainStartsAfterRow |-> 0, rowWrites |-> 0, unfencedWrite |-> FALSE,
             earlyTakeover |-> FALSE, tookOver |-> FALSE, crashes |-> 0, pauses |-> 0,
             acksAfterResolution |-> 0]
  /\ tmp = [act |-> "scheduled", w |-> Nobody, start |-> 0, attempt |-> 0, run |-> 1,
            applied |-> 0]

------------------------------------------------------------------------------
\* Helpers

\* The fence (docs/protocol.md section 3.2): current epoch, status running, live lease at now().
RealFence(w) == up[w] /\ lw[w].epoch = wfEpoch /\ wfOwner = w /\ wfStatus = "running"
                /\ leaseExp > now
\* BROKEN no_fencing: worker writes carry no WHERE clause beyond the id.
Fence(w) == RealFence(w) \/ BROKEN = "no_fencing"
Mine(w)  == dispWorkerEpoch = <<w, lw[w].epoch>>
Age      == now - firstDispatch
\* docs/protocol.md section 6.5: tier 1 past dedup_window - DEDUP_MARGIN becomes tier 2 or 3.
PastWindow == Tier = 1 /\ firstDispatch >= 0 /\ Age > DedupAge
EffTier    == IF PastWindow THEN (IF Queryable THEN 2 ELSE 3) ELSE Tier
\* PruneOK, the dedup-margin finding (docs/protocol.md section 14): keys may be forgotten only after
\* DedupAge + SendTimeout + SettleMargin; ThinDedupMargin lets the target forget after DedupAge.
PruneOK == firstDispatch >= 0 /\
           IF BROKEN = "thin_dedup_margin" THEN Age > DedupAge
           ELSE Age > DedupAge + SendTimeout + SettleMargin
\* The payload a Temporal run sends: run 1 carries the original decision, a reset run the new one.
RunPayload(r) == IF r = 1 THEN Approved ELSE Redecided
Premise == handRefund = 0     \* the decision's premise: no one else has refunded
Live(w) == up[w] /\ ~paused[w]

SetPc(w, p)   == pc' = [pc EXCEPT ![w] = p]
Reset(w)      == /\ pc' = [pc EXCEPT ![w] = "idle"]
                 /\ lw' = [lw EXCEPT ![w] = L0]
\* The fence UPDATE sets lease_expires_at = now() + ttl; the worker's stopwatch t0 was read
\* before the transaction, so its local lease is t0 + ttl <= now() + ttl (A5); the model
\* takes the equal, least safe value.
RenewLocal(w) == [lw EXCEPT ![w].lease = now + LeaseTTL]
MarkFenced(w) == hist' = [hist EXCEPT !.unfencedWrite = @ \/ ~RealFence(w)]
\* T_dispatch's fence matched (or not) at its begin; Postgres holds the row lock until commit,
\* so no claim can intervene even if the clock passes the lease meanwhile.
MarkTxn(w)    == hist' = [hist EXCEPT !.unfencedWrite = @ \/ ~lw[w].fenceOk]

------------------------------------------------------------------------------
\* MODE "interlock"

\* The claim (docs/protocol.md section 3.1): a due pending row, or a running row whose lease
\* expired; skip locked.
Claim(w) ==
  /\ Interlock /\ Live(w) /\ pc[w] = "idle" /\ rowLock = Nobody
  /\ wfStatus \notin Terminal
  /\ \/ wfStatus = "pending" /\ availAt <= now
     \/ wfStatus = "running" /\ leaseExp <= now
  /\ wfStatus' = "running" /\ wfEpoch' = wfEpoch + 1 /\ wfOwner' = w
  /\ leaseExp' = now + LeaseTTL
  /\ SetPc(w, "replay")
  /\ lw' = [lw EXCEPT ![w] = [L0 EXCEPT !.epoch = wfEpoch + 1, !.lease = now + LeaseTTL]]
  /\ hist' = [hist EXCEPT !.earlyTakeover = @ \/ (wfStatus = "running" /\ leaseExp > now),
                          !.tookOver = @ \/ wfStatus = "running"]
  /\ UNCHANGED <<now, availAt, rowLock, cancelRequested, stepRow, effVars, worldVars,
                 targetVars, up, paused, sendLog, tmp>>

\* The heartbeat thread's fence UPDATE (docs/protocol.md section 3.3).  CHOICE heartbeat (see the
\* header).
Heartbeat(w) ==
  /\ Interlock /\ Live(w) /\ pc[w] # "idle" /\ rowLock = Nobody /\ Fence(w)
  /\ leaseExp <= now + 1
  /\ leaseExp' = now + LeaseTTL
  /\ lw' = RenewLocal(w)
  /\ UNCHANGED <<now, wfStatus, wfEpoch, wfOwner, availAt, rowLock, cancelRequested, stepRow,
                 effVars, worldVars, targetVars, up, paused, pc, sendLog, hist, tmp>>

\* The workflow returns (all steps recorded) or raises Cancelled: one fenced write.
Finish(w) ==
  /\ rowLock = Nobody
  /\ IF Fence(w)
       THEN /\ wfStatus' = IF stepRow["effect"] THEN "completed" ELSE "cancelled"
            /\ wfOwner' = Nobody /\ leaseExp' = 0
            /\ MarkFenced(w)
       ELSE UNCHANGED <<wfStatus, wfOwner, leaseExp, hist>>
  /\ Reset(w)

\* Replay from the top (docs/protocol.md section 4).  The step rows are read here (the load after
\* the claim, or the re-entry after a fenced write), and the worker routes to the frontier call.
\* CHOICE cancel: the worker learns cancel_requested_at from its claim or fenced writes; the
\* model reads it at Replay.  A cancel that commits after Replay is refused by T_dispatch,
\* which checks it under the row lock, so no interleaving is lost.
\* CHOICE orphans: a cancelled workflow whose effect is still dispatched first resolves it by
\* the recovery path (what rt.recover_orphans does under a synthetic claim), then ends.
Replay(w) ==
  /\ Interlock /\ Live(w) /\ pc[w] = "replay"
  /\ CASE ~stepRow["plain"] /\ ~cancelRequested ->
            SetPc(w, "plain") /\ UNCHANGED <<lw, wfStatus, wfOwner, leaseExp, hist>>
       [] stepRow["plain"] /\ ~stepRow["effect"] /\ effState = "dispatched" ->
            \* An open dispatch with no step row takes the recovery path (section 6.5).
            SetPc(w, "recover") /\ UNCHANGED <<lw, wfStatus, wfOwner, leaseExp, hist>>
       [] stepRow["plain"] /\ ~stepRow["effect"] /\ ~cancelRequested ->
            SetPc(w, "premise") /\ UNCHANGED <<lw, wfStatus, wfOwner, leaseExp, hist>>
       [] OTHER -> Finish(w)
  /\ UNCHANGED <<now, wfEpoch, availAt, rowLock, cancelRequested, stepRow, effVars, worldVars,
                 targetVars, up, paused, sendLog, tmp>>

\* A plain step body starts.  The local-lease fix (docs/protocol.md sections 3.3 and 14): only
\* while monotonic() < local_lease; otherwise Fenced and the run is abandoned.  lw[w].late is a
\* worker resumed from a SIGSTOP taken after the check passed (A1 violated, PAUSE only).
RunPlain(w) ==
  /\ Interlock /\ Live(w) /\ pc[w] = "plain"
  /\ IF BROKEN = "no_local_lease_check" \/ now < lw[w].lease \/ lw[w].late
       THEN /\ hist' = [hist EXCEPT !.plainStartsAfterRow = @ + (IF stepRow["plain"] THEN 1 ELSE 0)]
            /\ SetPc(w, "plainDone")
            /\ lw' = [lw EXCEPT ![w].late = FALSE]
       ELSE Reset(w) /\ UNCHANGED hist
  /\ UNCHANGED <<now, wfVars, effVars, worldVars, targetVars, up, paused, sendLog, tmp>>

\* The step row, in a fenced transaction.  The primary key (workflow_id, seq) refuses a
\* second row: the transaction rolls back and the run is abandoned.
RecordPlain(w) ==
  /\ Interlock /\ Live(w) /\ pc[w] = "plainDone" /\ rowLock = Nobody
  /\ IF Fence(w) /\ ~stepRow["plain"]
       THEN /\ stepRow' = [stepRow EXCEPT !["plain"] = TRUE]
            /\ leaseExp' = now + LeaseTTL
            /\ lw' = RenewLocal(w)
            /\ SetPc(w, "replay")
            /\ hist' = [hist EXCEPT !.rowWrites = @ + 1, !.unfencedWrite = @ \/ ~RealFence(w)]
       ELSE Reset(w) /\ UNCHANGED <<stepRow, leaseExp, hist>>
  /\ UNCHANGED <<now, wfStatus, wfEpoch, wfOwner, availAt, rowLock, cancelRequested, effVars,
                 worldVars, targetVars, up, paused, sendLog, tmp>>

\* The submit path's premise read and the start of T_dispatch (docs/protocol.md section 6.2).  The
\* external premises are read outside any transaction (A3); the broken design GrantCheckOutsideTxn
\* also reads the grant there and trusts that read at commit.  Then T_dispatch begins: the fence
\* UPDATE takes the workflow row lock and fixes now().  The watchdog stopwatch t0 was started before
\* this (section 6.3); the model takes t0 = now().
\* CHOICE read: the read and the begin are one step.  The A3 window (a world event between
\* the read and the commit) is still in the model, between TDispatchBegin and
\* TDispatchCommit; a separate read step would only add interleavings with the same outcomes.
TDispatchBegin(w) ==
  /\ Interlock /\ Live(w) /\ pc[w] = "premise" /\ rowLock = Nobody
  /\ IF Fence(w)
       THEN /\ rowLock' = w /\ leaseExp' = now + LeaseTTL
            /\ lw' = [lw EXCEPT ![w].lease = now + LeaseTTL, ![w].txn = now,
                                ![w].fenceOk = RealFence(w), ![w].readOk = Premise,
                                ![w].readGrant = ~grantRevoked]
            /\ SetPc(w, "tdispatchC")
       ELSE Reset(w) /\ UNCHANGED <<rowLock, leaseExp>>
  /\ UNCHANGED <<now, wfStatus, wfEpoch, wfOwner, availAt, cancelRequested, stepRow, effVars,
                 worldVars, targetVars, up, paused, sendLog, hist, tmp>>

\* A refusal or a terminal effect state is recorded as the step row in T_dispatch itself.
RecordEffectStepInTDispatch(w) ==
  IF stepRow["effect"]
    THEN Reset(w) /\ UNCHANGED <<stepRow, hist>>                 \* primary key: roll back
    ELSE /\ stepRow' = [stepRow EXCEPT !["effect"] = TRUE]
         /\ hist' = [hist EXCEPT !.rowWrites = @ + 1, !.unfencedWrite = @ \/ ~lw[w].fenceOk]
         /\ SetPc(w, "replay")
         /\ lw' = [lw EXCEPT ![w].txn = 0, ![w].fenceOk = FALSE, ![w].readOk = FALSE,
                             ![w].readGrant = FALSE]

\* T_dispatch commits: the checks of docs/protocol.md section 6.2 in their order, at commit time.
\* The grant is read FOR SHARE inside the transaction, so a revoke is either before this commit or
\* after it; the workflow row lock makes cancel wait for the commit.
TDispatchCommit(w) ==
  /\ Interlock /\ Live(w) /\ pc[w] = "tdispatchC"
  /\ LET off       == offer
         \* step 8: unrevoked and the payload matches the approval's payload_hash
         grantLive == ~grantRevoked /\ off = Approved
         grantSeen == IF BROKEN = "grant_check_outside_txn"
                        THEN lw[w].readGrant /\ off = Approved ELSE grantLive
         bind      == IF boundPayload = 0 THEN off ELSE boundPayload
         a == [NoAuth EXCEPT !.liveClaim = lw[w].fenceOk, !.grantOk = grantLive,
                             !.premiseOk = lw[w].readOk, !.recheckOk = TRUE,
                             !.afterRevoke = grantRevoked, !.inReturned = revokeReturned,
                             !.afterCancel = cancelRequested, !.pastWindow = FALSE,
                             !.journaled = TRUE]
     IN CASE effState = "dispatched" ->
               \* step 3, open dispatch by another claim: commit nothing but the suspend
               \* (IN_FLIGHT), available again just past send_deadline + settle_margin.
               /\ wfStatus' = "pending" /\ wfOwner' = Nobody /\ leaseExp' = 0
               /\ availAt' = sendDeadline + SettleMargin + 1
               /\ Reset(w) /\ MarkTxn(w)
               /\ UNCHANGED <<stepRow, effVars>>
          [] boundPayload # 0 /\ boundPayload # off ->           \* step 4: conflicting_payload
               /\ RecordEffectStepInTDispatch(w)
               /\ UNCHANGED <<wfStatus, wfOwner, leaseExp, availAt, effVars>>
          [] effState \in {"committed", "ambiguous"} ->          \* step 5: DUPLICATE_IGNORED / AMBIGUOUS
               /\ RecordEffectStepInTDispatch(w)
               /\ UNCHANGED <<wfStatus, wfOwner, leaseExp, availAt, effVars>>
          [] cancelRequested \/ ~grantSeen \/ ~lw[w].readOk ->  \* steps 7, 8, 10: REFUSED
               /\ RecordEffectStepInTDispatch(w)
               /\ boundPayload' = bind /\ effState' = "proposed"
               /\ UNCHANGED <<wfStatus, wfOwner, leaseExp, availAt, dispWorkerEpoch,
                              firstDispatch, sendDeadline, journal>>
          [] OTHER ->                                            \* steps 11 to 13: DISPATCHED
               /\ effState' = "dispatched" /\ boundPayload' = bind
               /\ dispWorkerEpoch' = <<w, lw[w].epoch>>
               /\ firstDispatch' = IF firstDispatch < 0 THEN lw[w].txn ELSE firstDispatch
               /\ sendDeadline' = lw[w].txn + SendTimeout
               /\ journal' = [journal EXCEPT !.dispatched = @ + 1]
               /\ lw' = [lw EXCEPT ![w].auth = a, ![w].txn = 0, ![w].fenceOk = FALSE,
                           ![w].readOk = FALSE, ![w].readGrant = FALSE,
                           ![w].deadline = IF BROKEN = "stopwatch_after_dispatch"
                                             THEN now + SendTimeout        \* t0 after commit
                                             ELSE lw[w].txn + SendTimeout] \* t0 before begin
               /\ SetPc(w, "send") /\ MarkTxn(w)
               /\ UNCHANGED <<stepRow, wfStatus, wfOwner, leaseExp, availAt>>
  /\ rowLock' = Nobody
  /\ UNCHANGED <<now, wfEpoch, cancelRequested, worldVars, targetVars, up, paused, sendLog, tmp>>

\* Put a request on the wire and log what authorized it.  prevSendSettled: no earlier request
\* for this effect is still in flight (NoOverlappingSends: two sends are never in flight at once).
\* CHOICE liveClaim: fixed by the authorizing transaction's fence, as SendRequiresLiveClaim is
\* worded (docs/protocol.md section 11); a check at the send itself would flag a lease_ttl shorter
\* than send_timeout, which is allowed (the send is bounded by send_deadline, section 6.9).
PutOnWire(w, key, payload, a) ==
  /\ wire' = wire \cup {[id |-> Len(sendLog) + 1, w |-> w, key |-> key, payload |-> payload,
                         attempt |-> IF Interlock THEN 0 ELSE lw[w].epoch, run |-> lw[w].run,
                         processBy |-> IF SERVER_SLOW THEN MaxClock ELSE now + SettleMargin]}
  /\ sendLog' = Append(sendLog, a @@ [payload |-> payload, prevSendSettled |-> wire = {}])

\* Bytes leave, only before the watchdog's local deadline (docs/protocol.md section 6.3).  Past it
\* the send is skipped and the run abandoned; recovery resolves the effect.
Send(w) ==
  /\ Interlock /\ Live(w) /\ pc[w] = "send"
  /\ IF now < lw[w].deadline \/ lw[w].late
       THEN /\ PutOnWire(w, "E", boundPayload, lw[w].auth)
            /\ lw' = [lw EXCEPT ![w].await = Len(sendLog) + 1, ![w].late = FALSE,
                                ![w].auth = NoAuth]
            /\ SetPc(w, "await")
       ELSE Reset(w) /\ UNCHANGED <<wire, sendLog>>
  /\ UNCHANGED <<now, wfVars, effVars, worldVars, ledger, keyStore, appliedKeys, pruned,
                 up, paused, hist, tmp>>

\* The watchdog (docs/protocol.md section 6.3): os._exit while the send is unfinished at the local
\* deadline (Tick waits for it, see WatchdogDue).  CHOICE: the process's supervisor restarts it at
\* once (the same state as Crash then Restart, with fewer states).
Watchdog(w) ==
  /\ Interlock /\ Live(w) /\ pc[w] = "await" /\ now >= lw[w].deadline
  /\ Reset(w)
  /\ UNCHANGED <<now, wfVars, effVars, worldVars, targetVars, up, paused, sendLog, hist, tmp>>

\* T_commit, fenced (docs/protocol.md section 6.4): COMMITTED, state committed and the step row in
\* one transaction.  BROKEN commit_without_checkpoint writes the step row in a second transaction.
TCommit(w) ==
  /\ Interlock /\ Live(w) /\ pc[w] = "acked" /\ rowLock = Nobody
  /\ Fence(w) /\ effState = "dispatched" /\ Mine(w)
  /\ CASE BROKEN = "commit_without_checkpoint" ->
            /\ effState' = "committed"
            /\ journal' = [journal EXCEPT !.committed = @ + 1, !.resolutions = @ + 1]
            /\ leaseExp' = now + LeaseTTL /\ lw' = RenewLocal(w)
            /\ SetPc(w, "tcommitStep") /\ MarkFenced(w)
            /\ UNCHANGED stepRow
       [] stepRow["effect"] ->                        \* primary key: the transaction rolls back
            Reset(w) /\ UNCHANGED <<effState, journal, leaseExp, stepRow, hist>>
       [] OTHER ->
            /\ effState' = "committed"
            /\ journal' = [journal EXCEPT !.committed = @ + 1, !.resolutions = @ + 1]
            /\ stepRow' = [stepRow EXCEPT !["effect"] = TRUE]
            /\ leaseExp' = now + LeaseTTL /\ lw' = RenewLocal(w)
            /\ SetPc(w, "replay")
            /\ hist' = [hist EXCEPT !.rowWrites = @ + 1, !.unfencedWrite = @ \/ ~RealFence(w)]
  /\ UNCHANGED <<now, wfStatus, wfEpoch, wfOwner, availAt, rowLock, cancelRequested,
                 boundPayload, dispWorkerEpoch, firstDispatch, sendDeadline, worldVars,
                 targetVars, up, paused, sendLog, tmp>>

\* BROKEN commit_without_checkpoint only: the step row in its own transaction.
TCommitStep(w) ==
  /\ Interlock /\ Live(w) /\ pc[w] = "tcommitStep" /\ rowLock = Nobody
  /\ IF Fence(w) /\ ~stepRow["effect"]
       THEN /\ stepRow' = [stepRow EXCEPT !["effect"] = TRUE]
            /\ leaseExp' = now + LeaseTTL /\ lw' = RenewLocal(w)
            /\ SetPc(w, "replay")
            /\ hist' = [hist EXCEPT !.rowWrites = @ + 1, !.unfencedWrite = @ \/ ~RealFence(w)]
       ELSE Reset(w) /\ UNCHANGED <<stepRow, leaseExp, hist>>
  /\ UNCHANGED <<now, wfStatus, wfEpoch, wfOwner, availAt, rowLock, cancelRequested, effVars,
                 worldVars, targetVars, up, paused, sendLog, tmp>>

\* The late-result transaction (docs/protocol.md section 6.4): unfenced, locks only the effect row.
\* Still dispatched by this sender's (workflow, epoch): compare-and-set COMMITTED (the FencedWrites
\* exception).  Otherwise append LATE_RESULT; BROKEN late_ack_dropped drops the response instead.
LateResult(w) ==
  /\ Interlock /\ Live(w) /\ pc[w] = "acked"
  /\ ~(Fence(w) /\ effState = "dispatched" /\ Mine(w))
  /\ IF effState = "dispatched" /\ Mine(w)
       THEN /\ effState' = "committed"
            /\ journal' = [journal EXCEPT !.committed = @ + 1, !.resolutions = @ + 1]
            /\ UNCHANGED hist
       ELSE /\ journal' = [journal EXCEPT
                             !.lateResults = @ + (IF BROKEN = "late_ack_dropped" THEN 0 ELSE 1)]
            /\ hist' = [hist EXCEPT !.acksAfterResolution = @ + 1]
            /\ UNCHANGED effState
  /\ Reset(w)
  /\ UNCHANGED <<now, wfVars, boundPayload, dispWorkerEpoch, firstDispatch, sendDeadline,
                 worldVars, targetVars, up, paused, sendLog, tmp>>

\* Recovery (a) and (c) of docs/protocol.md section 6.5: a short read.  Nothing before now() >
\* send_deadline + settle_margin: suspend (a fenced write) until just past it.  Past it, outside any
\* transaction, validate_premises against the decided premises and query(effect_id) where the target
\* answers.  BROKEN recover_before_deadline goes on at once; BROKEN naive_recovery ignores the
\* premise result in T_resolve (it still looks the effect up).
\* CHOICE read: (a) and (c) are one step.  After send_deadline + settle_margin the target's
\* answer cannot change (A2), and a world event between (c) and T_resolve is still in the
\* model, so a separate step would only add interleavings with the same outcomes.
\* CHOICE tier: the code's short read (a) computes the tier downgrade; the model evaluates it in
\* T_resolve, with T_resolve's now(), as the dedup-margin finding reads it (docs/protocol.md section
\* 14: the check runs once, at T_resolve).  A tier computed here and used after a stall (the
\* heartbeat keeps the lease) could authorize a tier-1 resend past the window: the code must
\* re-evaluate it inside T_resolve.
BeginRecovery(w) ==
  /\ Interlock /\ Live(w) /\ pc[w] = "recover"
  /\ CASE effState # "dispatched" ->
            SetPc(w, "replay") /\ UNCHANGED <<lw, wfStatus, wfOwner, leaseExp, availAt, hist>>
       [] now > sendDeadline + SettleMargin \/ BROKEN = "recover_before_deadline" ->
            /\ SetPc(w, "tresolve")
            /\ lw' = [lw EXCEPT ![w].recPrem = Premise,
                                ![w].found = (Queryable /\ "E" \in appliedKeys)]
            /\ UNCHANGED <<wfStatus, wfOwner, leaseExp, availAt, hist>>
       [] OTHER ->
            /\ rowLock = Nobody
            /\ IF Fence(w)
                 THEN /\ wfStatus' = "pending" /\ wfOwner' = Nobody /\ leaseExp' = 0
                      /\ availAt' = sendDeadline + SettleMargin + 1
                      /\ MarkFenced(w)
                 ELSE UNCHANGED <<wfStatus, wfOwner, leaseExp, availAt, hist>>
            /\ Reset(w)
  /\ UNCHANGED <<now, wfEpoch, rowLock, cancelRequested, stepRow, effVars, worldVars,
                 targetVars, up, paused, sendLog, tmp>>

\* Recovery (d), T_resolve, fenced, with the decision table of docs/protocol.md section 6.5.  The
\* grant is checked under its FOR SHARE lock here.  CHOICE: T_resolve re-reads the effect row (it
\* must still be dispatched) but does not compare the dispatch pair or deadline with what (a) saw:
\* the code relies on the fence to exclude a concurrent recoverer, and NoFencing shows the cost.
TResolve(w) ==
  /\ Interlock /\ Live(w) /\ pc[w] = "tresolve" /\ rowLock = Nobody
  /\ LET naive     == BROKEN = "naive_recovery"
         grantLive == ~grantRevoked
         stale     == ~naive /\ (~grantLive \/ ~lw[w].recPrem)
         t         == EffTier
         a == [NoAuth EXCEPT !.liveClaim = RealFence(w), !.grantOk = grantLive,
                             !.premiseOk = IF naive THEN Premise ELSE lw[w].recPrem,
                             !.resend = TRUE, !.recheckOk = ~naive,
                             !.afterRevoke = grantRevoked, !.inReturned = revokeReturned,
                             !.afterCancel = FALSE, !.pastWindow = PastWindow,
                             !.journaled = BROKEN # "unjournaled_resend"]
         Resolve(st, why) ==
           IF stepRow["effect"]
             THEN Reset(w) /\ UNCHANGED <<effVars, stepRow, leaseExp, hist>>  \* primary key
             ELSE /\ effState' = st
                  /\ journal' = [journal EXCEPT !.resolutions = @ + 1,
                                   !.committed = @ + (IF st = "committed" THEN 1 ELSE 0),
                                   !.ambig = IF st = "ambiguous" THEN why ELSE @]
                  /\ dispWorkerEpoch' = IF st = "proposed" THEN <<Nobody, 0>> ELSE dispWorkerEpoch
                  /\ UNCHANGED <<sendDeadline, boundPayload, firstDispatch>>
                  /\ stepRow' = [stepRow EXCEPT !["effect"] = TRUE]
                  /\ leaseExp' = now + LeaseTTL
                  /\ lw' = [lw EXCEPT ![w].lease = now + LeaseTTL, ![w].recPrem = FALSE,
                                      ![w].found = FALSE]
                  /\ SetPc(w, "replay")
                  /\ hist' = [hist EXCEPT !.rowWrites = @ + 1,
                                          !.unfencedWrite = @ \/ ~RealFence(w)]
         \* tier 1 retry or tier 2 re-apply: move the dispatch pair to this claim, new deadline,
         \* and the signed RESENT entry with the re-check (its flag in the send's record: the
         \* journal keeps no send counter), committed before any bytes leave; t0 is taken before
         \* T_resolve begins.  BROKEN unjournaled_resend writes no entry: the send is off the
         \* signed record, as every resend was before RESENT.
         Resend ==
           /\ dispWorkerEpoch' = <<w, lw[w].epoch>>
           /\ sendDeadline' = now + SendTimeout
           /\ leaseExp' = now + LeaseTTL
           /\ lw' = [lw EXCEPT ![w].auth = a, ![w].deadline = now + SendTimeout,
                               ![w].lease = now + LeaseTTL, ![w].recPrem = FALSE,
                               ![w].found = FALSE]
           /\ SetPc(w, "send") /\ MarkFenced(w)
           /\ UNCHANGED <<effState, journal, stepRow, boundPayload, firstDispatch>>
     IN IF ~Fence(w)
          THEN Reset(w) /\ UNCHANGED <<effVars, stepRow, leaseExp, hist>>
        ELSE IF effState # "dispatched"
          THEN SetPc(w, "replay") /\ UNCHANGED <<lw, effVars, stepRow, leaseExp, hist>>
        ELSE CASE t = 3                    -> Resolve("ambiguous", "tier3")
               [] t = 1 /\ ~stale          -> Resend                          \* COMMITTED_BY_RETRY
               [] stale /\ ~Queryable      -> Resolve("ambiguous", "stale_no_lookup")
               [] lw[w].found              -> Resolve("committed", "none")    \* COMMITTED_ON_QUERY
               [] stale                    -> Resolve("proposed", "none")     \* REFUSED:*_at_recovery
               [] OTHER                    -> Resend                          \* REAPPLIED_AFTER_QUERY
  /\ UNCHANGED <<now, wfStatus, wfEpoch, wfOwner, availAt, rowLock, cancelRequested,
                 worldVars, targetVars, up, paused, sendLog, tmp>>

------------------------------------------------------------------------------
\* MODE "temporal_idem" and "temporal_precheck".  The server schedules attempts of the refund
\* activity; lw[w].epoch is the attempt number.
\* CHOICE temporal: the server starts a retry only after the start-to-close timeout
\* (SendTimeout), a SIGKILLed worker does not report its death, an attempt sends only before
\* its own timeout unless it was paused (the baseline's best case), and completion is accepted
\* only from the current attempt inside its timeout.  There is no separate effect journal:
\* effState becomes "dispatched" at the first send and "committed" when the target applies a
\* request (the target's record is the only commit Temporal has); tmp.applied names the
\* attempt of the current run whose request was applied first, and stepRow["effect"] is the
\* activity completion in the current run's history.

CurrentAttempt(w) ==
  /\ tmp.act = "started" /\ tmp.w = w /\ tmp.attempt = lw[w].epoch /\ tmp.run = lw[w].run
  /\ now < tmp.start + SendTimeout /\ wfStatus = "running"

TStart(w) ==
  /\ ~Interlock /\ Live(w) /\ pc[w] = "idle" /\ wfStatus = "running"
  /\ \/ tmp.act = "scheduled"
     \/ tmp.act = "started" /\ now >= tmp.start + SendTimeout
  /\ tmp' = [tmp EXCEPT !.act = "started", !.w = w, !.start = now, !.attempt = @ + 1]
  /\ lw' = [lw EXCEPT ![w] = [L0 EXCEPT !.epoch = tmp.attempt + 1, !.run = tmp.run,
                                        !.deadline = now + SendTimeout]]
  /\ SetPc(w, IF MODE = "temporal_precheck" THEN "tcheck" ELSE "tsend")
  /\ UNCHANGED <<now, wfVars, effVars, worldVars, targetVars, up, paused, sendLog, hist>>

\* System (b)'s reads (docs/protocol.md section 16.1), one step, separate from the send: lookup by
\* the workflow-id key, the grant (a plain SELECT), the amount against the approval, eligibility
\* (refunded_total + amount <= paid, 100: it passes for both hand refunds).
TCheck(w) ==
  /\ MODE = "temporal_precheck" /\ Live(w) /\ pc[w] = "tcheck"
  /\ CASE Queryable /\ "wf" \in appliedKeys ->
            SetPc(w, "acked") /\ lw' = [lw EXCEPT ![w].ackOk = TRUE]   \* "already happened"
       [] grantRevoked \/ RunPayload(lw[w].run) # Approved ->
            SetPc(w, "tfail") /\ UNCHANGED lw                          \* non-retryable
       [] OTHER ->
            SetPc(w, "tsend") /\ UNCHANGED lw
  /\ UNCHANGED <<now, wfVars, effVars, worldVars, targetVars, up, paused, sendLog, hist, tmp>>

\* The HTTP send.  For Temporal the authorizing point is the send itself: there is no
\* transaction before it.  A send by a retry attempt or a reset run is a resend, and neither
\* mode re-checks the decided premises (recheckOk = FALSE).
TSend(w) ==
  /\ ~Interlock /\ Live(w) /\ pc[w] = "tsend"
  /\ IF now < lw[w].deadline \/ lw[w].late
       THEN LET r   == lw[w].run
                key == IF MODE = "temporal_idem" THEN (IF r = 1 THEN "run1" ELSE "run2") ELSE "wf"
                a   == [NoAuth EXCEPT !.liveClaim = CurrentAttempt(w), !.grantOk = ~grantRevoked,
                                      !.premiseOk = Premise, !.resend = Len(sendLog) > 0,
                                      !.recheckOk = FALSE, !.afterRevoke = grantRevoked,
                                      !.inReturned = FALSE, !.afterCancel = cancelRequested,
                                      !.pastWindow = PastWindow]
            IN /\ PutOnWire(w, key, RunPayload(r), a)
               /\ lw' = [lw EXCEPT ![w].await = Len(sendLog) + 1, ![w].late = FALSE,
                                   ![w].auth = NoAuth]
               /\ SetPc(w, "await")
               /\ effState' = IF effState = "none" THEN "dispatched" ELSE effState
               /\ firstDispatch' = IF firstDispatch < 0 THEN now ELSE firstDispatch
       ELSE Reset(w) /\ UNCHANGED <<wire, sendLog, effState, firstDispatch>>
  /\ UNCHANGED <<now, wfVars, boundPayload, dispWorkerEpoch, sendDeadline, journal, worldVars,
                 ledger, keyStore, appliedKeys, pruned, up, paused, hist, tmp>>

\* The activity returns.  A success from the current attempt completes the activity (and the
\* workflow); a target error is retryable; anything else is ignored by the server.
TComplete(w) ==
  /\ ~Interlock /\ Live(w) /\ pc[w] = "acked"
  /\ IF CurrentAttempt(w)
       THEN IF lw[w].ackOk
              THEN /\ tmp' = [tmp EXCEPT !.act = "completed"]
                   /\ stepRow' = [stepRow EXCEPT !["effect"] = TRUE]
                   /\ journal' = [journal EXCEPT !.committed = @ + 1]
                   /\ wfStatus' = "completed"
              ELSE /\ tmp' = [tmp EXCEPT !.act = "scheduled"]
                   /\ UNCHANGED <<stepRow, journal, wfStatus>>
       ELSE UNCHANGED <<tmp, stepRow, journal, wfStatus>>
  /\ Reset(w)
  /\ UNCHANGED <<now, wfEpoch, wfOwner, leaseExp, availAt, rowLock, cancelRequested, effState,
                 boundPayload, dispWorkerEpoch, firstDispatch, sendDeadline, worldVars,
                 targetVars, up, paused, sendLog, hist>>

\* A non-retryable ApplicationError fails the workflow.
TFail(w) ==
  /\ MODE = "temporal_precheck" /\ Live(w) /\ pc[w] = "tfail"
  /\ IF CurrentAttempt(w)
       THEN tmp' = [tmp EXCEPT !.act = "failed"] /\ wfStatus' = "failed"
       ELSE UNCHANGED <<tmp, wfStatus>>
  /\ Reset(w)
  /\ UNCHANGED <<now, wfEpoch, wfOwner, leaseExp, availAt, rowLock, cancelRequested, stepRow,
                 effVars, worldVars, targetVars, up, paused, sendLog, hist>>

------------------------------------------------------------------------------
\* World events, each at most once.

Once(e) == e \in Events /\ e \notin done

\* CHOICE read points (an exact reduction).  A world event changes one variable that only
\* certain steps read.  Moving the event later, to just before the next step that reads that
\* variable, changes nothing any later step or invariant can observe, so the model offers an
\* event only where a step that reads it is next (or, for the Temporal reset and cancel, which
\* change the workflow itself, anywhere).  Per event:
\*  - revoke: read by T_dispatch (begin and commit) and T_resolve (interlock), TCheck and TSend
\*    (Temporal).  rt.revoke's returned list is the effect iff it is dispatched; between an
\*    earlier revoke and the next read the state can only go from dispatched to committed,
\*    after which no send is ever authorized, so the list never matters differently.
\*  - hand refund: the decision's premise is read by the premise read before T_dispatch and by
\*    recovery (c) (interlock; and by naive T_resolve), and by TSend (Temporal; system (b)'s
\*    eligibility passes either way).
\*  - cancel (interlock): read by Replay's routing and T_dispatch (which holds the row lock, so
\*    the cancel is before its begin), and it wakes a pending row for the next claim.
\*  - prune_keys: the keys are read only when the target processes a request.
\*  - redecide (interlock): the offered payload is read only by T_dispatch's commit.
ReadsGrant    == {"premise", "tdispatchC", "tresolve", "tcheck", "tsend"}
ReadsPremise  == {"premise", "recover", "tsend"} \cup
                 (IF BROKEN = "naive_recovery" THEN {"tresolve"} ELSE {})
ReadsCancel   == {"replay", "premise"}
Next2Read(ps) == \E w \in Workers : up[w] /\ pc[w] \in ps

\* rt.revoke: one transaction; it returns the effects dispatched under the grant.  The
\* Temporal baselines do the same revoked_at update and return nothing.
Revoke ==
  /\ Once("revoke") /\ Next2Read(ReadsGrant)
  /\ grantRevoked' = TRUE /\ done' = done \cup {"revoke"}
  /\ revokeReturned' = (Interlock /\ effState = "dispatched")
  /\ UNCHANGED <<now, wfVars, effVars, handRefund, offer, targetVars, workerVars, sendLog,
                 hist, tmp>>

\* Support refunds by hand: the decision's premise (no prior refund) becomes false.
HandRefund(e, amount) ==
  /\ Once(e) /\ handRefund = 0 /\ Next2Read(ReadsPremise)
  /\ handRefund' = amount /\ done' = done \cup {e}
  /\ UNCHANGED <<now, wfVars, effVars, grantRevoked, revokeReturned, offer, targetVars,
                 workerVars, sendLog, hist, tmp>>

\* rt.cancel locks the workflow row (so it waits for an open T_dispatch) and wakes a pending
\* row.  Temporal: the workflow is cancelled and no new attempt starts; a running attempt that
\* does not heartbeat is never told.
Cancel ==
  /\ Once("cancel") /\ rowLock = Nobody /\ wfStatus \notin Terminal
  /\ Interlock => /\ ~stepRow["effect"]     \* after the effect's row, Finish ignores a cancel
                  /\ Next2Read(ReadsCancel) \/ wfStatus = "pending"
  /\ cancelRequested' = TRUE /\ done' = done \cup {"cancel"}
  /\ availAt' = IF wfStatus = "pending" THEN now ELSE availAt
  /\ wfStatus' = IF Interlock THEN wfStatus ELSE "cancelled"
  /\ UNCHANGED <<now, wfEpoch, wfOwner, leaseExp, rowLock, stepRow, effVars, grantRevoked,
                 revokeReturned, handRefund, offer, targetVars, workerVars, sendLog, hist, tmp>>

\* EMULATED key expiry at a tier-1 target (Prove scenario S04), only when PruneOK.
Prune ==
  /\ Once("prune_keys") /\ Tier = 1 /\ PruneOK /\ wire # {}
  /\ keyStore' = {} /\ pruned' = TRUE /\ done' = done \cup {"prune_keys"}
  /\ UNCHANGED <<now, wfVars, effVars, grantRevoked, revokeReturned, handRefund, offer, wire,
                 ledger, appliedKeys, workerVars, sendLog, hist, tmp>>

\* The model re-decides 30.  Interlock: a fork or a retried decision offers 30 at the next
\* T_dispatch of this effect_id (payload binding and the approval's payload_hash refuse it).
\* Temporal: a reset to before the decision starts run 2 with a new run id, deciding 30.
Redecide ==
  /\ Once("redecide") /\ (Interlock => Next2Read({"tdispatchC"}))
  /\ offer' = Redecided /\ done' = done \cup {"redecide"}
  /\ IF Interlock
       THEN UNCHANGED <<wfStatus, stepRow, journal, tmp>>
       ELSE /\ tmp' = [tmp EXCEPT !.act = "scheduled", !.run = 2, !.applied = 0]
            /\ wfStatus' = "running"
            /\ stepRow' = [stepRow EXCEPT !["effect"] = FALSE]
            /\ journal' = [journal EXCEPT !.committed = 0]
  /\ UNCHANGED <<now, wfEpoch, wfOwner, leaseExp, availAt, rowLock, cancelRequested, effState,
                 boundPayload, dispWorkerEpoch, firstDispatch, sendDeadline, grantRevoked,
                 revokeReturned, handRefund, targetVars, workerVars, sendLog, hist>>

WorldStep ==
  \/ Revoke \/ Cancel \/ Prune \/ Redecide
  \/ HandRefund("hand_refund_full", 20) \/ HandRefund("hand_refund_partial", 10)

------------------------------------------------------------------------------
\* Faults

\* SIGKILL: local state is lost, an open transaction rolls back.
Crash(w) ==
  /\ up[w] /\ pc[w] # "idle" /\ hist.crashes < MaxCrashes
  /\ up' = [up EXCEPT ![w] = FALSE] /\ paused' = [paused EXCEPT ![w] = FALSE]
  /\ rowLock' = IF rowLock = w THEN Nobody ELSE rowLock
  /\ Reset(w)
  /\ hist' = [hist EXCEPT !.crashes = @ + 1]
  /\ UNCHANGED <<now, wfStatus, wfEpoch, wfOwner, leaseExp, availAt, cancelRequested, stepRow,
                 effVars, worldVars, targetVars, sendLog, tmp>>

Restart(w) ==
  /\ ~up[w]
  /\ up' = [up EXCEPT ![w] = TRUE]
  /\ UNCHANGED <<now, wfVars, effVars, worldVars, targetVars, paused, pc, lw, sendLog, hist, tmp>>

\* PAUSE (A1 violated): one SIGSTOP, taken after a local deadline check passed.  The guard is
\* that check (RunPlain's local lease, Send's and TSend's watchdog deadline): a stop after a
\* failed check resumes into an abandoned run, so pausing there adds no behavior of A1's.
LocalCheckPasses(w) ==
  IF pc[w] = "plain" THEN BROKEN = "no_local_lease_check" \/ now < lw[w].lease
  ELSE now < lw[w].deadline
Pause(w) ==
  /\ PAUSE /\ Live(w) /\ pc[w] \in {"plain", "send", "tsend"} /\ hist.pauses < 1
  /\ LocalCheckPasses(w)
  /\ paused' = [paused EXCEPT ![w] = TRUE]
  /\ hist' = [hist EXCEPT !.pauses = @ + 1]
  /\ UNCHANGED <<now, wfVars, effVars, worldVars, targetVars, up, pc, lw, sendLog, tmp>>

\* SIGCONT: the guarded action runs although its local deadline may have passed.
Resume(w) ==
  /\ up[w] /\ paused[w]
  /\ paused' = [paused EXCEPT ![w] = FALSE]
  /\ lw' = [lw EXCEPT ![w].late = TRUE]
  /\ UNCHANGED <<now, wfVars, effVars, worldVars, targetVars, up, pc, sendLog, hist, tmp>>

------------------------------------------------------------------------------
\* The target processes one request (written inline in Next, so TLC names this step "Next").
\* Tier 1 dedupes on the key with Stripe's semantics: the same key and payload replays the
\* stored result, a different payload is an error, neither applies again.
ProcessOne(m) ==
  LET hit   == Tier = 1 /\ \E kv \in keyStore : kv[1] = m.key
      same  == <<m.key, m.payload>> \in keyStore
      apply == ~hit
      s     == m.w
  IN /\ wire' = wire \ {m}
     /\ ledger' = ledger + (IF apply THEN 1 ELSE 0)
     /\ keyStore' = IF apply /\ Tier = 1 THEN keyStore \cup {<<m.key, m.payload>>} ELSE keyStore
     /\ appliedKeys' = IF apply THEN appliedKeys \cup {m.key} ELSE appliedKeys
     /\ effState' = IF ~Interlock /\ apply THEN "committed" ELSE effState
     /\ tmp' = IF ~Interlock /\ apply /\ m.run = tmp.run /\ tmp.applied = 0
                THEN [tmp EXCEPT !.applied = m.attempt] ELSE tmp
     /\ IF up[s] /\ pc[s] = "await" /\ lw[s].await = m.id
          THEN pc' = [pc EXCEPT ![s] = "acked"] /\ lw' = [lw EXCEPT ![s].ackOk = apply \/ same]
          ELSE UNCHANGED <<pc, lw>>

WorkerStep(w) ==
  \/ Claim(w) \/ Replay(w) \/ RunPlain(w) \/ RecordPlain(w)
  \/ TDispatchBegin(w) \/ TDispatchCommit(w) \/ Send(w) \/ Watchdog(w) \/ TCommit(w)
  \/ TCommitStep(w) \/ LateResult(w) \/ BeginRecovery(w) \/ TResolve(w)
  \/ TStart(w) \/ TCheck(w) \/ TSend(w) \/ TComplete(w) \/ TFail(w)

TargetStep(m) ==
  /\ UNCHANGED <<now, wfStatus, wfEpoch, wfOwner, leaseExp, availAt, rowLock, cancelRequested,
                 stepRow, boundPayload, dispWorkerEpoch, firstDispatch, sendDeadline, journal,
                 worldVars, pruned, up, paused, sendLog, hist>>
  /\ ProcessOne(m)

Process == \E m \in wire : TargetStep(m)

ProgressEnabled == \/ \E w \in Workers : ENABLED WorkerStep(w) \/ ENABLED Restart(w)
                   \/ ENABLED Process

\* CHOICE quiescence: once the workflow has ended, nothing is in flight and every worker is
\* idle, the clock stops (Tick is disabled).  No step can then change what any invariant
\* reads, except a Temporal reset (Redecide) restarting a finished run, which stays enabled,
\* as do the world events at their read points (see "CHOICE read points").
Quiescent == wfStatus \in Terminal /\ wire = {} /\ \A w \in Workers : pc[w] = "idle" /\ ~paused[w]

\* The clock never passes a request's processing bound (A2).  URGENT (liveness configs):
\* time passes only when no worker or target step can, so a bounded clock cannot starve a
\* fair behavior.
\* CHOICE stale attempts (Temporal, an exact reduction): an attempt whose start-to-close
\* timeout has passed before it sent can only give up (TSend past its deadline, or TCheck
\* leading there), which nothing observes; the tick that reaches its deadline idles it.
Stale(w) == ~Interlock /\ pc[w] \in {"tcheck", "tsend"} /\ ~paused[w] /\ ~lw[w].late
            /\ now + 1 >= lw[w].deadline
\* The send watchdog (docs/protocol.md section 6.3) is not optional: it ends the sender at its local
\* deadline, so the clock cannot pass the deadline of an interlock sender still waiting for its
\* response (unless SIGSTOPped: A1 violated, PAUSE only).
WatchdogDue(w) == Interlock /\ up[w] /\ ~paused[w] /\ pc[w] = "await" /\ now >= lw[w].deadline
Tick ==
  /\ now < MaxClock /\ ~Quiescent
  /\ \A m \in wire : now < m.processBy
  /\ \A w \in Workers : ~WatchdogDue(w)
  /\ URGENT => ~ProgressEnabled
  /\ now' = now + 1
  /\ pc' = [w \in Workers |-> IF Stale(w) THEN "idle" ELSE pc[w]]
  /\ lw' = [w \in Workers |-> IF Stale(w) THEN L0 ELSE lw[w]]
  /\ UNCHANGED <<wfVars, effVars, worldVars, targetVars, up, paused, sendLog, hist, tmp>>


Next ==
  \/ Tick
  \/ WorldStep
  \/ \E m \in wire : TRUE /\ TargetStep(m)      \* a conjunction, so TLC names this step "Next"
  \/ \E w \in Workers : \/ WorkerStep(w) \/ Heartbeat(w) \/ Crash(w) \/ Restart(w)
                        \/ Pause(w) \/ Resume(w)

Spec == Init /\ [][Next]_vars

\* Fairness: WF on Tick, Process, every worker's protocol steps (claims, recovery and
\* the rest) and Restart.  No fairness on Heartbeat, Crash, Pause or the world.
LiveSpec == /\ Spec
            /\ WF_vars(Tick) /\ WF_vars(Process)
            /\ \A w \in Workers : WF_vars(WorkerStep(w)) /\ WF_vars(Restart(w))

------------------------------------------------------------------------------
\* State-space reduction (VIEW View in every config).  TLC identifies two states when their
\* views are equal, so the view must keep everything any step or invariant can tell apart.
\* Every clock value is only ever compared with now through a fixed threshold (lease and
\* deadlines: "> now"; send_deadline: "now > d + SettleMargin"; firstDispatch: "now - f >
\* DedupAge" and "> DedupAge + SendTimeout + SettleMargin"; an attempt's start: "now >= s +
\* SendTimeout"), and every new value is computed from now.  So two values that are both
\* past the largest threshold behave identically forever, and the view clamps them.  Epochs
\* are only compared for equality, and a claim always makes a fresh largest one, so the view
\* replaces each epoch by its rank among the epochs present (the same for Temporal attempt
\* numbers and for request ids).  A full and a partial hand
\* refund are read identically by every step (the decision's premise "no prior refund" is
\* false after either, and system (b)'s eligibility passes after either), and each disables
\* the other, so the view identifies them too.  The send history and the ledger count enter
\* only through what reads them (SendSummary; OurApplications capped at 2).  All of this is
\* exact (a bisimulation), not an approximation: invariants read no raw clock, epoch, id,
\* refund amount or history beyond what the view keeps.
Clamp(t, k)  == IF t < now - k THEN now - k ELSE t
RankIn(S, e) == IF e = 0 THEN 0 ELSE Cardinality({x \in S : 0 < x /\ x <= e})
\* The send history matters only through what the invariants read from it (each reads one
\* flag of every entry, the payloads, and whether there were 0, 1 or more sends), and the
\* steps read only whether it is empty and its length for a fresh request id.
SendSummary ==
  LET S == DOMAIN sendLog
  IN [n        |-> IF Len(sendLog) > 2 THEN 2 ELSE Len(sendLog),
      payloads |-> {sendLog[i].payload : i \in S},
      bad      |-> {f \in {"liveClaim", "grantOk", "premiseOk", "prevSendSettled", "journaled"} :
                      \E i \in S : ~sendLog[i][f]}
                   \cup (IF \E i \in S : sendLog[i].resend /\ ~sendLog[i].recheckOk
                        THEN {"recheck"} ELSE {})
                   \cup (IF \E i \in S : sendLog[i].afterRevoke /\ ~sendLog[i].inReturned
                        THEN {"revoke"} ELSE {})
                   \cup (IF \E i \in S : sendLog[i].afterCancel THEN {"cancel"} ELSE {})
                   \cup (IF \E i \in S : sendLog[i].resend /\ sendLog[i].pastWindow
                        THEN {"pastWindow"} ELSE {})]
View ==
  LET \* Claim epochs (interlock) and attempt numbers (Temporal) are only compared for
      \* equality; request ids only match a response to the sender still waiting for it.
      nums == {wfEpoch, dispWorkerEpoch[2], tmp.attempt, tmp.applied}
              \cup {lw[w].epoch : w \in Workers} \cup {m.attempt : m \in wire}
      ids  == {m.id : m \in wire} \cup {lw[w].await : w \in Workers}
      R(e) == RankIn(nums, e)
      old  == DedupAge + SendTimeout + SettleMargin + 1
  IN
  <<now, wfStatus, R(wfEpoch), wfOwner, Clamp(leaseExp, 0),
    Clamp(availAt, 0), rowLock, cancelRequested, stepRow,
    effState, boundPayload, <<dispWorkerEpoch[1], R(dispWorkerEpoch[2])>>,
    IF firstDispatch < 0 THEN -1 ELSE Clamp(firstDispatch, old),
    Clamp(sendDeadline, SettleMargin + 1), journal,
    grantRevoked, revokeReturned, handRefund > 0, offer,
    IF "hand_refund_partial" \in done THEN (done \ {"hand_refund_partial"}) \cup {"hand_refund_full"}
    ELSE done,
    {[m EXCEPT !.id = RankIn(ids, @), !.attempt = R(@)] : m \in wire},
    IF ledger > 2 THEN 2 ELSE ledger, keyStore, appliedKeys, pruned,
    up, paused, pc,
    [w \in Workers |-> [lw[w] EXCEPT !.epoch = R(@), !.await = RankIn(ids, @),
                                     !.lease = Clamp(@, 0), !.deadline = Clamp(@, 0),
                                     !.txn = Clamp(@, old)]],
    SendSummary, hist,
    \* tmp.w only matters while that worker still holds the attempt
    [tmp EXCEPT !.start = Clamp(@, SendTimeout), !.attempt = R(@), !.applied = R(@),
                !.w = IF \E w \in Workers : lw[w].epoch = tmp.attempt /\ w = tmp.w
                      THEN @ ELSE Nobody]>>

------------------------------------------------------------------------------
\* Invariants, identifiers exactly as docs/protocol.md section 11.

Sends == DOMAIN sendLog
\* Interlock binds the payload at the first PROPOSED; Temporal has no binding, so the payload
\* the approval saw stands in for it.
FirstBoundPayload == IF Interlock THEN boundPayload ELSE Approved
CurrentDispatcherLive ==
  /\ dispWorkerEpoch[1] # Nobody /\ wfEpoch = dispWorkerEpoch[2] /\ wfOwner = dispWorkerEpoch[1]
  /\ wfStatus = "running" /\ leaseExp > now
\* The attempt whose request the target applied is still the one the server considers running.
ApplyingAttemptCurrent ==
  /\ tmp.act = "started" /\ tmp.attempt = tmp.applied /\ now < tmp.start + SendTimeout
  /\ wfStatus = "running"

NoRerunAfterComplete    == hist.plainStartsAfterRow = 0
StepResultUnique        == hist.rowWrites <= 2          \* one plain row and one effect row
FencedWrites            == ~hist.unfencedWrite
LeaseMutex              == Cardinality({w \in Workers : Interlock /\ RealFence(w)}) <= 1
TakeoverOnlyAfterExpiry == ~hist.earlyTakeover
AtMostOneCommit         == journal.committed <= 1
\* Tier 1 inside the dedup window (keys not yet pruned at a target without lookup), and tier 2.
EffectAtMostOnceTier12  == (Tier = 2 \/ (Tier = 1 /\ ~(~Queryable /\ pruned))) => ledger <= 1
\* CHOICE: the formula "(Tier = 3 \/ (Tier = 1 /\ ~Queryable /\ keysPruned)) => Len(sendLog) <= 1"
\* would also flag a legitimate in-window tier-1 retry once the keys are later pruned.  The
\* invariant says "at tier 1 past its window with no lookup, at most one request goes on the wire"
\* (docs/protocol.md section 15, item 12), so here a tier-1 resend without lookup is a violation
\* when it is authorized past the window.
Tier3NeverResends       == /\ Tier = 3 => Len(sendLog) <= 1
                           /\ (Tier = 1 /\ ~Queryable) =>
                                \A i \in Sends : sendLog[i].resend => ~sendLog[i].pastWindow
NoOverlappingSends      == \A i \in Sends : sendLog[i].prevSendSettled
CommittedImpliesApplied == effState = "committed" => ledger >= 1
AmbiguousOnlyWhenUnknowable ==
  effState = "ambiguous" =>
    \/ journal.ambig = "tier3"
    \/ (Tier = 1 /\ ~Queryable /\ journal.ambig = "stale_no_lookup")
\* "outside an open T_commit": a worker between the two transactions of the broken design is
\* inside its T_commit.  Temporal: the target's record is the commit, the history completion
\* the checkpoint, and the sending attempt the dispatching claim.
EffectCheckpointAtomic ==
  (effState = "committed" /\ ~stepRow["effect"]) =>
    IF Interlock THEN (\E w \in Workers : pc[w] = "tcommitStep") \/ ~CurrentDispatcherLive
    ELSE (\E w \in Workers : pc[w] = "acked" /\ lw[w].epoch = tmp.applied /\ lw[w].run = tmp.run)
         \/ ~ApplyingAttemptCurrent
SendRequiresLiveClaim   == \A i \in Sends : sendLog[i].liveClaim
NoSendUnderRevokedGrant == \A i \in Sends : sendLog[i].grantOk
RevokeLinearizable      == \A i \in Sends : sendLog[i].afterRevoke => sendLog[i].inReturned
NoSendOnStalePremise    == \A i \in Sends : sendLog[i].premiseOk
RecoveryRechecks        == \A i \in Sends : sendLog[i].resend => sendLog[i].recheckOk
PayloadBound            == \A i \in Sends : sendLog[i].payload = FirstBoundPayload
NoSendAfterCancel       == \A i \in Sends : ~sendLog[i].afterCancel
\* Every request on the wire is on the signed record: its entry committed before the bytes left.
EverySendJournaled      == Interlock => \A i \in Sends : sendLog[i].journaled
LateResultPreserved     == journal.lateResults = hist.acksAfterResolution
ReceiptChainLinear      == journal.committed <= 1 /\ journal.dispatched <= journal.resolutions + 1

\* Liveness (docs/protocol.md section 11), checked under LiveSpec with URGENT.
Termination    == <>(wfStatus \in Terminal)
EffectResolved == (effState = "dispatched") ~> (effState \in {"committed", "ambiguous", "proposed"})

\* Reachability witnesses, not invariants of docs/protocol.md section 11: each is an invariant that
\* must be VIOLATED where its path exists, so that a "hold" elsewhere is not vacuous.
Witness_Completed      == wfStatus # "completed"
Witness_Takeover       == ~hist.tookOver
Witness_RecoveryResend == ~\E i \in Sends : sendLog[i].resend
Witness_Ambiguous      == effState # "ambiguous"
Witness_RefusedAtRecovery == ~(effState = "proposed" /\ journal.resolutions > 0)
Witness_LateResult     == journal.lateResults = 0
Witness_Pruned         == ~pruned
Witness_Cancelled      == wfStatus # "cancelled"
\* SERVER_SLOW: a LATE_RESULT recorded in a behavior where the target applied the effect twice.
Witness_LateAfterDuplicate == ~(journal.lateResults > 0 /\ ledger >= 2)
=============================================================================
