"""The drive's two ports.

:class:`Triggers`: what a trigger may do to the controller, and nothing more: queue a package, ask whether
passes run on their own and whether this engine acts, start a background task. The triggers (the valuesFrom
objects' watches, the repositories' refresh) get this port instead of the controller, so none of them reads
the controller's fields or imports it.

:class:`PackageInput`: where the controller's packages come from: the packages folder
(:class:`~engine.runtime.drive.folder.PackageFolder`) or the API server's Package objects
(:class:`~engine.runtime.drive.objects.PackageObjects`). Both give the same
:class:`~engine.runtime.drive.folder.FolderUpdate`, validated by the one loader (:mod:`engine.package.load`),
so everything after it (the book, the queue, the pass, the gate) is one implementation.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from engine.package.model import PackageSpec
from engine.runtime.drive.folder import FolderUpdate
from engine.runtime.state import ReleaseKey


@dataclass(frozen=True)
class Triggers:
    """``enqueue(key)`` queues a pass of ``key``; ``reconciling()`` is whether passes run on their own (not
    ``reconcile --once``); ``acting()`` whether this engine may act now (the Lease, read-only);
    ``spawn(coroutine)`` runs a task the engine cancels when it stops."""

    enqueue: Callable[[ReleaseKey], None]
    reconciling: Callable[[], bool]
    acting: Callable[[], bool]
    spawn: Callable[[Coroutine[Any, Any, None]], object]

    def acts_on_its_own(self) -> bool:
        """Will a queued package get a pass: the engine both acts and reconciles on its own."""
        return self.acting() and self.reconciling()


class PackageInput(Protocol):
    """``load(touched)`` reads every package now (blocking; ``touched``: the paths known changed, None for
    all) and returns the update; ``watch()`` yields an update per burst of changes until ``stop()``;
    ``removal(spec)`` says, for the release's log, what became of a package an update removed."""

    def load(self, touched: set[Path] | None = None) -> FolderUpdate: ...

    def removal(self, spec: PackageSpec) -> str: ...

    def watch(self) -> AsyncIterator[FolderUpdate]: ...

    def stop(self) -> None: ...
