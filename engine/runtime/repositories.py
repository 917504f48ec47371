"""Repositories looked at on their own ``interval``, as Flux's source-controller refreshes a
HelmRepository or OCIRepository apart from the HelmReleases that use it.

:class:`RepositoryRefresh` wakes every :data:`TICK` seconds; each repository
whose answer is older than its ``spec.interval`` (default 1m) is asked again
(the HTTP index conditionally, the OCI tag list or the tag's manifest), once for
all the packages that use it, and without pulling. A package whose request now
selects another version (or OCI digest) than its last pass resolved is queued at
once, whatever its own package interval; the pass then pulls and upgrades. The
limit of one request per repository per interval is the chart source's own
(:meth:`engine.sources.ChartSource.due`), shared with the passes.
"""

from __future__ import annotations

import asyncio
import logging
from collections import defaultdict
from typing import TYPE_CHECKING

from engine.runtime.state import ReleaseKey
from engine.sources import ChartRequest, SourceError

if TYPE_CHECKING:
    from engine.runtime.controller import PackageController

log = logging.getLogger(__name__)

# How often due repositories are looked for, seconds: a new version is seen within interval + TICK.
TICK = 1.0


class RepositoryRefresh:
    """Refreshes the repositories of ``controller``'s packages and queues the packages whose chart changed.

    Idle while the controller does not reconcile on its own (``reconcile --once``, a follower, read-only).
    """

    def __init__(self, controller: PackageController, tick: float = TICK):
        self.controller = controller
        self.tick = tick

    async def run(self) -> None:
        """Loop until cancelled (the engine's background tasks)."""
        while True:
            await asyncio.sleep(self.tick)
            ctl = self.controller
            if ctl.auto and ctl.gate.acting:
                await self.check()

    def requests(self) -> dict[ChartRequest, list[ReleaseKey]]:
        """The chart requests of the loaded packages, each with the packages that make it."""
        out: defaultdict[ChartRequest, list[ReleaseKey]] = defaultdict(list)
        for key, spec in self.controller.book.packages.items():
            if spec.chart_request is not None:
                out[spec.chart_request].append(key)
        return out

    async def check(self) -> list[ReleaseKey]:
        """One look at the due repositories; returns the packages queued (a new version or digest)."""
        charts = self.controller.charts
        by_request = self.requests()
        # Due before anything is asked: the first request to a repository makes it fresh for the rest.
        due = [r for r in by_request if charts.due(r) <= 0]
        queued: list[ReleaseKey] = []
        for request in due:
            try:
                changed = await charts.changed(request)
            except SourceError as exc:  # the package's own pass reports it, with Flux's reason
                log.debug("refreshing %s: %s", request.describe(), exc)
                continue
            if changed:
                for key in by_request[request]:
                    self.controller.book.log(key, "source", "info",
                                             f"{request.source.describe()} offers a new chart: reconciling")
                    self.controller.queue.add(key)
                    queued.append(key)
        return queued
