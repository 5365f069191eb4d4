"""Smaller items of issue 40, item 11, that need no database: ``approvals.models.Approval`` is
documented as what it is (the holder of the app's permissions, never written), and
``ilr_keys generate`` warns about version control. The case timeline itself is in
tests/browser/test_case_timeline.py."""

from __future__ import annotations


def test_the_approval_model_is_documented_as_never_written():
    import approvals.models

    doc = (approvals.models.__doc__ or "") + (approvals.models.Approval.__doc__ or "")
    assert "Every approval through the review UI leaves a row here" not in doc
    assert "never written" in doc and "ilr.approval_requests" in doc


def test_ilr_keys_generate_warns_about_version_control(tmp_path):
    """Already so before issue 40's item 11 was taken up (checked, not changed): the command's
    answer names version control; the default key directory (.data/) is in .gitignore."""
    import io

    from django.core.management import call_command

    out = io.StringIO()
    call_command("ilr_keys", "generate", "--dir", str(tmp_path / "keys"), stdout=out)
    assert "out of version control" in out.getvalue(), out.getvalue()
    from tests.support import ROOT

    assert ".data/" in (ROOT / ".gitignore").read_text().split()
