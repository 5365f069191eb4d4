"""What the bench reads of the machine, from /proc: CPU seconds of the PostgreSQL server, of one
process and of the whole machine, and a process's peak RSS."""

from __future__ import annotations

import os
from pathlib import Path


def postgres_cpu_seconds() -> float:
    """utime + stime of every postgres process (the server's CPU), from /proc."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        if "(postgres)" not in stat:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def cpu_seconds(pid: int) -> float:
    """utime + stime of one process (its threads included), from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_cpu() -> tuple[int, int]:
    """(busy, total) jiffies of the whole machine, from /proc/stat: busy is everything but
    idle and iowait (user, system, irq and softirq of every process and the kernel)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    total = sum(fields[:8])
    return total - fields[3] - fields[4], total


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def cluster_cpu_seconds(postmaster_pid: int) -> float:
    """utime + stime of one PostgreSQL cluster: its postmaster and the processes it started (its
    backends and auxiliary processes), from /proc; other clusters on the machine are left out.
    A backend that exits takes its CPU with it, so read this around a span where none exits."""
    total = 0.0
    tick = os.sysconf("SC_CLK_TCK")
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(pid) == postmaster_pid or int(fields[1]) == postmaster_pid:
            total += (int(fields[11]) + int(fields[12])) / tick
    return total


def postmaster_pid(conn) -> int:
    """The pid of the postmaster of the cluster ``conn`` (a psycopg connection) is on: the parent of
    its checkpointer, from /proc (the server must be on this machine)."""
    from psycopg.rows import tuple_row

    (checkpointer,) = (
        conn.cursor(row_factory=tuple_row)
        .execute("select pid from pg_stat_activity where backend_type = 'checkpointer'")
        .fetchone()
    )
    return int(Path(f"/proc/{checkpointer}/stat").read_text().rsplit(")", 1)[1].split()[1])
