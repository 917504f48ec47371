"""The app attached to a real `helmdeck controller` on the local cluster: its Package objects show in the table,
`u`, `p`, `m` and `ctrl+k` become requests on the object (annotations, or the spec), the controller carries them
out and the row follows its status; --readonly refuses them; the controller view reads its metrics (found through
its Lease: no port-forward)."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget, api_client
from engine.runtime.assemble import build_engine
from engine.runtime.ledger.gate import READ_ONLY
from localcluster.cluster import LocalCluster
from testkit.controller import (
    GROUP,
    VERSION,
    create,
    get_package,
    oci_repository,
    package,
    publish_web,
    releases,
    start_controller,
)
from tests.controller_fixtures import ControllerEnv
from tests.tui.test_app_pilot import SIZE, cell, row, select, wait_for
from tui.app import HelmdeckApp
from tui.screens.confirm import ConfirmScreen
from tui.screens.picker import PickerScreen
from tui.screens.pulses import PulsesScreen

pytestmark = pytest.mark.cluster


def _object(objects: client.CustomObjectsApi, namespace: str) -> dict[str, Any]:
    return get_package(objects, namespace, "flaky") or {}


def _annotation(objects: client.CustomObjectsApi, namespace: str, name: str) -> str:
    return str((_object(objects, namespace).get("metadata") or {}).get("annotations", {}).get(name) or "")


def _deployed(app: HelmdeckApp, key: tuple[str, str]) -> str:
    """The chart version of the release's latest revision, as the app shows it ("" none)."""
    view = app.client.release(key)
    return view.observation.chart_version if view is not None and view.observation is not None else ""


def _semver(objects: client.CustomObjectsApi, namespace: str) -> str:
    found: Any = objects.get_namespaced_custom_object(GROUP, VERSION, namespace, "ocirepositories", "web")
    return str(found["spec"]["ref"].get("semver") or "")


def _handled(objects: client.CustomObjectsApi, namespace: str, annotation: str, ack: str) -> bool:
    """The request ``annotation`` was made and the controller acknowledged exactly that value."""
    asked = _annotation(objects, namespace, annotation)
    return bool(asked) and (_object(objects, namespace).get("status") or {}).get(ack) == asked


