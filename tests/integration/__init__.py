"""Tests on the test database, in-process: a Runtime, the Django test client, plain SQL; no worker."""
