"""``manage.py demo --agent``: a support agent (``demo.agent_refund``, built on ``ilr.agents``)
reads a ticket, looks the payment up (a read-only tool, a recorded step), asks for a refund (a
side-effecting tool gated by an approval request), waits for the approval, survives a SIGKILL
after the target answered, sends once and answers the customer.

The machinery is the refund demo's (``demo.refund.Demo``): the payment target and the model stub
(EMULATED tool use, scripted) as subprocesses, ``ilr_worker`` subprocesses armed with
ILR_KILL_AT, the approver approving through ``rt.approve_request`` as the review UI does, and a
failed run withdrawing its case. What is checked: the EffectResult, the target's ledger, the
receipt's ``verify()`` answers, and that the transcript replays identically (each turn, cut from
the transcript the workflow returned, hashes to the fingerprint the worker that ran it recorded).
"""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass, field

from demo.peers.targets_client import http_json
from demo.plan import PAID, expected
from demo.queries import AGENT_PENDING_REQUEST, MODEL_CALL_COUNT
from demo.refund import Demo
from ilr import Runtime, verify_receipt

AGENT_CRASHES = ("effect_after_dispatch", "effect_after_send", "effect_after_commit", "none")
"""The ``--crash`` choices with ``--agent``: the points of the gated send (the first worker is
SIGKILLed there, after the approval), or none."""
APPROVAL_TIMEOUT = 600.0  # seconds the agent's approval request stays open


def check_crash(crash: str | None) -> None:
    """Raise ValueError for a ``--crash`` choice ``--agent`` does not offer."""
    if (crash or "none") not in AGENT_CRASHES:
        raise ValueError(
            f"--agent: --crash must be one of {', '.join(AGENT_CRASHES)} (the agent demo kills a "
            "worker at the gated send, after the approval)"
        )


