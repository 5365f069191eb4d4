"""Ed25519 keys for journal signatures (docs/protocol.md §9), with the ``cryptography`` package.

The signing key is read from ILR_SIGNING_KEY (a PEM path; ilr.conf) when set, else from
``<ILR_DATA_DIR>/keys/ed25519.pem`` when ``manage.py ilr_keys generate`` wrote one. With no key,
entries are sealed with ``sig: null`` (hash chain only).
"""

from __future__ import annotations

import hashlib
import os
from functools import lru_cache
from pathlib import Path

from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from ilr.conf import settings


def default_dir() -> Path:
    return settings.DATA_DIR / "keys"


def key_path() -> Path | None:
    configured = settings.SIGNING_KEY
    if configured:
        return Path(configured)
    candidate = default_dir() / "ed25519.pem"
    return candidate if candidate.exists() else None


def generate(directory: Path | None = None, *, overwrite: bool = False) -> tuple[Path, Path]:
    """Write ``ed25519.pem`` (private, mode 0600) and ``ed25519.pub.pem`` under ``directory``.

    Returns:
        (private_path, public_path).

    Raises:
        FileExistsError: a key exists and overwrite is false (rotating silently would orphan
            every receipt signed so far).
    """
    directory = Path(directory or default_dir())
    directory.mkdir(parents=True, exist_ok=True)
    private_path, public_path = directory / "ed25519.pem", directory / "ed25519.pub.pem"
    if private_path.exists() and not overwrite:
        raise FileExistsError(f"{private_path} exists; pass --overwrite to replace it")
    key = Ed25519PrivateKey.generate()
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    fd = os.open(private_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as f:
        f.write(pem)
    os.chmod(private_path, 0o600)
    public_path.write_bytes(
        key.public_key().public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
    )
    signing_key.cache_clear()
    return private_path, public_path


@lru_cache(maxsize=1)
def signing_key() -> Ed25519PrivateKey | None:
    """The configured private key, or None."""
    path = key_path()
    if path is None:
        return None
    key = serialization.load_pem_private_key(path.read_bytes(), password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise ValueError(f"{path}: not an Ed25519 private key")
    return key


def public_key() -> Ed25519PublicKey | None:
    key = signing_key()
    return key.public_key() if key else None


def key_id(public: Ed25519PublicKey | None) -> str | None:
    """First 16 hex digits of sha256 over the raw public key."""
    if public is None:
        return None
    raw = public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return hashlib.sha256(raw).hexdigest()[:16]


def public_key_pem(public: Ed25519PublicKey | None) -> str | None:
    if public is None:
        return None
    return public.public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo).decode()


def load_public_pem(text: str) -> Ed25519PublicKey:
    key = serialization.load_pem_public_key(text.encode())
    if not isinstance(key, Ed25519PublicKey):
        raise ValueError("not an Ed25519 public key")
    return key
