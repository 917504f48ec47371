"""The release service against the real cluster and real helm: smart upgrade, monitors, maintenance, cleanup."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections import Counter
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from engine.base import wire
from engine.helm import Helm
from engine.helm.postrender_plugin import PostRendererLayout, install
from engine.kube.client import KubeTarget, api_client
from engine.monitor.status import MonitorStatus
from engine.package.load import load_package
from engine.package.model import PackageSpec
from engine.service import MaintenanceState, PackageNotHelm, ReleaseService
from testkit.packages import write_package
from tests.conftest import helm_binary, run_helm

pytestmark = pytest.mark.cluster

CHART = {
    "Chart.yaml": "apiVersion: v2\nname: pair\nversion: 0.1.0\n",
    "values.yaml": "a: one\nb: two\n",
    "templates/a.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-a\n"
                        "data:\n  value: {{ .Values.a | quote }}\n",
    "templates/b.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-b\n"
                        "data:\n  value: {{ .Values.b | quote }}\n",
}
# A pre-delete hook the API server rejects: uninstalling this release fails.
FAILING_HOOK = ("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: Not_Valid\n"
                "  annotations:\n    helm.sh/hook: pre-delete\n")


class CountingHelm(Helm):
    """The real helm, counting the calls made through it (a spy, not a mock)."""

    def __init__(self, *args: Any, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.calls: Counter[str] = Counter()

    async def upgrade(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.calls["upgrade"] += 1
        return await super().upgrade(*args, **kwargs)

    async def template(self, *args: Any, **kwargs: Any) -> str:
        self.calls["render"] += 1
        return await super().template(*args, **kwargs)

    async def dry_run(self, *args: Any, **kwargs: Any) -> dict[str, Any]:
        self.calls["render"] += 1  # the server-side dry run every online render is
        return await super().dry_run(*args, **kwargs)


@dataclass
class Recorder:
    """What the service's callbacks delivered, with arrival times (monotonic seconds)."""

    absent: list[tuple[str, str, float]] = field(default_factory=list)
    statuses: list[tuple[str, MonitorStatus]] = field(default_factory=list)
    arrived: asyncio.Event = field(default_factory=asyncio.Event)

    def on_absent(self, namespace: str, name: str) -> None:
        assert threading.current_thread() is threading.main_thread()  # handed over to the loop
        self.absent.append((namespace, name, time.monotonic()))
        self.arrived.set()

    def on_status(self, namespace: str, name: str, status: MonitorStatus) -> None:
        self.statuses.append((name, status))

    async def wait_absent(self, count: int, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while len(self.absent) < count:
            self.arrived.clear()
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            try:
                await asyncio.wait_for(self.arrived.wait(), left)
            except TimeoutError:
                return False
        return True


@dataclass
class Setup:
    helm: CountingHelm
    api: client.ApiClient
    core: client.CoreV1Api
    layout: PostRendererLayout
    folder: Path
    services: list[ReleaseService] = field(default_factory=list)

    def service(self, recorder: Recorder | None = None, **kwargs: Any) -> ReleaseService:
        rec = recorder or Recorder()
        svc = ReleaseService(self.helm, self.api, on_absent=rec.on_absent, on_status=rec.on_status,
                             post_renderer=self.layout, **kwargs)
        self.services.append(svc)
        return svc

    def chart(self, name: str = "pair", extra: dict[str, str] | None = None) -> Path:
        root = self.folder / "charts" / name
        for rel, text in {**CHART, **(extra or {})}.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text)
        return root

    def package(self, namespace: str, name: str, chart: Path, values: dict[str, Any] | None = None,
                maintenance: str = "") -> PackageSpec:
        return load_package(write_package(self.folder, name, namespace, file=f"{namespace}-{name}.yaml", chart=chart,
                                          values=values or {}, maintenance=maintenance, timeout="30s"))

    def revisions(self, namespace: str, name: str) -> dict[int, dict[str, str]]:
        """Stored revision -> storage labels, read from the API."""
        items = self.core.list_namespaced_secret(namespace, label_selector=f"owner=helm,name={name}").items
        return {int((s.metadata.labels or {})["version"]): dict(s.metadata.labels or {})
                for s in items if s.metadata is not None}

    def configmap(self, namespace: str, name: str) -> client.V1ConfigMap | None:
        try:
            return self.core.read_namespaced_config_map(name, namespace)
        except client.ApiException as exc:
            if exc.status == 404:
                return None
            raise


