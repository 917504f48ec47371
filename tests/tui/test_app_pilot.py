"""Pilot tests: the app driven by keys against the real local cluster and real helm.

Each test asserts what happened in the cluster (Helm's storage Secrets, the
release's objects, read through the Kubernetes API or helm itself) and what
the release's row says: every action key (u with its diff, r, t, p, m, s,
l, c, D) against the real local cluster and real helm.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.runtime.assemble import build_engine
from tests.conftest import EXAMPLES, run_helm
from tests.engine.runtime.test_engine_flow import write_package
from tui.app import HelmdeckApp
from tui.confirmations import Details
from tui.screens.confirm import ConfirmScreen
from tui.screens.picker import PickerScreen
from tui.widgets.release_table import ReleaseTable

pytestmark = pytest.mark.cluster
SIZE = (160, 30)


async def wait_for(check: Callable[[], bool], timeout: float = 30.0, seen: Callable[[], object] = lambda: "") -> None:
    """Wait until ``check()``; on timeout say what ``seen()`` (e.g. the row) shows."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"condition not met in time; seen: {seen()}")
        await asyncio.sleep(0.1)


def cell(app: HelmdeckApp, key: tuple[str, str], column: str) -> str | None:
    return app.query_one(ReleaseTable).plain_cell(key, column)


def row(app: HelmdeckApp, key: tuple[str, str]) -> dict[str, str | None]:
    """Every cell of a release's row and the app's notifications, for failure messages."""
    seen: dict[str, str | None] = {c: cell(app, key, c) for c in ("revision", "status", "action", "suspended")}
    notes = [f"{n.title}: {n.message}" for n in getattr(app, "_notifications", ())]  # Textual keeps them privately
    seen["notifications"] = " | ".join(notes) or None
    return seen


def stored(core_api: client.CoreV1Api, namespace: str, name: str) -> list[tuple[int, str]]:
    """``(revision, status)`` of every Helm storage Secret of a release, read from the API."""
    secrets = core_api.list_namespaced_secret(namespace, label_selector=f"owner=helm,name={name}").items
    labels = [(s.metadata.labels if s.metadata else None) or {} for s in secrets]
    return sorted((int(lb["version"]), lb["status"]) for lb in labels)


def make_app(kube_target: KubeTarget, helm: Helm, namespace: str, packages: Path | None) -> HelmdeckApp:
    return HelmdeckApp(build_engine(kube_target, helm, packages, namespaces=[namespace]), context="test")


async def settled(app: HelmdeckApp, key: tuple[str, str], action: str, revision: int, timeout: float = 30) -> None:
    """Wait until the row shows ``action`` succeeded and ``revision`` deployed (both read from storage)."""
    await wait_for(lambda: (cell(app, key, "action") == f"✔ {action}"
                            and cell(app, key, "revision") == str(revision)
                            and cell(app, key, "status") == "✔ deployed"),
                   timeout, seen=lambda: row(app, key))


async def select(app: HelmdeckApp, key: tuple[str, str]) -> None:
    await wait_for(lambda: app.query_one(ReleaseTable).select(key))


async def test_upgrade_key_upgrades_the_selected_package(
    helm: Helm, namespace: str, kube_target: KubeTarget, core_api: client.CoreV1Api, tmp_path: Path
) -> None:
    write_package(tmp_path, namespace, "cfg", "settings", "    settings:\n      a: b\n")
    app = make_app(kube_target, helm, namespace, tmp_path)
    key = (namespace, "cfg")
    async with app.run_test(size=SIZE) as pilot:
        await settled(app, key, "install", 1)  # the start-up pass installs it
        await select(app, key)
        await pilot.press("u")
        await wait_for(lambda: isinstance(app.screen, ConfirmScreen))  # asked first, with what would change
        await pilot.press("y")
        await settled(app, key, "upgrade", 2)
    assert stored(core_api, namespace, "cfg") == [(1, "superseded"), (2, "deployed")]


async def test_rollback_to_a_chosen_revision_suspends_the_package(
    helm: Helm, namespace: str, kube_target: KubeTarget, core_api: client.CoreV1Api, tmp_path: Path
) -> None:
    write_package(tmp_path, namespace, "cfg", "settings", "    settings:\n      v: one\n")
    app = make_app(kube_target, helm, namespace, tmp_path)
    key = (namespace, "cfg")
    async with app.run_test(size=SIZE) as pilot:
        await settled(app, key, "install", 1)
        for revision, value in ((2, "two"), (3, "three")):  # the package changes: the engine upgrades
            write_package(tmp_path, namespace, "cfg", "settings", f"    settings:\n      v: {value}\n")
            await settled(app, key, "upgrade", revision)
        await select(app, key)
        await pilot.press("r")
        await pilot.pause()
        assert isinstance(app.screen, PickerScreen)
        await pilot.press("down", "enter")  # the picker lists 2 then 1: pick revision 1
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        assert "to   revision 1" in app.screen.confirmation.body
        await pilot.press("y")
        await settled(app, key, "rollback", 4)
        await wait_for(lambda: cell(app, key, "suspended") == "⏸ yes", seen=lambda: row(app, key))
    assert stored(core_api, namespace, "cfg")[-1] == (4, "deployed")
    values = json.loads(run_helm(helm, "get", "values", "cfg", "-n", namespace, "-o", "json"))
    assert values == {"settings": {"v": "one"}}


