"""Pilot tests of the cockpit's actions (issue 14) on the real local cluster and real helm:
cancelling a running action."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube import KubeTarget
from tests.test_app_pilot import SIZE, cell, make_app, row, select, stored, wait_for
from tests.test_engine_flow import write_package
from tui.screens.confirm import ConfirmScreen

pytestmark = pytest.mark.cluster


async def test_cancel_key_stops_a_hung_upgrade_and_unlocks_at_once(
    helm: Helm, namespace: str, kube_target: KubeTarget, core_api: client.CoreV1Api, tmp_path: Path
) -> None:
    write_package(tmp_path, namespace, "web", "flaky", "    hang: false\n", timeout="5m")
    app = make_app(kube_target, helm, namespace, tmp_path)
    key = (namespace, "web")
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(lambda: cell(app, key, "status") == "✔ deployed", 60, seen=lambda: row(app, key))
        write_package(tmp_path, namespace, "web", "flaky", "    hang: true\n", timeout="5m")  # the engine upgrades
        await wait_for(lambda: cell(app, key, "status") == "⧗ pending-upgrade", 60, seen=lambda: row(app, key))
        await select(app, key)
        started = time.monotonic()
        await pilot.press("ctrl+k")
        await wait_for(lambda: isinstance(app.screen, ConfirmScreen))
        assert isinstance(app.screen, ConfirmScreen) and app.screen.confirmation.title.startswith("Cancel ")
        await pilot.press("y")
        await wait_for(lambda: stored(core_api, namespace, "web") == [(1, "deployed"), (2, "failed")], 30,
                       seen=lambda: (stored(core_api, namespace, "web"), row(app, key)))
        assert time.monotonic() - started < 30  # far from the 5m stale-lock timeout
        await wait_for(lambda: cell(app, key, "suspended") == "⏸ yes", seen=lambda: row(app, key))
        view = app.client.release(key)
        assert view is not None and view.running is None
        assert view.last is not None and "cancelled by the operator" in view.last.message
        assert any(e.outcome == "cancelled" for e in app.client.events(key))
        await asyncio.sleep(6)  # longer than the queue's refused retry: no new upgrade starts
        assert stored(core_api, namespace, "web") == [(1, "deployed"), (2, "failed")]