def cm_labels(cm: client.V1ConfigMap | None) -> dict[str, str]:
    return dict((cm.metadata.labels if cm is not None and cm.metadata is not None else None) or {})


def cm_data(cm: client.V1ConfigMap | None) -> dict[str, str]:
    return dict((cm.data if cm is not None else None) or {})


@pytest.fixture(scope="session")
def layout(tmp_path_factory: pytest.TempPathFactory) -> PostRendererLayout:
    return install(tmp_path_factory.mktemp("helmdeck-cache"))


def make_setup(component: str, kube_target: KubeTarget, helm_home: dict[str, str], layout: PostRendererLayout,
               folder: Path) -> Setup:
    api = api_client(kube_target)
    return Setup(CountingHelm(helm_binary(component), kube_target, helm_home), api, client.CoreV1Api(api),
                 layout, folder)


@pytest.fixture(params=["helm4", "helm3"])
async def any_setup(request: pytest.FixtureRequest, kube_target: KubeTarget, helm_home: dict[str, str],
                    layout: PostRendererLayout, tmp_path: Path) -> AsyncIterator[Setup]:
    s = make_setup(request.param, kube_target, helm_home, layout, tmp_path)
    yield s
    for svc in s.services:
        assert svc.stop_monitors()


@pytest.fixture
async def setup(kube_target: KubeTarget, helm_home: dict[str, str], layout: PostRendererLayout,
                tmp_path: Path) -> AsyncIterator[Setup]:
    s = make_setup("helm4", kube_target, helm_home, layout, tmp_path)
    yield s
    for svc in s.services:
        assert svc.stop_monitors()


@pytest.fixture
def second_namespace(core_api: client.CoreV1Api) -> Iterator[str]:
    name = f"t-second-{uuid.uuid4().hex[:6]}"
    core_api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))
    yield name
    core_api.delete_namespace(name, propagation_policy="Background")


