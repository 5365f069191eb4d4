"""Input gaps (issue 40, item 9): a target's answer too large to journal whole is journaled
bounded, with its size and hash. Real PostgreSQL, a real worker subprocess. The rest of the item
is in tests/integration/test_input_gaps.py and tests/browser/test_input_gaps.py.
"""

from __future__ import annotations

import json

from ilr._journal import receipts
from tests.support.queries.journal import BODY_N_OF_JOURNAL_BY_EFFECT_ID_KIND


def test_a_huge_target_answer_is_journaled_bounded_with_its_size_and_hash(rt, workers):
    """A 5 MB answer: the COMMITTED entry (and the step, and what the workflow sees, on every
    replay alike) keeps the small fields whole and the big one as its first
    ANSWER_VALUE_HEAD_CHARS characters, its size and sha256; the receipt still verifies."""
    import hashlib

    from ilr._codec import ANSWER_VALUE_HEAD_CHARS, MAX_ANSWER_BYTES

    size = 5 * 1024 * 1024
    workers.start("w1")
    grant = rt.grant("huge_answer", "refund", max_cents=100, by="policy")
    rt.start("huge_answer", "huge-1", {"size": size, "grant": grant})
    out = rt.result("huge-1", timeout=60)
    assert out["status"] == "COMMITTED", out
    entry = (
        rt.connection()
        .execute(
            BODY_N_OF_JOURNAL_BY_EFFECT_ID_KIND,
            (out["effect_id"],),
        )
        .fetchone()
    )
    assert entry["n"] < MAX_ANSWER_BYTES + 4096, entry["n"]
    answer = json.loads(entry["body"])["result"]
    assert answer["id"].startswith("ref_") and answer["status"] == "ok"
    echo = answer["echo"]["$bounded"]
    full = json.dumps("x" * size, ensure_ascii=False)
    assert echo["bytes"] == len(full.encode()) and echo["sha256"] == hashlib.sha256(full.encode()).hexdigest()
    assert echo["head"] == full[:ANSWER_VALUE_HEAD_CHARS]
    assert out["result"] == answer
    verdict = receipts.verify(rt.receipt(out["effect_id"]))
    assert verdict["chain_intact"] and verdict["happened"] is True, verdict
