"""A PostgreSQL cluster of Debian's server package for the real-server lane of the tests
(the cluster itself: prove.peers.pg_cluster).

``python3 -m tests.support.real_pg DIR -- PYTEST_ARGS...`` runs initdb in DIR (fresh), starts the server
on a free 127.0.0.1 port with its own socket directory, fsync and synchronous_commit on, creates
the ``interlock`` database, prints the server version, runs ``python3 -m pytest PYTEST_ARGS``
with DATABASE_URL pointing at it, and stops the cluster (fast) whatever happened; the exit code
is pytest's.

As root the cluster belongs to the ``postgres`` system user (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

from prove.peers.pg_cluster import DB_NAME, MINIMUM_MAJOR, Cluster, bin_dir, free_port  # noqa: F401 - re-exported


def main(argv: list[str]) -> int:
    if len(argv) < 1:
        raise SystemExit("usage: python3 -m tests.support.real_pg DIR [-- PYTEST_ARGS...]")
    root, rest = Path(argv[0]), argv[1:]
    if rest[:1] == ["--"]:
        rest = rest[1:]
    # SIGTERM (a CI timeout) must still reach the finally below and stop the cluster.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
    cluster = Cluster(root)
    try:
        started = time.monotonic()
        cluster.start()
        version = cluster.version()
        major = int(cluster.bin.parts[-2])
        if major < MINIMUM_MAJOR:
            raise SystemExit(f"PostgreSQL {major} is below the supported minimum {MINIMUM_MAJOR}")
        print(
            f"real-server lane: {version} at {cluster.url} (fsync on, data {cluster.data}, "
            f"started in {time.monotonic() - started:.1f} s)",
            flush=True,
        )
        pgbouncer = shutil.which("pgbouncer") or "/usr/sbin/pgbouncer"
        if os.path.exists(pgbouncer):
            out = subprocess.run([pgbouncer, "--version"], capture_output=True, text=True, check=False).stdout
            print(f"real-server lane: {out.splitlines()[0] if out else 'pgbouncer (no version)'}", flush=True)
        env = dict(os.environ, DATABASE_URL=cluster.url)
        return subprocess.call([sys.executable, "-m", "pytest", *rest], env=env)
    finally:
        cluster.stop()
        shutil.rmtree(cluster.root, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
