"""An OCIRepository's ``ref`` on the local cluster and its real OCI registry: a version pinned by tag
(``ref.tag``, build metadata written in its tag form) moves the release to that version, and
``ref.semverFilter`` is honoured alike by the resolution, the row's newer-version marker and the
version picker's list; ``ref.digest`` pins the exact artifact."""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.runtime.assemble import build_engine
from engine.runtime.state import ActionOutcome
from localcluster.cluster import LocalCluster
from testkit.chart_sources import oci_folder, package_chart, push_oci

pytestmark = pytest.mark.cluster


async def test_a_tag_pin_moves_the_release_to_that_tag(
    helm: Helm, namespace: str, kube_target: KubeTarget, tmp_path: Path, local_cluster: LocalCluster,
    helm_home: dict[str, str], session_cache: Path,
) -> None:
    h = helm.binary
    base = f"{local_cluster.registry}/tag-{uuid.uuid4().hex[:8]}"
    pushed = {}
    for version in ("1.0.0", "1.1.0+b.2"):  # helm pushes 1.1.0+b.2 as the tag 1.1.0_b.2
        pushed[version] = push_oci(h, package_chart(h, tmp_path, version, marker=f"t-{version}"), base,
                                   env=helm_home)
    pkgs = tmp_path / "packages"
    source = oci_folder(pkgs, namespace, base, "    tag: 1.0.0   # the tested one\n")
    engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace])
    key = (namespace, "web")
    await engine.start(reconcile=False)
    try:
        first = await engine.reconcile(key)
        assert isinstance(first, ActionOutcome) and first.ok, first
        listed = await engine.chart_versions(key)
        assert listed.range == "tag 1.0.0"
        assert [(r.version, r.in_range, r.deployed) for r in listed.rows] == [
            ("1.1.0+b.2", False, False), ("1.0.0", True, True)]
        pinned = await engine.pin(key, "1.1.0+b.2")
        assert (pinned.file.name, pinned.field, pinned.before, pinned.after) == (
            "source.yaml", "spec.ref.tag", "1.0.0", "1.1.0_b.2")
        assert (pkgs / "source.yaml").read_text() == source.replace("tag: 1.0.0 ", "tag: 1.1.0_b.2 ")
        done = await engine.reconcile(key)
        assert isinstance(done, ActionOutcome) and done.ok, done
        obs = engine.observer.latest(*key)
        # As Flux's mutateChartWithSourceRevision: the build metadata is replaced by the manifest digest's 12 hex
        digest12 = pushed["1.1.0+b.2"].removeprefix("sha256:")[:12]
        assert obs is not None and (obs.version, obs.status, obs.chart_version) == (2, "deployed", f"1.1.0+{digest12}")
        request = engine.packages[key].chart_request
        artifact = engine.controller.charts.last(request) if request is not None else None
        assert artifact is not None and session_cache in artifact.path.parents  # the suite's cache, not the user's
        view = engine.release(key)
        assert view is not None and view.chart_update is None
    finally:
        await engine.stop()


async def test_semver_filter_selects_lists_and_marks_only_the_tags_it_matches(
    helm: Helm, namespace: str, kube_target: KubeTarget, tmp_path: Path, local_cluster: LocalCluster,
    helm_home: dict[str, str],
) -> None:
    h = helm.binary
    base = f"{local_cluster.registry}/filter-{uuid.uuid4().hex[:8]}"
    pushed = {}
    for version in ("1.0.0-rc.1", "1.0.0", "1.1.0-rc.1", "2.0.0"):
        pushed[version] = push_oci(h, package_chart(h, tmp_path, version, marker=f"f-{version}"), base,
                                   env=helm_home)
    pkgs = tmp_path / "packages"
    oci_folder(pkgs, namespace, base, "    semver: '>=1.0.0-0'\n    semverFilter: '-rc'   # release candidates\n")
    engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace])
    key = (namespace, "web")
    await engine.start(reconcile=False)
    try:
        first = await engine.reconcile(key)
        assert isinstance(first, ActionOutcome) and first.ok, first
        obs = engine.observer.latest(*key)
        digest12 = pushed["1.1.0-rc.1"].removeprefix("sha256:")[:12]
        assert obs is not None and obs.chart_version == f"1.1.0-rc.1+{digest12}"  # 2.0.0 is newer: no candidate
        view = engine.release(key)  # the tag list the pass resolved from marks the row: nothing newer
        assert view is not None and view.chart_update is None
        listed = await engine.chart_versions(key)
        assert listed.range == "semver '>=1.0.0-0' (tags matching '-rc')"
        assert [(r.version, r.in_range, r.deployed) for r in listed.rows] == [
            ("1.1.0-rc.1", True, True), ("1.0.0-rc.1", True, False)]
        view = engine.release(key)
        assert view is not None and view.chart_update is None
    finally:
        await engine.stop()


async def test_a_digest_pin_installs_that_artifact_and_a_repushed_tag_does_not_move_it(
    helm: Helm, namespace: str, kube_target: KubeTarget, tmp_path: Path, local_cluster: LocalCluster,
    helm_home: dict[str, str], core_api: client.CoreV1Api,
) -> None:
    """As Flux, ``ref.digest`` comes before ``tag`` and ``semver``: the release gets exactly that manifest's chart
    (pulled by digest), a tag pushed again with other content does not move it, and the picker and the
    newer-version marker say the chart is pinned by digest."""
    h = helm.binary
    base = f"{local_cluster.registry}/digest-{uuid.uuid4().hex[:8]}"
    first = push_oci(h, package_chart(h, tmp_path, "1.0.0", marker="first"), base, env=helm_home)
    pkgs = tmp_path / "packages"
    oci_folder(pkgs, namespace, base, f"    digest: {first}\n    tag: 1.0.0\n    semver: '>=1.0.0'\n")
    engine = build_engine(kube_target, helm, pkgs, namespaces=[namespace])
    key = (namespace, "web")
    await engine.start(reconcile=False)
    try:
        done = await engine.reconcile(key)
        assert isinstance(done, ActionOutcome) and done.ok, done
        digest12 = first.removeprefix("sha256:")[:12]

        def deployed() -> tuple[str, str]:
            obs = engine.observer.latest(*key)
            data = core_api.read_namespaced_config_map("web-marker", namespace).data or {}
            return (obs.chart_version if obs is not None else "", data.get("marker", ""))

        assert deployed() == (f"1.0.0+{digest12}", "first")
        again = push_oci(h, package_chart(h, tmp_path, "1.0.0", marker="second"), base, env=helm_home)
        push_oci(h, package_chart(h, tmp_path, "1.1.0", marker="newer"), base, env=helm_home)
        assert again != first
        request = engine.packages[key].chart_request
        assert request is not None and engine.controller.charts.due(request) == float("inf")
        assert await engine.reconcile(key) is None  # the tag names other content now, the digest does not
        forced = await engine.reconcile(key, force=True)  # a forced upgrade takes the same artifact again
        assert isinstance(forced, ActionOutcome) and forced.ok, forced
        assert deployed() == (f"1.0.0+{digest12}", "first")
        listed = await engine.chart_versions(key)
        assert listed.by_digest and listed.range == f"pinned by digest {first}"
        assert [(r.version, r.in_range, r.deployed) for r in listed.rows] == [
            ("1.1.0", None, False), ("1.0.0", None, True)]
        view = engine.release(key)
        assert view is not None and view.chart_update is not None
        assert (view.chart_update.version, view.chart_update.by_digest) == ("1.1.0", True)
    finally:
        await engine.stop()
