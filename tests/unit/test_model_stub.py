"""The Messages API stub (demo.peers.model_stub) driven by the real ``anthropic`` SDK (demo.peers.model).

The stub runs as a ``manage.py demo_peer model-stub`` subprocess; the SDK talks real HTTP to it.
No database.
"""

from __future__ import annotations

import anthropic
import pytest

from demo.peers.model import MODEL, build_request, decide_refund, endpoint, request_hash
from demo.peers.model_stub import EMULATED_HEADER, model_stub_process
from demo.peers.targets_client import http_json


@pytest.fixture(scope="module")
def stub_url():
    with model_stub_process() as url:
        yield url


@pytest.fixture
def stub(stub_url, monkeypatch):
    """The stub, reset, with decide_refund pointed at it."""
    assert http_json("POST", f"{stub_url}/admin/reset")[0] == 200
    monkeypatch.setenv("ILR_MODEL_BASE_URL", stub_url)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    return stub_url


def calls(url) -> dict:
    return http_json("GET", f"{url}/admin/calls")[1]


def test_first_decision_is_2000_and_stays_without_redecide(stub):
    first = decide_refund({"case_id": "pay_1", "paid": 10_000})
    assert first["amount"] == 2000 and first["model"] == MODEL
    assert first["reasoning"] and first["usage"]["input_tokens"] > 0 and first["usage"]["output_tokens"] > 0
    assert set(first) == {"model", "amount", "reasoning", "usage"}
    assert decide_refund({"case_id": "pay_1", "paid": 10_000})["amount"] == 2000
    report = calls(stub)
    assert report["total"] == 2 and report["by_case"] == {"pay_1": 2}
    assert report["calls"][0]["anthropic_version"]  # the SDK's own headers reached the stub
    assert "anthropic" in report["calls"][0]["user_agent"].lower()


def test_redecide_answers_3000_after_the_first_call(stub):
    http_json("POST", f"{stub}/admin/script", {"redecide": True})
    assert decide_refund({"case_id": "pay_2"})["amount"] == 2000
    assert decide_refund({"case_id": "pay_2"})["amount"] == 3000
    assert decide_refund({"case_id": "pay_2"})["amount"] == 3000
    assert decide_refund({"payment": "pay_3"})["amount"] == 2000  # counted per case
    assert calls(stub)["by_case"] == {"pay_2": 3, "pay_3": 1}


def test_explicit_amounts_sequence(stub):
    status, script = http_json("POST", f"{stub}/admin/script", {"amounts": [1500, 2500]})
    assert status == 200 and script == {"redecide": False, "amounts": [1500, 2500]}
    assert [decide_refund({"case_id": "c"})["amount"] for _ in range(3)] == [1500, 2500, 2500]
    assert http_json("POST", f"{stub}/admin/script", {"amounts": ["ten"]})[0] == 400


def test_response_is_a_valid_message_labelled_emulated(stub):
    with anthropic.Anthropic(base_url=stub, api_key="k", max_retries=0) as client:
        raw = client.messages.with_raw_response.create(**build_request({"case_id": "pay_9"}))
        message = raw.parse()
    assert EMULATED_HEADER.lower() in {k.lower() for k in raw.headers}
    assert message.type == "message" and message.role == "assistant" and message.stop_reason == "end_turn"
    assert message.id.startswith("msg_") and message.content[0].type == "text"
    assert message.usage.input_tokens > 0


def test_stub_refuses_bad_requests(stub):
    with anthropic.Anthropic(base_url=stub, api_key="k", max_retries=0) as client:
        with pytest.raises(anthropic.BadRequestError, match="case_id"):
            client.messages.create(model=MODEL, max_tokens=10, messages=[{"role": "user", "content": "hi"}])
    status, body = http_json(
        "POST",
        f"{stub}/v1/messages",
        {"model": MODEL, "max_tokens": 5, "messages": []},
        headers={"anthropic-version": "2023-06-01"},
    )
    assert status == 401 and body["error"]["type"] == "authentication_error"
    assert calls(stub)["total"] == 0


def test_request_is_deterministic():
    a = build_request({"case_id": "pay_1", "paid": 10_000, "reason": "duplicate charge"})
    b = build_request({"reason": "duplicate charge", "paid": 10_000, "case_id": "pay_1"})
    assert a == b and request_hash(a) == request_hash(b)
    assert a["model"] == MODEL and a["messages"][0]["content"].startswith("case_id: pay_1\n")
    assert request_hash(build_request({"case_id": "pay_2"})) != request_hash(a)


def test_endpoint_choice(monkeypatch):
    monkeypatch.delenv("ILR_MODEL_BASE_URL", raising=False)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(RuntimeError, match="no model configured"):
        endpoint()
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test")
    assert endpoint() == {"base_url": None, "api_key": "sk-test", "emulated": False}
    monkeypatch.setenv("ILR_MODEL_BASE_URL", "http://127.0.0.1:1")
    assert endpoint() == {"base_url": "http://127.0.0.1:1", "api_key": "sk-test", "emulated": True}
