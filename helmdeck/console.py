"""What the commands share on the terminal: usage errors, a closed stdout, the packages' notes, a question."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from helmdeck.parser import EXIT_USAGE

# A reader that closed the pipe (``helmdeck status | head``): the shell's status for a command ended by
# SIGPIPE, as `helm status | head` and coreutils report it.
EXIT_PIPE = 128 + signal.SIGPIPE


class Refused(RuntimeError):
    """A headless command refused to go on; the message says why."""


def usage_error(message: str) -> SystemExit:
    """``error: message`` on stderr; the SystemExit (exit code 2) to raise."""
    print(f"error: {message}", file=sys.stderr)
    return SystemExit(EXIT_USAGE)


def quiet_stdout() -> None:
    """Point stdout at /dev/null: the interpreter's last flush would otherwise hit the closed pipe again
    (as the Python docs' "Note on SIGPIPE" says)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def notes(engine: Any) -> None:
    """The packages folder's objects skipped (one line) and Flux fields left out (a warning each), on stderr."""
    if engine.skipped:
        print(engine.skipped, file=sys.stderr)
    for item in engine.left_out:
        print(f"warning: {item}", file=sys.stderr)


def confirmed(yes: bool, question: str) -> bool:
    """True with ``--yes`` (``yes``), or when the operator answers yes on a terminal; False without one."""
    if yes:
        return True
    if not sys.stdin.isatty():
        return False
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")
