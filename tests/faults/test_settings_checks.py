"""Settings that would silently weaken a rule are named by ``manage.py check`` (issue 40, item 10).

Each case runs ``manage.py check`` (and ``ilr_worker``, which runs the same checks before it
starts) as a real subprocess on ``tests.support.check_settings``: the project's settings, plus the
``tests.support.check_app`` app, whose workflows module registers a target granted under "credit", plus
the ILR_* values under test.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from ilr import InvalidInput
from tests.support import ROOT


def manage(overrides: dict, *args: str) -> subprocess.CompletedProcess:
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "tests.support.check_settings",
        "ILR_CHECK_OVERRIDES": repr(overrides),
    }
    return subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_rule_under_a_name_no_target_or_action_has_is_a_warning():
    """{"credits": 10000} while the registered target's action is "credit": the rule would never
    apply. A warning naming the setting, the key and the near name; an error at --fail-level WARNING."""
    proc = manage({"ILR_TWO_PERSON_CENTS": {"credits": 10_000}}, "check")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0, out
    assert "ilr.W002" in out and "ILR_TWO_PERSON_CENTS['credits']" in out, out
    assert "two-person rule" in out and "'credit'" in out and "ledger-credits" in out, out
    assert manage({"ILR_TWO_PERSON_CENTS": {"credits": 10_000}}, "check", "--fail-level", "WARNING").returncode == 1
    # The action's own name, or the target's: nothing to say.
    for good in ({"credit": 10_000}, {"ledger-credits": 10_000, "refund": 50_000}):
        proc = manage({"ILR_TWO_PERSON_CENTS": good}, "check", "--fail-level", "WARNING")
        assert proc.returncode == 0 and "no issues" in proc.stdout, proc.stdout + proc.stderr


def test_every_ilr_setting_of_the_wrong_shape_is_an_error_naming_it():
    bad = {
        "ILR_TWO_PERSON_CENTS": {"credit": "100.00", "refund": True, "payout": -1, "": 5},
        "ILR_MAX_TAKEOVERS": "5",
        "ILR_DEPLOYMENT_REFRESH": 0,
        "ILR_POOLER": "transactions",
        "ILR_SIGNING_KEY": 7,
        "ILR_DATA_DIR": ["/tmp"],
        "ILR_BEFORE_CONNECT": 3,
    }
    proc = manage(bad, "check")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Traceback" not in out, out
    for words in (
        "ILR_TWO_PERSON_CENTS['credit']: a two-person threshold is a non-negative integer of cents",
        "got '100.00'",
        "ILR_TWO_PERSON_CENTS['refund']",
        "ILR_TWO_PERSON_CENTS['payout']",
        "ILR_TWO_PERSON_CENTS: every key is an action or target name",
        "ILR_MAX_TAKEOVERS",
        "ILR_DEPLOYMENT_REFRESH",
        "ILR_POOLER",
        "ILR_SIGNING_KEY",
        "ILR_DATA_DIR",
        "ILR_BEFORE_CONNECT",
    ):
        assert words in out, (words, out)
    assert out.count("ilr.E002") == 10, out
    # Not a dict at all.
    proc = manage({"ILR_TWO_PERSON_CENTS": [10_000]}, "check")
    assert proc.returncode == 1 and "ILR_TWO_PERSON_CENTS: must be None or a dict" in proc.stderr, proc.stderr
    # A worker runs the same checks before it starts: it refuses, naming the setting.
    proc = manage({"ILR_TWO_PERSON_CENTS": {"credit": "100.00"}}, "ilr_worker", "--id", "check-w")
    assert proc.returncode != 0 and "ILR_TWO_PERSON_CENTS['credit']" in proc.stderr, proc.stderr


def test_a_request_under_a_bad_rule_names_the_setting_not_a_type_error(settings):
    """Past the checks (``--skip-checks``, or a setting changed at run time), the rule itself says
    which setting is wrong instead of raising TypeError."""
    from ilr._ops.approval_requests import two_person_threshold

    settings.ILR_TWO_PERSON_CENTS = {"credit": "100.00"}
    with pytest.raises(InvalidInput) as err:
        two_person_threshold(None, "ledger-credits", "credit")
    assert err.value.field == "ILR_TWO_PERSON_CENTS['credit']" and "integer of cents" in err.value.rule


def test_a_malformed_queue_is_named_entry_by_entry():
    """ILR_QUEUES with a limit of 0, a rate that is no rate and an unknown rule: ilr.E002 for
    each, naming the entry and the rule; a good one passes."""
    bad = {"payouts": {"concurrency": 0, "rate": "fast", "burst": 3}, "ok": {"rate": "5/10s"}}
    proc = manage({"ILR_QUEUES": bad}, "check")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1, out
    assert "ILR_QUEUES['payouts']['concurrency']: must be an int from 1 to 1000, got 0" in out, out
    assert "ILR_QUEUES['payouts']['rate']: a rate is '<starts>/<unit>'" in out, out
    assert "ILR_QUEUES['payouts']['burst']: is not a queue rule" in out, out
    assert "ILR_QUEUES['ok']" not in out, out
    good = {"payouts": {"concurrency": 10, "rate": "100/m", "per_key_rate": "5/minute"}}
    proc = manage({"ILR_QUEUES": good}, "check", "--fail-level", "WARNING")
    assert proc.returncode == 0 and "no issues" in proc.stdout, proc.stdout + proc.stderr


def test_a_history_threshold_of_the_wrong_shape_is_an_error_naming_it():
    """The history thresholds (docs/protocol.md §5.7): None or an int of 1 or more."""
    bad = {
        "ILR_HISTORY_WARN_STEPS": 0,
        "ILR_HISTORY_WARN_BYTES": "10MB",
        "ILR_HISTORY_LIMIT_STEPS": 51_200.0,
        "ILR_HISTORY_LIMIT_BYTES": True,
    }
    proc = manage(bad, "check")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 1 and "Traceback" not in out, out
    assert "ILR_HISTORY_WARN_STEPS: must be None or an int, 1 or more (step rows), got 0" in out, out
    assert "ILR_HISTORY_WARN_BYTES: must be None or an int, 1 or more (bytes), got '10MB'" in out, out
    assert "ILR_HISTORY_LIMIT_STEPS: must be None or an int, 1 or more (step rows), got 51200.0" in out, out
    assert "ILR_HISTORY_LIMIT_BYTES: must be None or an int, 1 or more (bytes), got True" in out, out
    assert out.count("ilr.E002") == 4, out
    assert manage({"ILR_HISTORY_LIMIT_BYTES": None, "ILR_HISTORY_WARN_STEPS": 5}, "check").returncode == 0
