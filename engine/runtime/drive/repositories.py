"""Repositories looked at on their own ``interval``, as Flux's source-controller refreshes a
HelmRepository or OCIRepository apart from the HelmReleases that use it.

:class:`RepositoryRefresh` wakes every :data:`TICK` seconds; each repository
whose answer is older than its ``spec.interval`` (default 1m) is asked again
(the HTTP index conditionally, the OCI tag list or the tag's manifest), once for
all the packages that use it, and without pulling. A package whose request now
selects another version (or OCI digest) than its last pass resolved is queued at
once, whatever its own package interval; the pass then pulls and upgrades. The
limit of one request per repository per interval is the chart source's own
(:meth:`engine.sources.ChartSource.due`), shared with the passes. What a repository
offers also refreshes its packages' newer-version markers
(:meth:`ReleaseBook.set_offered`), a version outside the range included.
"""

from __future__ import annotations

import asyncio
import logging
import math
from collections import defaultdict
from collections.abc import Callable
from typing import TYPE_CHECKING

from engine.runtime.drive.ports import Triggers
from engine.runtime.ledger.book import ReleaseBook
from engine.runtime.state import ReleaseKey
from engine.sources import ChartRequest, SourceError, SourceSpec

if TYPE_CHECKING:
    from engine.sources.source import ChartSource

log = logging.getLogger(__name__)

# How often due repositories are looked for, seconds: a new version is seen within interval + TICK.
TICK = 1.0


class RepositoryRefresh:
    """Refreshes the repositories of the ``book``'s packages through ``charts()`` and queues (``triggers``)
    the packages whose chart changed.

    Idle while the engine does not reconcile on its own (``reconcile --once``); a follower or a
    read-only instance refreshes the newer-version markers only (it queues nothing).
    """

    def __init__(self, book: ReleaseBook, charts: Callable[[], ChartSource], triggers: Triggers,
                 tick: float = TICK):
        self.book = book
        self._charts = charts  # called when a package first names a repository: no pull code imported before
        self.triggers = triggers
        self.tick = tick
        self._failed: dict[SourceSpec, float] = {}  # loop time of a repository's last failed refresh

    async def run(self) -> None:
        """Loop until cancelled (the engine's background tasks)."""
        while True:
            await asyncio.sleep(self.tick)
            if self.triggers.reconciling():
                await self.check(queue=self.triggers.acting())

    def requests(self) -> dict[ChartRequest, list[ReleaseKey]]:
        """The chart requests of the loaded packages, each with the packages that make it."""
        out: defaultdict[ChartRequest, list[ReleaseKey]] = defaultdict(list)
        for key, spec in self.book.packages.items():
            if spec.chart_request is not None:
                out[spec.chart_request].append(key)
        return out

    async def check(self, *, queue: bool = True) -> list[ReleaseKey]:
        """One look at the due repositories, each on its own (a slow one delays no other); returns the
        packages queued (a new version or digest; none without ``queue``)."""
        by_request = self.requests()
        if not by_request:
            return []
        charts = self._charts()
        now = asyncio.get_running_loop().time()
        # Due before anything is asked: the first request to a repository makes it fresh for the rest. A
        # repository that failed waits its interval too (a failure leaves its answer stale).
        due: defaultdict[SourceSpec, list[ChartRequest]] = defaultdict(list)
        for request in by_request:
            source = request.source
            if charts.due(request) <= 0 and now - self._failed.get(source, -math.inf) >= source.interval:
                due[source].append(request)
        changed = await asyncio.gather(*(self._changed(source, requests) for source, requests in due.items()))
        for requests in due.values():  # what each repository offers now: the rows' newer-version markers
            for request in requests:
                offered = charts.available(request)
                for key in by_request[request]:
                    self.book.set_offered(key, offered)
        queued: list[ReleaseKey] = []
        for request in (r for found in changed for r in found if queue):
            for key in by_request[request]:
                self.book.log(key, "source", "info",
                                         f"{request.source.describe()} offers a new chart: reconciling")
                self.triggers.enqueue(key)
                queued.append(key)
        return queued

    async def _changed(self, source: SourceSpec, requests: list[ChartRequest]) -> list[ChartRequest]:
        """The requests of ``source`` that now select another chart; the first failure ends the look."""
        found = []
        for request in requests:
            try:
                if await self._charts().changed(request):
                    found.append(request)
            except SourceError as exc:  # the package's own pass reports it, with Flux's reason
                self._failed[source] = asyncio.get_running_loop().time()
                log.debug("refreshing %s: %s", source.describe(), exc)
                return found
        self._failed.pop(source, None)
        return found
