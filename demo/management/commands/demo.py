"""``manage.py demo [--tier 1|2|3] [--approve-as NAME] [--crash POINT|none]``: the refund demo.

Exits non-zero when the ledger or the receipt disagrees with the expected outcome, or the run
fails (its case is then cancelled, so nothing of it stays in the review queue); exits 1 with one
line, before anything starts, for ``--crash resolve_*`` at tier 3 (nothing resends there).

``manage.py demo --serve [--port N] [--tier 1|2|3]`` instead runs gunicorn with the admin and the
review UI, leaves a refund waiting for approval, and prints the URL and a demo-only login; it
serves until Ctrl-C (or ``--serve-for SECONDS``). ``--approve-as`` and ``--crash`` do not apply.

``manage.py demo --agent [--framework native|pydantic-ai|...] [--tier 1|2|3] [--approve-as NAME]
[--crash effect_after_send|...|none]``
instead runs the support agent (demo.agent): it reads a ticket, looks the payment up, asks
for a refund through an approval request, survives a SIGKILL at the send, sends once and answers;
it prints the conversation, the approval, the ledger and the receipt, and exits non-zero when they
disagree or the transcript does not replay identically.
"""

from __future__ import annotations

import argparse
import sys

from django.core.management.base import BaseCommand, CommandError


def _approver(value: str) -> str:
    """--approve-as: refused before anything starts, as rt.approve would refuse it later."""
    if not value.strip():
        raise argparse.ArgumentTypeError("must name the approver (a non-empty string)")
    return value


class Command(BaseCommand):
    help = "Run the refund demo: decide, approve, SIGKILL a worker at a crash point, recover, verify."

    def add_arguments(self, parser):
        """--tier, --approve-as, --crash; --agent; --serve, --port, --serve-for."""
        from demo.plan import DEMO_POINTS

        parser.add_argument("--tier", type=int, choices=[1, 2, 3], default=1)
        parser.add_argument(
            "--approve-as", default="demo-approver", type=_approver, help="the approver's name (stands in for a person)"
        )
        parser.add_argument(
            "--crash",
            default="effect_after_send",
            choices=[*DEMO_POINTS, "none"],
            help="kill point at which a worker is SIGKILLed (default effect_after_send); another "
            "recovers. resolve_after_commit and resolve_after_send are reached only in a "
            "recovery's resend: the first worker is SIGKILLed before it (tier 1 at "
            "effect_after_send, tier 2 at effect_after_dispatch), the recovering one at the "
            "point, a third recovers; tier 3 never resends, so it refuses them",
        )
        parser.add_argument(
            "--agent",
            action="store_true",
            help="run the support-agent demo (ilr.agents): a ticket, a lookup, a refund gated by an "
            "approval request, a SIGKILL at the send (--crash: effect_after_dispatch, "
            "effect_after_send, effect_after_commit or none), the conversation and the receipt",
        )
        parser.add_argument(
            "--framework",
            default="native",
            help="--agent: the agent's framework: native (ilr.agents), pydantic-ai (ilr.contrib.pydantic_ai), "
            "or another name of demo.agent_frameworks (default native)",
        )
        parser.add_argument(
            "--serve",
            action="store_true",
            help="serve the admin and the review UI (gunicorn) with a refund waiting for approval",
        )
        parser.add_argument("--port", type=int, default=8000, help="--serve: the port on 127.0.0.1 (0: any free one)")
        parser.add_argument(
            "--serve-for",
            type=float,
            default=None,
            help="--serve: stop after this many seconds (default: until Ctrl-C)",
        )

    def handle(self, *args, tier, approve_as, crash, agent, framework, serve, port, serve_for, **options):
        """Run the demo (the agent's, or serve the UI); exit with its status."""
        if agent:
            from demo.agent import AgentDemo, check_crash

            if serve:
                raise CommandError("--agent and --serve do not go together")
            from demo.agent_frameworks import DRIVERS

            if framework not in DRIVERS:
                raise CommandError(f"--framework: unknown framework {framework!r}; known: {', '.join(DRIVERS)}")
            try:
                check_crash(crash)
            except ValueError as exc:
                raise CommandError(str(exc)) from None
            status = AgentDemo(
                tier=tier, approve_as=approve_as, crash=crash, out=self.stdout, framework=framework
            ).run()
        elif serve:
            from demo.serve import ServeDemo

            status = ServeDemo(tier=tier, out=self.stdout, port=port, serve_for=serve_for).serve()
        else:
            from demo.plan import crash_plan
            from demo.refund import Demo

            try:
                crash_plan(tier, crash)
            except ValueError as exc:
                raise CommandError(str(exc)) from None
            status = Demo(tier=tier, approve_as=approve_as, crash=crash, out=self.stdout).run()
        if status:
            sys.exit(status)
