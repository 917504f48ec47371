"""Package sets on the real cluster: two folders of one base name never touch each other's releases or
Leases, and a release labelled the old way (``helmdeck-<base name>``) is adopted by its own set only."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.reconcile import state as st
from engine.runtime.assemble import build_engine
from helmdeck import builder
from helmdeck.cli import build_parser
from tests.cli.test_cli import cluster_args, helmdeck
from tests.engine.runtime.test_runtime import package, revision, until

pytestmark = pytest.mark.cluster


def folders(tmp_path: Path) -> tuple[Path, Path]:
    a, b = tmp_path / "a" / "pkgs", tmp_path / "b" / "pkgs"
    a.mkdir(parents=True)
    b.mkdir(parents=True)
    return a, b


def record_labels(core: client.CoreV1Api, namespace: str, release: str = "") -> list[dict[str, str]]:
    """The labels of the storage records in ``namespace`` (of ``release`` only, when given), oldest first."""
    selector = f"owner=helm,name={release}" if release else "owner=helm"
    items: list[Any] = core.list_namespaced_secret(namespace, label_selector=selector).items
    found = [dict(s.metadata.labels) for s in items]
    return sorted(found, key=lambda labels: int(labels["version"]))


def set_labels(core: client.CoreV1Api, namespace: str, release: str) -> list[str | None]:
    """The package-set label of each of ``release``'s storage records, oldest first."""
    return [labels.get("helmdeck.dev/package-set") for labels in record_labels(core, namespace, release)]


def test_cleanup_of_one_folder_never_removes_another_folders_releases(
    helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
) -> None:
    a, b = folders(tmp_path)
    package(a, namespace, "a1")
    package(a, namespace, "a2")
    package(b, namespace, "b1")
    for folder in (a, b):
        done = helmdeck("reconcile", "--once", "--no-lease",
                        *cluster_args(helm, kube_target, namespace, folder, tmp_path / "log"))
        assert done.returncode == 0, done.stdout + done.stderr
    (a / "a2.yaml").unlink()
    args = cluster_args(helm, kube_target, namespace, a, tmp_path / "log")
    listed = helmdeck("cleanup", "--dry-run", *args)
    assert listed.returncode == 0, listed.stderr
    assert [line.split()[:2] for line in listed.stdout.splitlines() if line.startswith("would-remove")] == \
        [["would-remove", f"{namespace}/a2"]]
    assert f"{namespace}/b1" not in listed.stdout  # b's releases are not this set's: not even listed
    proc = helmdeck("cleanup", "--yes", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    remaining = {labels["name"] for labels in record_labels(core_api, namespace)}
    assert remaining == {"a1", "b1"}
    other = helmdeck("cleanup", "--dry-run", *cluster_args(helm, kube_target, namespace, b, tmp_path / "log"))
    assert "would-remove" not in other.stdout, other.stdout


async def test_two_folders_with_one_base_name_each_lead_their_own_lease(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    engines = []
    for folder in folders(tmp_path):
        args = build_parser().parse_args([
            "reconcile", "--kubeconfig", str(kube_target.kubeconfig), "--helm", helm.binary, "-n", namespace,
            "--packages", str(folder), "--lease-namespace", namespace, "--log-file", str(tmp_path / "log")])
        engines.append(builder.engine(args))
    first, second = engines
    assert first.lease_config is not None and second.lease_config is not None
    assert first.lease_config.name != second.lease_config.name
    try:
        for engine in engines:
            await engine.start(reconcile=False)
        # Before, both were "helmdeck-pkgs": the second became a read-only follower of the first.
        await until(lambda: first.acting and second.acting, timeout=15)
    finally:
        for engine in engines:
            await engine.stop()


async def test_a_release_labelled_the_old_way_is_adopted_by_its_own_set_only(
    helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
) -> None:
    a, b = folders(tmp_path)
    package(a, namespace, "app")
    package(b, namespace, "other")
    key = (namespace, "app")
    # An older helmdeck labelled a's releases with the folder's base name: "helmdeck-pkgs".
    old = build_engine(kube_target, helm, a, namespaces=[namespace], watch_packages=False, package_set="helmdeck-pkgs")
    await old.start(reconcile=False)
    try:
        await old.controller.run_pass(key)
        await old.controller.run_pass(key)  # a second pass rests: one revision
    finally:
        await old.stop()
    assert set_labels(core_api, namespace, "app") == ["helmdeck-pkgs"]

    # b has the same base name but does not declare the release: its cleanup lists it, never removes it.
    other = build_engine(kube_target, helm, b, namespaces=[namespace], watch_packages=False)
    await other.start(reconcile=False)
    try:
        await other.controller.run_pass((namespace, "other"))
        items = await other.cleanup()
        app = [i for i in items if i.name == "app"]
        assert [i.result for i in app] == ["skipped"] and "older helmdeck" in app[0].message
    finally:
        await other.stop()
    assert set_labels(core_api, namespace, "app") == ["helmdeck-pkgs"]

    # a's next pass relabels every record as a's set, without a new revision, and the release stays ours.
    engine = build_engine(kube_target, helm, a, namespaces=[namespace], watch_packages=False)
    assert engine.package_set is not None
    await engine.start(reconcile=False)
    try:
        result = await engine.controller.run_pass(key)
        assert result.state == st.IN_SYNC, result
        assert set_labels(core_api, namespace, "app") == [engine.package_set.identity]
        assert revision(engine, key) == 1
        await engine.controller.run_pass(key)
        assert revision(engine, key) == 1
        (a / "app.yaml").unlink()
        engine.load_packages()
        planned = await engine.cleanup(dry_run=True)
        assert [(i.name, i.result) for i in planned] == [("app", "would-remove")]  # now provably a's
    finally:
        await engine.stop()

    # A third folder declaring the same release is refused: it belongs to a's set.
    c = tmp_path / "c" / "pkgs"
    c.mkdir(parents=True)
    package(c, namespace, "app", values="{settings: {v: other}}")
    third = build_engine(kube_target, helm, c, namespaces=[namespace], watch_packages=False)
    await third.start(reconcile=False)
    try:
        refused = await third.controller.run_pass(key)
        assert refused.state == "Failed" and "belongs to package set" in refused.message, refused
        assert "--package-set" in refused.message
        await asyncio.sleep(0.5)
        assert revision(third, key) == 1
    finally:
        await third.stop()
    # ... and its refusal is not stored over a's status: a's next start reads its release as in sync (a's
    # status showed c's refusal, Failed, until a's next pass).
    owner = build_engine(kube_target, helm, a, namespaces=[namespace], watch_packages=False)
    package(a, namespace, "app")
    await owner.start(reconcile=False)
    try:
        view = owner.release(key)
        assert view is not None and view.state == st.IN_SYNC and view.ready is True, view
    finally:
        await owner.stop()
