"""An in-memory helm over an offline observer, for tests that build one action reconciler directly.

As Flux's reconciler tests run each reconciler against helm's action
package with in-memory storage, these run a reconciler against
:class:`FakeHelm`, which writes the records helm would write (through the
real codec) into an offline :class:`~engine.storage.observer.Observer`.
Each call is recorded; ``fail`` makes the next calls raise after writing
what ``write`` says (helm can fail and still have stored a release).
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.helm import BEFORE_SPAWN, HelmError
from engine.package.model import PackageSpec
from engine.reconcile.action import ActionContext
from engine.reconcile.request import Request
from engine.reconcile.status import EngineStatus
from engine.sources.chart import Chart
from engine.storage.observation import Observation
from engine.storage.observer import Observer
from engine.storage.snapshot import History, Snapshot
from tests.storage_records import release, secret

NS, NAME = "demo", "web"
KEY = (NS, NAME)
CHART = Chart(Path("charts/web"), "web", "0.2.0", "1.27", "sha256:" + "0" * 64)



def _spawn() -> None:
    """Where the real helm spawns its process: the caller's BEFORE_SPAWN check is asked (engine.helm.cli)."""
    check = BEFORE_SPAWN.get()
    if check is not None:
        check()

@dataclass
class FakeHelm:
    """Writes release records as helm would; see the module docstring.

    ``write``: the status the next install/upgrade/rollback stores (None:
    stores nothing). ``fail``: raised after writing. ``test_phase``: the
    phase ``test`` leaves on the release's test hook.
    """

    observer: Observer
    write: str | None = "deployed"
    fail: HelmError | None = None
    test_phase: str = "Succeeded"
    calls: list[tuple[str, Any]] = field(default_factory=list)
    _rv: Any = field(default_factory=lambda: itertools.count(100))

    def store(self, version: int, status: str, *, hooks: list[dict[str, Any]] | None = None,
              labels: dict[str, str] | None = None, **extra: Any) -> Observation:
        """Store revision ``version`` of demo/web as helm writes it; returns what the observer holds."""
        rel = release(version, status, NAME, NS, hooks=hooks or [], **extra)
        self.observer.apply_object(secret(rel, labels, rv=str(next(self._rv))))
        latest = self.observer.history(NS, NAME)
        return next(o for o in latest if o.version == version)

    def _latest(self) -> Observation | None:
        return self.observer.latest(NS, NAME)

    def _new_revision(self, status: str | None, **extra: Any) -> None:
        latest = self._latest()
        if status is None:
            return
        if latest is not None and latest.status == "deployed" and status == "deployed":
            self.store(latest.version, "superseded")
        self.store((latest.version if latest else 0) + 1, status, **extra)

    def _done(self) -> None:
        if self.fail is not None:
            raise self.fail

    async def install(self, release_: str, namespace: str, chart: Path, values: dict[str, Any], opts: Any) -> None:
        _spawn()
        self.calls.append(("install", opts))
        self._new_revision(self.write, config=values)
        self._done()

    async def upgrade(self, release_: str, namespace: str, chart: Path, values: dict[str, Any], opts: Any) -> None:
        _spawn()
        self.calls.append(("upgrade", opts))
        self._new_revision(self.write, config=values)
        self._done()

    async def rollback(self, release_: str, namespace: str, revision: int, opts: Any) -> None:
        _spawn()
        self.calls.append(("rollback", revision))
        self._new_revision(self.write)
        self._done()

    async def uninstall(self, release_: str, namespace: str, opts: Any = None) -> None:
        _spawn()
        self.calls.append(("uninstall", opts))
        latest = self._latest()
        if latest is not None:
            self.store(latest.version, "uninstalled")
        self._done()

    async def test(self, release_: str, namespace: str, *, timeout: float = 300.0, filters: Any = (),
                   kube_as_user: str = "") -> str:
        _spawn()
        self.calls.append(("test", filters))
        latest = self._latest()
        if latest is not None:
            hook = {"name": "web-test", "kind": "Pod", "path": "web/templates/tests/t.yaml", "events": ["test"],
                    "last_run": {"phase": self.test_phase, "started_at": "2026-11-30T10:06:00Z",
                                 "completed_at": "2026-11-30T10:06:05Z"}}
            self.store(latest.version, latest.status, hooks=[hook])
        self._done()
        return ""


def offline_context() -> tuple[ActionContext, FakeHelm, list[tuple[str, str, str]]]:
    """An action context over an offline observer and a fake helm; the list collects its events."""
    observer = Observer(None, driver="secret")
    helm = FakeHelm(observer)
    events: list[tuple[str, str, str]] = []
    ctx = ActionContext(helm=helm, observer=observer, api=None,
                        events=lambda action, outcome, message, _tail: events.append((action, outcome, message)))
    return ctx, helm, events


def request(*, history: tuple[Observation, ...] = (), **spec: Any) -> Request:
    """A request for demo/web with ``spec`` fields and ``history`` (newest first) as our snapshots."""
    package = PackageSpec(Path("web.yaml"), NAME, NS, CHART.path, NAME, **spec)
    status = EngineStatus(history=History(tuple(Snapshot.from_observation(o) for o in history)))
    return Request(package, CHART, {"replicas": 2}, "d" * 32, status)
