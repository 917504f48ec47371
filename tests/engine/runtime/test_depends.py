"""spec.dependsOn on the local cluster: a package is held while its dependency fails, then both converge;
a cycle is refused at load naming the files."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import IO, Any

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.runtime.drive.holds import DEPENDENCY_RETRY
from tests.cli.test_cli import cluster_args, helmdeck

pytestmark = pytest.mark.cluster

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"


def package(folder: Path, name: str, namespace: str, values: str, depends: tuple[str, ...] = ()) -> Path:
    folder.mkdir(exist_ok=True)
    deps = "  dependsOn:\n" + "".join(f"    - name: {d}\n" for d in depends) if depends else ""
    (folder / f"{name}.yaml").write_text(
        f"apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata:\n  name: {name}\n  namespace: {namespace}\n"
        f"spec:\n  chart: {EXAMPLES / 'charts' / 'flaky'}\n  timeout: 20s\n  values: {values}\n{deps}")
    return folder


def lines(stdout: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]


def test_depends_on_holds_a_package_while_its_dependency_fails_then_both_converge(
    helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
) -> None:
    pkgs = package(tmp_path / "p", "base", namespace, "{fail: true}")
    package(pkgs, "app", namespace, "{message: hi}", depends=("base",))
    args = ["reconcile", "--once", "--no-lease", "--json", *cluster_args(helm, kube_target, namespace, pkgs,
                                                                         tmp_path / "log")]
    held = helmdeck(*args)
    assert held.returncode != 0, held.stdout
    results = {r["release"]: r for r in lines(held.stdout) if r["type"] == "result"}
    assert results["app"]["state"] == "DependencyNotReady"
    assert str(results["app"]["message"]).startswith(f"waiting for {namespace}/base (not Ready: ")
    assert results["base"]["state"] != "InSync"
    # app was never installed: its dependency failed.
    records = core_api.list_namespaced_secret(namespace, label_selector="owner=helm").items
    assert {(s.metadata.labels or {}).get("name") for s in records if s.metadata} == {"base"}

    package(pkgs, "base", namespace, "{fail: false}")
    fixed = helmdeck(*args)
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    events = lines(fixed.stdout)
    results = {r["release"]: r for r in events if r["type"] == "result"}
    assert results["app"]["state"] == results["base"]["state"] == "InSync"
    # The dependency settled before its dependent started.
    started = [e.get("release") for e in events if e.get("outcome") == "started"]
    finished = [i for i, e in enumerate(events) if e.get("release") == "base" and e.get("outcome") == "succeeded"]
    assert started and started[0] == "base" and finished
    assert all(i > finished[0] for i, e in enumerate(events)
               if e.get("release") == "app" and e.get("outcome") == "started")


def test_a_cycle_is_refused_at_load_naming_the_files(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    pkgs = package(tmp_path / "p", "one", namespace, "{}", depends=("two",))
    package(pkgs, "two", namespace, "{}", depends=("one",))
    package(pkgs, "free", namespace, "{}")
    proc = helmdeck("reconcile", "--once", "--no-lease", *cluster_args(helm, kube_target, namespace, pkgs,
                                                                       tmp_path / "log"))
    assert proc.returncode == 1
    assert f"one.yaml:11: spec.dependsOn[0]: dependency cycle: {namespace}/one (one.yaml:11) -> " \
           f"{namespace}/two (two.yaml:11)" in proc.stderr
    assert "two.yaml:11: spec.dependsOn[0]: dependency cycle" in proc.stderr
    assert f"{namespace}/free: InSync" in proc.stdout


def test_a_held_package_is_requeued_as_soon_as_its_dependency_turns_ready(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    pkgs = package(tmp_path / "p", "base", namespace, "{fail: true}")
    package(pkgs, "app", namespace, "{message: hi}", depends=("base",))
    proc = subprocess.Popen(
        [sys.executable, "-m", "helmdeck", "reconcile", "--no-lease", "--json",
         *cluster_args(helm, kube_target, namespace, pkgs, tmp_path / "log")],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    events: queue.Queue[dict[str, Any]] = queue.Queue()

    def read() -> None:
        for event in lines_of(proc.stdout):
            events.put(event)

    threading.Thread(target=read, daemon=True).start()

    def wait_for(match: Callable[[dict[str, Any]], bool], timeout: float = 60) -> tuple[dict[str, Any], float]:
        end = time.monotonic() + timeout
        while True:
            event = events.get(timeout=max(0.1, end - time.monotonic()))
            if match(event):
                return event, time.monotonic()

    try:
        held, _ = wait_for(lambda e: e.get("release") == "app" and "waiting for" in str(e.get("message")))
        assert held["message"].startswith(f"waiting for {namespace}/base (")
        package(pkgs, "base", namespace, "{fail: false}")  # the package watch reconciles base at once
        _, ready_at = wait_for(lambda e: e.get("release") == "base" and e.get("outcome") == "succeeded"
                               and "upgrade" in str(e.get("action")))
        _, started_at = wait_for(lambda e: e.get("release") == "app" and e.get("outcome") == "succeeded"
                                 and e.get("action") == "install")
        # Woken by the dependency turning Ready, not by the 30 s fallback retry.
        assert started_at - ready_at < DEPENDENCY_RETRY / 2
    finally:
        proc.terminate()
        proc.wait(timeout=60)


def lines_of(stream: IO[str] | None) -> Iterator[dict[str, Any]]:
    for line in stream or ():
        if line.startswith("{"):
            yield json.loads(line)


def test_prune_uninstalls_dependents_before_their_dependencies(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    # "a-app" sorts before "z-base" and depends on it; "m-db" depends on "a-app".
    pkgs = package(tmp_path / "p", "z-base", namespace, "{message: base}")
    package(pkgs, "a-app", namespace, "{message: app}", depends=("z-base",))
    package(pkgs, "m-db", namespace, "{message: db}", depends=("a-app",))
    proc = subprocess.Popen(
        [sys.executable, "-m", "helmdeck", "reconcile", "--no-lease", "--json", "--prune",
         *cluster_args(helm, kube_target, namespace, pkgs, tmp_path / "log")],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    seen: list[dict[str, Any]] = []
    try:
        stream = lines_of(proc.stdout)
        installed: set[object] = set()
        for event in stream:
            if event.get("action") == "install" and event.get("outcome") == "succeeded":
                installed.add(event.get("release"))
            if len(installed) == 3:
                break
        for name in ("z-base", "a-app", "m-db"):
            (pkgs / f"{name}.yaml").unlink()
        for event in stream:
            if event.get("action") == "prune":
                seen.append(event)
            if len(seen) == 3:
                break
    finally:
        proc.terminate()
        proc.wait(timeout=60)
    assert [(e["release"], e["outcome"]) for e in seen] == [("m-db", "succeeded"), ("a-app", "succeeded"),
                                                            ("z-base", "succeeded")]


def test_cleanup_uninstalls_dependents_before_their_dependencies(
    helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
) -> None:
    # As the prune test: "a-app" sorts first and depends on "z-base"; "m-db" depends on "a-app".
    pkgs = package(tmp_path / "p", "z-base", namespace, "{message: base}")
    package(pkgs, "a-app", namespace, "{message: app}", depends=("z-base",))
    package(pkgs, "m-db", namespace, "{message: db}", depends=("a-app",))
    args = cluster_args(helm, kube_target, namespace, pkgs, tmp_path / "log")
    installed = helmdeck("reconcile", "--once", "--no-lease", "--json", *args)
    assert installed.returncode == 0, installed.stdout + installed.stderr
    for name in ("z-base", "a-app", "m-db"):  # the files go; what they depended on stays in the status
        (pkgs / f"{name}.yaml").unlink()
    # No terminal to ask on (stdin is not a tty): it refuses without --yes and removes nothing.
    refused = helmdeck("cleanup", *args)
    assert refused.returncode == 1 and "--yes" in refused.stderr, refused.stdout + refused.stderr
    assert len(core_api.list_namespaced_secret(namespace, label_selector="owner=helm").items) == 3
    proc = helmdeck("cleanup", "--yes", *args)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    removed = [line.split()[1] for line in proc.stdout.splitlines() if line.startswith("removed")]
    assert removed == [f"{namespace}/m-db", f"{namespace}/a-app", f"{namespace}/z-base"], proc.stdout
    # cleanup removes one release at a time and lists them in that order; all are gone.
    assert not core_api.list_namespaced_secret(namespace, label_selector="owner=helm").items