async def test_smart_upgrade_renders_and_upgrades_only_on_change(any_setup: Setup, namespace: str) -> None:
    s = any_setup
    chart = s.chart()
    svc = s.service()
    pkg = s.package(namespace, "app", chart, {"a": "first"})

    first = await svc.upgrade(namespace, pkg)
    assert (first.action, first.revision, s.helm.calls["upgrade"], s.helm.calls["render"]) == ("install", 1, 1, 1)
    stored = s.revisions(namespace, "app")[1]
    assert stored[wire.MANIFEST_CHECKSUM] == first.checksum and len(first.checksum) == 32
    assert int(first.checksum, 16) >= 0
    assert (stored[wire.MANAGED_BY], stored[wire.PACKAGE], stored[wire.MAINTENANCE]) == \
        ("helmdeck", "app", "false")
    assert cm_labels(s.configmap(namespace, "app-a"))[wire.ORIGIN_NAME] == "app"
    assert cm_labels(s.configmap(namespace, "app-b"))[wire.ORIGIN_NAMESPACE] == namespace
    assert svc.has_monitor(namespace, "app")

    # Unchanged: no helm upgrade, no new revision, and (cache warm) no render either.
    again = await svc.upgrade(namespace, pkg)
    assert (again.action, again.checksum) == ("none", first.checksum)
    assert (s.helm.calls["upgrade"], s.helm.calls["render"]) == (1, 1)
    assert sorted(s.revisions(namespace, "app")) == [1]
    # A new service (cold cache): spec first, as Flux — the spec digest label matches, so no render either.
    cold = s.service()
    assert (await cold.upgrade(namespace, pkg)).action == "none"
    assert (s.helm.calls["upgrade"], s.helm.calls["render"]) == (1, 1)
    assert cold.stop_monitors()

    # Any chart file change changes the spec: one render; an output-neutral one then costs no upgrade
    # (Deckhouse's smart upgrade).
    (chart / "README.md").write_text("notes\n")
    assert (await svc.upgrade(namespace, pkg)).action == "none"
    assert (s.helm.calls["upgrade"], s.helm.calls["render"]) == (1, 2)
    # Same for a values change the templates ignore.
    unused = s.package(namespace, "app", chart, {"a": "first", "unused": 1})
    assert (await svc.upgrade(namespace, unused)).action == "none"
    assert (s.helm.calls["upgrade"], s.helm.calls["render"]) == (1, 3)

    # Changed values: exactly one upgrade, one new revision, new checksum.
    changed = s.package(namespace, "app", chart, {"a": "second"})
    up = await svc.upgrade(namespace, changed, release_labels={"example.com/extra": "x", wire.MAINTENANCE: "no"})
    assert (up.action, up.revision) == ("upgrade", 2) and "the rendered manifest changed" in up.reason
    assert up.checksum != first.checksum
    assert s.helm.calls["upgrade"] == 2
    assert s.revisions(namespace, "app")[2][wire.MANIFEST_CHECKSUM] == up.checksum
    assert s.revisions(namespace, "app")[2]["example.com/extra"] == "x"
    assert s.revisions(namespace, "app")[2][wire.MAINTENANCE] == "false"  # helmdeck's keys win
    assert cm_data(s.configmap(namespace, "app-a")) == {"value": "second"}
    assert (await svc.upgrade(namespace, changed)).action == "none"
    assert s.helm.calls["upgrade"] == 2

    # render() is what an upgrade would apply now: post-rendered, an upgrade of revision 2 (a new render:
    # .Release.Revision changed), then from the cache.
    rendered = await svc.render(namespace, changed)
    assert f'"{wire.ORIGIN_NAME}": "app"' in rendered and "second" in rendered
    assert s.helm.calls["render"] == 5
    assert await svc.render(namespace, changed) == rendered and s.helm.calls["render"] == 5


async def test_deleted_resource_is_reported_in_2s_once_and_restored(setup: Setup, namespace: str) -> None:
    rec = Recorder()
    svc = setup.service(rec)
    pkg = setup.package(namespace, "app", setup.chart())
    await svc.upgrade(namespace, pkg)
    assert svc.monitor_status(namespace, "app").summary() == "active"

    start = time.monotonic()
    setup.core.delete_namespaced_config_map("app-a", namespace)
    setup.core.delete_namespaced_config_map("app-b", namespace)
    assert await rec.wait_absent(1, 2.0), "deletion not reported within 2 s"
    assert rec.absent[0][:2] == (namespace, "app") and rec.absent[0][2] - start < 2.0
    await asyncio.sleep(0.5)
    assert len(rec.absent) == 1  # two deletions, one scheduled reconcile
    status = svc.monitor_status(namespace, "app")
    assert sorted(status.absent) == [f"ConfigMap/{namespace}/app-a", f"ConfigMap/{namespace}/app-b"]
    assert rec.statuses[-1] == ("app", status)

    restored = await svc.upgrade(namespace, pkg)
    assert restored.action == "upgrade" and restored.reason.startswith("absent resources")
    assert setup.configmap(namespace, "app-a") is not None and setup.configmap(namespace, "app-b") is not None
    assert svc.monitor_status(namespace, "app").absent == ()
    assert (await svc.upgrade(namespace, pkg)).action == "none"
    # The report was consumed by the upgrade: a new deletion is reported again.
    setup.core.delete_namespaced_config_map("app-a", namespace)
    assert await rec.wait_absent(2, 2.0)


