"""Pilot tests: the app driven by keys against the real local cluster and real helm.

Each test asserts what happened in the cluster (Helm's storage Secrets, the
release's objects, read through the Kubernetes API or helm itself) and what
the release's row says. Keys the engine cannot do yet (p, m, l, c) are
covered offline in test_tui_app.py: shown disabled, refused with the reason.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube import KubeTarget
from engine.runtime import Engine
from tests.conftest import EXAMPLES, run_helm
from tests.test_engine_flow import write_package
from tui.app import HelmdeckApp
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
    """Every cell of a release's row, for failure messages."""
    return {c: cell(app, key, c) for c in ("revision", "status", "action", "suspended")}


def stored(core_api: client.CoreV1Api, namespace: str, name: str) -> list[tuple[int, str]]:
    """``(revision, status)`` of every Helm storage Secret of a release, read from the API."""
    secrets = core_api.list_namespaced_secret(namespace, label_selector=f"owner=helm,name={name}").items
    labels = [(s.metadata.labels if s.metadata else None) or {} for s in secrets]
    return sorted((int(lb["version"]), lb["status"]) for lb in labels)


def make_app(kube_target: KubeTarget, helm: Helm, namespace: str, packages: Path | None) -> HelmdeckApp:
    return HelmdeckApp(Engine(kube_target, helm, packages, namespaces=[namespace]), context="test")


async def settled(app: HelmdeckApp, key: tuple[str, str], action: str, revision: int, timeout: float = 30) -> None:
    """Wait until the row shows ``action`` done and ``revision`` deployed (revision and status come from storage).

    The verdict symbol (✔/✖) is not asserted: the engine judges an action from
    the first storage write it sees after helm returns, which under load can
    be the pending write that precedes the final one (reported to the engine's
    owner); what Helm stored is asserted instead.
    """
    await wait_for(lambda: (cell(app, key, "action") in (f"✔ {action}", f"✖ {action}")
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
        if app.client.reason("diff") is None:  # the engine can tell what would change: shown first
            await wait_for(lambda: isinstance(app.screen, ConfirmScreen))
            await pilot.press("y")
        await settled(app, key, "upgrade", 2)
    assert stored(core_api, namespace, "cfg") == [(1, "superseded"), (2, "deployed")]


async def test_rollback_to_a_chosen_revision_suspends_the_package(
    helm: Helm, namespace: str, kube_target: KubeTarget, core_api: client.CoreV1Api, tmp_path: Path
) -> None:
    write_package(tmp_path, namespace, "cfg", "settings", "    settings:\n      v: one\n")
    app = make_app(kube_target, helm, namespace, tmp_path)
    key = (namespace, "cfg")
    chart = str(EXAMPLES / "charts" / "settings")
    async with app.run_test(size=SIZE) as pilot:
        await settled(app, key, "install", 1)
        run_helm(helm, "upgrade", "cfg", chart, "-n", namespace, "--set", "settings.v=two")
        run_helm(helm, "upgrade", "cfg", chart, "-n", namespace, "--set", "settings.v=three")
        await wait_for(lambda: cell(app, key, "revision") == "3")
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
        assert app.screen.confirmation.details == f"ConfigMap/{namespace}/cfg"
        await pilot.press("y")
        await wait_for(lambda: cell(app, key, "status") == "- not installed", seen=lambda: row(app, key))
        assert cell(app, key, "action") == "✔ uninstall"
        assert cell(app, key, "suspended") == "⏸ yes"  # so the engine does not reinstall it
    assert stored(core_api, namespace, "cfg") == []
    with pytest.raises(client.ApiException) as gone:
        core_api.read_namespaced_config_map("cfg", namespace)
    assert gone.value.status == 404
