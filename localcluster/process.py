"""Processes the local cluster starts: identity by PID and start time, stop, ports."""

from __future__ import annotations

import contextlib
import os
import random
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


# Below Linux's default ephemeral range (32768-60999) and above the well-known services.
_LISTEN_LOW = 20000


def _ephemeral_low() -> int:
    """The first port the kernel hands out to outgoing connections (``ip_local_port_range``)."""
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 32768


def listen_ports(count: int, avoid: set[int] | frozenset[int] = frozenset()) -> list[int]:
    """``count`` distinct ports on 127.0.0.1 that are free now, for servers to listen on.

    Picked at random below the kernel's ephemeral range: a port from that range (what ``bind(0)``
    returns) can be taken by any outgoing connection on the machine before the server binds it,
    which made a second cluster's start fail while another ran.
    """
    high = max(_ephemeral_low(), _LISTEN_LOW + 2000)
    chosen: list[int] = []
    while len(chosen) < count:
        port = random.randrange(_LISTEN_LOW, high)
        if port in avoid or port in chosen or port_open(port):
            continue
        with socket.socket() as s:
            try:
                s.bind(("127.0.0.1", port))
            except OSError:
                continue
        chosen.append(port)
    return chosen


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
