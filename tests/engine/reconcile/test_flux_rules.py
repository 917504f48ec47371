"""HelmRelease documents reconciled by Flux's helm-controller's rules (issue 34's numbered behaviours), each on
the local cluster with real helm, each citing the file and function of helm-controller v1.6.3 it follows."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget, api_client
from engine.reconcile import conditions as cond
from engine.reconcile import state as st
from engine.reconcile.atomic import PassResult
from engine.runtime import Engine
from engine.runtime.assemble import build_engine
from engine.runtime.cluster.annotation_requests import unmatched
from engine.storage.codec import record_name
from testkit.chart_sources import ChartRepoServer, helm_run, package_chart, publish_http, write
from testkit.controller import create, eventually, get_package, package
from testkit.controller import releases as stored
from tests.conftest import run_helm
from tests.controller_fixtures import ControllerEnv
from tests.engine.helm.test_crds import group, read, write_chart
from tests.reconcile_harness import EXAMPLES

__all__ = ["group"]  # the fixture: a CRD group of the test's own, its CRDs deleted after
from tests.engine.resolve.test_values_from import until

pytestmark = pytest.mark.cluster


def repository(namespace: str, url: str) -> str:
    return f"""apiVersion: source.toolkit.fluxcd.io/v1
kind: HelmRepository
metadata: {{name: charts, namespace: {namespace}}}
spec: {{interval: 1m, url: "{url}"}}
"""


def helm_release(namespace: str, spec: str = "", values: str = "{replicas: 1}", *, chart: str = "web",
                 name: str = "web", timeout: str = "60s", version: str = "*") -> str:
    """The HelmRelease ``name`` of the repository's ``chart`` (any version); ``spec`` holds more spec lines
    (indented two)."""
    return f"""apiVersion: helm.toolkit.fluxcd.io/v2
