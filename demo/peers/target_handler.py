"""The payment target's request handler: one HTTP/1.0 request, routed to the payment API or an
admin endpoint, answered in JSON and appended to the access log (the endpoints and faults:
demo/peers/target.py)."""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler
from urllib.parse import parse_qs, unquote, urlsplit

from demo.peers.target import Refused


class TargetHandler(BaseHTTPRequestHandler):
    """One request. ``self.server`` is the TargetServer (demo/peers/target_server.py): its
    ``ledger``, ``log``, ``faults``, ``tier``, ``queryable``, ``dedup_window`` and ``stopping``."""

    # HTTP/1.0: one request per connection, so a held or late request never blocks another.
    protocol_version = "HTTP/1.0"

    def log_message(self, format, *args):
        # The JSON-lines access log is the record; stderr stays quiet.
        pass

    # -- plumbing ----------------------------------------------------------------------------

    def _start(self) -> None:
        self.t_mono, self.t_wall = time.monotonic(), time.time()
        parts = urlsplit(self.path)
        self.route = unquote(parts.path).rstrip("/") or "/"
        self.query = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        self.raw_body = b""
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.raw_body = self.rfile.read(length)
        self.entry = {
            "method": self.command,
            "path": self.route,
            "query": self.query or None,
            "key": self.headers.get("Idempotency-Key"),
            "body": self._body_for_log(),
            "status": None,
            "applied": False,
            "refund_id": None,
            "delay": 0.0,
            "blackholed": False,
            "injected_failure": None,
            "response_written": False,
        }

    def _body_for_log(self):
        if not self.raw_body:
            return None
        try:
            return json.loads(self.raw_body)
        except ValueError:
            return self.raw_body.decode("utf-8", "replace")

    def _json_body(self) -> dict:
        if not self.raw_body:
            return {}
        try:
            body = json.loads(self.raw_body)
        except ValueError:
            raise Refused(400, "body is not JSON") from None
        if not isinstance(body, dict):
            raise Refused(400, "body must be a JSON object")
        return body

    def _send(self, status: int, payload: dict, headers: dict | None = None) -> None:
        data = json.dumps(payload, default=str).encode()
        self.entry["status"] = status
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in (headers or {}).items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
            self.wfile.flush()
            self.entry["response_written"] = True
        except OSError:
            # The client gave up (timeout, watchdog exit): the outcome stands, only the answer
            # is lost. The access log says so.
            self.entry["response_written"] = False

    def _finish(self) -> None:
        self.entry["t_mono"], self.entry["t_wall"] = self.t_mono, self.t_wall
        self.entry["t_done_mono"], self.entry["t_done_wall"] = time.monotonic(), time.time()
        try:
            self.server.log.append(self.entry)
        except ValueError:
            pass  # the log was closed by shutdown while this request was held

    def _dispatch(self, routes: dict[str, Callable[[], None]]) -> None:
        self._start()
        try:
            handler = routes.get(self.route)
            if handler is None:
                if self.command == "GET" and self.route.startswith("/payments/"):
                    handler = self._get_payment
                else:
                    raise Refused(404, f"no route {self.command} {self.route}")
            handler()
        except Refused as exc:
            self._send(exc.status, {"error": exc.error})
        except Exception as exc:  # noqa: BLE001 - a server bug must still answer and be logged
            self._send(500, {"error": f"internal error: {type(exc).__name__}: {exc}"})
        finally:
            self._finish()

    def do_GET(self):
        self._dispatch(
            {
                "/refunds": self._get_refunds,
                "/ledger": lambda: self._send(
                    200,
                    {"rows": self.server.ledger.rows(), "payments": self.server.ledger.payments()},
                ),
                "/access_log": lambda: self._send(200, {"entries": self.server.log.entries()}),
                "/health": lambda: self._send(200, {"ok": True, **self.server.settings()}),
            }
        )

    def do_POST(self):
        self._dispatch(
            {
                "/refunds": self._post_refunds,
                "/admin/payments": self._admin_payments,
                "/admin/delay": self._admin_delay,
                "/admin/blackhole": self._admin_blackhole,
                "/admin/prune_keys": self._admin_prune_keys,
                "/admin/hand_refund": self._admin_hand_refund,
                "/admin/fail_next": self._admin_fail_next,
                "/admin/key_conflict": self._admin_key_conflict,
                "/admin/hold_first": self._admin_hold_first,
                "/admin/reset": self._admin_reset,
            }
        )

    # -- the payment API ---------------------------------------------------------------------

    def _post_refunds(self) -> None:
        srv = self.server
        if srv.faults.blackhole:
            self.entry["blackholed"] = True
            self._hold()
            self.close_connection = True
            return
        key = self.entry["key"]
        saved = srv.faults.saved_failure(key) if key else None
        if saved is not None:
            # The key's first answer was saved (a 5xx included): replayed, nothing processed.
            self.entry["injected_failure"] = {"status": saved, "saved": True}
            self._send(saved, {"error": "injected failure (EMULATED)"})  # the same body, as Stripe replays it
            return
        hold = srv.faults.begin(key) if key else "go"
        if hold == "busy":
            self._send(409, {"error": "another request with this key is in progress", "code": "idempotency_key_in_use"})
            return
        try:
            self._process_refund(hold)
        finally:
            if hold == "hold":
                srv.faults.end(key)

    def _process_refund(self, hold: str) -> None:
        srv = self.server
        if hold == "hold":
            # The key's first request: processed after hold_first seconds whatever the client
            # did meanwhile; other requests with the key are answered 409 until then.
            self.entry["delay"] = srv.faults.hold_first
            time.sleep(srv.faults.hold_first)
        failure = srv.faults.take_fail_next()
        delay = srv.faults.delay
        self.entry["delay"] = delay
        if delay > 0:
            # Processed after the sleep whatever the client did meanwhile: a late application.
            time.sleep(delay)
        self.entry["injected_failure"] = failure
        if failure is not None and not failure["apply"]:
            self._send(failure["status"], {"error": "injected failure (EMULATED)"})
            return
        try:
            body = self._json_body()
            if "payment" not in body or "amount" not in body:
                raise Refused(400, "body needs payment and amount")
            refund, applied = srv.ledger.refund(
                body["payment"],
                body["amount"],
                key=self.entry["key"],
                effect_id=body.get("effect_id"),
                dedup=srv.tier == 1,
                dedup_window=srv.dedup_window,
                key_conflict=srv.faults.key_conflict,
            )
        except Refused:
            if failure is None:
                raise
            refund, applied = None, False
        self.entry["applied"] = applied
        self.entry["refund_id"] = refund["id"] if refund else None
        if failure is not None:
            if failure.get("save") and self.entry["key"]:
                srv.faults.save_failure(self.entry["key"], failure["status"])
            self._send(failure["status"], {"error": "injected failure (EMULATED)"})
            return
        self._send(200, {**refund, "status": "succeeded", "already_processed": not applied})

    def _hold(self) -> None:
        """Hold a blackholed request: no answer until the blackhole opens, the client leaves,
        or the server stops."""
        srv = self.server
        while not srv.faults.open.wait(0.1) and not srv.stopping.is_set():
            if self._client_gone():
                return

    def _client_gone(self) -> bool:
        try:
            readable, _, _ = select.select([self.connection], [], [], 0)
            return bool(readable) and self.connection.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _get_refunds(self) -> None:
        if not self.server.queryable:
            raise Refused(404, "no lookup")
        key = self.query.get("key")
        if not key:
            raise Refused(400, "key required: GET /refunds?key=K")
        found = self.server.ledger.lookup(key)
        if found is None:
            raise Refused(404, "not found")
        self._send(200, found)

    def _get_payment(self) -> None:
        pid = self.route[len("/payments/") :]
        self._send(200, self.server.ledger.payment(pid, self.query.get("effect_id")))

    # -- admin (all EMULATED faults or fixtures) ---------------------------------------------

    def _admin_payments(self) -> None:
        body = self._json_body()
        result = self.server.ledger.create_payment(body.get("id"), body.get("paid"))
        self._send(200 if not result["created"] else 201, result)

    def _admin_delay(self) -> None:
        seconds = self._json_body().get("seconds")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
            raise Refused(400, "seconds must be a non-negative number")
        self.server.faults.delay = float(seconds)
        self._send(200, {"delay": float(seconds)})

    def _admin_blackhole(self) -> None:
        on = self._json_body().get("on")
        if not isinstance(on, bool):
            raise Refused(400, "on must be true or false")
        self.server.faults.set_blackhole(on)
        self._send(200, {"blackhole": on})

    def _admin_prune_keys(self) -> None:
        self._send(200, {"pruned": self.server.ledger.prune_keys()})

    def _admin_hand_refund(self) -> None:
        body = self._json_body()
        refund = self.server.ledger.hand_refund(body.get("payment"), body.get("amount"))
        self.entry["applied"], self.entry["refund_id"] = True, refund["id"]
        self._send(200, refund)

    def _admin_fail_next(self) -> None:
        body = self._json_body()
        status, apply, save = body.get("status"), body.get("apply", False), body.get("save", False)
        if status not in (400, 500, 502) or not isinstance(apply, bool) or not isinstance(save, bool):
            raise Refused(400, "status must be 400, 500 or 502, and apply and save true or false")
        self.server.faults.fail_next = {"status": status, "apply": apply, "save": save}
        self._send(200, {"fail_next": self.server.faults.fail_next})

    def _admin_hold_first(self) -> None:
        seconds = self._json_body().get("seconds")
        if isinstance(seconds, bool) or not isinstance(seconds, (int, float)) or seconds < 0:
            raise Refused(400, "seconds must be a non-negative number")
        self.server.faults.hold_first = float(seconds)
        self._send(200, {"hold_first": float(seconds)})

    def _admin_key_conflict(self) -> None:
        answer = self._json_body().get("answer")
        if answer not in ("409", "400", "replay"):
            raise Refused(400, 'answer must be "409", "400" or "replay"')
        self.server.faults.key_conflict = answer
        self._send(200, {"key_conflict": answer})

    def _admin_reset(self) -> None:
        self.server.faults.reset()
        self.server.ledger.reset()
        self.server.log.truncate()
        self._send(200, {"reset": True})
