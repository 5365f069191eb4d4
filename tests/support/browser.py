"""What the browser tests share: Debian's Chromium driven by Playwright (``executable_path``;
``playwright install`` is never run), and the review UI's login."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]


def browser_or_skip():
    """Playwright's ``sync_playwright``, with Debian's chromium present; missing ones skip locally
    and fail in CI."""
    try:
        from playwright.sync_api import sync_playwright
    except ImportError:
        if os.environ.get("CI"):
            raise
        pytest.skip("playwright is not installed (pip install --group test)")
    if not Path(CHROMIUM).exists():
        if os.environ.get("CI"):
            pytest.fail(f"{CHROMIUM} is missing: apt-get install chromium")
        pytest.skip(f"{CHROMIUM} is missing (apt-get install chromium)")
    return sync_playwright


def log_in(page, base_url: str, username: str, password: str) -> None:
    """Log ``page`` in to the review UI at ``base_url``: the queue redirects to the login page
    first, and back to the queue after."""
    page.goto(f"{base_url}/review/")
    assert "/review/login/" in page.url
    page.fill("#id_username", username)
    page.fill("#id_password", password)
    page.click("button[type=submit]")
    page.wait_for_url(f"{base_url}/review/")
