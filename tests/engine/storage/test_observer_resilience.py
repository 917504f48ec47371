"""Observer resilience on a real control plane: outages, 410 Gone, an API server restart.

The 410 and restart tests use a private cluster whose API server has no
watch cache and compacts etcd every second, so a watch resumed after a short
outage finds its resourceVersion compacted away (410 Gone), as it would
after a long one on a real cluster. It is started once for the module and
stopped at the end.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.kube.client import KubeTarget, api_client
from engine.storage.codec import record_name
from engine.storage.observer import Observer, StorageChange
from localcluster.cluster import LocalCluster
from tests.storage_cluster import FaultProxy, wait_for
from tests.storage_records import new_secret, release

pytestmark = pytest.mark.cluster

class Log:
    """Observer callbacks as ``(type, release name, revision, status)``; thread-safe."""

    def __init__(self, observer: Observer):
        self.items: list[tuple[str, str, int, str]] = []
        self._lock = threading.Lock()
        observer.subscribe(self._add)

    def _add(self, change: StorageChange) -> None:
        obs = change.observation
        name = change.key.name.removeprefix("sh.helm.release.v1.")
        entry = (change.type, name, obs.version if obs else 0, obs.status if obs else "")
        with self._lock:
            self.items.append(entry)

    def since(self, start: int, count: int, timeout: float = 30) -> list[tuple[str, str, int, str]]:
        wait_for(lambda: len(self.items) >= start + count, timeout, f"{count} callbacks")
        return self.items[start:]


class Store:
    """Writes release records to one namespace directly, as helm's secrets driver would."""

    def __init__(self, core: client.CoreV1Api, namespace: str):
        self.core = core
        self.namespace = namespace

    def write(self, name: str, version: int, status: str = "deployed") -> None:
        """Create or replace the record of ``name`` at ``version``."""
        body = new_secret(release(version, status, name=name, namespace=self.namespace))
        try:
            self.core.create_namespaced_secret(self.namespace, body)
        except ApiException as exc:
            if exc.status != 409:
                raise
            self.core.replace_namespaced_secret(record_name(name, version), self.namespace, body)

    def delete(self, name: str, version: int) -> None:
        self.core.delete_namespaced_secret(record_name(name, version), self.namespace)


def through(proxy: FaultProxy, target: KubeTarget) -> client.ApiClient:
    api = api_client(target)
    api.configuration.host = f"https://127.0.0.1:{proxy.port}"
    return api


@pytest.fixture(scope="module")
def compacting_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalCluster]:
    cluster = LocalCluster(
        tmp_path_factory.mktemp("compacting") / "cluster",
        extra_apiserver_args=("--watch-cache=false", "--etcd-compaction-interval=1s"),
    )
    cluster.up()
    yield cluster
    cluster.down()


def test_outage_resumes_from_the_last_resource_version(
    kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, local_cluster: LocalCluster,
) -> None:
    server = local_cluster.server
    assert server is not None
    proxy = FaultProxy(int(server.rsplit(":", 1)[1]))
    observer = Observer(through(proxy, kube_target), [namespace], driver="secret")
    log = Log(observer)
    store = Store(core_api, namespace)
    observer.start()
    try:
        assert observer.wait_synced(20)
        store.write("a", 1)
        assert log.since(0, 1) == [("ADDED", "a.v1", 1, "deployed")]
        proxy.cut()
        store.write("a", 1, "superseded")
        store.write("a", 2)
        store.write("b", 1)
        store.delete("b", 1)
        proxy.restore()
        # Every event of the outage, in order, once: the watch resumed, it did not relist.
        assert log.since(1, 4) == [
            ("MODIFIED", "a.v1", 1, "superseded"), ("ADDED", "a.v2", 2, "deployed"),
            ("ADDED", "b.v1", 1, "deployed"), ("DELETED", "b.v1", 0, "")]
        assert observer.relists == 1
        store.write("a", 2, "failed")
        assert log.since(5, 1) == [("MODIFIED", "a.v2", 2, "failed")] and len(log.items) == 6
    finally:
        observer.stop()
        proxy.close()


def test_410_gone_relists_and_emits_exactly_the_missed_transitions(compacting_cluster: LocalCluster) -> None:
    target = KubeTarget(compacting_cluster.kubeconfig)
    core = client.CoreV1Api(api_client(target))
    store = Store(core, "default")
    server = compacting_cluster.server
    assert server is not None
    proxy = FaultProxy(int(server.rsplit(":", 1)[1]))
    observer = Observer(through(proxy, target), ["default"], driver="secret")
    log = Log(observer)
    for name in ("keep", "change", "gone"):
        store.write(name, 1)
    observer.start()
    try:
        assert observer.wait_synced(20) and len(log.since(0, 3)) == 3
        proxy.cut()
        listed: Any = core.list_namespaced_secret("default")
        seen_rv = str(listed.metadata.resource_version)
        store.write("change", 1, "superseded")
        store.write("change", 1, "failed")  # two updates while away: one transition to the final state
        store.write("new", 1)
        store.write("brief", 1)
        store.delete("brief", 1)  # created and deleted while away: no transition at all
        store.delete("gone", 1)
        wait_for(lambda: _compacted(core, seen_rv), 30, "etcd to compact past the outage")
        proxy.restore()
        missed = sorted(log.since(3, 3))
        assert missed == [("ADDED", "new.v1", 1, "deployed"), ("DELETED", "gone.v1", 0, ""),
                          ("MODIFIED", "change.v1", 1, "failed")]
        assert observer.relists == 2
        store.write("new", 2)  # and the watch goes on after the relist
        assert log.since(6, 1) == [("ADDED", "new.v2", 2, "deployed")] and len(log.items) == 7
        assert sorted(k[1] for k in observer.releases()) == ["change", "keep", "new"]
    finally:
        observer.stop()
        proxy.close()


def _compacted(core: client.CoreV1Api, resource_version: str) -> bool:
    """True once a watch from ``resource_version`` is answered 410 Gone."""
    try:
        resp: Any = core.list_namespaced_secret("default", watch=True, resource_version=resource_version,
                                                timeout_seconds=1, _preload_content=False)
    except ApiException as exc:
        return bool(exc.status == 410)
    try:
        return b'"code":410' in resp.read()
    finally:
        resp.release_conn()


def test_api_server_restart_mid_watch(compacting_cluster: LocalCluster) -> None:
    target = KubeTarget(compacting_cluster.kubeconfig)
    core = client.CoreV1Api(api_client(target))
    store = Store(core, "default")
    observer = Observer(api_client(target), ["default"], driver="secret")
    log = Log(observer)
    observer.start()
    try:
        assert observer.wait_synced(20)
        start = len(log.items)
        store.write("restart", 1)
        assert log.since(start, 1) == [("ADDED", "restart.v1", 1, "deployed")]
        compacting_cluster.restart("kube-apiserver", grace=2)
        store.write("restart", 1, "superseded")
        store.write("restart", 2)
        assert sorted(log.since(start + 1, 2)) == [
            ("ADDED", "restart.v2", 2, "deployed"), ("MODIFIED", "restart.v1", 1, "superseded")]
        assert len(log.items) == start + 3  # nothing seen twice
        assert observer.problems() == {}
    finally:
        observer.stop()
