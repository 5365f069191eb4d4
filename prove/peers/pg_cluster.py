"""Throwaway PostgreSQL clusters of Debian's server package: a single server, or a primary with
a streaming standby (pg_basebackup -R over a replication slot), for the real-server test lane
(tests/support/real_pg.py) and the failover harness (prove/harness/failover.py).

No Django here: ``python3 -m tests.support.real_pg`` imports this before any settings exist.

As root every cluster belongs to the ``postgres`` system user (PostgreSQL refuses to run as
root): its directory is chowned to it, and its parents must be readable by it (mode 755).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import time
from pathlib import Path

DB_NAME = "interlock"
MINIMUM_MAJOR = 15


def bin_dir() -> Path:
    """The newest /usr/lib/postgresql/N/bin with an initdb (Debian's layout).

    Raises:
        SystemExit: no Debian PostgreSQL server is installed.
    """
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"), key=lambda p: int(Path(p).parts[-3]))
    if not found:
        raise SystemExit("no Debian PostgreSQL server found under /usr/lib/postgresql (apt-get install postgresql)")
    return Path(found[-1]).parent


def have_server() -> bool:
    """Whether a Debian PostgreSQL server package is installed."""
    return bool(glob.glob("/usr/lib/postgresql/*/bin/initdb"))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Cluster:
    """One cluster: ``ROOT/data``, the socket directory ``ROOT/sock``, the log ``ROOT/server.log``.

    Args:
        root: its directory (removed and recreated by ``init``/``start``).
        port: the TCP port on 127.0.0.1; default a free one.
    """

    def __init__(self, root: Path, port: int | None = None):
        self.root = Path(root).resolve()
        self.data = self.root / "data"
        self.sock = self.root / "sock"
        self.log = self.root / "server.log"
        self.bin = bin_dir()
        self.port = port or free_port()
        self.user = "postgres" if os.geteuid() == 0 else None

    def _run(self, *args, timeout: float = 120, check: bool = True) -> subprocess.CompletedProcess:
        done = subprocess.run(
            [str(a) for a in args], check=False, capture_output=True, text=True, timeout=timeout, user=self.user
        )
        if check and done.returncode != 0:
            raise RuntimeError(
                f"{' '.join(str(a) for a in args)} exited {done.returncode}: {(done.stderr or done.stdout).strip()}"
            )
        return done

    @property
    def url(self) -> str:
        return f"postgres://postgres@127.0.0.1:{self.port}/{DB_NAME}"

    def conninfo(self, dbname: str = DB_NAME) -> str:
        return f"host=127.0.0.1 port={self.port} user=postgres dbname={dbname}"

    def _fresh_root(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)
        self.sock.mkdir(parents=True)
        if self.user:
            entry = pwd.getpwnam(self.user)
            for path in (self.root, self.sock):
                os.chown(path, entry.pw_uid, entry.pw_gid)

    def init(self) -> None:
        """A fresh initdb (trust auth; initdb's pg_hba admits local replication connections)."""
        self._fresh_root()
        self._run(self.bin / "initdb", "--auth=trust", "--encoding=utf8", "-U", "postgres", "-D", self.data)

    def launch(self, settings: dict | None = None, *, listen: bool = True) -> None:
        """``pg_ctl start`` (returns once the server accepts connections, or a standby is up).

        fsync and synchronous_commit on, passed at start so no stray configuration turns them
        off; ``settings`` adds or overrides ``-c`` options.

        Args:
            listen: False: no TCP listener, only the socket directory (a server nobody else may reach).
        """
        opts = {
            "listen_addresses": "127.0.0.1" if listen else "",
            "port": self.port,
            "unix_socket_directories": self.sock,
            "fsync": "on",
            "synchronous_commit": "on",
            "max_connections": 200,
            **(settings or {}),
        }
        text = " ".join(f"-c {k}={_quote(v)}" for k, v in opts.items())
        self._run(
            self.bin / "pg_ctl", "-w", "-t", "60", "-D", self.data, "-l", self.log, "-o", text, "start", timeout=90
        )

    def createdb(self, name: str = DB_NAME) -> None:
        self._run(self.bin / "createdb", "-h", "127.0.0.1", "-p", str(self.port), "-U", "postgres", name)

    def start(self) -> None:
        """init, launch and create the ``interlock`` database (the real-server lane's cluster)."""
        self.init()
        self.launch()
        self.createdb()

    def psql(self, sql: str, dbname: str = DB_NAME, *, socket_only: bool = False) -> str:
        """One statement through psql; returns its unaligned, tuples-only output."""
        host = str(self.sock) if socket_only else "127.0.0.1"
        return self._run(
            self.bin / "psql",
            "-h",
            host,
            "-p",
            str(self.port),
            "-U",
            "postgres",
            "-At",
            "-v",
            "ON_ERROR_STOP=1",
            "-c",
            sql,
            dbname,
        ).stdout.strip()

    def version(self) -> str:
        return self.psql("select version()")

    def pid(self) -> int | None:
        """The postmaster's pid from postmaster.pid, or None when it is not running."""
        try:
            pid = int((self.data / "postmaster.pid").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        return pid

    def running(self) -> bool:
        return self.pid() is not None

    def stop(self, mode: str = "fast") -> None:
        """``pg_ctl stop -m MODE`` when it runs; a server already gone is fine."""
        if self.running():
            self._run(
                self.bin / "pg_ctl", "-w", "-t", "60", "-D", self.data, "-m", mode, "stop", timeout=90, check=False
            )

    def kill(self) -> list[int]:
        """SIGKILL the postmaster and every child of it at once (a machine that dies): no
        shutdown checkpoint, no last WAL sent. Returns the pids killed."""
        pid = self.pid()
        if pid is None:
            return []
        pids = [pid, *children(pid)]
        for p in pids:
            try:
                os.kill(p, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 30
        while any(_alive(p) for p in pids):
            if time.monotonic() > deadline:
                raise RuntimeError(f"postgres processes {pids} survived SIGKILL")
            time.sleep(0.02)
        return pids

    # -- replication ---------------------------------------------------------------------------

    def standby_of(self, primary: Cluster, *, slot: str, application_name: str) -> None:
        """Make this cluster a streaming standby of ``primary``: pg_basebackup -R over a new
        physical replication slot, with ``application_name`` (what synchronous_standby_names
        names) in primary_conninfo. Does not start it (``launch``)."""
        self._fresh_root()
        self._run(
            self.bin / "pg_basebackup",
            "-h",
            "127.0.0.1",
            "-p",
            str(primary.port),
            "-U",
            "postgres",
            "-D",
            self.data,
            "-R",
            "-C",
            "-S",
            slot,
            "-X",
            "stream",
            "-c",
            "fast",
            timeout=300,
        )
        with open(self.data / "postgresql.auto.conf", "a") as conf:
            conf.write(
                f"primary_conninfo = 'host=127.0.0.1 port={primary.port} user=postgres "
                f"application_name={application_name}'\nprimary_slot_name = '{slot}'\n"
            )

    def promote(self) -> None:
        """``pg_ctl promote -w``: returns once the standby accepts writes."""
        self._run(self.bin / "pg_ctl", "-w", "-t", "60", "-D", self.data, "promote", timeout=90)

    def remove(self) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


def _quote(value) -> str:
    text = str(value)
    return f"'{text}'" if (not text or " " in text or "," in text) else text


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ", 1)[1].split()[0] != "Z"
    except (OSError, IndexError):
        return False


def children(pid: int) -> list[int]:
    """The pids whose parent is ``pid`` (from /proc)."""
    out = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                ppid = int(f.read().split(") ", 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        if ppid == pid:
            out.append(int(entry))
    return out
