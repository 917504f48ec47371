"""What the pytest-xdist workers of one session share: one local cluster, one build, the ``serial`` mark.

``make test`` runs the suite in pytest-xdist workers (``-n``), each a pytest session of its own. Resources that
are the session's in a single process are shared by all workers instead, as pytest-xdist's documentation
("Making session-scoped fixtures execute only once") describes: the workers' common directory is their base
temporary directory's parent, and whatever one worker starts there under a file lock the others attach to.

- The local cluster: the first worker to need it starts it (``LocalCluster.up`` under :func:`shared_lock`),
  the others find it running; the workers report its directory and the controller process stops it once,
  after every worker ended (:func:`pytest_testnodedown`, :func:`pytest_sessionfinish`).
- helmdeck's CRDs: applied by one worker at a time. (The build before the first test runs in every worker;
  ``localcluster.build.build`` and ``localcluster.image.build_image`` lock, so the next worker finds it current.)
- ``pytest.mark.serial``: a test that must not run beside any other test (it changes what every test sees,
  or its timing cannot take a second worker's load) takes the workers' turn lock exclusively; every other
  test holds it shared (:func:`_turn`).
- A worker's ``pytest.exit`` (a failed build: ``BUILD_FAILED``) ends the whole run, red, with its reason and its
  return code (:class:`WorkerExit`). pytest-xdist alone drops it: the worker leaves the run, its reason unsaid,
  and the run ends green when the other workers take its tests, or on an INTERNALERROR (exit code 3) when it held
  some.

Without xdist (``pytest tests/x.py``) nothing changes: the session is the only worker and no lock is contended.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from localcluster.cluster import LocalCluster

CLUSTERS = "helmdeck_clusters"  # workeroutput key: the cluster directories a worker attached to
EXITED = "helmdeck_exited"  # workeroutput key: a worker's pytest.exit, [return code or None, reason]


def is_worker(config: pytest.Config) -> bool:
    """Whether this session is a pytest-xdist worker (the controller, or a run without xdist, is not)."""
    return hasattr(config, "workerinput")


def shared_dir(tmp_path_factory: pytest.TempPathFactory, config: pytest.Config) -> Path:
    """The directory every worker of this run sees: the parent of a worker's base temporary directory
    (``<basetemp>/popen-gwN``), the base temporary directory itself without xdist."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if is_worker(config) else base


@contextlib.contextmanager
def shared_lock(path: Path, *, shared: bool = False) -> Iterator[None]:
    """``flock`` on ``path`` (created): exclusive, or ``shared`` with other shared holders; released on exit."""
    with path.open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_SH if shared else fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def cluster_dir(tmp_path_factory: pytest.TempPathFactory, config: pytest.Config) -> Path:
    """The session's cluster state directory: ``$HELMDECK_TEST_CLUSTER_DIR``, else ``cluster`` in the shared
    directory (one for all workers)."""
    explicit = os.environ.get("HELMDECK_TEST_CLUSTER_DIR")
    return Path(explicit) if explicit else shared_dir(tmp_path_factory, config) / "cluster"


def attach_cluster(tmp_path_factory: pytest.TempPathFactory, config: pytest.Config) -> LocalCluster:
    """The shared local cluster: the first worker starts it (``up``: reused if running), the others attach to
    it; a worker records its directory for the controller to stop.

    Only the first calls ``up``: on a loaded machine a later ``up`` could find the running cluster's API server
    slow to answer (``is_ready``'s 5 s) and restart it under the tests of the other workers."""
    state = cluster_dir(tmp_path_factory, config)
    state.parent.mkdir(parents=True, exist_ok=True)
    cluster = LocalCluster(state)
    where = shared_dir(tmp_path_factory, config)
    with shared_lock(where / "cluster.lock"):
        started = where / "cluster.started"  # this run's, even when $HELMDECK_TEST_CLUSTER_DIR is kept between runs
        if not started.exists():
            cluster.up()
            started.write_text(str(state))
    if is_worker(config):
        clusters: list[str] = config.workeroutput.setdefault(CLUSTERS, [])  # type: ignore[attr-defined]
        clusters.append(str(state))
    return cluster


def keep_cluster() -> bool:
    return os.environ.get("HELMDECK_TEST_KEEP_CLUSTER") == "1"


