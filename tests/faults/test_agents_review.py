"""The review UI on a durable agent's approval request (ilr.agents; the agent itself is
tests/faults/test_agents.py): on real PostgreSQL, a real ``ilr_worker`` subprocess, the real HTTP
payment target and the Messages API stub, the queue's and the case page's card shows the
conversation that led to the request; its selector and template name no workflow of their own."""

from __future__ import annotations

from tests.support.agents import pending_request, start
from tests.support.queries.steps import OUTPUT_OF_STEPS_BY_WORKFLOW_ID_NAME_AG_CARD
from tests.support.refund_harness import refund_env


def _card(html: str, request_id: str) -> str:
    """The request's card (<article id="request-...">) of a review UI page."""
    start = html.index(f'id="request-{request_id}"')
    return html[start : html.index("</article>", start)]


def test_an_agent_request_card_shows_the_conversation_that_led_to_it(rt, workers, tmp_path):
    """The real worker runs agent_refund up to its approval request; the review UI's queue and
    case page (Django test client) show, collapsed on the card, each turn up to the one that
    made the call: its text, the tool calls with their arguments as fields, the lookup's
    recorded result, and which call the request is for."""
    import html as html_lib
    import json
    import re

    from django.urls import reverse

    from tests.support.review import client_for, user

    with refund_env(tmp_path, tier=1) as env:
        workers.start("w1", env=env.worker_env())
        input = start(rt, env, "ag-card")
        req = pending_request(rt, "ag-card")
        client = client_for(user("reviewer", "approvals.review", "approvals.approve"))
        pages = {
            "queue": client.get(reverse("approvals:queue")),
            "case": client.get(reverse("approvals:case", args=["ag-card"])),
        }
        lookup = rt.connection().execute(OUTPUT_OF_STEPS_BY_WORKFLOW_ID_NAME_AG_CARD).fetchone()["output"]
        for where, page in pages.items():
            assert page.status_code == 200, where
            card = _card(page.content.decode(), req["id"])
            assert '<details class="conversation" data-conversation="2">' in card, (where, card)
            conversation = card[card.index('<details class="conversation"') : card.index("</details>")]
            turns = re.split(r'<li class="turn" data-turn="(\d+)">', conversation)
            assert turns[1::2] == ["0", "1"], (where, conversation)
            turn0, turn1 = (html_lib.unescape(t) for t in turns[2::2])
            assert "Calling lookup_payment." in turn0 and 'data-tool="lookup_payment" data-position="0.1"' in turn0
            assert f'data-argument="payment">"{input["payment"]}"' in turn0
            assert 'data-result="ok"' in turn0 and json.dumps(lookup, sort_keys=True) in turn0
            assert "Calling issue_refund." in turn1
            assert 'data-tool="issue_refund" data-position="1.1" data-current="1"' in turn1
            assert 'data-argument="amount">2000' in turn1 and f'data-argument="payment">"{input["payment"]}"' in turn1
            assert "Result" not in turn1  # nothing came back yet for the call that waits
            # The decision's reasoning is the turn's text.
            assert "Calling issue_refund." in card[card.index("Reasoning") : card.index('<section class="premises">')]
        rt.approve_request(req["id"], by="alice")
        assert rt.result("ag-card", timeout=40)["outcomes"][-1]["status"] == "COMMITTED"
        # Once decided, the case page still shows the conversation up to the request, not after it.
        card = _card(client.get(reverse("approvals:case", args=["ag-card"])).content.decode(), req["id"])
        assert '<details class="conversation" data-conversation="2">' in card and 'data-turn="2"' not in card


def test_the_conversation_selector_and_template_name_no_workflow_of_their_own():
    """The card's conversation works for any workflow built on ilr.agents: neither its selector
    nor its template names this project's tools or actions."""
    import inspect
    import re

    from approvals import conversation
    from tests.support import ROOT

    source = "".join(
        inspect.getsource(f)
        for f in (
            conversation.response_text,
            conversation._result_of,
            conversation._arguments,
            conversation._conversation,
            conversation.conversations,
        )
    )
    template = (ROOT / "approvals/templates/approvals/_conversation.html").read_text()
    for text in (source, template):
        assert not re.search(r"refund|payment|propose|approve", text, re.IGNORECASE)
