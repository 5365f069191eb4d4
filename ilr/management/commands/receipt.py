"""``manage.py receipt EFFECT_ID [--verify] [--public-key PEM ...] [--compare OLD.json]``: print an
effect's receipt bundle (JSON) and, with --verify, verify()'s answers to P1 to P5.

verify trusts the keys of this deployment's key directory unless ``--public-key`` pins others;
``--compare`` checks the bundle against one handed out earlier (a receipt that shrank or forked
shows; docs/security.md).
"""

from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from ilr import Runtime
from ilr._errors import EffectNotFound, SigningKeyUnavailable
from ilr._journal import keys, receipts


class Command(BaseCommand):
    help = "Print an effect's signed receipt bundle, and verify it."

    def add_arguments(self, parser):
        parser.add_argument("effect_id")
        parser.add_argument("--verify", action="store_true", help="also print verify()'s answers")
        parser.add_argument(
            "--public-key",
            action="append",
            default=[],
            metavar="PEM",
            help="with --verify: trust only this public key file (repeat for several)",
        )
        parser.add_argument(
            "--compare",
            metavar="OLD.json",
            help="with --verify: a bundle of this effect handed out earlier (this command's output or the download)",
        )

    def handle(self, *args, effect_id, verify, public_key, compare, **options):
        pinned = [_load_key(path) for path in public_key] or None
        previous = _load_bundle(compare) if compare else None
        rt = Runtime()
        try:
            bundle = rt.receipt(effect_id)
        except EffectNotFound as exc:
            raise CommandError(str(exc)) from None
        except SigningKeyUnavailable as exc:
            raise CommandError(str(exc)) from None
        finally:
            rt.close()
        out = {"bundle": bundle}
        if verify or pinned or previous:
            out["verify"] = receipts.verify(bundle, pinned, previous=previous)
        self.stdout.write(json.dumps(out, indent=2, default=str))


def _load_key(path: str):
    try:
        return keys.load_public_pem(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise CommandError(f"--public-key {path}: not a readable Ed25519 public key PEM ({exc})") from None


def _load_bundle(path: str) -> dict:
    try:
        data = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise CommandError(f"--compare {path}: not a readable JSON bundle ({exc})") from None
    # This command's own output wraps the bundle; the review UI's download is the bundle itself.
    data = data.get("bundle", data) if isinstance(data, dict) else data
    if not isinstance(data, dict) or "entries" not in data:
        raise CommandError(f"--compare {path}: not a receipt bundle (no entries)")
    return data
