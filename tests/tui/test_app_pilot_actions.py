"""Pilot tests of the cockpit's actions (issue 14) on the real local cluster and real helm:
cancelling a running action, switching cluster contexts (releases a Flux HelmRelease owns: test_flux_cockpit_app.py)."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget, contexts
from engine.runtime import Engine
from engine.runtime.assemble import build_engine
from engine.runtime.ledger.owners import FLUX_GROUP, FLUX_PLURAL, FLUX_VERSION
from tests.conftest import EXAMPLES, run_helm
from tests.engine.runtime.test_engine_flow import write_package
from tests.tui.test_app_pilot import SIZE, cell, make_app, row, select, stored, wait_for
from tui.app import HelmdeckApp
from tui.engine_client import ContextSwitch
from tui.screens.confirm import ConfirmScreen
from tui.screens.picker import PickerScreen

pytestmark = pytest.mark.cluster


@contextlib.asynccontextmanager
async def _cancelled(helm: Helm, namespace: str, kube_target: KubeTarget, tmp_path: Path, *, extra: str = "",
                     choice: str = "y", timeout: str = "5m") -> AsyncIterator[tuple[HelmdeckApp, float]]:
    """The app with the flaky chart installed, its upgrade hanging on --wait, ctrl+k then ``choice`` pressed in
    the dialog (whose words are checked); yields the app and when the choice was made (monotonic seconds)."""
    write_package(tmp_path, namespace, "web", "flaky", "    hang: false\n" + extra, timeout)
    app = make_app(kube_target, helm, namespace, tmp_path)
    key = (namespace, "web")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: cell(app, key, "status") == "✔ deployed", 60, seen=lambda: row(app, key))
        write_package(tmp_path, namespace, "web", "flaky", "    hang: true\n" + extra, timeout)  # the engine upgrades
        await wait_for(lambda: cell(app, key, "status") == "⧗ pending-upgrade", 60, seen=lambda: row(app, key))
        await select(app, key)
        await pilot.press("ctrl+k")
        await wait_for(lambda: isinstance(app.screen, ConfirmScreen))
        assert isinstance(app.screen, ConfirmScreen)
        dialog = app.screen.confirmation
        assert dialog.title == "Stop the upgrade?", dialog
        assert "the objects keep what revision 2 applied" in dialog.body and "revision 1 (deployed" in dialog.body
        assert dialog.alternative_label == "Stop and roll back to 1"
        started = time.monotonic()
        await pilot.press(choice)
        yield app, started


async def test_cancel_key_stops_a_hung_upgrade_and_records_it_as_the_engines_failed_upgrade(
    helm: Helm, namespace: str, kube_target: KubeTarget, core_api: client.CoreV1Api, tmp_path: Path
) -> None:
    key = (namespace, "web")
    async with _cancelled(helm, namespace, kube_target, tmp_path) as (app, started):
        await wait_for(lambda: stored(core_api, namespace, "web") == [(1, "deployed"), (2, "failed")], 30,
                       seen=lambda: (stored(core_api, namespace, "web"), row(app, key)))
        assert time.monotonic() - started < 30  # far from the 5m stale-lock timeout
        await wait_for(lambda: (view := app.client.release(key)) is not None and view.running is None)
        view = app.client.release(key)
        assert view is not None and view.last is not None
        assert view.last.action == "upgrade" and "cancelled by the operator" in view.last.message, view.last
        assert "The objects keep what revision 2 applied; roll back to revision 1" in view.last.message
        assert any(e.outcome == "cancelled" for e in app.client.events(key))
        # Revision 2 is the engine's own failed upgrade, not a change made outside helmdeck.
        status = app.client.engine.book.status(key)
        assert status is not None
        assert [(s.version, s.status) for s in status.history] == [(2, "failed"), (1, "deployed")]
        assert status.failures.upgrade == 1 and status.last_attempted_release_action == "upgrade"
        released = next(c for c in status.conditions if c.type == "Released")
        assert (released.status, released.reason) == ("False", "UpgradeFailed") and "cancelled" in released.message
        plan = await app.client.engine.plan()
        line = next(p for p in plan.packages if (p.namespace, p.release) == key)
        assert line.state != "Unmanaged" and not any("outside helmdeck" in r for r in line.reasons), line
        # Remediation follows the package's settings: no retries, so the package stalls; nothing is suspended.
        await asyncio.sleep(6)  # longer than the queue's refused retry: no new upgrade starts
        assert stored(core_api, namespace, "web") == [(1, "deployed"), (2, "failed")]
        assert cell(app, key, "suspended") != "⏸ yes", row(app, key)
        status = app.client.engine.book.status(key)
        assert status is not None and any(c.type == "Stalled" and c.status == "True" for c in status.conditions), status


async def test_cancel_and_roll_back_returns_to_the_last_deployed_revision(
    helm: Helm, namespace: str, kube_target: KubeTarget, core_api: client.CoreV1Api, tmp_path: Path
) -> None:
    key = (namespace, "web")
    async with _cancelled(helm, namespace, kube_target, tmp_path, choice="b") as (app, _):
        await wait_for(lambda: stored(core_api, namespace, "web") == [(1, "superseded"), (2, "failed"),
                                                                       (3, "deployed")], 60,
                       seen=lambda: (stored(core_api, namespace, "web"), row(app, key)))
        await wait_for(lambda: cell(app, key, "suspended") == "⏸ yes", seen=lambda: row(app, key))
        status = app.client.engine.book.status(key)
        assert status is not None and [s.version for s in status.history][:3] == [3, 2, 1]  # all the engine's own


async def test_after_a_cancel_remediation_follows_the_package(
    helm: Helm, namespace: str, kube_target: KubeTarget, core_api: client.CoreV1Api, tmp_path: Path
) -> None:
    key = (namespace, "web")
    retries = "  upgrade:\n    remediation:\n      retries: 1\n"  # after the values: a spec field
    async with _cancelled(helm, namespace, kube_target, tmp_path, extra=retries, timeout="40s") as (app, _):
        # One retry left: the engine remediates the cancelled upgrade by rolling back to revision 1 (Flux's
        # rollback remediation), then upgrades again.
        await wait_for(lambda: stored(core_api, namespace, "web")[:3] == [(1, "superseded"), (2, "failed"),
                                                                           (3, "deployed")], 60,
                       seen=lambda: (stored(core_api, namespace, "web"), row(app, key)))
        await wait_for(lambda: any(e.action == "rollback" and e.outcome == "succeeded"  # told once it let go
                                   for e in app.client.events(key)), seen=lambda: app.client.events(key)[-3:])


def install_crd(api: client.ApiClient, group: str, version: str, kind: str, plural: str) -> client.CustomObjectsApi:
    """A schema-less CRD of ``kind`` (a Flux kind in Flux's group and version, as the issue allows for tests) with
    a status subresource, as Flux's CRDs have (its controllers write status through it), left for the session;
    returns once the API serves it."""
    crd: Any = {
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{plural}.{group}"},
        "spec": {"group": group, "scope": "Namespaced",
                 "names": {"plural": plural, "singular": kind.lower(), "kind": kind},
                 "versions": [{"name": version, "served": True, "storage": True, "subresources": {"status": {}},
                               "schema": {"openAPIV3Schema": {"type": "object",
                                                              "x-kubernetes-preserve-unknown-fields": True}}}]},
    }
    extensions = client.ApiextensionsV1Api(api)
    try:
        extensions.create_custom_resource_definition(crd)
    except client.ApiException as exc:
        if exc.status != 409:
            raise
        extensions.patch_custom_resource_definition(crd["metadata"]["name"], {"spec": crd["spec"]})  # a kept cluster's
    objects = client.CustomObjectsApi(api)
    deadline = time.monotonic() + 30
    while True:  # served a moment after it is created
        try:
            objects.list_cluster_custom_object(group, version, plural)
            return objects
        except client.ApiException:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def install_flux_crd(api: client.ApiClient) -> client.CustomObjectsApi:
    """Flux's HelmRelease API served (:func:`install_crd`)."""
    return install_crd(api, FLUX_GROUP, FLUX_VERSION, "HelmRelease", FLUX_PLURAL)


def two_contexts(kubeconfig: Path, into: Path, namespaces: tuple[str, str]) -> Path:
    """A kubeconfig with contexts "one" and "two" on the same local cluster, each with its own namespace."""
    import yaml

    cfg = yaml.safe_load(kubeconfig.read_text())
    base = cfg["contexts"][0]["context"]
    cfg["contexts"] = [{"name": name, "context": {**base, "namespace": ns}}
                       for name, ns in zip(("one", "two"), namespaces, strict=True)]
    cfg["current-context"] = "one"
    into.write_text(yaml.safe_dump(cfg))
    return into


async def test_switching_context_shows_each_ones_releases(
    helm: Helm, namespace: str, kube_target: KubeTarget, core_api: client.CoreV1Api, tmp_path: Path
) -> None:
    other = f"{namespace}-b"
    core_api.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=other)))
    try:
        assert kube_target.kubeconfig is not None
        config = two_contexts(kube_target.kubeconfig, tmp_path / "kubeconfig", (namespace, other))
        run_helm(helm, "install", "first", str(EXAMPLES / "charts" / "settings"), "-n", namespace)
        run_helm(helm, "install", "second", str(EXAMPLES / "charts" / "settings"), "-n", other)
        scope = {"one": namespace, "two": other}

        def build(name: str) -> Engine:
            target = KubeTarget(config, name)
            return build_engine(target, Helm(helm.binary, target, helm.env), None, namespaces=[scope[name]])

        switch = ContextSwitch(lambda: contexts(KubeTarget(config)), build)
        app = HelmdeckApp(build("one"), context="one", contexts=switch)
        first, second = (namespace, "first"), (other, "second")
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(lambda: cell(app, first, "status") == "✔ deployed", 90, seen=lambda: row(app, first))
            await pilot.press("slash", *"s", "enter")  # a filter that both releases match: it stays
            await pilot.press("C")
            await wait_for(lambda: isinstance(app.screen, PickerScreen))
            await pilot.pause()
            await pilot.press("down", "enter")
            await wait_for(lambda: cell(app, second, "status") == "✔ deployed", 90, seen=lambda: row(app, second))
            assert cell(app, first, "status") is None  # the first context's release is gone
            assert getattr(app.screen.query_one("#filter"), "value", None) == "s"  # the filter stayed
            await pilot.press("C")
            await wait_for(lambda: isinstance(app.screen, PickerScreen))
            await pilot.pause()
            await pilot.press("up", "enter")
            await wait_for(lambda: cell(app, first, "status") == "✔ deployed", 90, seen=lambda: row(app, first))
            assert cell(app, second, "status") is None
    finally:
        core_api.delete_namespace(other)