async def test_rollback_of_a_release_made_by_plain_helm_and_cancelling(
    helm: Helm, namespace: str, kube_target: KubeTarget, core_api: client.CoreV1Api
) -> None:
    chart = str(EXAMPLES / "charts" / "settings")
    run_helm(helm, "install", "plain", chart, "-n", namespace, "--set", "settings.v=one")
    run_helm(helm, "upgrade", "plain", chart, "-n", namespace, "--set", "settings.v=two")
    app = make_app(kube_target, helm, namespace, None)
    key = (namespace, "plain")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: cell(app, key, "revision") == "2")
        await select(app, key)
        await pilot.press("r")
        await pilot.pause()
        await pilot.press("escape")  # cancel in the picker
        await pilot.press("r")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        await pilot.press("n")  # cancel in the confirmation
        await pilot.pause(0.5)
        assert len(app.screen_stack) == 1 and stored(core_api, namespace, "plain")[-1] == (2, "deployed")
        await pilot.press("r")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        await pilot.press("y")
        await settled(app, key, "rollback", 3)
        assert cell(app, key, "suspended") == "-"  # no package: nothing to suspend
    assert stored(core_api, namespace, "plain") == [(1, "superseded"), (2, "superseded"), (3, "deployed")]
    values = json.loads(run_helm(helm, "get", "values", "plain", "-n", namespace, "-o", "json"))
    assert values == {"settings": {"v": "one"}}


async def test_test_key_runs_the_helm_tests(
    helm: Helm, namespace: str, kube_target: KubeTarget, tmp_path: Path
) -> None:
    write_package(tmp_path, namespace, "site", "web", "    replicas: 1\n", timeout="2m")
    app = make_app(kube_target, helm, namespace, tmp_path)
    key = (namespace, "site")
    async with app.run_test(size=SIZE) as pilot:
        await settled(app, key, "install", 1, timeout=90)
        await select(app, key)
        await pilot.press("t")
        # A test writes no new revision, so the engine judges it from helm and the stored hooks: no race.
        await wait_for(lambda: cell(app, key, "action") == "✔ test", timeout=90, seen=lambda: row(app, key))
    status = json.loads(run_helm(helm, "status", "site", "-n", namespace, "-o", "json"))
    test_hooks = [h for h in status["hooks"] if "test" in h["events"]]
    assert [h["last_run"]["phase"] for h in test_hooks] == ["Succeeded"]


async def test_suspend_key_stops_reconciling_until_resumed(
    helm: Helm, namespace: str, kube_target: KubeTarget, core_api: client.CoreV1Api, tmp_path: Path
) -> None:
    package = write_package(tmp_path, namespace, "cfg", "settings", "    settings:\n      a: b\n")
    app = make_app(kube_target, helm, namespace, tmp_path)
    key = (namespace, "cfg")
    async with app.run_test(size=SIZE) as pilot:
        await settled(app, key, "install", 1)
        await select(app, key)
        await pilot.press("s")
        await wait_for(lambda: cell(app, key, "suspended") == "⏸ yes")
        package.write_text(package.read_text().replace("a: b", "a: c"))
        app.engine.load_packages()
        assert await app.engine.reconcile(key) is None  # what the reconcile loop would do: nothing
        assert stored(core_api, namespace, "cfg") == [(1, "deployed")]
        await pilot.press("s")  # resuming asks first
        await pilot.pause()
        assert isinstance(app.screen, ConfirmScreen)
        await pilot.press("y")
        await wait_for(lambda: cell(app, key, "suspended") == "-")
        await settled(app, key, "upgrade", 2)  # resumed: the engine upgrades the changed package itself
    assert stored(core_api, namespace, "cfg") == [(1, "superseded"), (2, "deployed")]


