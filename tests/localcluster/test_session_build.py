"""The session builds the Go binaries its selected tests need before the first test (tests/conftest.py), so
a test's setup never holds a cold build that pytest-timeout would cut short."""

from __future__ import annotations

import fcntl
import os
import subprocess
import sys
import threading
from pathlib import Path

from localcluster import build
from tests.conftest import BUILD_FAILED, ROOT


def _pytest(cache: Path, *selection: str, cwd: Path = ROOT) -> subprocess.CompletedProcess[str]:
    """pytest on ``selection`` with an empty binaries cache and no ``go`` on PATH: any build fails at once."""
    python_dir = str(Path(sys.executable).parent)
    env = {**os.environ, "HELMDECK_CACHE": str(cache), "PATH": f"{python_dir}:/nonexistent", "PYTHONPATH": str(ROOT)}
    env.pop("PYTEST_XDIST_WORKER", None)  # a run of its own, even from a worker of make test's
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *selection],
                          cwd=cwd, env=env, capture_output=True, text=True, timeout=120, check=False)


def test_a_cluster_test_builds_before_any_test_runs(tmp_path: Path) -> None:
    proc = _pytest(tmp_path / "cache", "tests/localcluster/test_cluster.py::test_up_again_is_a_no_op")
    out = proc.stdout + proc.stderr
    assert proc.returncode == BUILD_FAILED, out
    assert "'go' command is not on PATH" in out, out  # the build was tried: the default components are missing
    assert "no tests ran" in out and "INTERNALERROR" not in out, out  # not one test's setup error


def test_a_failed_build_in_the_workers_ends_make_tests_run_red_saying_why(tmp_path: Path) -> None:
    """As make test runs it (pytest-xdist workers): each worker's build fails and calls pytest.exit; the run ends
    with BUILD_FAILED and the reason, not xdist's INTERNALERROR (exit code 3, the reason unsaid)."""
    proc = _pytest(tmp_path / "cache", "-n", "2", "tests/localcluster/test_cluster.py::test_up_again_is_a_no_op",
                   "tests/localcluster/test_cluster.py::test_cluster_is_ready_with_stamped_version")
    out = proc.stdout + proc.stderr
    assert proc.returncode == BUILD_FAILED, out
    assert "called pytest.exit: the selected tests need binaries that could not be built" in out, out
    assert "'go' command is not on PATH" in out and "INTERNALERROR" not in out, out


def test_a_worker_that_exits_while_another_collects_ends_the_run_red(tmp_path: Path) -> None:
    """A worker that calls pytest.exit before the tests are handed out (here: while the other worker still
    collects) left the run unnoticed: the other worker ran every test and the run ended green, exit code 0, the
    reason unsaid. Now the run stops, Interrupted with the worker's reason, and ends with its return code."""
    (tmp_path / "conftest.py").write_text(
        "import time\n"
        "import pytest\n"
        "pytest_plugins = ('tests.shared_session',)\n"
        "def pytest_collection_modifyitems(session):\n"
        "    worker = getattr(session.config, 'workerinput', {}).get('workerid')\n"
        "    if worker == 'gw0':\n"
        "        pytest.exit('the shared cluster failed to start', returncode=9)\n"
        "    time.sleep(3)  # gw1: still collecting when gw0 leaves\n")
    (tmp_path / "test_some.py").write_text("def test_one():\n    pass\n\n\ndef test_two():\n    pass\n")
    proc = _pytest(tmp_path / "cache", "-n", "2", str(tmp_path), cwd=tmp_path)
    out = proc.stdout + proc.stderr
    assert proc.returncode == 9, out
    assert "gw0 called pytest.exit: the shared cluster failed to start" in out and "INTERNALERROR" not in out, out


def test_a_test_needing_no_binary_builds_nothing(tmp_path: Path) -> None:
    proc = _pytest(tmp_path / "cache", "tests/cli/test_cli.py::test_help_for_every_command[status]")
    out = proc.stdout + proc.stderr
    assert proc.returncode == 0 and "1 passed" in out, out
    assert "building" not in out and "'go' command" not in out, out


def test_a_second_build_of_a_component_waits_for_the_first_and_reuses_its_binaries(tmp_path: Path) -> None:
    """Two builds at once (make demo beside make test) once rewrote each other's go.mod: the k8s build failed."""
    comp = build.COMPONENTS["kustomize"]
    work = comp.work_dir(tmp_path)
    work.mkdir(parents=True)
    said: list[str] = []
    result: list[Path] = []
    with (work.parent / f"{comp.key}.lock").open("a") as held:
        fcntl.flock(held, fcntl.LOCK_EX)  # "the first build" holds the lock
        waiter = threading.Thread(target=lambda: result.append(build.build(comp, root=tmp_path, progress=said.append)))
        waiter.start()
        waiter.join(timeout=2)
        assert waiter.is_alive() and said and "waiting for another build" in said[0], said
        for name in comp.binaries:  # the first build ends with its binaries in place
            path = comp.path(name, tmp_path)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("#!/bin/sh\n")
            path.chmod(0o755)
    waiter.join(timeout=10)
    assert result == [comp.bin_dir(tmp_path)]
    assert not any(m.startswith("building") for m in said), said  # nothing was built again
