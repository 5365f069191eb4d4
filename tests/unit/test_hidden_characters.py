"""Look-alike and invisible characters are shown as what they are (issue 40, item 3): the one
filter (``reveal``) escapes a bidirectional override, a zero-width space and a Cyrillic letter
inside a Latin word as code points and flags them. The pages that use it are in
tests/browser/test_hidden_characters.py.
"""

from __future__ import annotations

from approvals.templatetags.approvals_extras import hidden_characters, reveal
from tests.support.review import CYRILLIC, RLO, ZWSP


def test_reveal_escapes_what_is_not_plain_and_flags_mixed_scripts():
    assert "\\u202e" in reveal(RLO) and "\\u202c" in reveal(RLO) and "hidden-chars" in reveal(RLO)
    assert "\\u200b" in reveal(ZWSP)
    assert "\\u0430" in reveal(CYRILLIC) and "mixed scripts" in reveal(CYRILLIC)
    # Plain text, a Cyrillic-only word, line breaks: as written, no badge; markup escaped.
    for plain in ("acct_9876", "Привет, Bob", "two\nlines", "a < b"):
        assert hidden_characters(plain)[1] == [], plain
    assert reveal("a < b") == "a &lt; b"
    assert "\\u00a0" in reveal("1\u00a0000") and "\\U000e0041" in reveal("\U000e0041")
    assert "\\u202e" in reveal({"to": RLO})  # JSON documents too
