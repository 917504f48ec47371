"""Where helmdeck keeps files: the XDG base directory rule with helmdeck's own variable first.

The cache directory is ``$HELMDECK_CACHE``, else ``$XDG_CACHE_HOME/helmdeck``, else ``~/.cache/helmdeck``:
the post-renderer, the remote charts and the pinned tools' builds (:mod:`engine.base.tools`) live below it.
"""

from __future__ import annotations

import os
from pathlib import Path


def xdg_dir(explicit: str, xdg: str, fallback: str, *parts: str) -> Path:
    """``$explicit`` when set, else ``$xdg`` (or ``~/fallback``) joined with ``parts``; not created."""
    value = os.environ.get(explicit)
    if value:
        return Path(value)
    base = os.environ.get(xdg)
    return (Path(base) if base else Path.home() / fallback).joinpath(*parts)


def resolved(path: Path) -> Path:
    """``path`` made absolute with its symlinks followed (``Path.resolve()``), except that a symlink loop is
    left in place instead of raising RuntimeError (Python before 3.13; 3.13 leaves it too): whoever reads the
    file then reports it as unreadable, naming it, where an exception would end a folder's watcher."""
    try:
        return path.resolve()
    except RuntimeError:
        return path.absolute()


def cache_root() -> Path:
    """helmdeck's cache directory (not created)."""
    return xdg_dir("HELMDECK_CACHE", "XDG_CACHE_HOME", ".cache", "helmdeck")