async def test_pause_counter(setup: Setup, namespace: str) -> None:
    rec = Recorder()
    svc = setup.service(rec)
    chart = setup.chart()
    pkg = setup.package(namespace, "app", chart)
    await svc.upgrade(namespace, pkg)

    assert svc.pause_monitor(namespace, "app") == 1
    assert svc.pause_monitor(namespace, "app") == 2
    setup.core.delete_namespaced_config_map("app-a", namespace)
    assert not await rec.wait_absent(1, 1.5)
    assert svc.monitor_status(namespace, "app") == MonitorStatus("paused", 2)
    # A paused monitor reports nothing, so a reconcile meanwhile leaves the deletion alone.
    assert (await svc.upgrade(namespace, pkg)).action == "none"
    assert svc.resume_monitor(namespace, "app") == 1  # paused twice, resumed once: still paused
    assert not await rec.wait_absent(1, 1.0)
    assert svc.monitor_status(namespace, "app").state == "paused"

    assert svc.resume_monitor(namespace, "app") == 0  # at zero it looks again at once
    assert await rec.wait_absent(1, 2.0)
    assert svc.resume_monitor(namespace, "app") == 0  # never below zero
    assert (await svc.upgrade(namespace, pkg)).action == "upgrade"
    assert setup.configmap(namespace, "app-a") is not None

    # Replacing the monitor (an upgrade) keeps the count, so a pause/resume pair stays balanced.
    with svc.monitor_paused(namespace, "app"):
        up = await svc.upgrade(namespace, setup.package(namespace, "app", chart, {"a": "changed"}))
        assert up.action == "upgrade" and svc.monitor_status(namespace, "app") == MonitorStatus("paused", 1)
    assert svc.monitor_status(namespace, "app").summary() == "active"


@pytest.mark.timeout(120)
async def test_maintenance_enter_leave_and_hand_edits(any_setup: Setup, namespace: str) -> None:
    s = any_setup
    chart = s.chart()
    rec = Recorder()
    svc = s.service(rec)
    managed = s.package(namespace, "app", chart)
    held = s.package(namespace, "app", chart, maintenance=MaintenanceState.NoResourceReconciliation)
    await svc.upgrade(namespace, managed)

    enter = await svc.upgrade(namespace, held)
    assert (enter.action, enter.revision) == ("upgrade", 2)
    assert s.revisions(namespace, "app")[2][wire.MAINTENANCE] == "true"
    assert all(cm_labels(s.configmap(namespace, n))[wire.RESOURCE_MAINTENANCE] == "true"
               for n in ("app-a", "app-b"))
    assert not svc.has_monitor(namespace, "app")
    assert svc.monitor_status(namespace, "app").state == "off"

    # Hand edits and deletions stay: nothing is rendered, upgraded or reported.
    s.core.patch_namespaced_config_map("app-a", namespace, {"data": {"value": "by hand"}})
    s.core.delete_namespaced_config_map("app-b", namespace)
    calls = dict(s.helm.calls)
    assert (await svc.upgrade(namespace, held)).action == "maintenance"
    # ... also after a restart: a new service knows from the release label.
    restarted = s.service(rec)
    again = await restarted.upgrade(namespace, held)
    assert (again.action, again.revision) == ("maintenance", 2)
    assert dict(s.helm.calls) == calls and sorted(s.revisions(namespace, "app")) == [1, 2]
    assert cm_data(s.configmap(namespace, "app-a")) == {"value": "by hand"}
    assert s.configmap(namespace, "app-b") is None and rec.absent == []

    leave = await restarted.upgrade(namespace, managed)
    assert (leave.action, leave.revision) == ("upgrade", 3)
    assert s.revisions(namespace, "app")[3][wire.MAINTENANCE] == "false"
    assert cm_data(s.configmap(namespace, "app-a")) == {"value": "one"}
    assert wire.RESOURCE_MAINTENANCE not in cm_labels(s.configmap(namespace, "app-b"))
    assert restarted.has_monitor(namespace, "app")
    assert (await restarted.upgrade(namespace, managed)).action == "none"
    assert sorted(s.revisions(namespace, "app")) == [1, 2, 3]


