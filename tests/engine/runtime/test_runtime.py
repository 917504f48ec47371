"""The running engine: live package folder, debounce, bad files, one acting engine per lease."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.reconcile import state as st
from engine.runtime import Engine, PackageProblems
from engine.runtime.assemble import build_engine
from engine.runtime.engine import ActionRefused, LeaseConfig
from engine.runtime.state import EngineSignal
from testkit.packages import write_package
from tests.reconcile_harness import EXAMPLES

pytestmark = pytest.mark.cluster


def package(folder: Path, namespace: str, name: str, values_file: Path | None = None, values: str = "{}") -> None:
    files: dict[str, Any] = {"valuesFiles": [str(values_file)]} if values_file else {}
    write_package(folder, name, namespace, chart=EXAMPLES / "charts" / "settings", timeout="20s",
                  values=yaml.safe_load(values), **files)


async def until(check: Callable[[], bool], timeout: float = 20.0) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not check():
        assert loop.time() < end, "condition not met in time"
        await asyncio.sleep(0.1)


def revision(engine: Engine, key: tuple[str, str]) -> int:
    obs = engine.observer.latest(*key) if engine.observer else None
    return obs.version if obs else 0


async def test_values_file_edits_and_save_bursts_give_one_revision_each(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    pkgs, values = tmp_path / "packages", tmp_path / "values"
    pkgs.mkdir()
    values.mkdir()
    vfile = values / "app.yaml"
    vfile.write_text("settings: {num: '0'}\n")
    package(pkgs, namespace, "app", vfile)
    engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace])
    await engine.start()
    key = (namespace, "app")
    try:
        await until(lambda: revision(engine, key) == 1 and engine.release(key) is not None
                    and engine.release(key).state == st.IN_SYNC)  # type: ignore[union-attr]
        vfile.write_text("settings: {num: '1'}\n")
        await until(lambda: revision(engine, key) == 2)
        for i in range(2, 7):  # an editor's save burst
            vfile.write_text(f"settings: {{num: '{i}'}}\n")
            await asyncio.sleep(0.02)
        await until(lambda: revision(engine, key) == 3)
        await asyncio.sleep(3.0)
        assert revision(engine, key) == 3
        latest = engine.observer.latest(*key) if engine.observer else None
        assert latest is not None and latest.config == {"settings": {"num": "6"}}
    finally:
        await engine.stop()


async def test_a_broken_file_is_reported_and_the_others_keep_reconciling(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    package(tmp_path, namespace, "a", values="{settings: {v: '1'}}")
    package(tmp_path, namespace, "b", values="{settings: {v: '1'}}")
    engine = build_engine(kube_target, helm, tmp_path, namespaces=[namespace])
    problems: list[PackageProblems] = []

    def on_event(ev: EngineSignal) -> None:
        if isinstance(ev, PackageProblems) and ev.errors:
            problems.append(ev)

    engine.subscribe(on_event)
    await engine.start()
    a, b = (namespace, "a"), (namespace, "b")
    try:
        await until(lambda: revision(engine, a) == 1 and revision(engine, b) == 1)
        (tmp_path / "a.yaml").write_text("apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nspec: {chart: [\n")
        await until(lambda: bool(problems))
        assert problems[-1].errors[0].file.name == "a.yaml" and problems[-1].errors[0].line is not None
        assert a in engine.packages  # keeps its last good spec
        # ... and its row says so (a duplicate release name left it InSync with no sign the file was refused).
        view = engine.release(a)
        assert view is not None and view.last is not None and (view.last.action, view.last.ok) == (
            "package file", False) and "a.yaml" in view.last.message, view
        package(tmp_path, namespace, "b", values="{settings: {v: '2'}}")
        await until(lambda: revision(engine, b) == 2)
        assert revision(engine, a) == 1
        package(tmp_path, namespace, "a", values="{settings: {v: '2'}}")
        await until(lambda: revision(engine, a) == 2)
        assert engine.package_errors == []
        await until(lambda: getattr(getattr(engine.release(a), "last", None), "action", "") == "upgrade")
    finally:
        await engine.stop()


async def test_two_engines_one_acts_and_the_other_takes_over(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    package(tmp_path, namespace, "app", values="{settings: {v: '1'}}")
    lease = LeaseConfig("helmdeck-two-engines", namespace, duration=2.0, retry=0.3)
    first = build_engine(kube_target, helm, tmp_path, namespaces=[namespace], lease=dataclass_replace(lease, "first"))
    second = build_engine(kube_target, helm, tmp_path, namespaces=[namespace], lease=dataclass_replace(lease, "second"))
    await first.start()
    await second.start()
    key = (namespace, "app")
    try:
        await until(lambda: first.acting != second.acting)
        leader, follower = (first, second) if first.acting else (second, first)
        await until(lambda: revision(leader, key) == 1)
        assert follower.why_not("upgrade") is not None
        with pytest.raises(ActionRefused, match="holds the engine lease"):
            await follower.reconcile(key, force=True)
        await until(lambda: follower.release(key) is not None
                    and follower.release(key).state == st.IN_SYNC)  # type: ignore[union-attr]
        # The leader dies without giving the lease up.
        assert leader.elector is not None
        await leader.elector.stop(release=False)
        await leader.controller.queue.stop(0)
        await until(lambda: follower.acting, timeout=6.0)
        package(tmp_path, namespace, "app", values="{settings: {v: '2'}}")
        await until(lambda: revision(follower, key) == 2)
    finally:
        await first.stop()
        await second.stop()


def dataclass_replace(lease: LeaseConfig, identity: str) -> LeaseConfig:
    import dataclasses

    return dataclasses.replace(lease, identity=identity)


async def test_a_release_changed_outside_is_noticed_and_reconciled_back(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    from tests.conftest import run_helm

    package(tmp_path, namespace, "app", values="{settings: {v: declared}}")
    engine = build_engine(kube_target, helm, tmp_path, namespaces=[namespace])
    await engine.start()
    key = (namespace, "app")
    try:
        await until(lambda: revision(engine, key) == 1 and engine.release(key) is not None
                    and engine.release(key).state == st.IN_SYNC)  # type: ignore[union-attr]
        run_helm(helm, "upgrade", "app", str(EXAMPLES / "charts" / "settings"), "-n", namespace,
                 "--set", "settings.v=by-hand")
        # Noticed from storage at once (no interval wait): the engine upgrades back to the package.
        await until(lambda: revision(engine, key) == 3, timeout=20)
        latest = engine.observer.latest(*key) if engine.observer else None
        assert latest is not None and latest.config == {"settings": {"v": "declared"}}
        await asyncio.sleep(2)
        assert revision(engine, key) == 3  # and then it rests
    finally:
        await engine.stop()


async def test_cleanup_only_touches_its_own_package_set(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    team_a, team_b = tmp_path / "team-a", tmp_path / "team-b"
    team_a.mkdir()
    team_b.mkdir()
    package(team_a, namespace, "a1")
    package(team_a, namespace, "a2")
    package(team_b, namespace, "b1")
    engines = [build_engine(kube_target, helm, folder, namespaces=[namespace], watch_packages=False)
               for folder in (team_a, team_b)]
    try:
        for engine in engines:
            await engine.start(reconcile=False)
            for key in engine.packages:
                await engine.controller.run_pass(key)
        (team_a / "a2.yaml").unlink()
        engines[0].load_packages()
        planned = await engines[0].cleanup(dry_run=True)
        assert [(i.name, i.result) for i in planned if i.result == "would-remove"] == [("a2", "would-remove")]
        assert {i.name for i in planned} == {"a1", "a2"}  # b1 belongs to another package set: not even listed
        done = await engines[0].cleanup()
        assert [(i.name, i.result) for i in done if i.result == "removed"] == [("a2", "removed")]
        assert revision(engines[1], (namespace, "b1")) == 1
    finally:
        for engine in engines:
            await engine.stop()