async def test_the_app_attached_to_a_controller_makes_requests_and_follows_its_status(
    controller_env: ControllerEnv, kube_target: KubeTarget,
) -> None:
    env = controller_env
    objects, core, namespace, helm = env.objects, env.core, env.namespace, env.helm
    env.flaky_source()
    create(objects, package(namespace, "flaky", timeout="5m"))
    ctl = env.start()
    key = (namespace, "flaky")
    app = HelmdeckApp(build_engine(kube_target, helm, None, namespaces=[namespace], attach=True), context="test")
    try:
        async with app.run_test(size=SIZE) as pilot:
            # Attached: the Package object is a row, the owner named, the state the controller's.
            await wait_for(lambda: cell(app, key, "owner") == "cluster" and cell(app, key, "status") == "✔ deployed"
                           and cell(app, key, "state") == "✔ InSync", 90, seen=lambda: (row(app, key), ctl.text()))
            view = app.client.release(key)
            assert view is not None and view.attached is not None and view.attached.ref == key
            found = app.client.controller(view.attached)
            assert found is not None and found.lease == view.attached.lease
            holder = found.holder
            assert view.attached.controller == holder and holder in ctl.text()
            # status.controller: the replica reconciling it (not sharded: no shard), in the Overview's owner line
            await wait_for(lambda: (v := app.client.release(key)) is not None and v.attached is not None
                           and v.attached.replica == holder, 30, seen=lambda: app.client.release(key))
            await select(app, key)

            # u: a forced upgrade, requested (asked first, naming the controller); the controller upgrades and the
            # row shows revision 2.
            await pilot.press("u")
            await wait_for(lambda: isinstance(app.screen, ConfirmScreen))
            assert f"from helmdeck controller {holder}" in app.screen.confirmation.body  # type: ignore[attr-defined]
            await pilot.press("y")
            await wait_for(lambda: _handled(objects, namespace, "reconcile.helmdeck.dev/forceAt", "lastHandledForceAt"),
                           60, seen=lambda: (row(app, key), ctl.text()[-2000:]))
            assert releases(core, namespace, "flaky") == [(1, "superseded"), (2, "deployed")]
            await wait_for(lambda: cell(app, key, "revision") == "2" and cell(app, key, "action") == "✔ upgrade", 30,
                           seen=lambda: row(app, key))  # from the storage and the controller's Event
            assert any("requested: the controller upgrades" in n.message for n in app._notifications)

            # p: the monitor paused by request, acknowledged once.
            await pilot.press("p")
            await wait_for(lambda: _handled(objects, namespace, "monitor.helmdeck.dev/pauseAt", "lastHandledPauseAt"),
                           30, seen=lambda: row(app, key))

            # m: maintenance is the spec's own field: the spec is patched, the controller upgrades once.
            await pilot.press("m")
            await wait_for(lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("y")
            await wait_for(lambda: (_object(objects, namespace).get("spec") or {}).get("maintenance")
                           == "NoResourceReconciliation", 20, seen=lambda: row(app, key))
            await wait_for(lambda: cell(app, key, "maintenance") not in (None, "-", "○ off")
                           and cell(app, key, "state") == "✔ InSync", 60,
                           seen=lambda: (row(app, key), cell(app, key, "state"), app.client.release(key)))
            assert releases(core, namespace, "flaky")[-1] == (3, "deployed")
            view = app.client.release(key)
            assert view is not None and view.attached is not None and view.attached.observed == 2

            # ctrl+k: an upgrade hanging on --wait (an operator edits the object), cancelled by request.
            objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, "packages", "flaky",
                                                   {"spec": {"maintenance": None, "values": {"hang": True}}})
            await wait_for(lambda: (cell(app, key, "status") or "").endswith("pending-upgrade")
                           and (cell(app, key, "action") or "").startswith("⟳ upgrade"), 60,
                           seen=lambda: row(app, key))
            await pilot.press("ctrl+k")
            await wait_for(lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("y")
            await wait_for(lambda: _handled(objects, namespace, "cancel.helmdeck.dev/requestedAt",
                                            "lastHandledCancelAt"), 30,
                           seen=lambda: (row(app, key), ctl.text()[-2000:]))
            await wait_for(lambda: cell(app, key, "status") == "✖ failed" and cell(app, key, "action") != "⟳ upgrade",
                           30, seen=lambda: row(app, key))
            assert not [s for _, s in releases(core, namespace, "flaky") if s.startswith("pending-")]

            # P: the controller view reads the controller's metrics at the address its Lease gives.
            await pilot.press("P")
            await wait_for(lambda: isinstance(app.screen, PulsesScreen) and bool(app.screen.pulses), 20)
            assert isinstance(app.screen, PulsesScreen) and app.screen.pulses
            [pulse] = app.screen.pulses
            assert pulse.replica == holder and pulse.url.startswith("http://127.0.0.1:") and not pulse.problem
            await pilot.press("escape")

        # --readonly: the same rows, every request refused, nothing written.
        before = _object(objects, namespace)["metadata"].get("annotations")
        watcher = HelmdeckApp(build_engine(kube_target, helm, None, namespaces=[namespace], attach=True, readonly=True),
                              context="test")
        async with watcher.run_test(size=SIZE) as pilot:
            await wait_for(lambda: cell(watcher, key, "owner") == "cluster", 30, seen=lambda: row(watcher, key))
            await select(watcher, key)
            for action in ("upgrade", "monitor", "maintenance", "cancel", "suspend", "rollback"):
                assert watcher.client.why_not(action, key) == READ_ONLY
            await pilot.press("u", "p", "m")
            await pilot.pause(0.3)
            assert any(READ_ONLY in n.message for n in watcher._notifications)
        assert _object(objects, namespace)["metadata"].get("annotations") == before
    finally:
        ctl.stop(signal.SIGKILL)


async def test_the_version_picker_pins_in_the_object(
    helm: Helm, namespace: str, kube_target: KubeTarget, tmp_path: Path, local_cluster: LocalCluster,
    helm_home: dict[str, str], helmdeck_crds: list[str],
) -> None:
    """v on an attached package: the OCIRepository's spec.ref.semver is patched (no file), the controller
    deploys the picked version."""
    api = api_client(kube_target)
    objects, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    assert local_cluster.registry is not None and local_cluster.kubeconfig is not None
    create(objects, oci_repository(namespace, publish_web(helm, tmp_path, local_cluster.registry, helm_home,
                                                          "0.1.0", "0.2.0")))
    create(objects, package(namespace, "web"))
    ctl = start_controller(local_cluster.kubeconfig, namespace, helm, tmp_path)
    key = (namespace, "web")
    app = HelmdeckApp(build_engine(kube_target, helm, None, namespaces=[namespace], attach=True), context="test")
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(lambda: _deployed(app, key).startswith("0.2.0") and cell(app, key, "owner") == "cluster",
                           90, seen=lambda: (row(app, key), ctl.text()))
            await select(app, key)
            await pilot.press("v")
            await wait_for(lambda: isinstance(app.screen, PickerScreen), 30, seen=lambda: row(app, key))
            picker = app.screen
            assert isinstance(picker, PickerScreen)
            await pilot.press("down", "enter")  # newest first: 0.2.0 (deployed), then 0.1.0
            await wait_for(lambda: isinstance(app.screen, ConfirmScreen), 30, seen=lambda: row(app, key))
            assert isinstance(app.screen, ConfirmScreen)
            assert "the object's spec patched" in app.screen.confirmation.body
            await pilot.press("y")
            await wait_for(lambda: _semver(objects, namespace) == "0.1.0", 20, seen=lambda: row(app, key))
            await wait_for(lambda: _deployed(app, key).startswith("0.1.0") and cell(app, key, "status") == "✔ deployed",
                           90, seen=lambda: (row(app, key), ctl.text()[-2000:]))
            assert releases(core, namespace, "web") == [(1, "superseded"), (2, "deployed")]
    finally:
        ctl.stop(signal.SIGKILL)
