"""The suite's helmdeck cache (tests/conftest.py ``session_cache``): charts, index copies and the post-renderer
go to a directory of this session, never the user's; the Go binaries are the user's cached ones."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from engine.base.paths import cache_root
from engine.helm.postrender_plugin import install


def test_the_cache_is_the_sessions_and_the_binaries_the_users(session_cache: Path) -> None:
    assert cache_root() == session_cache == cache_root()
    assert session_cache not in (Path.home() / ".cache" / "helmdeck").parents
    assert os.environ["HELMDECK_CACHE"] == str(session_cache)
    for sub in ("bin", "build"):
        link = session_cache / sub
        assert link.is_symlink() and link.resolve() != link  # the binaries stay where they were built
    assert session_cache in install().plugins_dir.parents
    helmdeck = subprocess.run([sys.executable, "-c", "from engine.base.paths import cache_root; print(cache_root())"],
                              capture_output=True, text=True, timeout=60, check=True)
    assert helmdeck.stdout.strip() == str(session_cache)  # helmdeck run as a command by a test, too
