"""Ed25519 keys for journal signatures (docs/protocol.md §9, docs/security.md), with the
``cryptography`` package.

The signing key is read from ILR_SIGNING_KEY (a PEM path; ilr.conf) when set, else from
``<ILR_DATA_DIR>/keys/ed25519.pem`` when ``manage.py ilr_keys generate`` wrote one. With no key,
entries are sealed with ``sig: null`` (hash chain only).

The key directory is the directory of the signing key file. Its ``public/`` holds every public
key that ever signed, as ``<kid>.pem``: the private key is only the current one, and
``rotate`` keeps the old public key there, so each entry (which names its ``kid``) stays
verifiable after a rotation. ``trusted_keys`` is what this deployment trusts: those public keys
and the current key's.
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ilr._conf import settings
from ilr._errors import SigningKeyUnavailable

PRIVATE_NAME = "ed25519.pem"
PUBLIC_NAME = "ed25519.pub.pem"
PUBLIC_DIR = "public"


def default_dir() -> Path:
    return settings.DATA_DIR / "keys"


def key_path() -> Path | None:
    """The signing key file: ILR_SIGNING_KEY when set (whether or not it exists: a named file
    that is missing is an error, see ``signing_key``), else the default file when it exists."""
    configured = settings.SIGNING_KEY
    if configured:
        return Path(configured)
    candidate = default_dir() / PRIVATE_NAME
    return candidate if candidate.exists() else None


def key_dir() -> Path:
    """The key directory: the signing key file's directory (default ``<ILR_DATA_DIR>/keys``)."""
    configured = settings.SIGNING_KEY
    return Path(configured).parent if configured else default_dir()


def _setting_for(path: Path) -> str:
    """The setting that names ``path``: ILR_SIGNING_KEY when set, else ILR_DATA_DIR."""
    return "ILR_SIGNING_KEY" if settings.SIGNING_KEY else "ILR_DATA_DIR (its keys/ed25519.pem)"


def _public_pem_bytes(public: Ed25519PublicKey) -> bytes:
    return public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)


