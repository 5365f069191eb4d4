"""The refund decision: one call to the Messages API through the official ``anthropic`` SDK.

Where the call goes (docs/protocol.md §16.2):

- ``ILR_MODEL_BASE_URL`` set: the local stub (demo.peers.model_stub), EMULATED model variance. The
  API key is ``ANTHROPIC_API_KEY`` when set, else a placeholder the stub accepts.
- ``ILR_MODEL_BASE_URL`` unset and ``ANTHROPIC_API_KEY`` set: real Claude (needs network).
- Neither: ``decide_refund`` raises RuntimeError.

The request is built by ``build_request`` from the case alone (no clock, no randomness), so
``request_hash`` of it is stable across processes and replays: the runtime can record which
question a recorded decision answered.

``anthropic`` is imported only inside ``decide_refund``, so importing this module stays cheap.
"""

from __future__ import annotations

import hashlib
import json
import os

MODEL = "claude-haiku-4-5-20251001"
MAX_TOKENS = 300
STUB_API_KEY = "stub-key-not-a-secret"
SYSTEM = (
    "You decide refunds for a payments team. Answer with only a JSON object "
    '{"amount": <integer cents to refund>, "reasoning": "<one sentence>"} and nothing else.'
)


def _canonical(value) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def case_id_of(case: dict) -> str:
    """The case's id: ``case["case_id"]``, else ``case["payment"]``.

    Raises:
        ValueError: the case has neither.
    """
    value = case.get("case_id", case.get("payment"))
    if value is None or value == "":
        raise ValueError("a case needs case_id or payment")
    return str(value)


def build_request(case: dict) -> dict:
    """The Messages API request for one case, a plain dict of JSON values.

    Args:
        case: JSON values; needs ``case_id`` or ``payment``. Typical keys: payment, paid (cents),
            requested (cents), reason.

    Returns:
        {"model", "max_tokens", "system", "messages"}: the keyword arguments of
        ``client.messages.create``. The user message starts with ``case_id: X`` (the stub keys
        its script on it) and carries the case as canonical JSON.
    """
    prompt = (
        f"case_id: {case_id_of(case)}\nCase (amounts in cents): {_canonical(case)}\nHow many cents should be refunded?"
    )
    return {
        "model": MODEL,
        "max_tokens": MAX_TOKENS,
        "system": SYSTEM,
        "messages": [{"role": "user", "content": prompt}],
    }


def request_hash(request: dict) -> str:
    """sha256 hex of the request's canonical JSON (the canonical form of docs/protocol.md §9)."""
    return hashlib.sha256(_canonical(request).encode()).hexdigest()


def endpoint() -> dict:
    """Where decide_refund would send its call.

    Returns:
        {"base_url": str | None (None: the SDK's default, real Claude), "api_key": str,
        "emulated": bool}.

    Raises:
        RuntimeError: neither ILR_MODEL_BASE_URL nor ANTHROPIC_API_KEY is set.
    """
    base_url = os.environ.get("ILR_MODEL_BASE_URL")
    api_key = os.environ.get("ANTHROPIC_API_KEY")
    if base_url:
        return {"base_url": base_url, "api_key": api_key or STUB_API_KEY, "emulated": True}
    if api_key:
        return {"base_url": None, "api_key": api_key, "emulated": False}
    raise RuntimeError("no model configured: set ILR_MODEL_BASE_URL (the local stub, EMULATED) or ANTHROPIC_API_KEY")


def parse_decision(text: str) -> dict:
    """Parse the model's answer text.

    Args:
        text: a JSON object ``{"amount": cents, "reasoning": str}``, possibly wrapped in prose or
            a code fence (a real model sometimes adds one).

    Returns:
        {"amount": int cents, "reasoning": str}.

    Raises:
        ValueError: no JSON object, or an amount that is not a non-negative integer.
    """
    start, end = text.find("{"), text.rfind("}")
    if start < 0 or end < start:
        raise ValueError(f"model answer holds no JSON object: {text[:200]!r}")
    try:
        decision = json.loads(text[start : end + 1])
    except ValueError as exc:
        raise ValueError(f"model answer is not valid JSON: {exc}") from None
    amount = decision.get("amount") if isinstance(decision, dict) else None
    if isinstance(amount, bool) or not isinstance(amount, int) or amount < 0:
        raise ValueError(f"model answer's amount must be non-negative integer cents, not {amount!r}")
    return {"amount": amount, "reasoning": str(decision.get("reasoning", ""))}


def decide_refund(case: dict, *, timeout: float = 60.0) -> dict:
    """Ask the model how much to refund.

    Args:
        case: see build_request.
        timeout: seconds for the whole HTTP call.

    Returns:
        {"model": the model that answered, "amount": cents, "reasoning": str,
        "usage": {"input_tokens": int, "output_tokens": int}}.

    Raises:
        RuntimeError: no model configured (see endpoint()).
        anthropic.APIError subclasses: the call failed (connection, timeout, HTTP error).
        ValueError: the answer could not be parsed.
    """
    import anthropic

    where = endpoint()
    request = build_request(case)
    # max_retries=0: retrying is the runtime's RetryPolicy's job, so every model call it makes
    # is one it can see (and the stub's per-case script counts exactly those).
    with anthropic.Anthropic(
        base_url=where["base_url"], api_key=where["api_key"], max_retries=0, timeout=timeout
    ) as client:
        response = client.messages.create(**request)
    text = "".join(block.text for block in response.content if getattr(block, "type", None) == "text")
    decision = parse_decision(text)
    return {
        "model": response.model,
        "amount": decision["amount"],
        "reasoning": decision["reasoning"],
        "usage": {
            "input_tokens": response.usage.input_tokens,
            "output_tokens": response.usage.output_tokens,
        },
    }
