"""helmdeck's cache directory: ``$HELMDECK_CACHE``, else ``$XDG_CACHE_HOME/helmdeck``, else ``~/.cache/helmdeck``.

After the XDG base directory specification. The post-renderer and the remote
charts live below it, as the local cluster's binaries do (``localcluster.build``).
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """helmdeck's cache directory (not created)."""
    explicit = os.environ.get("HELMDECK_CACHE")
    if explicit:
        return Path(explicit)
    xdg = os.environ.get("XDG_CACHE_HOME")
    return (Path(xdg) if xdg else Path.home() / ".cache") / "helmdeck"
