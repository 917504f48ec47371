"""RepositoryRefresh's decisions over small in-memory inputs: which packages are queued when a repository
offers a new chart, and a failing repository waiting its interval instead of being asked each tick.
(The behaviour end to end, on the local cluster: tests/engine/sources/test_sources_interval.py.)"""

from __future__ import annotations

import asyncio
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from engine.runtime.drive.ports import Triggers
from engine.runtime.drive.repositories import RepositoryRefresh
from engine.sources import ChartRequest, HelmRepositorySpec, SourceUnreachable

FILE = Path("/pk/sources.yaml")
GOOD = HelmRepositorySpec(FILE, "good", "ns", "http://good", interval=60)
DOWN = HelmRepositorySpec(FILE, "down", "ns", "http://down", interval=60)


class Charts:
    """Stands in for ChartSource: every request is due; ``new`` ones changed; DOWN's fail."""

    def __init__(self, new: set[ChartRequest]):
        self.new = new
        self.asked: list[ChartRequest] = []

    def due(self, request: ChartRequest) -> float:
        return 0.0

    async def changed(self, request: ChartRequest) -> bool:
        self.asked.append(request)
        if request.source == DOWN:
            raise SourceUnreachable("cannot reach http://down", repository="down")
        return request in self.new

    def available(self, request: ChartRequest) -> str:
        return f"offered by {request.source.name}"  # what the rows' newer-version markers get


def controller(charts: Charts, packages: dict[tuple[str, str], ChartRequest]) -> Any:
    queued: list[tuple[str, str]] = []
    logged: list[str] = []
    offered: dict[tuple[str, str], str] = {}
    specs = {k: SimpleNamespace(chart_request=r) for k, r in packages.items()}
    specs[("ns", "local")] = SimpleNamespace(chart_request=None)
    return SimpleNamespace(
        charts=charts, queued=queued, logged=logged, offered=offered,
        triggers=Triggers(enqueue=queued.append, reconciling=lambda: True, acting=lambda: True, spawn=print),
        book=SimpleNamespace(packages=specs, log=lambda key, action, outcome, message: logged.append(message),
                             set_offered=offered.__setitem__))


def test_packages_of_a_changed_request_are_queued_and_a_failing_repository_waits() -> None:
    web1, web2, down = ChartRequest(GOOD, "web", "~1.0"), ChartRequest(GOOD, "web", "^2"), ChartRequest(DOWN, "web")
    down2 = ChartRequest(DOWN, "api")
    charts = Charts(new={web1})
    ctl = controller(charts, {("ns", "a"): web1, ("ns", "b"): web1, ("ns", "c"): web2, ("ns", "d"): down,
                              ("ns", "e"): down2})
    refresh = RepositoryRefresh(ctl.book, lambda: ctl.charts, ctl.triggers)

    queued = asyncio.run(refresh.check())
    assert sorted(queued) == [("ns", "a"), ("ns", "b")] == sorted(ctl.queued)
    assert ctl.logged[0] == "HelmRepository ns/good (http://good) offers a new chart: reconciling"
    # One failure of a repository ends its look: the second request of DOWN was not asked.
    assert charts.asked.count(down) + charts.asked.count(down2) == 1
    assert ctl.offered[("ns", "c")] == "offered by good" and ("ns", "local") not in ctl.offered

    charts.new = set()
    charts.asked.clear()
    assert asyncio.run(refresh.check()) == []
    assert set(charts.asked) == {web1, web2}  # DOWN waits its interval


def test_a_follower_refreshes_the_markers_and_queues_nothing() -> None:
    web = ChartRequest(GOOD, "web", "~1.0")
    charts = Charts(new={web})
    ctl = controller(charts, {("ns", "a"): web})
    assert asyncio.run(RepositoryRefresh(ctl.book, lambda: ctl.charts, ctl.triggers).check(queue=False)) == []
    assert ctl.queued == [] and ctl.logged == []
    assert ctl.offered == {("ns", "a"): "offered by good"}
