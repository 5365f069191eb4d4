"""``manage.py ilr_resume WF_ID --by NAME``: resume a stuck workflow (``Runtime.resume``).

Prints the JSON answer ({"workflow_id", "status", "error" it was stuck with, "steps" it keeps,
"resumed_by", "resumed_at"}). Exits 1 (CommandError) when the workflow does not exist or is
not stuck; nothing is written then.
"""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from ilr import Runtime
from ilr._errors import InvalidInput, WorkflowNotFound


class Command(BaseCommand):
    help = (
        "Resume a stuck workflow: pending and due now, takeovers reset, error cleared; every recorded "
        "step is kept and the first step without a row runs again."
    )

    def add_arguments(self, parser):
        parser.add_argument("workflow_id")
        parser.add_argument("--by", required=True, help="who resumes it (recorded as resumed_by)")

    def handle(self, *args, workflow_id, by, **options):
        rt = Runtime()
        try:
            out = rt.resume(workflow_id, by=by)
        except (InvalidInput, WorkflowNotFound) as exc:
            raise CommandError(str(exc)) from None
        finally:
            rt.close()
        self.stdout.write(json.dumps(out, default=str))