async def test_uninstall_key_lists_the_resources_then_uninstalls(
    helm: Helm, namespace: str, kube_target: KubeTarget, core_api: client.CoreV1Api, tmp_path: Path
) -> None:
    write_package(tmp_path, namespace, "cfg", "settings", "    settings:\n      a: b\n")
    app = make_app(kube_target, helm, namespace, tmp_path)
    key = (namespace, "cfg")
    async with app.run_test(size=SIZE) as pilot:
        await settled(app, key, "install", 1)
        assert (core_api.read_namespaced_config_map("cfg", namespace).data or {})["a"] == "b"
        await select(app, key)
        await pilot.press("D")
        await wait_for(lambda: isinstance(app.screen, ConfirmScreen))
        assert isinstance(app.screen, ConfirmScreen)
        assert app.screen.confirmation.details == Details("Resources deleted (1)", f"ConfigMap/{namespace}/cfg")
        await pilot.press("y")
        # Storage shows the release gone a moment before the action reports back: wait for both.
        await wait_for(lambda: (cell(app, key, "status") == "- not installed"
                                and cell(app, key, "action") == "✔ uninstall"
                                and cell(app, key, "suspended") == "⏸ yes"),  # so it is not reinstalled
                       seen=lambda: row(app, key))
    assert stored(core_api, namespace, "cfg") == []
    with pytest.raises(client.ApiException) as gone:
        core_api.read_namespaced_config_map("cfg", namespace)
    assert gone.value.status == 404


async def test_upgrade_key_shows_the_diff_first(
    helm: Helm, namespace: str, kube_target: KubeTarget, core_api: client.CoreV1Api, tmp_path: Path
) -> None:
    package = write_package(tmp_path, namespace, "cfg", "settings", "    settings:\n      color: blue\n")
    app = make_app(kube_target, helm, namespace, tmp_path)
    key = (namespace, "cfg")
    async with app.run_test(size=SIZE) as pilot:
        await settled(app, key, "install", 1)
        await select(app, key)
        await pilot.press("s")  # suspend, so the engine does not apply the edit on its own
        await wait_for(lambda: cell(app, key, "suspended") == "⏸ yes")
        package.write_text(package.read_text().replace("color: blue", "color: green"))
        app.engine.load_packages()
        await pilot.press("u")
        await wait_for(lambda: isinstance(app.screen, ConfirmScreen))
        assert isinstance(app.screen, ConfirmScreen)
        details = app.screen.confirmation.details.text if app.screen.confirmation.details else ""
        assert '-  color: "blue"' in details and '+  color: "green"' in details
        await pilot.press("y")
        await settled(app, key, "upgrade", 2)
        assert cell(app, key, "suspended") == "-"  # an explicit upgrade lifts the suspension
    assert (core_api.read_namespaced_config_map("cfg", namespace).data or {})["color"] == "green"


async def test_pause_key_holds_absence_reports_until_resumed(
    helm: Helm, namespace: str, kube_target: KubeTarget, core_api: client.CoreV1Api, tmp_path: Path
) -> None:
    write_package(tmp_path, namespace, "cfg", "settings", "    settings:\n      a: b\n")
    app = make_app(kube_target, helm, namespace, tmp_path)
    key = (namespace, "cfg")
    async with app.run_test(size=SIZE) as pilot:
        await settled(app, key, "install", 1)
        await wait_for(lambda: cell(app, key, "monitor") == "● active", seen=lambda: cell(app, key, "monitor"))
        await select(app, key)
        await pilot.press("p")
        await wait_for(lambda: cell(app, key, "monitor") == "‖ paused ×1", seen=lambda: cell(app, key, "monitor"))
        core_api.delete_namespaced_config_map("cfg", namespace)
        await asyncio.sleep(2.0)  # a paused monitor reports nothing: no restoring upgrade
        assert stored(core_api, namespace, "cfg") == [(1, "deployed")]
        await pilot.press("p")  # resume: the absence is reported and the engine restores the ConfigMap
        await settled(app, key, "upgrade", 2)
        await wait_for(lambda: cell(app, key, "monitor") == "● active", seen=lambda: cell(app, key, "monitor"))
    assert (core_api.read_namespaced_config_map("cfg", namespace).data or {})["a"] == "b"


