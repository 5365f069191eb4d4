"""``manage.py receipt EFFECT_ID [--verify]``: print an effect's receipt bundle (JSON) and,
with --verify, verify()'s answers to P1 to P5."""

from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError

from ilr import Runtime, receipts
from ilr.grants import EffectNotFound


class Command(BaseCommand):
    help = "Print an effect's signed receipt bundle, and verify it."

    def add_arguments(self, parser):
        parser.add_argument("effect_id")
        parser.add_argument("--verify", action="store_true", help="also print verify()'s answers")

    def handle(self, *args, effect_id, verify, **options):
        rt = Runtime()
        try:
            bundle = rt.receipt(effect_id)
        except EffectNotFound as exc:
            raise CommandError(str(exc)) from None
        finally:
            rt.close()
        out = {"bundle": bundle}
        if verify:
            out["verify"] = receipts.verify(bundle)
        self.stdout.write(json.dumps(out, indent=2, default=str))
