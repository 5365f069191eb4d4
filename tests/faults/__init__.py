"""Tests with worker subprocesses, servers, clusters, SIGKILL and SIGSTOP, Temporal, DBOS, TLC and long runs
(marked slow: tests/support/layout.py)."""
