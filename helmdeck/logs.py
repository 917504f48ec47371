"""Structured log lines (``time level logger message key=value``) to a file the user can find."""

from __future__ import annotations

import logging
import os
from pathlib import Path


def state_dir() -> Path:
    """``$XDG_STATE_HOME/helmdeck`` (default ``~/.local/state/helmdeck``)."""
    xdg = os.environ.get("XDG_STATE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".local" / "state") / "helmdeck"


def default_log_file() -> Path:
    return state_dir() / "helmdeck.log"


def setup_logging(level: str = "info", file: Path | None = None, *, stderr: bool = False) -> Path | None:
    """Send helmdeck's logs to ``file`` (created 0600), or with ``stderr`` and no file to standard error (a
    pod's log); return the file's path (None on standard error)."""
    handler: logging.Handler
    path: Path | None = None
    if stderr and file is None:
        handler = logging.StreamHandler()
    else:
        path = file or default_log_file()
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600, exist_ok=True)
        handler = logging.FileHandler(path)
    handler.setFormatter(logging.Formatter(
        "time=%(asctime)s level=%(levelname)s logger=%(name)s msg=%(message)r",
    ))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level.upper())
    # The kubernetes client logs request bodies at debug level: never let it.
    logging.getLogger("kubernetes").setLevel(logging.WARNING)
    logging.getLogger("urllib3").setLevel(logging.WARNING)
    return path
