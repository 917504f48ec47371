"""Processes the local cluster starts: identity by PID and start time, stop, ports."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def port_open(port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(0.2)
        return s.connect_ex(("127.0.0.1", port)) == 0


def proc_start_time(pid: int) -> int | None:
    """Start time of ``pid`` in clock ticks since boot (/proc/<pid>/stat field 22)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    # The command name may hold spaces and parentheses: split after the last ')'.
    fields = stat.rsplit(")", 1)[1].split()
    if fields[0] == "Z":
        return None
    return int(fields[19])


@dataclass
class ProcessRecord:
    """A process this cluster started: its PID and start time identify it."""

    component: str
    pid: int
    start_time: int
    log: str
    cmd: list[str] = field(default_factory=list)

    def alive(self) -> bool:
        return proc_start_time(self.pid) == self.start_time


def stop_processes(records: list[ProcessRecord], timeout: float) -> float:
    """SIGTERM each process, SIGKILL those still alive after ``timeout`` s; returns that deadline."""
    for rec in records:
        with contextlib.suppress(ProcessLookupError):
            os.kill(rec.pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    for rec in records:
        while rec.alive() and time.monotonic() < deadline:
            reap(rec.pid)
            time.sleep(0.05)
        if rec.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(rec.pid, signal.SIGKILL)
            while rec.alive():
                reap(rec.pid)
                time.sleep(0.05)
    return deadline


def reap(pid: int) -> None:
    """Collect ``pid`` if it is our child so it does not linger as a zombie."""
    with contextlib.suppress(ChildProcessError, OSError):
        os.waitpid(pid, os.WNOHANG)


def http_ok(url: str) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=2) as resp:
            return bool(resp.status == 200)
    except (OSError, urllib.error.URLError):
        return False
