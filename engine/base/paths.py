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


def cache_root() -> Path:
    """helmdeck's cache directory (not created)."""
    return xdg_dir("HELMDECK_CACHE", "XDG_CACHE_HOME", ".cache", "helmdeck")