def _one_line(text: str, width: int = 160) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass
class AgentDemo(Demo):
    """``demo --agent``: the agent_refund workflow under the refund demo's machinery."""

    worker_args: tuple = ("--import", "demo.agent_refund")
    workflow: str = "agent_refund"
    asked: dict = field(default_factory=dict)
    """The approval request the agent's call waited on, as ``_asked`` found it."""
    framework: str = "native"
    """The agent's framework (demo.agent_frameworks: native, pydantic-ai, ...)."""

    def __post_init__(self):
        from demo.agent_frameworks import DRIVERS

        self.driver = DRIVERS[self.framework]
        self.worker_args = ("--import", self.driver.module)
        self.workflow = self.driver.workflow

    def _banner(self) -> str:
        return (
            f"Interlock agent demo: a support agent ({self.driver.title}) handles a refund ticket (tier {self.tier}, "
            f"crash at {self.crash or 'none'})"
        )

    def run(self) -> int:
        check_crash(self.crash)
        return super().run()

    def _scenario(self, target_url: str, model_url: str, started: float) -> int:
        import importlib

        importlib.import_module(self.driver.module)  # registers the workflow in this process

        rt = Runtime()
        case_id = f"ticket-{time.strftime('%H%M%S')}-{os.getpid()}"
        payment = f"pay_{case_id}"
        http_json("POST", f"{target_url}/admin/payments", {"id": payment, "paid": PAID})
        case = {
            "case_id": case_id,
            "payment": payment,
            "key": case_id,
            "url": target_url,
            "tier": self.tier,
            "queryable": self.tier != 3,
            "policy": "approval",
            "approval_timeout": APPROVAL_TIMEOUT,
        }
        rt.start(self.workflow, case_id, case, version=self.driver.version)
        self.say(
            f"\n1. started workflow {self.workflow} {case_id} (payment {payment}, paid ${PAID / 100:.2f}); "
            "the agent reads the ticket"
        )
        plan = [] if self.crash in (None, "none") else [self.crash]
        try:
            self._drive(rt, case_id, model_url, plan)
            result = self._result(rt, case_id, timeout=90)
        except (RuntimeError, TimeoutError) as exc:
            self.say(f"\nFAILED: {exc}")
            self._withdraw(rt, case_id, model_url)
            return 1
        except Exception as exc:  # noqa: BLE001 - reported, and the exit status says so
            self.say(f"\nFAILED: the workflow did not complete: {exc}")
            self._withdraw(rt, case_id, model_url)
            return 1
        status = self._agent_report(rt, case_id, case, target_url, result, started)
        if status:
            self._withdraw(rt, case_id, model_url)
        return status

    # -- the approval (Demo._drive's hooks) -------------------------------------------------------

    @staticmethod
    def _asked(rt: Runtime, case_id: str, d: dict) -> dict | None:
        """The pending approval request of the agent's call, once there is one; else None."""
        req = rt.connection().execute(AGENT_PENDING_REQUEST, (case_id,)).fetchone()
        if req is None:
            return None
        return {"proposal": req["payload"], "decision": None, "premises": req["premises"], "request": req}

    def _say_asked(self, line: int, ask: dict) -> None:
        self.asked = ask
        req = ask["request"]
        self.say(f"{line}. the agent's call waits on approval request {req['id']}: {req['summary']!r}")
        self.say(
            f"   arguments (the exact payload): {json.dumps(req['payload'], sort_keys=True)}; "
            f"premises captured: {json.dumps(req['premises'], sort_keys=True)}"
        )

    def _say_approved(self, line: int, ask: dict, grant_id: str, approvers: list[str]) -> None:
        self.say(
            f"{line}. {' and '.join(approvers)} approved request {ask['request']['id']} "
            f"(rt.approve_request, as the review UI does): grant {grant_id}"
        )

    # -- the report ------------------------------------------------------------------------------

    def _conversation(self, transcript: list) -> None:
        """Print each message: the ticket, each turn's text and tool calls, each tool_result."""
        self.say("\nConversation (the transcript the workflow returned)")
        if self.driver.conversation is not None:
            from demo.agent_frameworks import load

            for line in load(self.driver.conversation)(transcript):
                self.say(f"  {_one_line(line, 800)}")
            return
        names: dict[str, str] = {}
        turn = 0
        for message in transcript:
            content = message.get("content")
            if message.get("role") == "assistant":
                self.say(f"  turn {turn} (model):")
                turn += 1
                for block in content or []:
                    if block.get("type") == "text":
                        self.say(f"    text: {_one_line(block['text'])}")
                    elif block.get("type") == "tool_use":
                        names[block.get("id")] = block.get("name")
                        self.say(f"    tool_use {block.get('name')} {json.dumps(block.get('input'), sort_keys=True)}")
            elif isinstance(content, str):
                self.say("  user (the ticket):")
                for text in content.splitlines():
                    self.say(f"    {text}")
            else:
                for block in content or []:
                    if block.get("type") == "tool_result":
                        error = " (is_error)" if block.get("is_error") else ""
                        self.say(
                            f"  tool_result for {names.get(block.get('tool_use_id'), '?')}{error}: "
                            f"{_one_line(block.get('content'), 800)}"
                        )
                    elif block.get("type") == "text":
                        self.say(f"  user: {_one_line(block['text'])}")

    def _replay_failures(self, rt: Runtime, case_id: str, case: dict, result: dict) -> list[str]:
        """Whether the transcript replays identically: each turn's request, rebuilt from the
        returned transcript, hashes to the decide step's recorded fingerprint, and each
        assistant message is the recorded response; and no model call was discarded."""
        from demo.agent_frameworks import load

        rows = [s for s in rt.describe(case_id)["steps"] if s["kind"] == "decide"]
        calls = rt.connection().execute(MODEL_CALL_COUNT, (case_id,)).fetchone()["n"]
        recorded = [r["fingerprint"] for r in rows]
        same = load(self.driver.replayed)(case, result, rows)
        epochs = sorted({r["epoch"] for r in rows})
        self.say(
            f"\nReplay: {len(rows)} turns recorded (claim epochs {', '.join(map(str, epochs))}); the transcript "
            f"{'replays identically' if same else 'does NOT replay identically'} (each turn's request hashes to "
            f"its recorded fingerprint); model calls made {calls}, recorded {len(rows)}"
        )
        failures = []
        if not same:
            failures.append(f"the transcript did not replay identically (recorded fingerprints {recorded})")
        if calls != len(rows):
            failures.append(f"{calls - len(rows)} model call(s) discarded; expected none at {self.crash}")
        return failures

    def _agent_report(
        self, rt: Runtime, case_id: str, case: dict, target_url: str, result: dict, started: float
    ) -> int:
        expect = expected(self.tier, self.crash)
        from demo.agent_frameworks import load

        answer = load(self.driver.answer)(result)
        self._conversation(result["transcript"])
        self.say(f"\nAnswer to the customer: {_one_line(answer, 400)}")
        failures = self._replay_failures(rt, case_id, case, result)

        effects = [o for o in result["outcomes"] if o["tool"] == "issue_refund"]
        outcome = effects[-1] if effects else None
        req = rt.approval_request(self.asked["request"]["id"]) if self.asked else None
        self.say("\nApproval")
        if req is not None:
            approvers = [a["by"] for a in req["approvals"] or []]
            self.say(f"  request {req['id']}: {req['status']} by {', '.join(approvers)}; grant {req['grant_id']}")
            self.say(
                f"  payload {json.dumps(req['payload'], sort_keys=True)} (hash {req['payload_hash'][:16]}…), "
                f"key {req['effect_key']}"
            )
        payment, payload = case["payment"], (req or {}).get("payload") or {}
        ledger = [r for r in http_json("GET", f"{target_url}/ledger")[1]["rows"] if r["payment"] == payment]
        self.say("\nLedger (read from the payment target)")
        for r in ledger:
            self.say(f"  refund {r['id']}: {r['amount']} cents, source {r['source']}, key {r.get('key')}")
        if not ledger:
            self.say("  (no refund)")
        if outcome is None or not outcome.get("effect_id"):
            self.say(f"\nFAILED: the agent's call did not become an effect: {result['outcomes']}")
            return 1
        bundle = rt.receipt(outcome["effect_id"])
        v = verify_receipt(bundle)
        effect = next((e for e in rt.describe(case_id)["effects"] if e["effect_id"] == outcome["effect_id"]), None)
        self.say(
            f"\nEffectResult: {outcome['status']} ({outcome['effect_id']}), sent under grant "
            f"{effect['grant_id'] if effect else None}"
        )
        self.say("Receipt verify():")
        for k in (
            "valid",
            "tamper_evident",
            "happened",
            "happened_once",
            "authorized_when_fired",
            "assumptions_held",
            "sends",
        ):
            self.say(f"  {k:22s} {v[k]}")
        for p in v["problems"]:
            self.say(f"  problem: {p}")

        if result.get("stop", "end_turn") != "end_turn" or not answer:
            failures.append(f"the agent did not answer the customer (stop {result.get('stop')})")
        if req is None or req["status"] != "approved" or effect is None or effect["grant_id"] != req["grant_id"]:
            failures.append("the effect was not sent under the approval request's grant")
        if outcome["input"] != payload:
            failures.append(f"the call's arguments {outcome['input']} are not the approved payload {payload}")
        if outcome["status"] not in expect.status:
            failures.append(f"status {outcome['status']} not in {sorted(expect.status)}")
        if len(ledger) != expect.refunds or any(r["amount"] != payload.get("amount") for r in ledger):
            failures.append(
                f"ledger holds {len(ledger)} refund(s); expected {expect.refunds} of {payload.get('amount')}"
            )
        if not (v["valid"] and v["tamper_evident"]):
            failures.append("the receipt does not verify")
        if v["happened"] != expect.happened:
            failures.append(f"receipt says happened={v['happened']}, expected {expect.happened}")
        if v["happened"] is True and not ledger:
            failures.append("the receipt says it happened, and the ledger shows nothing")
        once_ok = v["happened_once"] is True or (
            v["happened_once"] == "unknown" and outcome["status"] == "REAPPLIED_AFTER_QUERY"
        )
        if expect.happened is True and not (once_ok and v["authorized_when_fired"] and v["assumptions_held"]):
            failures.append("the receipt does not show one authorized application with its assumptions held")
        self.say(f"\nWall time: {time.monotonic() - started:.1f} s")
        if failures:
            self.say("FAILED: " + "; ".join(failures))
            return 1
        self.say("OK: the conversation replays, and the approval, the ledger and the receipt agree.")
        return 0
