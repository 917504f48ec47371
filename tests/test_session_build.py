"""The session builds the Go binaries its selected tests need before the first test (tests/conftest.py), so
a test's setup never holds a cold build that pytest-timeout would cut short."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from tests.conftest import BUILD_FAILED, ROOT


def _pytest(cache: Path, *selection: str) -> subprocess.CompletedProcess[str]:
    """pytest on ``selection`` with an empty binaries cache and no ``go`` on PATH: any build fails at once."""
    python_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "HELMDECK_CACHE": str(cache), "PATH": f"{python_dir}:/nonexistent"}
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *selection],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_a_cluster_test_builds_before_any_test_runs(tmp_path: Path) -> None:
    proc = _pytest(tmp_path / "cache", "tests/test_cluster.py::test_up_again_is_a_no_op")
    out = proc.stdout + proc.stderr
    assert proc.returncode == BUILD_FAILED, out
    assert "'go' command is not on PATH" in out, out  # the build was tried: the default components are missing
    assert "no tests ran" in out and "INTERNALERROR" not in out, out  # not one test's setup error


def test_a_test_needing_no_binary_builds_nothing(tmp_path: Path) -> None:
    proc = _pytest(tmp_path / "cache", "tests/test_cli.py::test_help_for_every_command[status]")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "1 passed" in out, out
    assert "building" not in out and "'go' command" not in out, out
