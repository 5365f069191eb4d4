"""``LocalRefunds``: the EffectTarget for the local payment target (demo.peers.target).

The runtime's ``ctx.effect`` reads these attributes with defaults (docs/protocol.md §6.9): ``name``,
``tier``, ``send_timeout``, ``settle_margin``, ``premise_max_age``, ``queryable``,
``dedup_window``; and calls ``apply``, ``query``, ``capture`` and ``validate_premises``.

Every call opens one fresh HTTP connection (the stdlib ``http.client``) with an explicit
timeout, so a fault proxy between worker and target sees one connection per request and a
reset never poisons a pooled connection.
"""

from __future__ import annotations

import http.client
import json
import math
from dataclasses import dataclass
from urllib.parse import quote, urlencode, urlsplit

from ilr import RetryPolicy, SendInProgress, TargetRejected

# 409 (key in use, or reused with other parameters) and 429 say nothing
# definite about whether the refund exists, so they are not a "definite no".
NOT_DEFINITE_4XX = frozenset({409, 429})


class TargetHTTPError(Exception):
    """An HTTP answer that is not a definite no: 5xx, 409, 429 (the outcome is unknown).

    Attributes:
        status: the HTTP status.
        body: the decoded JSON body (``{"raw": text}`` when it was not JSON).
    """

    def __init__(self, status: int, body: dict, what: str):
        self.status = status
        self.body = body
        super().__init__(f"{what}: HTTP {status}: {body.get('error', body)}")


class LookupUnavailable(Exception):
    """The target has no lookup (tier 3, or tier 1 started without --queryable)."""


class UnknownPayment(LookupError):
    """The target has no payment with this id."""


def http_json(
    method: str,
    url: str,
    body: dict | None = None,
    *,
    headers: dict | None = None,
    timeout: float = 10.0,
) -> tuple[int, dict]:
    """One HTTP request with a JSON body and a JSON answer, on a fresh connection.

    Args:
        method: "GET" or "POST".
        url: absolute http:// URL.
        body: sent as JSON when given.
        headers: extra request headers.
        timeout: seconds, applied to the connect and to each socket read and write.

    Returns:
        (status, decoded body); a non-JSON body comes back as ``{"raw": text}``.

    Raises:
        OSError (TimeoutError, ConnectionResetError, ConnectionRefusedError, ...) and
        http.client.HTTPException (RemoteDisconnected, ...) when no answer arrives.
    """
    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
    try:
        data = None if body is None else json.dumps(body).encode()
        hdrs = {"Accept": "application/json", **(headers or {})}
        if data is not None:
            hdrs["Content-Type"] = "application/json"
        target = parts.path + (f"?{parts.query}" if parts.query else "")
        conn.request(method, target or "/", body=data, headers=hdrs)
        resp = conn.getresponse()
        raw = resp.read()
    finally:
        conn.close()
    try:
        decoded = json.loads(raw) if raw else {}
    except ValueError:
        decoded = {"raw": raw.decode("utf-8", "replace")}
    return resp.status, decoded if isinstance(decoded, dict) else {"value": decoded}