_reported: set[str] = set()  # in the controller: the clusters its workers attached to
_exited: list[tuple[int | None, str]] = []  # in the controller: the workers' pytest.exit, as WorkerExit says it


class WorkerExit:
    """In a pytest-xdist worker: a ``pytest.exit`` there stops the whole run. The worker's session is told to stop
    with the reason (``shouldstop``: xdist's controller then stops scheduling and ends the run Interrupted, saying
    it) and the reason and return code go to the controller (``workeroutput``), which ends with that code
    (:func:`pytest_sessionfinish`). Without it xdist ignores a worker's exit status unless the worker held a test,
    and then fails on an assertion of its own (INTERNALERROR, exit code 3) without the reason."""

    def __init__(self, config: pytest.Config):
        self.config = config
        self.session: pytest.Session | None = None

    def pytest_sessionstart(self, session: pytest.Session) -> None:
        self.session = session

    def pytest_keyboard_interrupt(self, excinfo: pytest.ExceptionInfo[BaseException]) -> None:
        """pytest calls it for a ``pytest.exit`` too, before ``pytest_sessionfinish`` (where xdist's worker sends
        its ``workeroutput`` and ``shouldstop``)."""
        if not isinstance(excinfo.value, pytest.exit.Exception):
            return
        worker = self.config.workerinput["workerid"]  # type: ignore[attr-defined]
        reason = f"{worker} called pytest.exit: {excinfo.value.msg}"
        self.config.workeroutput[EXITED] = [excinfo.value.returncode, reason]  # type: ignore[attr-defined]
        if self.session is not None:
            self.session.shouldstop = reason


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """xdist's controller: a worker ended; note the clusters it attached to (its ``workeroutput``)."""
    output = getattr(node, "workeroutput", {})
    _reported.update(output.get(CLUSTERS, ()))
    if output.get(EXITED):
        code, reason = output[EXITED]
        _exited.append((code, reason))


def pytest_terminal_summary(terminalreporter: Any) -> None:
    """xdist's controller: say which worker ended the run, and why."""
    for code, reason in _exited:
        terminalreporter.write_line(f"{reason}{f' (exit code {code})' if code else ''}", red=True, bold=True)


def pytest_sessionfinish(session: pytest.Session) -> None:
    """xdist's controller, after every worker ended: stop the shared cluster once (unless kept). Besides the
    workers' reports, the marker the first one wrote in the shared directory (the controller's base temporary
    directory: xdist gives worker N ``<basetemp>/popen-gwN``) names it: a run interrupted, or a worker that
    crashed, reports nothing. A worker's ``pytest.exit`` (:class:`WorkerExit`) ends the run with its return code
    (Interrupted when it gave none or 0: tests were left unrun)."""
    if not session.config.pluginmanager.has_plugin("dsession"):
        return  # a worker, or no xdist: the local_cluster fixture stops its own
    if _exited:
        session.exitstatus = next((code for code, _ in _exited if code), pytest.ExitCode.INTERRUPTED)
    if keep_cluster():
        return
    factory: pytest.TempPathFactory | None = getattr(session.config, "_tmp_path_factory", None)
    started = factory.getbasetemp() / "cluster.started" if factory is not None else None
    if started is not None and started.exists():
        _reported.add(started.read_text())
    for state in sorted(_reported):
        LocalCluster(Path(state)).down()
    _reported.clear()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "serial: runs with no other test beside it in another xdist worker")
    if is_worker(config):
        config.pluginmanager.register(WorkerExit(config), "helmdeck-worker-exit")
    else:
        _exited.clear()  # a run of its own (pytester runs several in one process)


@pytest.fixture(autouse=True)
def _turn(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The workers' turn: a ``serial`` test runs alone, the others side by side. A test holds the turn lock
    shared, a serial one exclusively; the gate in front of it (taken briefly by everyone, held by a serial test
    until its turn comes) keeps new tests from starving a waiting serial one."""
    if not is_worker(request.config):
        yield
        return
    where = shared_dir(tmp_path_factory, request.config)
    serial = request.node.get_closest_marker("serial") is not None
    with contextlib.ExitStack() as stack:
        with shared_lock(where / "gate.lock"):
            stack.enter_context(shared_lock(where / "turn.lock", shared=not serial))
        yield
