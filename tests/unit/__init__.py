"""Tests that need no database: pure code, and the small local servers (target, fault proxy, model stub)."""
