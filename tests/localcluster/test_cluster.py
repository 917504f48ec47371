"""The local control plane: real components, versions, idempotent up, clean down."""

from __future__ import annotations

import json
import os
import socket
import time
from pathlib import Path

import pytest
from kubernetes import client

from engine.base import tools
from localcluster import build
from localcluster.cluster import CONTAINER_LOG_LINES, FAKE_NODE, LocalCluster, exit_reason
from localcluster.process import listen_ports

pytestmark = pytest.mark.cluster


def test_cluster_is_ready_with_stamped_version(local_cluster: LocalCluster, core_api: client.CoreV1Api) -> None:
    status = local_cluster.status()
    assert status.ready, "\n".join(status.lines())
    assert all(status.running.values())
    assert status.versions["kube-apiserver"] == tools.KUBERNETES_VERSION
    node = core_api.read_node(FAKE_NODE)
    assert node.status is not None and node.status.conditions
    ready = {c.type: c.status for c in node.status.conditions}
    assert ready["Ready"] == "True"
    sa = core_api.read_namespaced_service_account("default", "default")
    assert sa.metadata is not None and sa.metadata.name == "default"


def test_pods_log_is_served_by_kwok_through_the_api_server(core_api: client.CoreV1Api, namespace: str) -> None:
    """kwok's ClusterLogs: every container's log is the cluster's container-logs.log, proxied as pods/log."""
    pod = client.V1Pod(metadata=client.V1ObjectMeta(name="talker"),
                       spec=client.V1PodSpec(containers=[client.V1Container(name="app", image="busybox")]))
    core_api.create_namespaced_pod(namespace, pod)
    deadline = time.monotonic() + 60
    while getattr(core_api.read_namespaced_pod("talker", namespace).status, "phase", None) != "Running":
        assert time.monotonic() < deadline, "the pod never ran"
        time.sleep(0.2)
    text = core_api.read_namespaced_pod_log("talker", namespace, container="app", tail_lines=10)
    assert text.splitlines() == list(CONTAINER_LOG_LINES)


@pytest.mark.serial  # were the cluster slow to answer up's readiness check, up would restart it under other tests
def test_up_again_is_a_no_op(local_cluster: LocalCluster) -> None:
    before = local_cluster._load()[1]
    local_cluster.up()
    after = local_cluster._load()[1]
    assert {k: v.pid for k, v in before.items()} == {k: v.pid for k, v in after.items()}


def test_second_cluster_starts_though_its_port_is_taken_and_down_frees_ports(tmp_path: Path) -> None:
    # A second cluster while the session's runs; the port it would give kube-controller-manager is bound (not
    # listening, as between another process's bind and listen): the start says so, keeps the log and retries.
    cluster = LocalCluster(tmp_path / "second")
    cluster.logs_dir.mkdir(parents=True)
    chosen = listen_ports(7)
    taken = chosen[3]
    (tmp_path / "second" / "state.json").write_text(json.dumps({"ports": dict(zip(
        ["etcd_client", "etcd_peer", "apiserver", "controller_manager", "scheduler", "kwok", "registry"], chosen,
        strict=True)), "processes": {}}))
    said: list[str] = []
    try:
        with socket.socket() as holder:
            holder.bind(("127.0.0.1", taken))
            cluster.up(progress=said.append)
        assert any(f"kube-controller-manager exited during start-up: port {taken} is in use; see " in m
                   and m.endswith("starting again on other ports") for m in said), said
        assert "address already in use" in cluster.log_path("kube-controller-manager").read_text()
        ports, procs = cluster._load()
        assert cluster.is_ready() and taken not in ports.all()
        pids = {rec.pid for rec in procs.values()}
        stopped = cluster.down()
        assert sorted(stopped) == sorted(procs)
        for pid in pids:
            assert not Path(f"/proc/{pid}").exists() or _zombie(pid)
        for port in ports.all():
            with socket.socket() as s:
                assert s.connect_ex(("127.0.0.1", port)) != 0, f"port {port} still listening"
        assert cluster.status().running == dict.fromkeys(stopped, False)
        assert cluster.down() == []  # nothing left to stop
    finally:
        cluster.down()  # a failed assertion must not leave a second control plane running


def _zombie(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0] == "Z"
    except OSError:
        return True


def test_binaries_are_cached_outside_the_repo() -> None:
    repo = Path(__file__).resolve().parents[2]
    for name in build.COMPONENTS:
        comp = build.COMPONENTS[name]
        assert comp.is_built() or comp.on_demand, name  # cosign: on a binaries mark
        assert repo not in comp.bin_dir().parents
    assert os.access(build.binary("helm4"), os.X_OK)


def test_registry_runs_with_the_cluster_and_status_json_names_it(local_cluster: LocalCluster, tmp_path: Path) -> None:
    import json
    import subprocess
    import sys

    from localcluster import registry

    status = local_cluster.status()
    assert status.running["registry"] and status.registry == local_cluster.registry
    assert status.registry is not None and status.registry.startswith("127.0.0.1:")
    assert registry.ping(int(status.registry.rsplit(":", 1)[1]))
    proc = subprocess.run(
        [sys.executable, "-m", "helmdeck", "cluster", "status", "-o", "json",
         "--cluster-dir", str(local_cluster.state_dir)],
        capture_output=True, text=True, timeout=60, check=False,
    )
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["registry"] == status.registry and data["server"] == local_cluster.server
    assert data["kubeconfig"] == str(local_cluster.kubeconfig) and data["ready"] is True
    # Plain HTTP, no auth: helm pushes and pulls as is.
    helm = str(build.binary("helm4"))
    chart = tmp_path / "c"
    subprocess.run([helm, "create", str(chart)], check=True, capture_output=True)
    subprocess.run([helm, "package", str(chart), "-d", str(tmp_path)], check=True, capture_output=True)
    env = {**os.environ, "HELM_REGISTRY_CONFIG": str(tmp_path / "reg.json")}
    push = subprocess.run([helm, "push", str(tmp_path / "c-0.1.0.tgz"), f"oci://{status.registry}/cluster-test",
                           "--plain-http"], capture_output=True, text=True, env=env, check=False)
    assert push.returncode == 0, push.stderr
    assert "Digest: sha256:" in push.stdout + push.stderr


def test_exit_reason_names_the_port_in_use_else_the_last_line(tmp_path: Path) -> None:
    log = tmp_path / "c.log"
    log.write_text("--- start\nE1201 failed to listen on 127.0.0.1:24567: listen tcp 127.0.0.1:24567: bind: "
                   "address already in use\n")
    assert exit_reason(log) == ("port 24567 is in use", 24567)
    log.write_text("--- start\nsomething else broke\n\n")
    assert exit_reason(log) == ("something else broke", None)
    assert exit_reason(tmp_path / "none.log") == ("", None)