@dataclass
class LocalRefunds:
    """EffectTarget for demo.peers.target.

    Args:
        base_url: e.g. "http://127.0.0.1:40123" (the target, or a fault proxy in front of it).
        tier: 1, 2 or 3; must match the server's.
        queryable: whether query() can answer; None means tier == 2 (docs/protocol.md §6.9).
            Set True for a tier-1 server started with --queryable.
        send_timeout: seconds; the socket timeout of apply() and the runtime's send deadline.
        settle_margin: seconds after send_deadline within which a request may still land (A2).
        premise_max_age: seconds a captured premise may age before the stopwatch starts (A3).
        dedup_window: seconds the server remembers a key (A4); math.inf when it never forgets.
        read_timeout: seconds, socket timeout of query(), capture() and validate_premises().
        name: the target's name in journal entries.
        resend_policy: how recovery spaces resends (None: Temporal's defaults, docs/protocol.md §6.5).
        lookup_after: failed sends in a row after which a queryable target is looked up.
    """

    base_url: str
    tier: int = 1
    queryable: bool | None = None
    send_timeout: float = 35.0
    settle_margin: float = 10.0
    premise_max_age: float = 5.0
    dedup_window: float = math.inf
    read_timeout: float = 10.0
    name: str = "local-refunds"
    resend_policy: RetryPolicy | None = None
    lookup_after: int = 3

    def __post_init__(self):
        if self.tier not in (1, 2, 3):
            raise ValueError(f"tier must be 1, 2 or 3, not {self.tier!r}")
        if self.queryable is None:
            self.queryable = self.tier == 2
        self.base_url = self.base_url.rstrip("/")

    @classmethod
    def from_server(cls, base_url: str, **overrides) -> LocalRefunds:
        """Build a client whose tier, queryable and dedup_window match the server's /health.

        Args:
            base_url: the target (not a proxy that may be blackholed).
            overrides: any constructor argument; wins over what the server reports (for
                example dedup_window=612 when keys are pruned by hand, scenario S04).
        """
        status, health = http_json("GET", base_url.rstrip("/") + "/health", timeout=10.0)
        if status != 200:
            raise TargetHTTPError(status, health, "GET /health")
        window = health.get("dedup_window")
        settings = {
            "tier": health["tier"],
            "queryable": health["queryable"],
            "dedup_window": math.inf if window is None else float(window),
        }
        return cls(base_url, **{**settings, **overrides})

    # -- the send ----------------------------------------------------------------------------

    def apply(self, effect_id: str, payload: dict, timeout: float | None = None) -> dict:
        """POST /refunds with ``Idempotency-Key: effect_id``.

        Args:
            effect_id: the runtime's effect id; it is the idempotency key and is sent in the body.
            payload: {"payment": id, "amount": cents}.
            timeout: seconds for the connect and each socket read; default send_timeout. The
                runtime passes the time left before the send's local deadline (EffectTarget).

        Returns:
            The target's refund JSON: {"id", "payment", "amount", "key", "effect_id", "source",
            "applied_at", "status", "already_processed"}.

        Raises:
            TargetRejected: a definite no (a 4xx other than 409 and 429); nothing was applied.
            SendInProgress: 409 ``idempotency_key_in_use``: the key's first request is still
                being processed; the send is in flight.
            TargetHTTPError: 5xx, 409 or 429; the outcome is unknown.
            OSError, http.client.HTTPException: timeout, reset, refused connection, no answer;
                the outcome is unknown.
        """
        body = {"payment": payload["payment"], "amount": payload["amount"], "effect_id": effect_id}
        status, answer = http_json(
            "POST",
            f"{self.base_url}/refunds",
            body,
            headers={"Idempotency-Key": effect_id},
            timeout=self.send_timeout if timeout is None else timeout,
        )
        if status == 200:
            return answer
        if status == 409 and answer.get("code") == "idempotency_key_in_use":
            raise SendInProgress(f"{self.name} POST /refunds: HTTP 409: {answer.get('error')}")
        if 400 <= status < 500 and status not in NOT_DEFINITE_4XX:
            exc = TargetRejected(f"{self.name} refused the refund: HTTP {status}: {answer.get('error', answer)}")
            exc.status, exc.body = status, answer
            raise exc
        raise TargetHTTPError(status, answer, f"{self.name} POST /refunds")

    def query(self, effect_id: str, payload: dict) -> dict | None:
        """GET /refunds?key=effect_id: did this effect's refund land?

        Args:
            effect_id: the idempotency key the send used.
            payload: the effect's payload (unused: the key identifies the refund).

        Returns:
            The refund JSON plus "matches" (how many refunds carry the key), or None when the
            target has none.

        Raises:
            LookupUnavailable: the target has no lookup.
            TargetHTTPError: any other non-200, non-404 answer.
            OSError, http.client.HTTPException: no answer.
        """
        status, answer = http_json(
            "GET",
            f"{self.base_url}/refunds?{urlencode({'key': effect_id})}",
            timeout=self.read_timeout,
        )
        if status == 200:
            return answer
        if status == 404 and answer.get("error") == "no lookup":
            raise LookupUnavailable(f"{self.name} (tier {self.tier}) has no lookup")
        if status == 404:
            return None
        raise TargetHTTPError(status, answer, f"{self.name} GET /refunds")

    # -- premises: {payment, eligible, refunded_by_others} -------------------------------------

    def capture(self, payment, effect_id: str | None = None) -> dict:
        """Read the external premises a refund decision rests on.

        Args:
            payment: the payment id.
            effect_id: when given, refunds carrying this effect id or key are not "others", and
                eligibility is judged without them (the facts as they were before this effect's
                own refund). Without it every refund counts as another's: at decision time this
                effect has applied nothing.

        Returns:
            {"payment": id, "eligible": bool, "refunded_by_others": cents}.

        Raises:
            UnknownPayment: the payment does not exist.
            TargetHTTPError, OSError, http.client.HTTPException: no usable answer.
        """
        url = f"{self.base_url}/payments/{quote(str(payment), safe='')}"
        if effect_id is not None:
            url += "?" + urlencode({"effect_id": effect_id})
        status, facts = http_json("GET", url, timeout=self.read_timeout)
        if status == 404:
            raise UnknownPayment(f"{self.name}: {facts.get('error', 'no such payment')}")
        if status != 200:
            raise TargetHTTPError(status, facts, f"{self.name} GET /payments")
        if effect_id is None:
            return {
                "payment": facts["payment"],
                "eligible": facts["eligible"],
                "refunded_by_others": facts["refunded_total"],
            }
        return {
            "payment": facts["payment"],
            "eligible": facts["eligible_excluding_effect"],
            "refunded_by_others": facts["refunded_by_others"],
        }

    def validate_premises(self, premises: dict, effect_id: str) -> list[str]:
        """Re-read the facts and name every premise that no longer holds.

        This effect's own refund (if it landed) is excluded, so a resend after a crash is not
        refused for the refund it is retrying.

        Args:
            premises: what capture() returned at decision time.
            effect_id: the effect being re-checked.

        Returns:
            One plain sentence per premise whose value differs; [] when all hold. A premise
            this target cannot check is reported too, so it is never silently trusted.

        Raises:
            TargetHTTPError, OSError, http.client.HTTPException: the facts could not be read.
        """
        payment = premises.get("payment")
        if payment is None:
            return ["premises name no payment, so none can be checked"]
        try:
            now = self.capture(payment, effect_id=effect_id)
        except UnknownPayment:
            return [f"payment {payment} no longer exists at {self.name}"]
        violations = []
        for name, was in premises.items():
            if name == "payment":
                continue
            if name not in now:
                violations.append(f"premise {name} cannot be checked by {self.name}")
            elif now[name] != was:
                unit = " cents" if name == "refunded_by_others" else ""
                violations.append(
                    f"{name} of payment {payment} was {json.dumps(was)}{unit} when decided "
                    f"and is {json.dumps(now[name])}{unit} now"
                )
        return violations
