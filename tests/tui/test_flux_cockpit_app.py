"""Flux's cockpit on the real local cluster: a HelmRelease object (Flux's HelmRelease CRD served, no Flux running;
the test writes its status through the status subresource as helm-controller does) owns a release helm
installed. The app shows the row from the object (Ready, conditions, failure counters, history, the last handled
requests, helm-controller's Events) and its keys are Flux's own requests, read back from the API server:
``u`` as ``flux reconcile helmrelease --force``, ``l`` as ``--reset``, ``s`` as ``flux suspend / resume
helmrelease`` (fluxcd/flux2 cmd/flux/reconcile.go ``requestReconciliation``, suspend.go, resume.go), ``r``
refused with what Flux offers instead; helm-controller acts on forceAt/resetAt only when equal to requestedAt
(api/v2 annotations.go ``ShouldHandleForceRequest``, ``ShouldHandleResetRequest``: fluxcd/pkg/apis/meta
``HandleAnnotationRequest``)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from textual.widgets._footer import FooterKey

from engine.helm import Helm
from engine.kube.client import KubeTarget, api_client
from engine.runtime.assemble import build_engine
from engine.runtime.ledger.owners import FLUX_GROUP, FLUX_PLURAL, FLUX_VERSION
from localcluster.cluster import LocalCluster
from tests.conftest import EXAMPLES, run_helm
from tests.engine.runtime.test_engine_flow import write_package
from tests.tui.test_app_pilot import SIZE, cell, row, select, settled, stored, wait_for
from tests.tui.test_app_pilot_actions import install_flux_crd
from tui.app import HelmdeckApp
from tui.screens.confirm import ConfirmScreen

pytestmark = pytest.mark.cluster

REQUESTED, FORCE, RESET = ("reconcile.fluxcd.io/requestedAt", "reconcile.fluxcd.io/forceAt",
                           "reconcile.fluxcd.io/resetAt")
# Go's time.RFC3339Nano: fractional seconds with trailing zeros dropped (none when zero)
TOKEN = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d*[1-9])?Z$")
HANDLED = "2026-12-01T10:00:00.5Z"


def status(generation: int, *, ready: str = "False", handled_force: str = "") -> dict[str, Any]:
    """A HelmRelease's status as helm-controller writes it after a failed upgrade (api/v2 HelmReleaseStatus)."""
    at = "2026-12-01T10:00:00Z"
    return {
        "observedGeneration": generation,
        "conditions": [
            {"type": "Ready", "status": ready, "reason": "UpgradeFailed" if ready == "False" else "UpgradeSucceeded",
             "message": "Helm upgrade failed: timed out waiting for the condition", "lastTransitionTime": at,
             "observedGeneration": generation},
            {"type": "Released", "status": ready, "reason": "UpgradeFailed", "message": "upgrade failed",
             "lastTransitionTime": at, "observedGeneration": generation}],
        "history": [{"digest": "sha256:" + "a" * 64, "name": "settings", "namespace": "x", "version": 1,
                     "status": "deployed", "chartName": "settings", "chartVersion": "0.1.0", "appVersion": "1.0",
                     "configDigest": "sha256:" + "b" * 64, "firstDeployed": at, "lastDeployed": at}],
        "failures": 2, "upgradeFailures": 2, "installFailures": 0,
        "lastAttemptedRevision": "0.1.0", "lastHandledReconcileAt": HANDLED,
        **({"lastHandledForceAt": handled_force} if handled_force else {}),
    }


def helmrelease(objects: client.CustomObjectsApi, namespace: str) -> Any:
    return objects.get_namespaced_custom_object(FLUX_GROUP, FLUX_VERSION, namespace, FLUX_PLURAL, "settings")


async def press_and_confirm(pilot: Any, app: HelmdeckApp, key: str, title: str) -> None:
    await pilot.press(key)
    await wait_for(lambda: isinstance(app.screen, ConfirmScreen))
    assert isinstance(app.screen, ConfirmScreen) and app.screen.confirmation.title == title
    await pilot.pause()
    await pilot.press("y")
    await wait_for(lambda: not isinstance(app.screen, ConfirmScreen))


