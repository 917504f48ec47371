"""Pilot test: the app started on a cluster that already holds releases.

The app lists every release from storage's labels first (``Engine.start(preview=True)``); the decoded
records, the engine's states and the start-up pass must follow, for the packages of the folder and for
releases nothing declares.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from textual.geometry import Region

import engine.storage.observer as observer_module
from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.runtime.assemble import build_engine
from engine.runtime.state import ActionOutcome
from engine.storage.codec import Driver
from engine.storage.observation import Observation
from tests.conftest import EXAMPLES, run_helm
from tests.engine.runtime.test_engine_flow import write_package
from tests.storage_records import new_secret, release
from tests.tui.test_app_pilot import SIZE, cell, make_app, wait_for
from tui.app import HelmdeckApp
from tui.widgets.release_table import ReleaseTable

pytestmark = pytest.mark.cluster


def drawn_lines(app: HelmdeckApp) -> list[str]:
    """The release table's lines as it draws them now (what reaches the terminal), not its cell data."""
    table = app.query_one(ReleaseTable)
    return [strip.text for strip in table.render_lines(Region(0, 0, table.size.width, table.size.height))]


async def shows(app: HelmdeckApp, key: tuple[str, str], **expected: str) -> None:
    """Wait until ``key``'s row has these cells (by column) and no cell still waits for its record."""
    def seen() -> dict[str, str | None]:
        return {c: cell(app, key, c) for c in (*expected, "app_version")}
    await wait_for(lambda: seen() == {**expected, "app_version": seen()["app_version"]}
                   and seen()["app_version"] not in (None, "…"), seen=seen)


def chart_version(chart: str) -> str:
    return str(yaml.safe_load((Path(chart) / "Chart.yaml").read_text())["version"])


async def test_the_app_on_a_cluster_already_holding_releases_shows_their_records_and_reconciles(
    helm: Helm, namespace: str, kube_target: KubeTarget, tmp_path: Path
) -> None:
    # Before the app: two packages installed by an earlier helmdeck, and a release of plain helm
    # (two revisions) that no package declares.
    for name in ("alpha", "beta"):
        write_package(tmp_path, namespace, name, "settings", "    settings:\n      a: b\n")
    first = build_engine(kube_target, helm, tmp_path, namespaces=[namespace], monitors=False)
    await first.start(reconcile=False)
    try:
        for name in ("alpha", "beta"):
            result = await first.reconcile((namespace, name))
            assert isinstance(result, ActionOutcome) and result.ok, result
    finally:
        await first.stop()
    chart = str(EXAMPLES / "charts" / "settings")
    for _ in range(2):
        run_helm(helm, "upgrade", "--install", "foreign", chart, "-n", namespace)
    # A package the earlier run did not install: the app's start-up pass installs it.
    write_package(tmp_path, namespace, "gamma", "settings", "    settings:\n      a: b\n")

    app = make_app(kube_target, helm, namespace, tmp_path)
    settings = f"settings@{chart_version(chart)}"
    async with app.run_test(size=SIZE):
        for name in ("alpha", "beta"):
            await shows(app, (namespace, name), chart=settings, revision="1", status="✔ deployed", state="✔ InSync",
                        owner="helmdeck")
        await shows(app, (namespace, "foreign"), chart=settings, revision="2", status="✔ deployed", state="-",
                    owner="-")
        await shows(app, (namespace, "gamma"), chart=settings, revision="1", state="✔ InSync", action="✔ install")
        # as drawn, not only as the table keeps them: every row's line past NAMESPACE (cut to its width)
        drawn = {line.split()[1]: line[14:] for line in drawn_lines(app)[1:] if line.strip()}
        assert set(drawn) == {"alpha", "beta", "foreign", "gamma"}, drawn
        for line in drawn.values():
            assert settings in line and "…" not in line and "✔ deployed" in line, drawn


async def test_the_rows_on_screen_show_their_records_before_the_others_are_decoded(
    helm: Helm, namespace: str, kube_target: KubeTarget, core_api: client.CoreV1Api,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Issue 36, goal 1: at 10,000 releases decoding every record took seconds before the first screen showed a
    # chart. The app names the rows it drew from storage's labels; the engine reads and decodes those first.
    # Here decoding stops after HELD records until the test lets it go: the rows on screen (fewer) must show
    # their chart meanwhile; read in the storage list's order (by Secret name) they would not.
    count, held = 120, 60
    for i in range(count):
        core_api.create_namespaced_secret(namespace, new_secret(release(1, name=f"rel-{i}", namespace=namespace)))
    decoded, go_on = itertools.count(1), threading.Event()
    decode = observer_module.decode_record

    def held_back(obj: Mapping[str, Any], driver: Driver) -> Observation:
        if next(decoded) > held:
            go_on.wait(60)
        return decode(obj, driver)

    monkeypatch.setattr(observer_module, "decode_record", held_back)
    app = make_app(kube_target, helm, namespace, None)
    try:
        async with app.run_test(size=SIZE):
            table = app.query_one(ReleaseTable)
            await wait_for(lambda: len(drawn_lines(app)) > 1 and "rel-" in drawn_lines(app)[1],
                           seen=lambda: drawn_lines(app))
            on_screen = [line.split()[1] for line in drawn_lines(app)[1:] if line.strip()]
            assert 10 < len(on_screen) < held, on_screen

            def charts() -> dict[str, str | None]:
                return {name: cell(app, (namespace, name), "chart") for name in on_screen}
            await wait_for(lambda: set(charts().values()) == {"web@0.2.0"}, seen=charts)
            assert not go_on.is_set() and next(decoded) <= held + 2  # the list of every record still held back
            assert cell(app, (namespace, f"rel-{count - 1}"), "chart") == "…"  # not on screen, not decoded
            go_on.set()
            await wait_for(lambda: cell(app, (namespace, f"rel-{count - 1}"), "chart") == "web@0.2.0",
                           seen=lambda: table.plain_cell((namespace, f"rel-{count - 1}"), "chart"))
    finally:
        go_on.set()
