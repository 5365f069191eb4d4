"""Tests of the review UI in Chromium, driven by Playwright (marked slow: tests/support/layout.py)."""