@pytest.mark.timeout(120)
async def test_cleanup(setup: Setup, namespace: str, second_namespace: str, helm: Helm) -> None:
    chart = setup.chart()
    failing = setup.chart("failing", {"templates/hook.yaml": FAILING_HOOK})
    svc = setup.service(namespaces=[namespace, second_namespace])
    for ns, name, c in [(namespace, "keep", chart), (namespace, "drop", chart), (namespace, "stuck", failing),
                        (second_namespace, "ignored", chart), (namespace, "zz-last", chart)]:
        await svc.upgrade(ns, setup.package(ns, name, c))
    run_helm(helm, "install", "mine", str(chart), "-n", namespace)  # not helmdeck's

    keep = {f"{namespace}/keep"}
    ignore = [second_namespace]
    plan = await svc.cleanup(keep, ignore, dry_run=True)
    doomed = (f"{namespace}/drop", f"{namespace}/stuck", f"{namespace}/zz-last")
    assert plan.dry_run and plan.removed == doomed and plan.failed == ()
    assert setup.revisions(namespace, "drop")  # nothing uninstalled by a dry run

    report = await svc.cleanup(keep, ignore)
    assert report.removed == (f"{namespace}/drop", f"{namespace}/zz-last")  # the failure did not stop the rest
    assert [ref for ref, _ in report.failed] == [f"{namespace}/stuck"] and "Not_Valid" in report.failed[0][1]
    assert dict(report.skipped) == {f"{namespace}/keep": "kept", f"{second_namespace}/ignored": "namespace ignored"}
    assert not setup.revisions(namespace, "drop") and not setup.revisions(namespace, "zz-last")
    assert not svc.has_monitor(namespace, "drop")
    assert setup.revisions(namespace, "keep") and setup.revisions(second_namespace, "ignored")
    assert setup.revisions(namespace, "mine") and setup.configmap(namespace, "mine-a") is not None


async def test_delete_is_idempotent_and_chartless_packages_are_refused(
    setup: Setup, namespace: str, tmp_path: Path,
) -> None:
    svc = setup.service()
    await svc.upgrade(namespace, setup.package(namespace, "app", setup.chart()))
    assert svc.has_monitor(namespace, "app")
    assert await svc.delete(namespace, "app") is True
    assert not svc.has_monitor(namespace, "app") and not setup.revisions(namespace, "app")
    assert await svc.delete(namespace, "app") is False
    svc.remove_monitor(namespace, "app")  # no monitor: no-op

    (tmp_path / "not-a-chart").mkdir()
    bare = PackageSpec(file=tmp_path / "p.yaml", name="bare", namespace=namespace,
                       chart_path=tmp_path / "not-a-chart", release_name="bare")
    with pytest.raises(PackageNotHelm):
        await svc.upgrade(namespace, bare)
    with pytest.raises(PackageNotHelm):
        await svc.render(namespace, bare)
    assert setup.helm.calls["render"] == 1


async def test_stop_monitors_ends_every_watch_thread(setup: Setup, namespace: str) -> None:
    def watch_threads() -> list[str]:
        return [t.name for t in threading.enumerate() if t.name.startswith("helmdeck-watch")]

    before = watch_threads()
    svc = setup.service()
    chart = setup.chart("with-deployment", {
        "templates/c.yaml": "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: {{ .Release.Name }}\n"
                            "spec:\n  selector: {matchLabels: {app: x}}\n  template:\n"
                            "    metadata: {labels: {app: x}}\n    spec: {containers: [{name: c, image: x}]}\n"})
    for name in ("one", "two"):
        await svc.upgrade(namespace, setup.package(namespace, name, chart))
    assert len(watch_threads()) == len(before) + 2  # ConfigMaps and Deployments, shared by both releases
    status = svc.monitor_status(namespace, "one")
    assert [(r.kind, r.ready) for r in status.resources] == [("ConfigMap", True), ("ConfigMap", True),
                                                             ("Deployment", True)]
    assert svc.stop_monitors()
    assert watch_threads() == before
    assert not svc.has_monitor(namespace, "one") and not svc.has_monitor(namespace, "two")
    # The service still works afterwards: the next upgrade starts a monitor again.
    await svc.upgrade(namespace, setup.package(namespace, "one", chart))
    assert svc.has_monitor(namespace, "one")
