"""A PostgreSQL cluster of Debian's server package for the real-server lane of the tests.

``python3 -m tests.real_pg DIR -- PYTEST_ARGS...`` runs initdb in DIR (fresh), starts the server
on a free 127.0.0.1 port with its own socket directory, fsync and synchronous_commit on, creates
the ``interlock`` database, prints the server version, runs ``python3 -m pytest PYTEST_ARGS``
with DATABASE_URL pointing at it, and stops the cluster (fast) whatever happened; the exit code
is pytest's.

As root the cluster belongs to the ``postgres`` system user (PostgreSQL refuses to run as root).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

DB_NAME = "interlock"
MINIMUM_MAJOR = 15


def bin_dir() -> Path:
    """The newest /usr/lib/postgresql/N/bin with an initdb (Debian's layout)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        raise SystemExit("no Debian PostgreSQL server found under /usr/lib/postgresql (apt-get install postgresql)")
    return Path(found[-1]).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """One throwaway cluster: ``DIR/data`` and the socket directory ``DIR/sock``."""

    def __init__(self, root: Path):
        self.root = root.resolve()
        self.data = self.root / "data"
        self.sock = self.root / "sock"
        self.bin = bin_dir()
        self.port = free_port()
        self.user = "postgres" if os.geteuid() == 0 else None

    def _run(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
        done = subprocess.run([str(a) for a in args], check=False, capture_output=True, text=True, timeout=timeout,
                              user=self.user)
        if done.returncode != 0:
            raise RuntimeError(f"{' '.join(str(a) for a in args)} exited {done.returncode}: "
                               f"{(done.stderr or done.stdout).strip()}")
        return done

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{DB_NAME}"

    def start(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        self.sock.mkdir(parents=True)
        if self.user:
            entry = pwd.getpwnam(self.user)
            for path in (self.root, self.sock):
                os.chown(path, entry.pw_uid, entry.pw_gid)
        self._run(self.bin / "initdb", "--auth=trust", "--encoding=utf8", "-U", "postgres", "-D", self.data)
        # fsync and synchronous_commit on, as the durability assumptions need, passed at start
        # so no stray configuration turns them off.
        opts = (f"-c listen_addresses=127.0.0.1 -p {self.port} -k {self.sock} -c fsync=on "
                "-c synchronous_commit=on -c max_connections=200")
        self._run(self.bin / "pg_ctl", "-w", "-t", "60", "-D", self.data, "-l", self.root / "server.log",
                  "-o", opts, "start", timeout=90)
        self._run(self.bin / "createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", DB_NAME)

    def version(self) -> str:
        return self._run(self.bin / "psql", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", "-At",
                         "-c", "select version()", DB_NAME).stdout.strip()

    def stop(self) -> None:
        if (self.data / "postmaster.pid").exists():
            self._run(self.bin / "pg_ctl", "-w", "-t", "60", "-D", self.data, "-m", "fast", "stop", timeout=90)


def main(argv: list[str]) -> int:
    if len(argv) < 1:
        raise SystemExit("usage: python3 -m tests.real_pg DIR [-- PYTEST_ARGS...]")
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
        print(f"real-server lane: {version} at {cluster.url} (fsync on, data {cluster.data}, "
              f"started in {time.monotonic() - started:.1f} s)", flush=True)
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
