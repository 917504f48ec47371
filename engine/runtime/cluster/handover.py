"""Packages moving between controller replicas (``--watch-label-selector`` with a Lease, ``--shards auto``): what
this replica does with the packages placed on it now and with those placed elsewhere now.

The shards (:mod:`engine.runtime.cluster.shards`) decide which packages move; :class:`Handover` is what they call
(``gained``, ``lost``), built with the parts it hands the packages to.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from typing import Any

from engine.runtime.cluster.annotation_requests import Requests
from engine.runtime.cluster.finalizer import Finalizers
from engine.runtime.cluster.object_status import StatusWriter
from engine.runtime.cluster.objects import PackageObjects
from engine.runtime.drive.controller import PackageController
from engine.runtime.ledger.book import ReleaseBook
from engine.runtime.ledger.gate import ActionGate
from engine.runtime.state import ReleaseKey
from engine.service import ReleaseService


class Handover:
    """Gained and lost packages of one replica: ``status_writer``, ``finalizers`` and ``requests`` look at the
    gained ones' objects; the ``controller`` queues and monitors them; ``remove_monitor`` (the release
    service's) stops a lost one's monitor; ``spawn`` runs background tasks."""

    def __init__(self, book: ReleaseBook, gate: ActionGate, controller: PackageController, objects: PackageObjects,
                 service: ReleaseService, status_writer: StatusWriter, finalizers: Finalizers, requests: Requests,
                 spawn: Callable[[Coroutine[Any, Any, Any]], object]):
        self._book = book
        self._gate = gate
        self._controller = controller
        self._objects = objects
        self._service = service
        self._status_writer = status_writer
        self._finalizers = finalizers
        self._requests = requests
        self._spawn = spawn

    def gained(self, keys: set[ReleaseKey]) -> None:
        """Packages placed on this replica now: their objects looked at; once started (which reads every status,
        queues and monitors what is placed here), :meth:`_take` them."""
        self._status_writer.forget(keys)
        self._status_writer.catch_up()
        self._finalizers.sweep()
        self._requests.sweep()
        if self._controller.auto:
            self._spawn(self._take(keys))

    async def _take(self, keys: set[ReleaseKey]) -> None:
        """Gained packages: the status the replica that had them persisted is read where it acted since this one
        last did (:meth:`ReleaseBook.reload_status`: no read when storage's latest revision is known here; none
        for a package whose action still runs here), then each is queued at once, not on its interval (the
        takeover after a replica's departure), and monitored."""
        book = self._book
        await asyncio.gather(*(book.reload_status(key) for key in keys if not book.busy(key)))
        if self._gate.acting:
            for key in sorted(keys, key=self._settled):  # equal due times run in the order added
                self._controller.queue.add(key)
        for key in keys:
            self._spawn(self._controller.refresh_monitor(key))

    def _settled(self, key: ReleaseKey) -> bool:
        """Was ``key``'s Package object reconciled at its current spec (``PackageObjects.settled``)? False sorts
        first: after a takeover the edited packages wait for no look at the settled ones."""
        spec = self._book.packages.get(key)
        return spec is None or self._objects.settled(spec.file)

    def lost(self, keys: set[ReleaseKey]) -> None:
        """Packages placed on another replica now: their monitors stop at the pass boundary (at once, or when the
        action running here ends), the new owner's monitor takes over."""
        for key in keys:
            if self._book.busy(key):
                self._spawn(self._unmonitor_after(key))
            else:
                self._service.remove_monitor(*key)

    async def _unmonitor_after(self, key: ReleaseKey) -> None:
        await self._book.released(key)
        if self._gate.placed_elsewhere(key) is not None:
            self._service.remove_monitor(*key)
