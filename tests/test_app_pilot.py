"""Pilot tests: the app driven by keys against the real local cluster."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from engine.helm import Helm
from engine.kube import KubeTarget
from engine.runtime import Engine
from tests.conftest import EXAMPLES, run_helm
from tests.test_engine_flow import write_package
from tui.app import HelmdeckApp
from tui.widgets.release_table import ReleaseTable

pytestmark = pytest.mark.cluster


async def wait_for(check: Callable[[], bool], timeout: float = 30.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        if loop.time() > deadline:
            raise AssertionError("condition not met in time")
        await asyncio.sleep(0.1)


def cell(app: HelmdeckApp, key: str, column: str) -> str | None:
    table = app.query_one(ReleaseTable)
    return table.get_cell(key, column) if key in table.rows else None


async def test_rollback_from_keyboard_of_a_release_made_by_plain_helm(
    helm: Helm, namespace: str, kube_target: KubeTarget
) -> None:
    chart = str(EXAMPLES / "charts" / "settings")
    run_helm(helm, "install", "plain", chart, "-n", namespace, "--set", "settings.v=one")
    run_helm(helm, "upgrade", "plain", chart, "-n", namespace, "--set", "settings.v=two")
    engine = Engine(kube_target, helm, None, namespaces=[namespace])
    app = HelmdeckApp(engine, context="test")
    key = f"{namespace}/plain"
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for(lambda: cell(app, key, "revision") == "2")
        table = app.query_one(ReleaseTable)
        table.move_cursor(row=table.get_row_index(key))
        await pilot.press("r")
        await pilot.pause()
        await pilot.press("y")
        await wait_for(lambda: cell(app, key, "revision") == "3")
        await wait_for(lambda: cell(app, key, "action") == "✔ rollback")
        assert cell(app, key, "status") == "✔ deployed"
    latest = engine.observer.latest(namespace, "plain") if engine.observer else None
    assert latest is not None and latest.config == {"settings": {"v": "one"}}


async def test_upgrade_key_upgrades_the_selected_package(
    helm: Helm, namespace: str, kube_target: KubeTarget, tmp_path: Path
) -> None:
    write_package(tmp_path, namespace, "cfg", "settings", "    settings:\n      a: b\n")
    engine = Engine(kube_target, helm, tmp_path, namespaces=[namespace])
    app = HelmdeckApp(engine, context="test")
    key = f"{namespace}/cfg"
    async with app.run_test(size=(160, 30)) as pilot:
        # The start-up pass installs the package.
        await wait_for(lambda: cell(app, key, "status") == "✔ deployed")
        assert cell(app, key, "revision") == "1"
        await wait_for(lambda: cell(app, key, "action") == "✔ install")
        await pilot.press("u")
        await wait_for(lambda: cell(app, key, "revision") == "2")
        await wait_for(lambda: cell(app, key, "action") == "✔ upgrade")


async def test_rollback_can_be_cancelled(helm: Helm, namespace: str, kube_target: KubeTarget) -> None:
    chart = str(EXAMPLES / "charts" / "settings")
    run_helm(helm, "install", "keep", chart, "-n", namespace)
    run_helm(helm, "upgrade", "keep", chart, "-n", namespace, "--set", "settings.x=y")
    engine = Engine(kube_target, helm, None, namespaces=[namespace])
    app = HelmdeckApp(engine, context="test")
    key = f"{namespace}/keep"
    async with app.run_test(size=(160, 30)) as pilot:
        await wait_for(lambda: cell(app, key, "revision") == "2")
        await pilot.press("r")
        await pilot.pause()
        await pilot.press("n")
        await pilot.pause(0.5)
        assert cell(app, key, "revision") == "2"
        assert len(app.screen_stack) == 1
