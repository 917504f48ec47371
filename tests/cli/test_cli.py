"""The headless command line, run as a user would (subprocesses against the local cluster)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget, api_client
from helmdeck.cli import EXIT_CONVERGED, EXIT_FAILED, EXIT_STALLED
from testkit.packages import write_package
from tests.reconcile_harness import EXAMPLES


def helmdeck(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run the helmdeck command line as a user would (output captured, at most ``timeout`` seconds); the
    one runner of the tests."""
    return subprocess.run([sys.executable, "-m", "helmdeck", *args], capture_output=True, text=True,
                          timeout=timeout, check=False)


def cluster_args(helm: Helm, target: KubeTarget, namespace: str, packages: Path, log: Path) -> list[str]:
    return ["--kubeconfig", str(target.kubeconfig), "--helm", helm.binary, "-n", namespace,
            "--packages", str(packages), "--log-file", str(log)]


def flaky(folder: Path, namespace: str, values: str, timeout: str = "20s") -> Path:
    folder.mkdir(exist_ok=True)
    (folder / "app.yaml").write_text(
        f"apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata:\n  name: app\n  namespace: {namespace}\n"
        f"spec:\n  chart: {EXAMPLES / 'charts' / 'flaky'}\n  timeout: {timeout}\n  values: {values}\n")
    return folder


@pytest.mark.parametrize("command", ["", "demo", "cluster", "cluster up", "reconcile", "status", "render", "diff",
                                     "cleanup", "plan"])
def test_help_for_every_command(command: str) -> None:
    proc = helmdeck(*command.split(), "--help", timeout=30)
    assert proc.returncode == 0 and "usage: helmdeck" in proc.stdout


@pytest.mark.cluster
def test_reconcile_once_exit_codes_and_json_lines(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    log = tmp_path / "helmdeck.log"
    cases = [("{message: fine, password: hunter2-do-not-log}", EXIT_CONVERGED, "InSync"),
             ("{renderError: true}", EXIT_FAILED, "Absent"),
             ("{fail: true}", EXIT_STALLED, "Stalled")]
    core = client.CoreV1Api(api_client(kube_target))
    for i, (values, code, state) in enumerate(cases):
        ns = f"{namespace}-{i}"
        pkgs = flaky(tmp_path / f"p{i}", ns, values, "60s")  # converges fast; 60 s on a loaded CI
        args = ["reconcile", "--once", "--json", "--no-lease", *cluster_args(helm, kube_target, ns, pkgs, log)]
        # The release namespace must exist (Flux's default: install.createNamespace false).
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
        try:
            proc = helmdeck(*args)
        finally:
            core.delete_namespace(ns, propagation_policy="Background")
        assert proc.returncode == code, proc.stdout + proc.stderr
        lines = [json.loads(line) for line in proc.stdout.splitlines()]
        result = [ln for ln in lines if ln["type"] == "result"]
        assert result == [{"type": "result", "namespace": ns, "release": "app", "state": state,
                           "converged": code == EXIT_CONVERGED, "suspended": False, "message": result[0]["message"]}]
        events = [ln for ln in lines if ln["type"] == "event"]
        assert events and all({"time", "action", "outcome", "message", "helmOutput"} <= set(e) for e in events)
    text = log.read_text()
    assert "install" in text and "hunter2-do-not-log" not in text  # values never reach the log


@pytest.mark.cluster
def test_status_json(helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path) -> None:
    pkgs = flaky(tmp_path / "p", namespace, "{message: hi}")
    log = tmp_path / "log"
    assert helmdeck("reconcile", "--once", "--no-lease", *cluster_args(helm, kube_target, namespace, pkgs,
                                                                       log)).returncode == 0
    proc = helmdeck("status", "-o", "json", *cluster_args(helm, kube_target, namespace, pkgs, log))
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert len(rows) == 1
    row = rows[0]
    assert {k: row[k] for k in ("namespace", "name", "package", "revision", "status", "state", "ready",
                                "maintenance", "suspended")} == {
        "namespace": namespace, "name": "app", "package": "app", "revision": 1, "status": "deployed",
        "state": "InSync", "ready": True, "maintenance": "", "suspended": False}
    assert row["monitor"] == {"state": "active", "paused": 0, "absent": [], "problem": None}
    ready = [c for c in row["conditions"] if c["type"] == "Ready"]
    assert ready == [{"type": "Ready", "status": "True", "reason": "InstallSucceeded", "message": ready[0]["message"]}]
    table = helmdeck("status", *cluster_args(helm, kube_target, namespace, pkgs, log))
    assert table.returncode == 0 and "InSync" in table.stdout and table.stdout.startswith("NAMESPACE")


def test_an_unreachable_api_server_is_an_error_not_an_empty_list(tmp_path: Path) -> None:
    # status printed an empty table and exited 0 after 30 s; plan and cleanup ended in a urllib3 traceback.
    # As helm ("Kubernetes cluster unreachable"), each says so and fails, after a few tries, not 30 s.
    import socket

    with socket.socket() as sock:  # a port nothing listens on
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: gone\n"
        f"clusters: [{{name: gone, cluster: {{server: 'https://127.0.0.1:{port}', insecure-skip-tls-verify: true}}}}]\n"
        "users: [{name: u, user: {token: t}}]\ncontexts: [{name: gone, context: {cluster: gone, user: u}}]\n")
    (tmp_path / "p").mkdir()
    # reconcile --once reads the storage of its packages' releases only (an empty folder's none: issue 36), so
    # it is given one package
    write_package(tmp_path / "q", "web", chart=str(EXAMPLES / "charts" / "web"))
    base = ["--kubeconfig", str(kubeconfig), "--log-file", str(tmp_path / "log")]
    for command in (["status"], ["plan", "--packages", str(tmp_path / "p")],
                    ["cleanup", "--dry-run", "--packages", str(tmp_path / "p")],
                    ["reconcile", "--once", "--no-lease", "--packages", str(tmp_path / "q")]):
        proc = helmdeck(*command, *base, timeout=25)  # the storage wait was 30 s
        assert proc.returncode == EXIT_FAILED, (command, proc.stdout, proc.stderr)
        assert "error: cannot list Helm's storage in all namespaces" in proc.stderr, (command, proc.stderr)
        assert f"cannot reach the API server at https://127.0.0.1:{port} (" in proc.stderr, (command, proc.stderr)
        assert "Connection refused" in proc.stderr and "Traceback" not in proc.stderr, (command, proc.stderr)