async def test_maintenance_key_on_and_off(
    helm: Helm, namespace: str, kube_target: KubeTarget, core_api: client.CoreV1Api, tmp_path: Path
) -> None:
    write_package(tmp_path, namespace, "cfg", "settings", "    settings:\n      a: b\n")
    app = make_app(kube_target, helm, namespace, tmp_path)
    key = (namespace, "cfg")
    async with app.run_test(size=SIZE) as pilot:
        await settled(app, key, "install", 1)
        await select(app, key)
        await pilot.press("m")
        await wait_for(lambda: isinstance(app.screen, ConfirmScreen))
        assert isinstance(app.screen, ConfirmScreen) and app.screen.confirmation.title == "Enter maintenance?"
        await pilot.press("y")
        # Revision 2 is stored (pending-upgrade) before helm applies the objects: wait until it is deployed.
        await wait_for(lambda: cell(app, key, "maintenance") == "✎ on" and cell(app, key, "revision") == "2"
                       and cell(app, key, "status") == "✔ deployed", seen=lambda: row(app, key))
        cm = core_api.read_namespaced_config_map("cfg", namespace)
        assert cm.metadata is not None and (cm.metadata.labels or {}).get("helmdeck.dev/maintenance") == "true", \
            [(e.action, e.outcome, e.message[:80]) for e in app.engine.events(key)]
        core_api.patch_namespaced_config_map("cfg", namespace, {"data": {"a": "by hand"}})
        runs = app.engine.controller.queue.runs
        app.engine.enqueue(key)  # a pass in maintenance reconciles nothing
        await wait_for(lambda: app.engine.controller.queue.runs > runs)
        assert (core_api.read_namespaced_config_map("cfg", namespace).data or {})["a"] == "by hand"
        await wait_for(lambda: cell(app, key, "monitor") == "○ off", seen=lambda: cell(app, key, "monitor"))
        await pilot.press("m")
        await wait_for(lambda: isinstance(app.screen, ConfirmScreen))
        assert isinstance(app.screen, ConfirmScreen) and app.screen.confirmation.title == "Leave maintenance?"
        await pilot.press("y")
        await wait_for(lambda: cell(app, key, "maintenance") == "-" and cell(app, key, "revision") == "3"
                       and cell(app, key, "status") == "✔ deployed", seen=lambda: row(app, key))
    assert stored(core_api, namespace, "cfg")[-1] == (3, "deployed")
    cm = core_api.read_namespaced_config_map("cfg", namespace)
    assert (cm.data or {})["a"] == "b" and cm.metadata is not None
    assert "helmdeck.dev/maintenance" not in (cm.metadata.labels or {})


async def test_unlock_key_frees_a_release_left_pending_by_a_killed_helm(
    helm: Helm, namespace: str, kube_target: KubeTarget, core_api: client.CoreV1Api
) -> None:
    import os
    import signal

    proc = await asyncio.create_subprocess_exec(
        helm.binary, "install", "stuck", str(EXAMPLES / "charts" / "flaky"), "--set", "hang=true", "--wait",
        "--timeout", "60s", "-n", namespace, *helm.target.helm_args(), env={**os.environ, **helm.env},
        start_new_session=True)
    engine = build_engine(kube_target, helm, None, namespaces=[namespace])
    app = HelmdeckApp(engine, context="test")
    key = (namespace, "stuck")
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_for(lambda: cell(app, key, "status") == "⧗ pending-install", seen=lambda: row(app, key))
            os.killpg(proc.pid, signal.SIGKILL)
            await proc.wait()
            await select(app, key)
            await pilot.press("l")
            await wait_for(lambda: isinstance(app.screen, ConfirmScreen))
            assert isinstance(app.screen, ConfirmScreen) and app.screen.confirmation.title == "Unlock?"
            await pilot.press("y")
            await wait_for(lambda: cell(app, key, "status") == "✖ failed", seen=lambda: row(app, key))
    finally:
        if proc.returncode is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert stored(core_api, namespace, "stuck") == [(1, "failed")]
    status = json.loads(run_helm(helm, "status", "stuck", "-n", namespace, "-o", "json"))
    assert status["info"]["status"] == "failed" and "unlocked by helmdeck" in status["info"]["description"]


async def test_cleanup_key_lists_then_removes_only_orphaned_managed_releases(
    helm: Helm, namespace: str, kube_target: KubeTarget, core_api: client.CoreV1Api, tmp_path: Path
) -> None:
    keep = write_package(tmp_path, namespace, "keep", "settings", "    settings:\n      a: b\n")
    gone = write_package(tmp_path, namespace, "gone", "settings", "    settings:\n      a: b\n")
    run_helm(helm, "install", "plain", str(EXAMPLES / "charts" / "settings"), "-n", namespace)
    app = make_app(kube_target, helm, namespace, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await settled(app, (namespace, "keep"), "install", 1)
        await settled(app, (namespace, "gone"), "install", 1)
        gone.unlink()  # no package declares it any more (kept: pruning is off)
        app.engine.load_packages()
        await pilot.press("c")
        await wait_for(lambda: isinstance(app.screen, ConfirmScreen))
        assert isinstance(app.screen, ConfirmScreen)
        assert app.screen.confirmation.details == Details("Releases that would be uninstalled", f"{namespace}/gone")
        await pilot.press("y")
        await wait_for(lambda: cell(app, (namespace, "gone"), "status") is None)
    assert stored(core_api, namespace, "gone") == []
    assert stored(core_api, namespace, "keep") == [(1, "deployed")]
    assert stored(core_api, namespace, "plain") == [(1, "deployed")]  # not helmdeck's: never touched
    assert keep.exists()
