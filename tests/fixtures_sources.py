"""Fixed engine state with charts from repositories (tests/data/sources-packages), for the snapshot tests of
where a chart comes from: the Overview's source line, the CHART column's newer-version marker, the picker.

``shop/web`` comes from a HelmRepository with range ``^0.2`` and has 0.2.0 deployed: its repository offers
0.2.1 (inside the range) and 0.3.0 (outside). ``shop/api`` comes from an OCIRepository with semver ``~1.0``
and has 1.0.0 deployed: its registry offers 1.0.3 (inside). What the repositories offer is given as the
engine learns it after a resolve (``book.set_offered``); their version lists as ``ChartSource.versions``
answers.
"""

from __future__ import annotations

from pathlib import Path

from engine.runtime import Engine
from engine.runtime.state import Condition, ReleaseKey
from engine.sources import ChartRequest, ChartVersionInfo
from engine.sources.updates import available
from engine.storage.observer import Observer
from tests.fixtures import FIXED_NOW, set_engine_status, storage_secret

SOURCES_PACKAGES = Path(__file__).resolve().parent / "data" / "sources-packages"
SHOP_WEB: ReleaseKey = ("shop", "web")
SHOP_API: ReleaseKey = ("shop", "api")
OFFERED = {
    "web": [ChartVersionInfo("0.3.0", "2.1.0", "2026-11-29T08:00:00Z"),
            ChartVersionInfo("0.2.1", "2.0.1", "2026-11-20T08:00:00Z"),
            ChartVersionInfo("0.2.0", "2.0.0", "2026-11-02T08:00:00Z"),
            ChartVersionInfo("0.1.0", "1.9.0", "2026-10-01T08:00:00Z")],
    "api": [ChartVersionInfo("1.0.3", "5.2.3", "2026-11-28T12:00:00Z"),
            ChartVersionInfo("1.0.0", "5.2.0", "2026-11-01T12:00:00Z")],
}


def _chart(request: ChartRequest) -> str:
    return request.chart or request.source.name


def sources_engine() -> Engine:
    """An engine that is never started, with the two remote packages deployed and InSync."""
    observer = Observer(None)
    engine = Engine.offline(SOURCES_PACKAGES, observer=observer)
    observer.apply_object(storage_secret("web", "shop", 1, "deployed", "web", "0.2.0", "2.0.0", {"replicas": 2},
                                         "2026-11-30T09:10:00Z", "Install complete"))
    observer.apply_object(storage_secret("api", "shop", 1, "deployed", "api", "1.0.0", "5.2.0", {},
                                         "2026-11-30T09:12:00Z", "Install complete"))
    for key in (SHOP_WEB, SHOP_API):
        ready = Condition("Ready", "True", "InstallSucceeded", "Helm install succeeded for revision 1",
                          FIXED_NOW - 50 * 60)
        set_engine_status(engine, key, state="InSync", conditions=(ready,))
        request = engine.packages[key].chart_request
        assert request is not None
        engine.book.set_offered(key, available(request, tuple(v.version for v in OFFERED[_chart(request)])))

    async def versions(request: ChartRequest) -> list[ChartVersionInfo]:
        return OFFERED[_chart(request)]

    engine.controller.charts.versions = versions  # type: ignore[method-assign]
    return engine