def _write_private(path: Path, key: Ed25519PrivateKey) -> None:
    """Write ``key`` to ``path`` (mode 0600) through a temporary file and a rename, so a reader
    never sees half a key."""
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    tmp = path.with_name(f".{path.name}.tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def keep_public(public: Ed25519PublicKey, directory: Path | None = None) -> Path:
    """Keep ``public`` in the key directory's ``public/<kid>.pem`` (for verifying after a
    rotation); returns its path."""
    folder = Path(directory or key_dir()) / PUBLIC_DIR
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{key_id(public)}.pem"
    if not path.exists():
        path.write_bytes(_public_pem_bytes(public))
    return path


def generate(directory: Path | None = None, *, overwrite: bool = False) -> tuple[Path, Path]:
    """Write ``ed25519.pem`` (private, mode 0600) and ``ed25519.pub.pem`` under ``directory``,
    and keep the public key in its ``public/<kid>.pem``.

    Returns:
        (private_path, public_path).

    Raises:
        FileExistsError: a key exists and overwrite is false (rotating silently would orphan
            every receipt signed so far; ``rotate`` keeps the old public key).
    """
    directory = Path(directory or default_dir())
    directory.mkdir(parents=True, exist_ok=True)
    private_path, public_path = directory / PRIVATE_NAME, directory / PUBLIC_NAME
    if private_path.exists() and not overwrite:
        raise FileExistsError(f"{private_path} exists; pass --overwrite to replace it (or rotate it: ilr_keys rotate)")
    key = Ed25519PrivateKey.generate()
    _write_private(private_path, key)
    public_path.write_bytes(_public_pem_bytes(key.public_key()))
    keep_public(key.public_key(), directory)
    signing_key.cache_clear()
    return private_path, public_path


def rotate() -> tuple[str, str, Path]:
    """Replace the current signing key with a new one, keeping the old public key.

    The old public key is kept as ``public/<kid>.pem`` in the key directory (entries it signed
    name that kid), the new private key is written where the old one was (mode 0600), and the
    new public key is kept beside it. Processes that read the old key keep signing with it until
    they restart; what they sign still verifies.

    Returns:
        (old key id, new key id, the private key's path).

    Raises:
        SigningKeyUnavailable: there is no current key to rotate, or it cannot be read.
    """
    path = key_path()
    if path is None:
        raise SigningKeyUnavailable(
            f"there is no signing key to rotate under {default_dir()} (ILR_DATA_DIR): "
            "run `manage.py ilr_keys generate` first"
        )
    old = _load_private(path)
    directory = path.parent
    keep_public(old.public_key(), directory)
    new = Ed25519PrivateKey.generate()
    keep_public(new.public_key(), directory)
    _write_private(path, new)
    if path.name == PRIVATE_NAME:
        (directory / PUBLIC_NAME).write_bytes(_public_pem_bytes(new.public_key()))
    signing_key.cache_clear()
    return key_id(old.public_key()) or "", key_id(new.public_key()) or "", path


def _load_private(path: Path) -> Ed25519PrivateKey:
    """The Ed25519 private key in ``path``; every failure is one sentence naming the setting."""
    setting = _setting_for(path)
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise SigningKeyUnavailable(
            f"{setting} names {path}, which does not exist: point it at the signing key's PEM file, "
            "or unset it and run `manage.py ilr_keys generate`"
        ) from None
    except OSError as exc:
        raise SigningKeyUnavailable(f"{setting} names {path}, which cannot be read ({exc.strerror or exc})") from None
    try:
        key = serialization.load_pem_private_key(data, password=None)
    except (ValueError, TypeError) as exc:
        raise SigningKeyUnavailable(
            f"{setting} names {path}, which is not an unencrypted PEM private key ({exc})"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise SigningKeyUnavailable(f"{setting} names {path}, which is not an Ed25519 private key")
    return key


@lru_cache(maxsize=1)
def signing_key() -> Ed25519PrivateKey | None:
    """The configured private key, or None when none is configured.

    Raises:
        SigningKeyUnavailable: ILR_SIGNING_KEY names a file that is missing or unreadable, or
            the key file is not an Ed25519 private key (one sentence naming the setting).
    """
    path = key_path()
    if path is None:
        return None
    return _load_private(path)


def public_key() -> Ed25519PublicKey | None:
    key = signing_key()
    return key.public_key() if key else None


_kid_memo: tuple[Ed25519PrivateKey, str] | None = None
"""(the key, its id): the current key's id, computed once per key object (every append names it)."""


def current_key_id() -> str | None:
    """The key id of the current signing key, or None (``Chain.append`` writes it as ``kid``)."""
    global _kid_memo
    key = signing_key()
    if key is None:
        return None
    memo = _kid_memo
    if memo is not None and memo[0] is key:
        return memo[1]
    kid = key_id(key.public_key()) or ""
    _kid_memo = (key, kid)
    return kid


def trusted_keys() -> dict[str, Ed25519PublicKey]:
    """This deployment's trusted public keys by key id: every ``public/*.pem`` of the key
    directory and the current signing key's. A file that does not load as an Ed25519 public key
    is left out (a key that is not trusted only makes fewer receipts verify).

    Raises:
        SigningKeyUnavailable: the configured signing key is missing or unreadable.
    """
    out: dict[str, Ed25519PublicKey] = {}
    folder = key_dir() / PUBLIC_DIR
    if folder.is_dir():
        for path in sorted(folder.glob("*.pem")):
            try:
                public = load_public_pem(path.read_text())
            except (OSError, ValueError):
                continue
            kid = key_id(public)
            if kid is not None:
                out[kid] = public
    current = public_key()
    if current is not None:
        out[key_id(current) or ""] = current
    return out


def key_id(public: Ed25519PublicKey | None) -> str | None:
    """First 16 hex digits of sha256 over the raw public key."""
    if public is None:
        return None
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def public_key_pem(public: Ed25519PublicKey | None) -> str | None:
    if public is None:
        return None
    return _public_pem_bytes(public).decode()


def load_public_pem(text: str) -> Ed25519PublicKey:
    """The Ed25519 public key in PEM ``text``.

    Raises:
        ValueError: not a PEM public key, or not Ed25519.
    """
    key = serialization.load_pem_public_key(text.encode())
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError("not an Ed25519 public key")
    return key
