"""The maintenance pass, built directly over an offline observer and a fake release service."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from engine.base import wire
from engine.helm import HelmError
from engine.package.model import NO_RESOURCE_RECONCILIATION, PackageSpec
from engine.reconcile import conditions as cond
from engine.reconcile.maintenance import IN_MAINTENANCE, Maintenance
from tests.fake_helm import FakeHelm, offline_context, request


@dataclass(frozen=True)
class Result:
    action: str
    revision: int | None


class FakeService:
    """The release service's smart upgrade: stamps the maintenance label once, then does nothing."""

    def __init__(self, helm: FakeHelm, fail: HelmError | None = None):
        self.helm = helm
        self.fail = fail
        self.calls: list[dict[str, str]] = []

    async def upgrade(self, namespace: str, package: PackageSpec, *,
                      release_labels: Mapping[str, str] | None = None) -> Result:
        self.calls.append(dict(release_labels or {}))
        if self.fail is not None:
            raise self.fail
        latest = self.helm.observer.latest(namespace, package.release_name)
        if latest is not None and latest.label_map.get(wire.MAINTENANCE) == "true":
            return Result("maintenance", latest.version)
        version = (latest.version if latest else 0) + 1
        if latest is not None:
            self.helm.store(latest.version, "superseded")
        self.helm.store(version, "deployed", labels={wire.MAINTENANCE: "true"})
        return Result("upgrade", version)


async def test_entering_maintenance_costs_one_upgrade_then_nothing() -> None:
    ctx, helm, events = offline_context()
    first = helm.store(1, "deployed")
    service = FakeService(helm)
    req = request(history=(first,), maintenance=NO_RESOURCE_RECONCILIATION)
    req.spec_digest, req.package_set = "d" * 32, "set"
    result = await Maintenance(ctx, service).reconcile(req)
    assert result.next == "interval" and result.message == IN_MAINTENANCE
    assert [o.revision for o in result.outcomes] == [2] and result.outcomes[0].action == "maintenance"
    assert service.calls == [{wire.SPEC_DIGEST: "d" * 32, wire.PACKAGE_SET: "set"}]  # only these are passed
    assert [s.version for s in req.status.history.snapshots] == [2, 1]
    ready = cond.get(req.status.conditions, cond.READY)
    assert ready is not None and ready.status == "Unknown" and ready.reason == cond.IN_MAINTENANCE
    assert events[-1][1] == "succeeded"

    again = await Maintenance(ctx, service).reconcile(req)
    assert again.outcomes == () and helm.observer.latest("demo", "web").version == 2  # type: ignore[union-attr]


async def test_a_failing_service_ends_the_pass_with_an_error() -> None:
    ctx, helm, events = offline_context()
    helm.store(1, "deployed")
    service = FakeService(helm, HelmError("render failed", tail=("Error: bad template",)))
    req = request(maintenance=NO_RESOURCE_RECONCILIATION)
    result = await Maintenance(ctx, service).reconcile(req)
    assert (result.state, result.next) == ("Failed", "error")
    assert result.message == "entering maintenance failed: render failed"
    assert events == [("maintenance", "failed", result.message)]
    assert cond.get(req.status.conditions, cond.READY) is None  # conditions untouched
