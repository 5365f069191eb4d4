"""The login is rate limited by django-axes (issue 40, item 11 and the Must show; docs/deploy.md),
through Django's test client. The production settings' own checks are in
tests/faults/test_deploy_settings.py."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse


@pytest.mark.django_db(transaction=True)
def test_the_nth_failed_login_locks_the_user_out():
    """django-axes on the review UI's login: AXES_FAILURE_LIMIT wrong passwords, then even the
    right one is refused (429) for that username from that address; another user still logs in."""
    from django.contrib.auth.models import User

    User.objects.create_user("alice", password="the-right-password")
    User.objects.create_user("bob", password="bobs-password")
    login = reverse("approvals:login")
    c = Client()
    for attempt in range(settings.AXES_FAILURE_LIMIT - 1):
        r = c.post(login, {"username": "alice", "password": f"wrong-{attempt}"})
        assert r.status_code == 200, (attempt, r.status_code)  # the form again, with its error
    r = c.post(login, {"username": "alice", "password": "wrong-last"})
    assert r.status_code == 429, r.status_code
    r = c.post(login, {"username": "alice", "password": "the-right-password"})
    assert r.status_code == 429 and "_auth_user_id" not in c.session, r.status_code
    r = Client().post(login, {"username": "bob", "password": "bobs-password"})
    assert r.status_code == 302, r.status_code
