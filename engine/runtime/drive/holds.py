"""``spec.dependsOn`` at pass time: a package whose dependencies are not Ready is held (Ready=False,
``DependencyNotReady``, the release left alone) and passed again when one turns Ready, as Flux's
helm-controller holds a HelmRelease (``--requeue-dependency``). Parsing and the load-time checks are
:mod:`engine.package.depends` and :mod:`engine.package.order`."""

from __future__ import annotations

import dataclasses

from engine.package.depends import Dependency, PackageId
from engine.package.model import PackageSpec
from engine.package.order import package_id, waiting_for
from engine.reconcile import conditions as cond
from engine.reconcile.atomic import PassResult
from engine.reconcile.status import EngineStatus
from engine.runtime.ledger.book import ReleaseBook
from engine.runtime.state import EngineSignal, ReleaseKey, ReleaseUpdated

# A package held for its dependencies looks again this often even without a trigger (Flux's
# --requeue-dependency default), seconds.
DEPENDENCY_RETRY = 30.0


class DependencyHolds:
    """The dependencies of the ``book``'s packages: which are Ready, what a package waits for, its hold."""

    def __init__(self, book: ReleaseBook):
        self._book = book
        self._ready: dict[ReleaseKey, bool | None] = {}  # each package's Ready as last announced

    def key_of(self, pid: PackageId) -> ReleaseKey | None:
        """The release key of the package ``(namespace, metadata.name)``, None when none is loaded."""
        return next((k for k, s in self._book.packages.items() if package_id(s) == pid), None)

    def ready(self, pid: PackageId) -> bool | None:
        """Is the package ``pid`` Ready now (its Ready condition True)? None: no such package."""
        key = self.key_of(pid)
        if key is None:
            return None
        status = self._book.status(key)
        return status is not None and cond.is_true(status.conditions, cond.READY)

    def waiting(self, spec: PackageSpec) -> list[Dependency]:
        """The dependencies ``spec`` waits for (not Ready now)."""
        return waiting_for(spec, self.ready)

    def message(self, waiting: list[Dependency]) -> str:
        """``waiting for ns/base (not Ready: <its Ready message>)``, one clause per dependency."""
        parts = []
        for dep in waiting:
            key = self.key_of(dep.id)
            status = self._book.status(key) if key is not None else None
            ready = cond.get(status.conditions, cond.READY) if status is not None else None
            why = "not found" if key is None else f"not Ready: {ready.message}" if ready is not None and \
                ready.message else "not reconciled yet"
            parts.append(f"{dep} ({why})")
        return "waiting for " + ", ".join(parts)

    def hold(self, key: ReleaseKey, waiting: list[Dependency]) -> PassResult:
        """Ready=False (DependencyNotReady) naming what ``key`` waits for; the release is left alone."""
        book = self._book
        message = self.message(waiting)
        status = book.status(key) or EngineStatus()
        before = cond.get(status.conditions, cond.READY)
        if before is None or before.reason != cond.DEPENDENCY_NOT_READY or before.message != message:
            book.log(key, "reconcile", "info", message)  # said once per change, not at every retry
        conds = cond.set_condition(status.conditions, cond.READY, False, cond.DEPENDENCY_NOT_READY, message)
        book.set_status(key, dataclasses.replace(status, conditions=conds))
        return PassResult(cond.DEPENDENCY_NOT_READY, "interval", message)

    def released(self, event: EngineSignal) -> list[ReleaseKey]:
        """The book's signal ``event``: when a package's Ready turned True, the packages that depend on it (to
        pass again at once); else none."""
        if not isinstance(event, ReleaseUpdated) or event.view.package is None:
            return []
        key, ready = event.view.key, event.view.ready
        was, self._ready[key] = self._ready.get(key), ready
        if ready is not True or was is True:
            return []
        pid = package_id(event.view.package)
        return [other for other, spec in self._book.packages.items() if any(d.id == pid for d in spec.depends_on)]
