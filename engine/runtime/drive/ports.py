"""The drive's two ports, and what the package input gives.

:class:`Triggers`: what a trigger may do to the controller, and nothing more: queue a package, ask whether
passes run on their own and whether this engine acts, start a background task. The triggers (the valuesFrom
objects' watches, the repositories' refresh) get this port instead of the controller, so none of them reads
the controller's fields or imports it.

:class:`PackageInput`: where the controller's packages come from: the packages folder
(:class:`~engine.runtime.drive.folder.PackageFolder`) or the API server's Package objects
(:class:`~engine.runtime.cluster.objects.PackageObjects`). Both give the same
:class:`InputUpdate`, validated by the one loader (:mod:`engine.package.load`),
so everything after it (the book, the queue, the pass, the gate) is one implementation.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from engine.base.fields import PackageError
from engine.package.model import PackageSpec
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


@dataclass(frozen=True)
class InputUpdate:
    """The outcome of a (re)load of a package input (the folder, a kustomize build, the Package objects).

    ``specs``: every effective package by release key; ``changed``: keys whose
    spec or inputs changed (new packages included); ``removed``: keys no file
    declares any more; ``errors``: every current problem (bad files keep their
    last good specs in ``specs``); ``skipped``: the objects of other kinds, in one line.
    """

    specs: dict[ReleaseKey, PackageSpec]
    changed: frozenset[ReleaseKey] = frozenset()
    removed: frozenset[ReleaseKey] = frozenset()
    errors: tuple[PackageError, ...] = ()
    paths: frozenset[Path] = field(default=frozenset())
    skipped: str = ""  # one line: the kinds of the objects skipped and how many of each ("" when none)
    left_out: tuple[str, ...] = ()  # Flux fields left out with --allow-unsupported, one warning each


class PackageInput(Protocol):
    """``load(touched)`` reads every package now (blocking; ``touched``: the paths known changed, None for
    all) and returns the update; ``watch()`` yields an update per burst of changes until ``stop()``;
    ``removal(spec)`` says, for the release's log, what became of a package an update removed."""

    def load(self, touched: set[Path] | None = None) -> InputUpdate: ...

    def removal(self, spec: PackageSpec) -> str: ...

    def watch(self) -> AsyncIterator[InputUpdate]: ...

    def stop(self) -> None: ...
