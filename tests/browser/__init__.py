"""Tests of the review UI in Chromium, driven by Playwright (marked slow by tests/conftest.py)."""
