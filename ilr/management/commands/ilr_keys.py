"""``manage.py ilr_keys generate [--dir PATH] [--overwrite]``, ``ilr_keys rotate`` and
``ilr_keys show``.

Writes an Ed25519 key pair for journal signatures (private key mode 0600) under
<ILR_DATA_DIR>/keys unless the settings name one (ILR_SIGNING_KEY); see ilr.conf. ``rotate``
makes a new current key and keeps every old public key (``public/<kid>.pem`` in the key
directory) so receipts signed before stay verifiable; docs/security.md.
"""

from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError

from ilr._conf import settings
from ilr._errors import SigningKeyUnavailable
from ilr._journal import keys

VCS_WARNING = (
    "the private key must stay out of version control and shared backups: "
    "keep the key directory out of the repository (e.g. in .gitignore)"
)


class Command(BaseCommand):
    help = "Generate, rotate or show the Ed25519 key that signs journal entries."

    def add_arguments(self, parser):
        parser.add_argument("action", choices=["generate", "rotate", "show"])
        parser.add_argument("--dir", default=None, help="directory for the key pair (default <ILR_DATA_DIR>/keys)")
        parser.add_argument("--overwrite", action="store_true", help="generate: replace a key (prefer rotate)")

    def handle(self, *args, action, dir, overwrite, **options):
        try:
            getattr(self, f"_{action}")(dir, overwrite)
        except SigningKeyUnavailable as exc:
            raise CommandError(str(exc)) from None

    def _show(self, dir, overwrite) -> None:
        path = keys.key_path()
        if path is None:
            raise CommandError("no signing key: run `manage.py ilr_keys generate`")
        current = keys.public_key()
        kept = sorted(kid for kid in keys.trusted_keys() if kid != keys.key_id(current))
        self.stdout.write(
            f"{path}\nkey id {keys.key_id(current)}\n"
            f"kept for verifying: {', '.join(kept) if kept else 'no older key'} ({keys.key_dir() / keys.PUBLIC_DIR})\n"
            f"{keys.public_key_pem(current)}"
        )

    def _rotate(self, dir, overwrite) -> None:
        if dir:
            raise CommandError("rotate takes no --dir: it rotates the key the settings name")
        old, new, path = keys.rotate()
        self.stdout.write(
            f"rotated {path}: key {old} -> {new}; the old public key is kept in "
            f"{path.parent / keys.PUBLIC_DIR} so receipts it signed still verify. "
            "Restart the workers and the review server to sign with the new key."
        )

    def _generate(self, dir, overwrite) -> None:
        if settings.SIGNING_KEY and not dir:
            raise CommandError(f"settings name a key already (ILR_SIGNING_KEY={settings.SIGNING_KEY})")
        try:
            private, public = keys.generate(dir, overwrite=overwrite)
        except FileExistsError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(f"wrote {private} (0600) and {public}; {VCS_WARNING}")