async def test_the_row_follows_the_helmrelease_and_its_keys_are_fluxs_requests(
    helm: Helm, namespace: str, kube_target: KubeTarget, core_api: client.CoreV1Api, tmp_path: Path,
) -> None:
    objects = install_flux_crd(core_api.api_client)
    created: Any = objects.create_namespaced_custom_object(FLUX_GROUP, FLUX_VERSION, namespace, FLUX_PLURAL, {
        "apiVersion": f"{FLUX_GROUP}/{FLUX_VERSION}", "kind": "HelmRelease", "metadata": {"name": "settings"},
        "spec": {"interval": "5m", "chart": {"spec": {"chart": "settings", "sourceRef": {"kind": "HelmRepository",
                                                                                          "name": "charts"}}}}})
    generation = created["metadata"]["generation"]
    objects.patch_namespaced_custom_object_status(FLUX_GROUP, FLUX_VERSION, namespace, FLUX_PLURAL, "settings",
                                                  {"status": status(generation)})
    run_helm(helm, "install", "settings", str(EXAMPLES / "charts" / "settings"), "-n", namespace)  # as Flux did
    app = HelmdeckApp(build_engine(kube_target, helm, None, namespaces=[namespace], attach=True), context="test")
    key = (namespace, "settings")
    async with app.run_test(size=SIZE) as pilot:
        # the row from the object: Flux owns it, its Ready and state from the conditions, its counters and history
        await wait_for(lambda: cell(app, key, "owner") == "flux" and cell(app, key, "ready") == "✖ no",
                       seen=lambda: {**row(app, key), "ready": cell(app, key, "ready"),
                                     "owner": cell(app, key, "owner")})
        view = app.client.release(key)
        assert view is not None and view.flux is not None and view.flux.ref == key
        assert view.state == "Failed" and view.failures.upgrade == 2 and view.failures.total == 2
        assert [c.reason for c in view.conditions] == ["UpgradeFailed", "UpgradeFailed"]
        assert [(h.version, h.status, h.chart_version) for h in view.flux.history] == [(1, "deployed", "0.1.0")]
        assert view.flux.handled_reconcile == HANDLED and view.flux.requested == ()
        await select(app, key)

        # u: requestedAt and forceAt with one token, as flux reconcile hr --force
        await press_and_confirm(pilot, app, "u", "Request a forced reconcile?")
        await wait_for(lambda: FORCE in (helmrelease(objects, namespace)["metadata"].get("annotations") or {}),
                       seen=lambda: row(app, key))
        notes = helmrelease(objects, namespace)["metadata"]["annotations"]
        assert notes[REQUESTED] == notes[FORCE] and TOKEN.match(notes[FORCE]), notes
        assert RESET not in notes
        await wait_for(lambda: (v := app.client.release(key)) is not None and v.flux is not None
                       and v.flux.requested == ("force",), seen=lambda: app.client.release(key))
        forced = notes[FORCE]
        # helm-controller handles it: the row's request is gone
        objects.patch_namespaced_custom_object_status(FLUX_GROUP, FLUX_VERSION, namespace, FLUX_PLURAL, "settings",
                                                      {"status": {"lastHandledReconcileAt": forced,
                                                                  "lastHandledForceAt": forced}})
        await wait_for(lambda: (v := app.client.release(key)) is not None and v.flux is not None
                       and v.flux.requested == () and v.flux.handled_force == forced,
                       seen=lambda: app.client.release(key))

        # l: requestedAt and resetAt with a new token, as flux reconcile hr --reset (no pending revision needed)
        await press_and_confirm(pilot, app, "l", "Request a reset?")
        await wait_for(lambda: RESET in (helmrelease(objects, namespace)["metadata"].get("annotations") or {}),
                       seen=lambda: row(app, key))
        notes = helmrelease(objects, namespace)["metadata"]["annotations"]
        assert notes[REQUESTED] == notes[RESET] != forced and notes[FORCE] == forced, notes

        # r: refused, saying what Flux offers instead; nothing written
        await pilot.press("r")
        await wait_for(lambda: "Flux rolls back only as upgrade remediation" in (row(app, key)["notifications"] or ""),
                       seen=lambda: row(app, key))

        # s: spec.suspend as flux suspend hr; the row follows; a reconcile request is then refused, as flux's
        await press_and_confirm(pilot, app, "s", "Suspend the HelmRelease?")
        await wait_for(lambda: helmrelease(objects, namespace)["spec"].get("suspend") is True)
        await wait_for(lambda: cell(app, key, "suspended") not in (None, "-", "no"),
                       seen=lambda: {**row(app, key), "suspended": cell(app, key, "suspended")})
        why = app.client.why_not("upgrade", key)
        assert why is not None and f"HelmRelease {namespace}/settings is suspended" in why
        # s again: resumed as flux resume hr (the field removed)
        await press_and_confirm(pilot, app, "s", "Resume the HelmRelease?")
        await wait_for(lambda: "suspend" not in helmrelease(objects, namespace)["spec"])

        # helm-controller's Event on the object: the release's log and LAST ACTION
        event: Any = {
            "metadata": {"name": "settings.upgrade", "namespace": namespace},
            "involvedObject": {"apiVersion": f"{FLUX_GROUP}/{FLUX_VERSION}", "kind": "HelmRelease",
                               "name": "settings", "namespace": namespace},
            "reason": "UpgradeSucceeded", "type": "Normal", "source": {"component": "helm-controller"},
            "message": "Helm upgrade succeeded for release x/settings.v2 with chart settings@0.1.0",
            "lastTimestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())}
        core_api.create_namespaced_event(namespace, event)
        await wait_for(lambda: cell(app, key, "action") == "✔ upgrade", seen=lambda: row(app, key))
        assert any(e.action == "UpgradeSucceeded" for e in app.client.events(key))

        # another releaseName: the object owns that release now (not installed yet), this one is nobody's again
        # (its manifest carries no Flux labels)
        objects.patch_namespaced_custom_object(FLUX_GROUP, FLUX_VERSION, namespace, FLUX_PLURAL, "settings",
                                               {"spec": {"releaseName": "renamed"}})
        renamed = (namespace, "renamed")
        await wait_for(lambda: cell(app, key, "owner") == "-" and cell(app, renamed, "owner") == "flux",
                       seen=lambda: {**row(app, key), "owner": cell(app, key, "owner")})
        assert app.client.why_not("rollback", key) is None
        # the HelmRelease deleted: its row goes (no release stored under that name)
        objects.delete_namespaced_custom_object(FLUX_GROUP, FLUX_VERSION, namespace, FLUX_PLURAL, "settings")
        await wait_for(lambda: app.client.release(renamed) is None, seen=lambda: app.client.release(renamed))
    assert stored(core_api, namespace, "settings") == [(1, "deployed")]  # helmdeck ran no helm action


def footer_keys(app: HelmdeckApp) -> set[str]:
    """The keys the footer of the screen on top offers (shown, enabled or not)."""
    return {k.key for k in app.screen.query(FooterKey) if k.key}


async def test_the_footer_shows_the_keys_of_the_selected_row(
    helm: Helm, namespace: str, kube_target: KubeTarget, core_api: client.CoreV1Api, tmp_path: Path,
) -> None:
    """A Flux row's footer lacks r, m and D (what Flux would undo: engine.runtime.ledger.owners.has_key, as k9s's
    footer shows the view's keys); a helmdeck package's row has them; the footer follows the cursor, and the
    selected row's owner when a HelmRelease comes to own it; r on a Flux row still says why."""
    objects = install_flux_crd(core_api.api_client)
    run_helm(helm, "install", "settings", str(EXAMPLES / "charts" / "settings"), "-n", namespace)  # as Flux did
    write_package(tmp_path, namespace, "cfg", "settings", "    settings:\n      a: b\n")
    app = HelmdeckApp(build_engine(kube_target, helm, tmp_path, namespaces=[namespace], attach=True),
                      context="test")
    flux, ours = (namespace, "settings"), (namespace, "cfg")
    refused = {"r", "m", "D"}
    async with app.run_test(size=SIZE) as pilot:
        await settled(app, ours, "install", 1)
        await select(app, flux)  # nobody's yet: every key
        await wait_for(lambda: refused <= footer_keys(app), seen=lambda: footer_keys(app))
        # the HelmRelease comes: the selected row is Flux's, its footer loses r, m, D with no key pressed
        objects.create_namespaced_custom_object(FLUX_GROUP, FLUX_VERSION, namespace, FLUX_PLURAL, {
            "apiVersion": f"{FLUX_GROUP}/{FLUX_VERSION}", "kind": "HelmRelease", "metadata": {"name": "settings"},
            "spec": {"interval": "5m"}})
        await wait_for(lambda: cell(app, flux, "owner") == "flux" and not refused & footer_keys(app), 60,
                       seen=lambda: (cell(app, flux, "owner"), footer_keys(app)))
        assert {"u", "s", "t"} <= footer_keys(app)  # Flux's requests, and helmdeck's own test
        await select(app, ours)
        await wait_for(lambda: refused <= footer_keys(app), seen=lambda: footer_keys(app))
        await select(app, flux)
        await wait_for(lambda: not refused & footer_keys(app), seen=lambda: footer_keys(app))
        await pilot.press("r")  # not in the footer, still said why
        await wait_for(lambda: "Rollback: Flux rolls back only" in (row(app, flux)["notifications"] or ""),
                       seen=lambda: row(app, flux))
        await pilot.press("enter")  # the detail of a Flux row: the same keys
        await wait_for(lambda: app.screen is not app.screen_stack[0] and "u" in footer_keys(app))
        assert not refused & footer_keys(app)
    assert stored(core_api, namespace, "settings") == [(1, "deployed")]


def flux_labelled_chart(into: Path, namespace: str) -> Path:
    """A chart whose ConfigMap carries helm-controller's origin labels for HelmRelease ``namespace``/web, as its
    post-renderer stamps every object (internal/postrender/origin_labels.go ``OriginLabels``): a release Flux
    deployed, read by its labels alone."""
    chart = into / "flux-web"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: web\nversion: 1.0.0\n")
    (chart / "templates" / "cm.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web\n  labels:\n"
        f"    helm.toolkit.fluxcd.io/name: web\n    helm.toolkit.fluxcd.io/namespace: {namespace}\n"
        "data: {a: b}\n")
    return chart


async def press_flux_keys(pilot: Any, app: HelmdeckApp, key: tuple[str, str]) -> list[str]:
    """u, l and s on ``key``'s row, each confirmed; the notification each ended with ("title: message")."""
    said: list[str] = []
    for press, title in (("u", "Request a forced reconcile?"), ("l", "Request a reset?"),
                         ("s", "Suspend the HelmRelease?")):
        before = {n.identity for n in app._notifications}  # others come and go (Textual's toasts expire)
        await press_and_confirm(pilot, app, press, title)

        def new() -> list[str]:
            return [f"{n.title}: {n.message}" for n in app._notifications
                    if n.identity not in before and n.title.startswith(("Force", "Reset", "Suspend"))]  # noqa: B023
        await wait_for(lambda: bool(new()), seen=lambda: row(app, key))
        said += new()
    return said


@pytest.fixture(scope="module")
def fluxless_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    """A local cluster of its own that never served Flux's HelmRelease API (the session's serves it from the
    first test that installs Flux's CRD on)."""
    cluster = LocalCluster(tmp_path_factory.mktemp("fluxless") / "cluster")
    cluster.up(timeout=300)  # beside the session's
    yield cluster
    cluster.down()


async def test_fluxs_requests_on_a_cluster_without_fluxs_api_are_refused_saying_so(
    helm: Helm, fluxless_cluster: LocalCluster, tmp_path: Path,
) -> None:
    """A release with helm-controller's labels (a Flux elsewhere deployed it, or Flux was removed) on a cluster
    that does not serve helm.toolkit.fluxcd.io/v2: u, l and s are refused naming the API and what to do, not
    failed with the API's 404; nothing is written. The app's discovery (asked every 30 s until the API is served)
    knows it already: each key is refused at once, before any confirmation is asked."""
    target = KubeTarget(fluxless_cluster.kubeconfig)
    there = Helm(helm.binary, target, helm.env)
    namespace = "apps"
    run_helm(there, "install", "web", str(flux_labelled_chart(tmp_path, namespace)), "-n", namespace,
             "--create-namespace")
    engine = build_engine(target, there, None, namespaces=[namespace], attach=True)
    app = HelmdeckApp(engine, context="fluxless")
    key = (namespace, "web")
    said: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: cell(app, key, "owner") == "flux", seen=lambda: row(app, key))
        served = engine.gate.flux_served
        assert served is not None
        await wait_for(lambda: served() is False)  # the discovery answered
        await select(app, key)
        for press, label in (("u", "Upgrade"), ("l", "Unlock"), ("s", "Suspend")):
            before = {n.identity for n in app._notifications}  # others come and go (Textual's toasts expire)

            def new() -> list[str]:
                return [f"{n.title}: {n.message}" for n in app._notifications
                        if n.identity not in before and n.title == "Not available"]  # noqa: B023
            await pilot.press(press)
            await wait_for(lambda: bool(new()), seen=lambda: row(app, key))
            assert not isinstance(app.screen, ConfirmScreen) and app.screen is app.screen_stack[0], app.screen
            [note] = new()
            assert note.startswith(f"Not available: {label}: this cluster does not serve the HelmRelease API "
                                   "(helm.toolkit.fluxcd.io/v2), so Flux's requests on HelmRelease apps/web cannot "
                                   "be written"), note
            said.append(note)
    for note in said:
        assert "Install Flux (flux install), or act on the release with helm itself" in note and "404" not in note
    assert stored(client.CoreV1Api(api_client(target)), namespace, "web") == [(1, "deployed")]


async def test_fluxs_requests_on_a_helmrelease_gone_are_refused_saying_so(
    helm: Helm, namespace: str, core_api: client.CoreV1Api, kube_target: KubeTarget, tmp_path: Path,
) -> None:
    """The API served, the HelmRelease its labels name not there: refused, saying the object is missing."""
    install_flux_crd(core_api.api_client)
    run_helm(helm, "install", "web", str(flux_labelled_chart(tmp_path, namespace)), "-n", namespace)
    app = HelmdeckApp(build_engine(kube_target, helm, None, namespaces=[namespace], attach=True), context="test")
    key = (namespace, "web")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: cell(app, key, "owner") == "flux", seen=lambda: row(app, key))
        await select(app, key)
        said = await press_flux_keys(pilot, app, key)
    for note in said:
        assert f"refused: HelmRelease {namespace}/web is not in the cluster (deleted?)" in note, note
    assert stored(core_api, namespace, "web") == [(1, "deployed")]
