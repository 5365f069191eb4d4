"""``manage.py ilr_keys generate [--dir PATH] [--overwrite]`` and ``ilr_keys show``.

Writes an Ed25519 key pair for journal signatures (private key mode 0600) under
<ILR_DATA_DIR>/keys unless the settings name one (ILR_SIGNING_KEY); see ilr.conf.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from ilr import keys
from ilr.conf import settings


class Command(BaseCommand):
    help = "Generate or show the Ed25519 key that signs journal entries."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["generate", "show"])
        parser.add_argument("--dir", default=None, help="directory for the key pair (default <ILR_DATA_DIR>/keys)")
        parser.add_argument("--overwrite", action="store_true")

    def handle(self, *args, action, dir, overwrite, **options):
        if action == "show":
            path = keys.key_path()
            if path is None:
                raise CommandError("no signing key: run `manage.py ilr_keys generate`")
            self.stdout.write(
                f"{path}\nkey id {keys.key_id(keys.public_key())}\n{keys.public_key_pem(keys.public_key())}"
            )
            return
        if settings.SIGNING_KEY and not dir:
            raise CommandError(f"settings name a key already (ILR_SIGNING_KEY={settings.SIGNING_KEY})")
        try:
            private, public = keys.generate(dir, overwrite=overwrite)
        except FileExistsError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"wrote {private} (0600) and {public}")
