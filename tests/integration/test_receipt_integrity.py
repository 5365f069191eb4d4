"""A receipt's integrity (issue 40, item 6; docs/security.md): a bundle stripped of its signatures
or re-signed with another key is not tamper-evident. Real PostgreSQL; the chain is written as the
runtime writes it. Truncation is in tests/browser/test_receipt_integrity.py, key rotation and the
signed reconcile in tests/faults/test_receipt_integrity.py.
"""

from __future__ import annotations

import json

from ilr import _codec as codec
from ilr._journal import journal, keys, receipts
from tests.support.review import effect_chain

# -- item 6: which key verify trusts ------------------------------------------------------------


def _forge(bundle: dict, key) -> dict:
    """The bundle with its payload raised to $100,000, every entry re-sealed and re-signed with
    ``key``, and ``key`` placed in the bundle as its own."""
    bodies, prev = [], None
    for body in bundle["entries"]:
        entry = {k: v for k, v in json.loads(body).items() if k not in ("hash", "sig")}
        if "effect" in entry:
            entry["effect"] = {**entry["effect"], "amount": 10_000_000}
        entry["prev"] = prev
        if "kid" in entry:
            entry["kid"] = keys.key_id(key.public_key())
        sealed = journal.seal(entry, key)
        bodies.append(codec.canonical(sealed))
        prev = sealed["hash"]
    pem = keys.public_key_pem(key.public_key())
    kid = keys.key_id(key.public_key())
    return {**bundle, "entries": bodies, "key_id": kid, "public_key": pem, "keys": {kid: pem}, "head": None}


def test_a_bundle_stripped_of_its_signatures_or_resigned_with_another_key_is_not_tamper_evident(rt, signing, tmp_path):
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    effect_id = effect_chain(rt)
    bundle = rt.receipt(effect_id)
    ours = keys.public_key()
    assert receipts.verify(bundle)["tamper_evident"] is True  # the deployment's own key, by id
    assert receipts.verify(bundle, public_key=ours)["tamper_evident"] is True  # pinned

    forged = _forge(bundle, Ed25519PrivateKey.generate())
    v = receipts.verify(forged)
    assert v["tamper_evident"] is False, v
    assert v["signature"] == (f"unverified: the bundle names key {forged['key_id']}, which is not a trusted key"), v[
        "signature"
    ]

    stripped = {
        **bundle,
        "entries": [codec.canonical({**json.loads(b), "sig": None}) for b in bundle["entries"]],
        "key_id": None,
        "public_key": None,
        "keys": {},
    }
    v = receipts.verify(stripped)
    assert v["tamper_evident"] is False and v["unsigned"] == len(bundle["entries"]), v
    assert v["signature"].startswith("unverified:"), v["signature"]
    # A verifier with no trusted key at all cannot call any chain tamper-evident.
    v = receipts.verify(bundle, trusted_keys={})
    assert v["tamper_evident"] is False and v["chain_intact"] is True
    assert v["signature"].startswith("unverified:"), v["signature"]