kind: HelmRelease
metadata: {{name: {name}, namespace: {namespace}}}
spec:
  interval: 10m
  timeout: {timeout}
  chart:
    spec: {{chart: {chart}, version: "{version}", sourceRef: {{kind: HelmRepository, name: charts}}}}
  values: {values}
{spec}"""


@pytest.fixture
def flux_folder(helm: Helm, namespace: str, tmp_path: Path, repo: ChartRepoServer) -> Path:
    """A Flux repository's folder: the HelmRepository (its own file) serving the charts ``web`` 1.0.0 and the
    example ``flaky`` 0.1.0 (its values make it fail, hang or fail its tests)."""
    publish_http(helm.binary, package_chart(helm.binary, tmp_path, "1.0.0"), repo)
    helm_run(helm.binary, "package", str(EXAMPLES / "charts" / "flaky"), "-d", str(tmp_path / "packaged"))
    publish_http(helm.binary, tmp_path / "packaged" / "flaky-0.1.0.tgz", repo)
    pkgs = tmp_path / "flux"
    write(pkgs, "repository.yaml", repository(namespace, repo.url))
    return pkgs


def releases(helm: Helm, namespace: str) -> list[str]:
    return [r["name"] for r in json.loads(run_helm(helm, "list", "-n", namespace, "-o", "json"))]


@pytest.fixture
async def pruning(kube_target: KubeTarget, helm: Helm, namespace: str, flux_folder: Path) -> AsyncIterator[Engine]:
    """An engine watching ``flux_folder`` that prunes what leaves it (``reconcile --prune``)."""
    engine = build_engine(kube_target, helm, flux_folder, namespaces=[namespace], prune=True)
    await engine.start()
    try:
        yield engine
    finally:
        await engine.stop()


async def test_a_suspended_helmrelease_pruned_from_the_folder_keeps_its_release(
    helm: Helm, namespace: str, flux_folder: Path, pruning: Engine,
) -> None:
    """Behaviour 13: helm-controller uninstalls a deleted HelmRelease's release only when it is not suspended
    (internal/controller/helmrelease_controller.go, ``reconcileDelete``: ``if !obj.Spec.Suspend``)."""
    key = (namespace, "web")
    write(flux_folder, "web.yaml", helm_release(namespace))
    await until(lambda: (v := pruning.release(key)) is not None and v.state == st.IN_SYNC, 90)
    write(flux_folder, "web.yaml", helm_release(namespace, "  suspend: true\n"))
    await until(lambda: pruning.book.suspended(key))
    (flux_folder / "web.yaml").unlink()
    await until(lambda: any("the package was suspended" in e.message for e in pruning.events(key)))
    assert releases(helm, namespace) == ["web"]
    # Not suspended: the prune uninstalls, as Flux's reconcileReleaseDeletion does.
    write(flux_folder, "web.yaml", helm_release(namespace))
    await until(lambda: (v := pruning.release(key)) is not None and v.state == st.IN_SYNC, 90)
    (flux_folder / "web.yaml").unlink()
    await until(lambda: releases(helm, namespace) == [], 60)


class Passes:
    """One HelmRelease ``app`` of the chart ``flaky`` in ``folder``, reconciled one pass at a time."""

    def __init__(self, engine: Engine, folder: Path, namespace: str):
        self.engine, self.folder, self.namespace = engine, folder, namespace
        self.key = (namespace, "app")

    def write(self, values: str = "{}", spec: str = "", timeout: str = "20s") -> None:
        write(self.folder, "app.yaml", helm_release(self.namespace, spec, values, chart="flaky", name="app",
                                                    timeout=timeout))
        self.engine.load_packages()

    async def run(self, force: bool = False) -> PassResult:
        return await self.engine.controller.run_pass(self.key, force=force)

    async def converge(self, limit: int = 6) -> list[PassResult]:
        """Passes while one asks for an immediate requeue (as the work queue would)."""
        results = [await self.run()]
        while results[-1].next == "now" and len(results) < limit:
            results.append(await self.run())
        return results

    def revisions(self) -> list[tuple[int, str]]:
        return sorted((o.version, o.status) for o in self.engine.history(self.key))

    def condition(self, type_: str) -> cond.Condition | None:
        status = self.engine.status(self.key)
        return next((c for c in status.conditions if c.type == type_), None) if status else None


@pytest.fixture
async def passes(kube_target: KubeTarget, helm: Helm, namespace: str, flux_folder: Path) -> AsyncIterator[Passes]:
    engine = build_engine(kube_target, helm, flux_folder, namespaces=[namespace], watch_packages=False)
    await engine.start(reconcile=False)
    try:
        yield Passes(engine, flux_folder, namespace)
    finally:
        await engine.stop()


async def test_failure_counters_reset_on_a_new_generation(passes: Passes) -> None:
    """Behaviour 11: helm-controller clears the failure counters when the object's generation differs from the
    last attempt's, before it compares chart version and values (internal/action/reset.go,
    ``MustResetFailures``, called from internal/controller/helmrelease_controller.go ``reconcileRelease``): a
    stalled HelmRelease whose spec changes elsewhere (here its timeout) is tried again."""
    passes.write("{fail: true}")
    failed = await passes.run()
    assert [(o.action, o.ok) for o in failed.outcomes] == [("install", False)] and failed.state == st.STALLED
    again = await passes.run()
    assert again.outcomes == () and again.state == st.STALLED
    passes.write("{fail: true}", timeout="21s")  # same chart, same values: a new generation only
    retried = await passes.run()
    assert [(o.action, o.ok) for o in retried.outcomes] == [("upgrade", False)], retried
    assert passes.revisions() == [(1, "failed"), (2, "failed")]
    stalled = passes.condition(cond.STALLED)
    assert stalled is not None and stalled.reason == cond.RETRIES_EXCEEDED
    # The same generation again: no new attempt, as before.
    assert (await passes.run()).outcomes == ()


def test_a_force_or_reset_acts_only_with_a_reconcile_request_of_its_value() -> None:
    """Behaviour 14, the rule alone: Flux acts on ``forceAt``/``resetAt`` only when it equals ``requestedAt``
    (fluxcd/pkg/apis/meta annotations.go, ``HandleAnnotationRequest``, used by helm-controller's
    ``ShouldHandleForceRequest`` and api/v2 annotations.go ``ShouldHandleResetRequest``)."""
    assert unmatched([("force", "t1")]) == {"force"}
    assert unmatched([("reset", "t1"), ("reconcile", "t2")]) == {"reset"}
    assert unmatched([("reset", "t1"), ("force", "t1"), ("reconcile", "t1")]) == set()


def _status(env: ControllerEnv, name: str) -> dict[str, Any]:
    return dict(((get_package(env.objects, env.namespace, name) or {}).get("status")) or {})


def _annotate(env: ControllerEnv, name: str, **annotations: str) -> None:
    env.objects.patch_namespaced_custom_object("helmdeck.dev", "v1alpha1", env.namespace, "packages", name,
                                               {"metadata": {"annotations": annotations}})


def test_a_force_acts_only_with_requested_at_and_keeps_the_failure_counters(controller_env: ControllerEnv) -> None:
    """Behaviour 14 on the controller: a ``forceAt`` with no ``requestedAt`` of its value is acknowledged and does
    nothing (fluxcd/pkg/apis/meta annotations.go, ``HandleAnnotationRequest``); with it, a stalled release is
    upgraded once more and its failure counters are kept (helm-controller internal/reconcile/atomic_release.go,
    ``actionForState``: "forcing upgrade for failed release", with no ``ClearFailures``, which only
    internal/action/reset.go ``MustResetFailures`` does)."""
    env = controller_env
    env.flaky_source()
    create(env.objects, package(env.namespace, "flaky", values={"fail": True}, timeout="20s"))
    ctl = env.start()
    try:
        eventually(lambda: _status(env, "flaky").get("installFailures") == 1
                   and any(c["type"] == "Stalled" and c["status"] == "True" for c in _status(env, "flaky")
                           .get("conditions", [])), 90, "the install failed and stalled", logs=ctl.text)
        assert stored(env.core, env.namespace, "flaky") == [(1, "failed")]
        _annotate(env, "flaky", **{"reconcile.fluxcd.io/forceAt": "f1"})
        eventually(lambda: _status(env, "flaky").get("lastHandledForceAt") == "f1", 30, "f1 acknowledged",
                   logs=ctl.text)
        assert stored(env.core, env.namespace, "flaky") == [(1, "failed")]  # acknowledged, not acted on
        _annotate(env, "flaky", **{"reconcile.fluxcd.io/forceAt": "f2", "reconcile.fluxcd.io/requestedAt": "f2"})
        eventually(lambda: _status(env, "flaky").get("lastHandledForceAt") == "f2", 60, "f2 acknowledged",
                   logs=ctl.text)
        assert stored(env.core, env.namespace, "flaky") == [(1, "failed"), (2, "failed")]
        status = _status(env, "flaky")
        assert (status["installFailures"], status["upgradeFailures"]) == (1, 1), status  # kept, then counted
    finally:
        assert ctl.stop() == 0, ctl.text()


async def test_a_dependency_not_present_yet_is_waited_for(
    kube_target: KubeTarget, helm: Helm, namespace: str, flux_folder: Path,
) -> None:
    """Behaviour 18: a HelmRelease whose ``dependsOn`` names an object that does not exist (yet) is not refused:
    it waits, Ready=False ``DependencyNotReady``, and goes on once the dependency is there and Ready, as
    helm-controller does (internal/controller/helmrelease_controller.go, ``checkDependencies``: "unable to get
    dependency", retried by ``reconcile`` with ``DependencyNotReadyReason``)."""
    write(flux_folder, "app.yaml", helm_release(namespace, "  dependsOn: [{name: base}]\n", name="app"))
    engine = build_engine(kube_target, helm, flux_folder, namespaces=[namespace])
    await engine.start()
    try:
        assert not engine.controller.package_errors
        key = (namespace, "app")

        def held() -> bool:
            status = engine.status(key)
            ready = next((c for c in status.conditions if c.type == cond.READY), None) if status else None
            return ready is not None and ready.reason == cond.DEPENDENCY_NOT_READY \
                and f"waiting for {namespace}/base (not found)" in ready.message

        await until(held, 60)
        assert releases(helm, namespace) == []
        write(flux_folder, "base.yaml", helm_release(namespace, name="base"))
        await until(lambda: sorted(releases(helm, namespace)) == ["app", "base"], 120)
    finally:
        await engine.stop()


async def test_a_rollback_target_gone_from_storage_is_upgraded_instead(
    passes: Passes, core_api: client.CoreV1Api,
) -> None:
    """Behaviour 19: before rolling back, helm-controller verifies the previous release in storage; one that
    disappeared (or changed) makes it upgrade again instead (internal/reconcile/atomic_release.go,
    ``actionForState``, on internal/action/verify.go ``VerifySnapshot``'s ``ErrReleaseDisappeared``)."""
    passes.write("{message: a}")
    await passes.run()
    passes.write("{message: b}")
    await passes.run()
    passes.write("{fail: true}")  # no remediation: revision 3 failed, stalled
    assert (await passes.run()).state == st.STALLED
    assert passes.revisions() == [(1, "superseded"), (2, "deployed"), (3, "failed")]
    core_api.delete_namespaced_secret(record_name("app", 2), passes.namespace)  # the rollback target
    await until(lambda: [v for v, _ in passes.revisions()] == [1, 3])
    passes.write("{fail: true}", "  upgrade:\n    remediation: {retries: 1, remediateLastFailure: false}\n")
    results = [await passes.run()]
    while results[-1].next == "now" and len(results) < 6:
        results.append(await passes.run())
    actions = [(o.action, o.ok) for r in results for o in r.outcomes]
    assert actions == [("upgrade", False), ("upgrade", False)], actions  # never a rollback to revision 2
    assert results[-1].state == st.STALLED


async def test_a_values_change_rendering_the_same_manifest_makes_a_revision(passes: Passes, helm: Helm) -> None:
    """Behaviour 7: helm-controller upgrades when the values' digest differs from the release's, whatever the
    render (internal/reconcile/state.go ``DetermineReleaseState``: internal/action/verify.go ``VerifyRelease``
    compares the config digest), so the stored
    values follow the document (helmdeck's Package keeps its smart upgrade)."""
    passes.write("{unused: a}")
    await passes.run()
    passes.write("{unused: b}")  # the chart renders no such value: the same manifest
    changed = await passes.run()
    assert [(o.action, o.ok) for o in changed.outcomes] == [("upgrade", True)], changed
    assert passes.revisions() == [(1, "superseded"), (2, "deployed")]
    assert "unused: b" in run_helm(helm, "get", "values", "app", "-n", passes.namespace)


async def test_a_deleted_resource_is_left_unless_drift_detection_corrects_it(
    passes: Passes, core_api: client.CoreV1Api,
) -> None:
    """Behaviour 6: helm-controller looks at the cluster only with ``driftDetection`` on
    (internal/reconcile/state.go ``DetermineReleaseState``: ``DriftDetection.MustDetectChanges``); disabled, the
    default, a deleted object stays deleted and no revision is made; ``warn`` reports it; ``enabled`` puts it back
    with no new revision (internal/reconcile/correct_drift.go ``CorrectClusterDrift``). helmdeck's monitor still
    shows it absent."""
    passes.write("{}")
    await passes.run()
    core_api.delete_namespaced_config_map("app", passes.namespace)
    await until(lambda: bool((v := passes.engine.release(passes.key)) and v.monitor.absent))
    left = await passes.run()
    assert left.outcomes == () and left.state == st.IN_SYNC, left
    assert passes.revisions() == [(1, "deployed")]
    assert passes.engine.release(passes.key).monitor.absent  # type: ignore[union-attr]
    passes.write("{}", "  driftDetection: {mode: warn}\n")
    warned = await passes.run()
    assert warned.state == st.DRIFTED and warned.outcomes == () and any("ConfigMap" in d.ref for d in warned.drift)
    passes.write("{}", "  driftDetection: {mode: enabled}\n")
    corrected = await passes.run()
    assert [o.action for o in corrected.outcomes] == ["correct-drift"], corrected
    assert core_api.read_namespaced_config_map("app", passes.namespace).data == {"message": "hello"}
    assert passes.revisions() == [(1, "deployed")]


async def test_crds_are_created_on_upgrade_when_unset_and_carry_fluxs_origin_labels(
    kube_target: KubeTarget, helm: Helm, namespace: str, flux_folder: Path, repo: ChartRepoServer, tmp_path: Path,
    group: str,
) -> None:
    """Behaviour 10: with ``upgrade.crds`` unset, helm-controller creates the CRDs a new chart version adds
    (internal/action/crds.go ``crdPolicyOrDefault``: ``DefaultCRDPolicy`` is ``Create``, for install and upgrade
    alike), and every CRD it applies carries its origin labels (internal/action/crds.go ``applyCRDs`` with
    ``setOriginVisitor``, from install.go ``Install`` and upgrade.go ``Upgrade``)."""
    for version in ("0.1.0", "0.2.0"):
        chart = write_chart(tmp_path / version, group, version)
        helm_run(helm.binary, "package", str(chart), "-d", str(tmp_path / "packaged"))
        publish_http(helm.binary, tmp_path / "packaged" / f"crdchart-{version}.tgz", repo)
    write(flux_folder, "app.yaml", helm_release(namespace, chart="crdchart", name="app", version="0.1.0", values="{}"))
    engine = build_engine(kube_target, helm, flux_folder, namespaces=[namespace], watch_packages=False)
    await engine.start(reconcile=False)
    try:
        key = (namespace, "app")
        installed = await engine.controller.run_pass(key)
        assert [(o.action, o.ok) for o in installed.outcomes] == [("install", True)], installed
        api = _crd_api(kube_target)
        origin = {"helm.toolkit.fluxcd.io/name": "app", "helm.toolkit.fluxcd.io/namespace": namespace}
        widgets = read(api, f"widgets.{group}")
        assert widgets is not None and origin.items() <= widgets["metadata"]["labels"].items(), widgets
        write(flux_folder, "app.yaml", helm_release(namespace, chart="crdchart", name="app", version="0.2.0",
                                                    values="{}"))
        engine.load_packages()
        upgraded = await engine.controller.run_pass(key)
        assert [(o.action, o.ok) for o in upgraded.outcomes] == [("upgrade", True)], upgraded
        gadgets = read(api, f"gadgets.{group}")
        assert gadgets is not None and origin.items() <= gadgets["metadata"]["labels"].items(), gadgets
    finally:
        await engine.stop()


def _crd_api(target: KubeTarget) -> client.ApiextensionsV1Api:
    return client.ApiextensionsV1Api(api_client(target))


async def test_the_drifted_condition_follows_drift_detection(passes: Passes, core_api: client.CoreV1Api) -> None:
    """Behaviour 22: with drift detection on, helm-controller marks Drifted False (NoDriftDetected) on a release
    in sync and True (DriftDetected) on a drifted one (internal/reconcile/atomic_release.go ``actionForState``)."""
    passes.write("{}", "  driftDetection: {mode: warn}\n")
    await passes.run()
    quiet = passes.condition(cond.DRIFTED)
    assert quiet is not None and (quiet.status, quiet.reason) == ("False", cond.NO_DRIFT_DETECTED), quiet
    core_api.patch_namespaced_config_map("app", passes.namespace, {"data": {"message": "edited by hand"}})
    await passes.run()
    drifted = passes.condition(cond.DRIFTED)
    assert drifted is not None and (drifted.status, drifted.reason) == ("True", cond.DRIFT_DETECTED), drifted
    assert f"Cluster state of release {passes.namespace}/app has drifted" in drifted.message
    passes.write("{}", "  driftDetection: {mode: enabled}\n")
    await passes.run()
    corrected = passes.condition(cond.DRIFTED)
    assert corrected is not None and corrected.status == "False", corrected


def _namespaces(core_api: client.CoreV1Api) -> list[str]:
    return [str(n.metadata.name) for n in core_api.list_namespace().items if n.metadata is not None]


async def test_create_namespace_needs_a_target_namespace(passes: Passes, core_api: client.CoreV1Api) -> None:
    """Behaviour 22: helm-controller passes ``install.createNamespace`` to helm only with a ``targetNamespace``
    (internal/action/install.go ``Install``): a HelmRelease whose own namespace does not exist fails its install
    and creates nothing."""
    missing = f"{passes.namespace}-none"
    write(passes.folder, "app.yaml", helm_release(missing, "  install: {createNamespace: true}\n", "{}",
                                                  chart="flaky", name="app", timeout="20s")
          .replace("sourceRef: {kind: HelmRepository, name: charts}",
                   f"sourceRef: {{kind: HelmRepository, name: charts, namespace: {passes.namespace}}}"))
    passes.engine.load_packages()
    try:
        failed = await passes.engine.controller.run_pass((missing, "app"))
        assert failed.outcomes == () and failed.next == "error", failed  # helm stored nothing
        assert f'namespaces "{missing}" not found' in failed.message, failed
        assert missing not in _namespaces(core_api)
    finally:
        if missing in _namespaces(core_api):
            core_api.delete_namespace(missing)
    # With a targetNamespace it is created, as Flux's Install does (stored there too: helm's CLI cannot keep a
    # release apart from its namespace, so one stored in the HelmRelease's namespace would be refused).
    target = f"{passes.namespace}-made"
    passes.write("{}", f"  targetNamespace: {target}\n  storageNamespace: {target}\n"
                       "  install: {createNamespace: true}\n")
    try:
        [key] = [k for k in passes.engine.book.packages if k[0] == target]  # Flux's release name, shortened
        made = await passes.engine.controller.run_pass(key)
        assert [(o.action, o.ok) for o in made.outcomes][:1] == [("install", True)], made
    finally:
        core_api.delete_namespace(target)


async def test_tests_the_filters_leave_out_do_not_keep_a_release_untested(passes: Passes) -> None:
    """Behaviour 22: a release counts as tested from the tests ``spec.test.filters`` select, as helm-controller
    records only the tests it ran (internal/action/test.go ``Test`` with the filters, then
    internal/reconcile/state.go ``DetermineReleaseState``: api/v2 ``Snapshot.HasBeenTested``): filters that
    select none of the chart's tests make it tested at once, not tested again on every pass."""
    passes.write("{}", "  test:\n    enable: true\n    filters: [{name: no-such-test}]\n")
    first = await passes.converge()
    assert first[-1].state == st.IN_SYNC, first
    again = await passes.run()
    assert again.outcomes == () and again.state == st.IN_SYNC, again
