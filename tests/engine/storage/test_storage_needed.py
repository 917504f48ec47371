"""A command reads the release records it needs and no other (issue 36, goal 2): the observer narrowed to named
releases (and a package set's), an empty folder's ``reconcile --once`` that lists no release storage at all, and
``plan`` that still finds the releases it would prune, and ``status`` of a folder that prints (and reads) its
packages' releases alone, every release with ``--all``."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import pytest
from kubernetes import client

from engine.base.wire import MANAGED_BY, MANAGER, PACKAGE_SET
from engine.helm import Helm
from engine.kube.client import KubeTarget, api_client
from engine.runtime.assemble import build_engine
from engine.runtime.package_set import package_set_for
from engine.storage.observer import Observer
from helmdeck.cli import main
from testkit.packages import write_package
from tests.reconcile_harness import EXAMPLES
from tests.storage_cluster import wait_for
from tests.storage_records import new_secret, release, secret

pytestmark = pytest.mark.cluster


def labelled_secret(rel: dict[str, object], labels: dict[str, str]) -> client.V1Secret:
    """The Secret helm stores for ``rel`` with custom ``labels`` (helm's ``--labels``)."""
    obj = secret(rel, labels=labels)
    meta = obj["metadata"]
    return client.V1Secret(metadata=client.V1ObjectMeta(name=meta["name"], labels=meta["labels"]),
                           type=obj["type"], data=obj["data"])


def held(observer: Observer) -> set[str]:
    return {f"{o.name}.v{o.version}" for o in observer.observations().values()}


def test_the_observer_holds_the_named_releases_and_the_labelled_ones_only(
    kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str,
) -> None:
    for name in ("web", "api"):
        core_api.create_namespaced_secret(namespace, new_secret(release(1, name=name, namespace=namespace)))
    core_api.create_namespaced_secret(namespace, labelled_secret(release(1, name="old", namespace=namespace),
                                                                 {PACKAGE_SET: "mine"}))
    observers = {
        "every": Observer(api_client(kube_target), [namespace], driver="secret", watch_timeout=2),
        "named": Observer(api_client(kube_target), [namespace], driver="secret", watch_timeout=2,
                          releases={namespace: {"web"}}),
        "named and labelled": Observer(api_client(kube_target), [namespace], driver="secret", watch_timeout=2,
                                       releases={namespace: {"web"}}, labelled={PACKAGE_SET: "mine"}),
        "none": Observer(api_client(kube_target), [namespace], driver="secret", watch_timeout=2, releases={}),
    }
    try:
        for observer in observers.values():
            observer.start()
            assert observer.wait_synced(20)
        assert held(observers["every"]) == {"web.v1", "api.v1", "old.v1"}
        assert held(observers["named"]) == {"web.v1"}
        assert held(observers["named and labelled"]) == {"web.v1", "old.v1"}
        assert held(observers["none"]) == set() and observers["none"].relists == 0  # no list made at all
        # Live: a new revision of each; the narrowed observers see their own only.
        for name in ("api", "web", "old"):
            core_api.create_namespaced_secret(namespace, labelled_secret(
                release(2, name=name, namespace=namespace), {PACKAGE_SET: "mine"} if name == "old" else {}))
        wait_for(lambda: {"web.v2", "api.v2", "old.v2"} <= held(observers["every"]) or None, what="every revision")
        wait_for(lambda: {"web.v2", "old.v2"} <= held(observers["named and labelled"]) or None, what="v2 seen")
        wait_for(lambda: "web.v2" in held(observers["named"]) or None, what="web v2 seen")
        assert held(observers["named"]) == {"web.v1", "web.v2"}
        assert held(observers["named and labelled"]) == {"web.v1", "web.v2", "old.v1", "old.v2"}
        assert held(observers["none"]) == set()
    finally:
        for observer in observers.values():
            observer.stop()


def test_an_empty_folder_once_engine_reads_no_release_record(
    kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
) -> None:
    core_api.create_namespaced_secret(namespace, new_secret(release(1, name="other", namespace=namespace)))
    folder = tmp_path / "packages"
    folder.mkdir()

    async def held_by(records_of: str | None) -> tuple[int, list[str]]:
        engine = build_engine(kube_target, Helm("helm", kube_target), folder, namespaces=[namespace],
                              records_of=records_of, watch_packages=False, monitors=False)  # type: ignore[arg-type]
        await engine.start(reconcile=False)
        try:
            return engine.observer.relists, [v.name for v in engine.releases()]
        finally:
            await engine.stop()

    assert asyncio.run(held_by(None)) == (1, ["other"])  # every release: the namespace is listed
    assert asyncio.run(held_by("packages")) == (0, [])


def storage_lists(log: Path) -> list[str]:
    return [line for line in log.read_text().splitlines() if "storage list of" in line]


def test_reconcile_once_of_an_empty_folder_lists_no_storage_and_plan_lists_its_set_only(
    kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
    helm: Helm, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    folder = tmp_path / "packages"
    folder.mkdir()
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    identity = package_set_for(folder, None).identity
    core_api.create_namespaced_secret(namespace, new_secret(release(1, name="other", namespace=namespace)))
    core_api.create_namespaced_secret(namespace, labelled_secret(release(1, name="gone", namespace=namespace),
                                                                 {MANAGED_BY: MANAGER, PACKAGE_SET: identity}))
    common = ["--kubeconfig", str(kube_target.kubeconfig), "-n", namespace, "--packages", str(folder),
              "--helm", helm.binary, "--log-level", "debug"]
    logs = {command: tmp_path / f"{command}.log" for command in ("reconcile", "plan", "status")}
    assert main(["reconcile", "--once", *common, "--log-file", str(logs["reconcile"])]) == 0
    assert storage_lists(logs["reconcile"]) == []
    # plan lists the records of its package set's releases, to say what it would prune: "gone", not "other"
    capsys.readouterr()
    assert main(["plan", *common, "--log-file", str(logs["plan"]), "-o", "json"]) != 1
    plan = json.loads(capsys.readouterr().out)
    assert [(p["release"], p["action"]) for p in plan["packages"]] == [("gone", "uninstall")]
    assert plan["packages"][0]["removed"]  # its objects, from its record (held: labelled with the set)
    assert [line.rsplit(": ", 1)[-1].rstrip("'") for line in storage_lists(logs["plan"])] == [
        f"owner=helm,{PACKAGE_SET}={identity}"]
    # status prints the folder's packages' releases (none here) and lists no storage; with --all every
    # release, as helm list (the log's line is there when a list is made)
    capsys.readouterr()
    assert main(["status", *common, "--log-file", str(logs["status"]), "-o", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == []
    assert storage_lists(logs["status"]) == []
    every = tmp_path / "status-all.log"
    assert main(["status", "--all", *common, "--log-file", str(every), "-o", "json"]) == 0
    assert sorted(row["name"] for row in json.loads(capsys.readouterr().out)) == ["gone", "other"]
    assert [line.rsplit(": ", 1)[-1].rstrip("'") for line in storage_lists(every)] == ["owner=helm"]


def test_status_of_a_folder_prints_its_packages_releases_only(
    kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
    helm: Helm, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
) -> None:
    # As flux get helmreleases lists the HelmReleases Flux manages, not every release (helm list's job: --all).
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    folder = tmp_path / "packages"
    write_package(folder, "web", namespace, chart=str(EXAMPLES / "charts" / "web"))
    for name in ("web", "other"):
        core_api.create_namespaced_secret(namespace, new_secret(release(1, name=name, namespace=namespace)))
    log = tmp_path / "status.log"
    common = ["--kubeconfig", str(kube_target.kubeconfig), "-n", namespace, "--packages", str(folder),
              "--helm", helm.binary, "--log-level", "debug", "--log-file", str(log), "-o", "json"]
    assert main(["status", *common]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [(row["name"], row["package"], row["revision"]) for row in rows] == [("web", "web", 1)]
    assert [line.rsplit(": ", 1)[-1].rstrip("'") for line in storage_lists(log)] == ["owner=helm,name in (web)"]
    assert main(["status", "--all", *common]) == 0
    assert sorted(row["name"] for row in json.loads(capsys.readouterr().out)) == ["other", "web"]