def test_a_context_switch_reconciles_the_packages_on_the_started_context_only(tmp_path: Path) -> None:
    # `C` rebuilt the engine with every flag on the chosen context, --packages too: the folder's packages were
    # then reconciled on whatever cluster the operator only meant to look at.
    from helmdeck.app import context_switch
    from helmdeck.cli import build_parser

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: dev\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:9'}}]\nusers: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: dev, context: {cluster: c, user: u}}, {name: prod, context: {cluster: c, user: u}}]\n")
    pkgs = flaky(tmp_path / "p", "ns", "{}")
    args = build_parser().parse_args(["--kubeconfig", str(kubeconfig), "-n", "ns", "--packages", str(pkgs),
                                      "--prune", "--helm", sys.executable])
    switch = context_switch(args, "dev")
    assert switch.names() == ["dev", "prod"]
    prod = switch.build("prod")
    assert prod.controller.package_input is None and prod.packages == {}  # shown, never reconciled from the folder
    assert str(pkgs) in switch.note("prod") and "--context prod" in switch.note("prod")
    dev = switch.build("dev")  # back on the started context: its packages again
    assert dev.controller.package_input is not None and switch.note("dev") == ""


def test_the_engine_lease_says_what_holds_it(tmp_path: Path) -> None:
    # The app's and a reconcile's Leases are labelled with what they are, so a reconcile kept waiting names "the
    # app" rather than a bare host-pid identity, and says what to do about each holder.
    from engine.base.wire import ROLE
    from engine.runtime.drive.lease import held_fix, holder_said
    from helmdeck import builder
    from helmdeck.cli import build_parser

    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: dev\nclusters: [{name: c, cluster: {server: "
        "'https://127.0.0.1:9'}}]\nusers: [{name: u, user: {token: t}}]\n"
        "contexts: [{name: dev, context: {cluster: c, user: u}}]\n")
    pkgs = flaky(tmp_path / "p", "ns", "{}")
    for command, role in (([], "app"), (["reconcile"], "reconcile")):
        args = build_parser().parse_args([*command, "--kubeconfig", str(kubeconfig), "-n", "ns", "--packages",
                                          str(pkgs), "--helm", sys.executable])
        lease = builder.engine(args).lease_config
        assert lease is not None and (ROLE, role) in lease.labels, (command, lease)
    assert holder_said("ws-4242-ab12", "app") == "helmdeck's app (ws-4242-ab12)"
    assert holder_said("web-7d9f", "controller") == "a helmdeck controller (web-7d9f)"
    assert holder_said("ws-1-ab12", "") == "another helmdeck instance (ws-1-ab12)"  # an older helmdeck's Lease
    assert held_fix("app").startswith("quit the app (q)") and "--no-lease" in held_fix("app")
    assert "stop it (scale it to 0)" in held_fix("controller") and "--no-lease" in held_fix("")


@pytest.mark.cluster
def test_reconcile_once_says_at_once_that_it_waits_for_a_held_lease(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    # The wait for a held lease (a lease duration, proving the holder alive) was 20 s of silence; then it named
    # the holder's identity alone. It says what holds it (the Lease's role label) and what to do, and stops
    # waiting once the holder is seen renewing it (alive: it would not go within the lease's 15 s).
    (tmp_path / "p").mkdir()
    args = [*cluster_args(helm, kube_target, namespace, tmp_path / "p", tmp_path / "log"),
            "--lease-namespace", namespace]
    holder = subprocess.Popen([sys.executable, "-m", "helmdeck", "reconcile", *args], stdout=subprocess.DEVNULL,
                              stderr=subprocess.DEVNULL)
    try:
        leases = client.CoordinationV1Api(api_client(kube_target))
        deadline = time.monotonic() + 60
        def held() -> bool:
            return any(lease.spec is not None and lease.spec.holder_identity
                       for lease in leases.list_namespaced_lease(namespace).items)

        while not held():
            assert holder.poll() is None and time.monotonic() < deadline, "the long-running reconcile took no lease"
            time.sleep(0.2)
        [lease] = leases.list_namespaced_lease(namespace).items
        assert lease.spec is not None
        said = f"helmdeck reconcile ({lease.spec.holder_identity})"
        start = time.monotonic()
        proc = helmdeck("reconcile", "--once", *args, timeout=90)
        took = time.monotonic() - start
        assert proc.returncode == EXIT_FAILED, proc.stderr
        lines = proc.stderr.splitlines()
        assert lines[0].startswith(f"note: {said} holds the engine lease; waiting up to 15 s"), lines
        assert f"error: {said} holds the engine lease; nothing was reconciled (stop that reconcile" in proc.stderr
        assert "or pass --no-lease to act beside it" in proc.stderr
        assert took < 15, f"waited {took:.1f} s for a holder seen renewing"  # not the lease duration: 2 s renewals
    finally:
        holder.terminate()
        holder.wait(60)
