"""The refund demo's last part: the timeline of the case (claims, steps, journal entries on the
database clock), the ledger read from the payment target, the receipt's ``verify()``, and the
verdict against the expected outcome (demo.plan.expected)."""

from __future__ import annotations

import json
import time
from collections.abc import Callable

from demo.peers.targets_client import http_json
from demo.plan import Expectation
from demo.queries import CASE_CLAIMS
from ilr import Runtime, verify_receipt


def report(
    say: Callable[[str], None],
    expect: Expectation,
    rt: Runtime,
    case_id: str,
    payment: str,
    target_url: str,
    result: dict,
    proposal: dict,
    started: float,
) -> int:
    """Print the timeline, the ledger and the receipt of ``case_id``; return 0 when they agree
    with ``expect``, else 1 (saying what differs)."""
    d = rt.describe(case_id)
    conn = rt.connection()
    t0 = d["created_at"]
    say("\nTimeline (database clock, seconds since start)")
    events = [
        (
            c["claimed_at"],
            f"claim epoch {c['epoch']} by {c['owner']}"
            + (" (takeover after lease expiry)" if c["prev_status"] == "running" else ""),
        )
        for c in conn.execute(CASE_CLAIMS, (case_id,)).fetchall()
    ]
    events += [
        (
            s["created_at"],
            f"step {s['seq']} {s['kind']} {s['name']}"
            + (f" -> {s['output']['status']}" if s["kind"] == "effect" else ""),
        )
        for s in d["steps"]
    ]
    bundle = rt.receipt(result["effect_id"])
    for body in bundle["entries"]:
        e = json.loads(body)
        via = f" via {e['via']}" if e.get("via") else ""
        events.append((None, f"journal {e['kind']}{via}", e["ts"]))
    rows = []
    for ev in events:
        ts = ev[2] if len(ev) == 3 else ev[0].timestamp()
        rows.append((ts - t0.timestamp(), ev[1]))
    for offset, text in sorted(rows, key=lambda row: row[0]):
        say(f"  {offset:7.2f}s  {text}")
    ledger = [r for r in http_json("GET", f"{target_url}/ledger")[1]["rows"] if r["payment"] == payment]
    say("\nLedger (read from the payment target)")
    for r in ledger:
        say(f"  refund {r['id']}: {r['amount']} cents, source {r['source']}, key {r.get('key')}")
    if not ledger:
        say("  (no refund)")
    v = verify_receipt(bundle)
    say(f"\nEffectResult: {result['status']} ({result['effect_id']})")
    say("Receipt verify():")
    for k in (
        "valid",
        "tamper_evident",
        "happened",
        "happened_once",
        "authorized_when_fired",
        "assumptions_held",
        "sends",
    ):
        say(f"  {k:22s} {v[k]}")
    for p in v["problems"]:
        say(f"  problem: {p}")
    failures = []
    if result["status"] not in expect.status:
        failures.append(f"status {result['status']} not in {sorted(expect.status)}")
    if len(ledger) != expect.refunds or any(r["amount"] != proposal["amount"] for r in ledger):
        failures.append(f"ledger holds {len(ledger)} refund(s); expected {expect.refunds} of {proposal['amount']}")
    if not (v["valid"] and v["tamper_evident"]):
        failures.append("the receipt does not verify")
    if v["happened"] != expect.happened:
        failures.append(f"receipt says happened={v['happened']}, expected {expect.happened}")
    # After a reapply the receipt cannot rule out a late first send (A2), so it answers
    # happened_once "unknown" (verify()'s P2 rule); the ledger check above counts the refunds.
    once_ok = v["happened_once"] is True or (
        v["happened_once"] == "unknown" and result["status"] == "REAPPLIED_AFTER_QUERY"
    )
    if expect.happened is True and not (once_ok and v["authorized_when_fired"] and v["assumptions_held"]):
        failures.append("the receipt does not show one authorized application with its assumptions held")
    say(f"\nWall time: {time.monotonic() - started:.1f} s")
    if failures:
        say("FAILED: " + "; ".join(failures))
        return 1
    say("OK: the ledger and the receipt agree with the expected outcome.")
    return 0
