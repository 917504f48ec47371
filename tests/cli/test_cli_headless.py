"""Headless commands on the local cluster: diff's CI exit codes, unreadable records in status, helm without PATH."""

from __future__ import annotations

import base64
import gzip
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from engine.helm import Helm
from engine.kube.client import KubeTarget
from helmdeck.cli import EXIT_CHANGES, EXIT_FAILED, EXIT_NO_CHANGES, EXIT_PIPE
from tests.cli.test_cli import cluster_args, flaky, helmdeck
from tests.storage_records import new_secret, release

pytestmark = pytest.mark.cluster


def test_diff_exit_codes_gate_ci(helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path) -> None:
    pkgs = flaky(tmp_path / "p", namespace, "{message: one}")
    log = tmp_path / "log"
    # No --helm and no helm on PATH (the rest of PATH stays: the post-renderer's shell needs it): helmdeck's
    # own build in its cache is found.
    path = os.pathsep.join(d for d in os.environ.get("PATH", "").split(os.pathsep) if not (Path(d) / "helm").exists())
    env = {**os.environ, **helm.env, "PATH": path, "HELMDECK_HELM": ""}
    args = ["--kubeconfig", str(kube_target.kubeconfig), "--packages", str(pkgs), "--log-file", str(log)]

    def diff(*extra: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run([sys.executable, "-m", "helmdeck", "diff", *extra], capture_output=True, text=True,
                              env=env, timeout=120, check=False)

    first = diff("app", *args)
    assert first.returncode == EXIT_CHANGES, first.stderr  # not installed: everything would be added
    assert "ConfigMap" in first.stdout
    assert "using helm" in log.read_text() and "helmdeck's own helm" in log.read_text()
    assert helmdeck("reconcile", "--once", "--no-lease",
                    *cluster_args(helm, kube_target, namespace, pkgs, log)).returncode == 0
    same = diff("app", *args)
    assert (same.returncode, same.stdout) == (EXIT_NO_CHANGES, ""), same.stderr
    assert "would change nothing" in same.stderr
    flaky(tmp_path / "p", namespace, "{message: two}")
    changed = diff("app", *args)
    assert changed.returncode == EXIT_CHANGES and "two" in changed.stdout, changed.stderr
    # Errors, usage errors included, are 1: 2 means only "changes".
    assert diff("no-such-package", *args).returncode == EXIT_FAILED
    assert diff(*args).returncode == EXIT_FAILED  # PACKAGE missing
    assert diff("app", "--bogus", *args).returncode == EXIT_FAILED
    assert diff("app", "--concurrency", "0", *args).returncode == EXIT_FAILED
    assert diff("app", *args[:-2], "--kubeconfig", str(tmp_path / "none")).returncode == EXIT_FAILED


def test_status_shows_unreadable_records(
    helm: Helm, kube_target: KubeTarget, core_api: client.CoreV1Api, namespace: str, tmp_path: Path,
) -> None:
    broken = {
        "b64": "not base64 at all!",
        "gz": base64.b64encode(b"\x1f\x8b\x08\x00" + b"torn").decode(),
        "json": base64.b64encode(gzip.compress(b"{not json")).decode(),
    }
    for name, payload in broken.items():
        core_api.create_namespaced_secret(namespace, new_secret(release(2, name=name, namespace=namespace), payload))
    log = tmp_path / "log"
    base = ["--kubeconfig", str(kube_target.kubeconfig), "--helm", helm.binary, "-n", namespace,
            "--log-file", str(log)]
    proc = helmdeck("status", "-o", "json", *base)
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    assert set(rows) == set(broken)
    reasons = {"b64": "BadBase64", "gz": "BadGzip", "json": "BadJson"}
    for name, row in rows.items():
        assert row["state"] == "Unreadable" and row["revision"] is None
        (readable,) = [c for c in row["conditions"] if c["type"] == "Readable"]
        assert readable["status"] == "False" and readable["reason"] == reasons[name]
        assert readable["message"].startswith("revision 2: ")
    table = helmdeck("status", *base)
    assert table.returncode == 0 and table.stdout.count("Unreadable") == 3


def _into_closed_pipe(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run helmdeck with stdout on a pipe whose reader has gone (as ``| head`` after its lines)."""
    read, write = os.pipe()
    os.close(read)
    try:
        return subprocess.run([sys.executable, "-m", "helmdeck", *args], stdout=write, stderr=subprocess.PIPE,
                              text=True, env=env, timeout=120, check=False)
    finally:
        os.close(write)


def test_closed_pipe_ends_every_command_quietly(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    base = ["--kubeconfig", str(kube_target.kubeconfig), "--helm", helm.binary, "-n", namespace,
            "--log-file", str(tmp_path / "log")]
    pkgs = flaky(tmp_path / "p", namespace, "{message: one}")
    commands = [
        ["status", *base], ["status", "-o", "json", *base], ["--version"],
        ["cluster", "status", "--cluster-dir", str(tmp_path / "no-cluster")],
        ["plan", "--packages", str(pkgs), *base],
    ]
    for command in commands:
        proc = _into_closed_pipe(*command, env={**os.environ, **helm.env})
        assert proc.returncode == EXIT_PIPE, (command, proc.stderr)
        assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, (command, proc.stderr)


def test_reconcile_into_closed_pipe_ends_at_once_and_logs_no_traceback(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    # Each event line hit the closed pipe again: one BrokenPipeError traceback per event in the log file.
    log = tmp_path / "log"
    for extra, values in ((["--once"], "{message: one}"), ([], "{message: two}")):  # a long-running one ends too
        pkgs = flaky(tmp_path / "p", namespace, values)  # an install, then an upgrade: an event line each
        proc = _into_closed_pipe("reconcile", *extra, "--no-lease", *cluster_args(helm, kube_target, namespace, pkgs,
                                                                               log), env={**os.environ, **helm.env})
        assert proc.returncode == EXIT_PIPE, proc.stderr
        assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr, proc.stderr
        assert "BrokenPipeError" not in log.read_text() and "Traceback" not in log.read_text()


# Runs helmdeck, then writes the modules it loaded, the API requests it made (method and URL), how many
# clients it made from the kubeconfig and how many times it read the kubeconfig's contexts, as JSON.
_OBSERVED_AT_EXIT = """
import atexit, json, runpy, sys
import urllib3.connectionpool as pool
import engine  # the kubernetes package's __init__ deferred, as at helmdeck's own start
from kubernetes import config
out, requests, clients, reads = sys.argv.pop(1), [], [], []
urlopen = pool.HTTPConnectionPool.urlopen
def counted(self, method, url, *args, **kwargs):
    requests.append(method + " " + url)
    return urlopen(self, method, url, *args, **kwargs)
pool.HTTPConnectionPool.urlopen = counted
new_client = config.new_client_from_config
def client_counted(*args, **kwargs):
    clients.append(kwargs.get("context"))
    return new_client(*args, **kwargs)
config.new_client_from_config = client_counted
list_contexts = config.list_kube_config_contexts
def contexts_counted(*args, **kwargs):
    reads.append(kwargs.get("config_file"))
    return list_contexts(*args, **kwargs)
config.list_kube_config_contexts = contexts_counted
atexit.register(lambda: open(out, "w").write(json.dumps({"modules": sorted(sys.modules), "requests": requests,
                                                         "clients": len(clients), "context_reads": len(reads)})))
sys.argv[0] = "helmdeck"
runpy.run_module("helmdeck", run_name="__main__")
"""


def _observed(helm: Helm, tmp_path: Path, *command: str) -> tuple[list[str], list[str]]:
    """The modules a helmdeck command loaded and the API requests it made; it must succeed."""
    found = _observed_all(helm, tmp_path, *command)
    return found["modules"], found["requests"]


def _observed_all(helm: Helm, tmp_path: Path, *command: str) -> dict[str, Any]:
    """What _OBSERVED_AT_EXIT writes of a helmdeck command (``modules``, ``requests``, ``clients``,
    ``context_reads``)."""
    out = tmp_path / "observed.json"
    proc = subprocess.run([sys.executable, "-c", _OBSERVED_AT_EXIT, str(out), *command], capture_output=True,
                          text=True, env={**os.environ, **helm.env}, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    found: dict[str, Any] = json.loads(out.read_text())
    return found


# What the app's first screen and a no-op command need not import: the version picker's, drill-down's and
# diff's engine modules, the actions' driver, a chart pull's code, the controllers' metrics reader (each
# imported when first used).
FIRST_USE = ("engine.runtime.chart_versions", "engine.runtime.operations", "engine.runtime.diff",
             "engine.monitor.inspect", "engine.runtime.cockpit.pulses", "engine.runtime.drive.kustomized",
             "engine.sources.source", "engine.sources.credentials", "engine.sources.helm_pull",
             "engine.sources.oci", "engine.sources.index", "engine.sources.cosign", "engine.sources.pin")


def test_noop_reconcile_and_status_import_no_generated_kubernetes_module(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    # The generated API and model modules cost most of a headless command's start (core_v1_api alone
    # imports ~265 models, 0.65 s): the hot paths call the API by path with raw JSON (engine.kube.rest).
    pkgs = flaky(tmp_path / "p", namespace, "{message: one}")
    args = ["reconcile", "--once", "--no-lease", *cluster_args(helm, kube_target, namespace, pkgs, tmp_path / "log")]
    assert helmdeck(*args).returncode == 0  # installs: the next pass is a no-op
    for command in (args, ["status", *cluster_args(helm, kube_target, namespace, pkgs, tmp_path / "log")]):
        loaded, _ = _observed(helm, tmp_path, *command)
        assert "engine.kube.rest" in loaded and "kubernetes.client.api_client" in loaded  # the transport is used
        generated = [m for m in loaded if m.startswith(("kubernetes.client.api.", "kubernetes.client.models."))
                     or m == "kubernetes.client.api"]
        assert generated == [], command[0]
        # Nor what only a watching command, a chart pull or the app uses: the folder watcher (watchfiles,
        # anyio), the pulling code (engine.sources.source and its index, OCI and helm pull modules), Textual.
        # Nor the kubernetes package's eager parts (engine.kube.deferred: its dynamic client, websocket stream,
        # watch), nor the app's and actions' collaborators (the version picker, operations, pulses, inspect).
        heavy = [m for m in loaded if m.split(".")[0] in ("anyio", "watchfiles", "textual", "tui", "websocket")
                 or m in ("engine.sources.source", "engine.sources.index", "engine.sources.oci",
                          "engine.sources.helm_pull", "kubernetes.dynamic", "kubernetes.stream", "kubernetes.watch",
                          "engine.runtime.chart_versions", "engine.runtime.operations", "engine.runtime.diff",
                          "engine.runtime.cockpit.pulses", "engine.monitor.inspect", "difflib")]
        assert heavy == [], command[0]


def test_an_empty_folder_reconcile_imports_only_what_it_uses(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    # The start of a command with nothing to do (issue 24): no generated module, nothing of a controller,
    # the app, --kustomize or a chart pull.
    (tmp_path / "empty").mkdir()
    loaded, _ = _observed(helm, tmp_path, "reconcile", "--once", "--no-lease",
                          *cluster_args(helm, kube_target, namespace, tmp_path / "empty", tmp_path / "log"))
    assert "engine.kube.rest" in loaded and "engine.runtime.drive.controller" in loaded
    assert [m for m in loaded if m.startswith(("kubernetes.client.api.", "kubernetes.client.models."))] == []
    unused = ("engine.runtime.cluster.objects", "engine.runtime.cluster.object_status",
              "engine.runtime.cluster.finalizer", "engine.runtime.cluster.annotation_requests",
              "engine.runtime.cockpit.attach", "engine.runtime.drive.repositories",
              "engine.runtime.plan", "engine.sources.source", "engine.sources.oci", "engine.sources.helm_pull",
              "engine.runtime.chart_versions", "engine.runtime.operations", "engine.runtime.diff",
              "engine.runtime.cockpit.pulses", "engine.monitor.inspect", "engine.runtime.drive.kustomized",
              "kubernetes.dynamic", "kubernetes.stream", "kubernetes.watch", "kubernetes.informer", "difflib",
              *FIRST_USE)
    assert [m for m in loaded if m in unused
            or m.split(".")[0] in ("textual", "tui", "watchfiles", "anyio", "websocket")] == []


# Runs the app (Textual's headless driver) until its main screen has been up for a second, then writes the
# modules loaded by then as JSON and quits the app.
_APP_MODULES = """
import json, os, runpy, sys, threading, time
os.environ["TEXTUAL_DRIVER"] = "textual.drivers.headless_driver:HeadlessDriver"
from tui.app import HelmdeckApp
from tui.screens.main import MainScreen
out = sys.argv.pop(1)
run = HelmdeckApp.run
def watch(app):
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not (app.is_running and app.screen_stack
                                                and isinstance(app.screen_stack[-1], MainScreen)):
        time.sleep(0.02)
    time.sleep(1.0)  # the engine started, the storage listed, the first table drawn
    open(out, "w").write(json.dumps(sorted(sys.modules)))
    app.call_from_thread(app.exit)
def watched(self, *args, **kwargs):
    threading.Thread(target=watch, args=(self,), daemon=True).start()
    return run(self, *args, **kwargs)
HelmdeckApp.run = watched
sys.argv[0] = "helmdeck"
runpy.run_module("helmdeck", run_name="__main__")
"""

def test_the_apps_first_screen_imports_what_it_shows(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    (tmp_path / "empty").mkdir()
    out = tmp_path / "modules.json"
    env = {**os.environ, **helm.env, "XDG_CONFIG_HOME": str(tmp_path / "config"),
           "XDG_STATE_HOME": str(tmp_path / "state")}
    proc = subprocess.run([sys.executable, "-c", _APP_MODULES, str(out),
                           *cluster_args(helm, kube_target, namespace, tmp_path / "empty", tmp_path / "log")],
                          capture_output=True, text=True, env=env, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    loaded = json.loads(out.read_text())
    assert "tui.screens.main" in loaded and "engine.runtime.drive.repositories" in loaded  # it ran and reconciles
    # Nor the screens opened by a key (the detail and its overview, help, confirmations, live objects, pulses).
    screens = ("tui.screens.detail", "tui.widgets.overview", "tui.screens.help", "tui.screens.confirm",
               "tui.screens.resource", "tui.screens.pulses")
    assert [m for m in loaded if m in FIRST_USE or m in screens] == []


def test_the_access_check_and_the_engine_share_one_client(
    helm: Helm, kube_target: KubeTarget, tmp_path: Path,
) -> None:
    # Without -n the command asks the API server whether storage may be listed everywhere before it builds the
    # engine: one client made from the kubeconfig serves both (a second was a kubeconfig load and a TLS
    # connection more at every start), and a headless command does not parse the kubeconfig again for the
    # context's name (only the app shows it; the pure-Python YAML parse grows with the kubeconfig).
    (tmp_path / "empty").mkdir()
    found = _observed_all(helm, tmp_path, "reconcile", "--once", "--no-lease", "--kubeconfig",
                          str(kube_target.kubeconfig), "--helm", helm.binary, "--packages", str(tmp_path / "empty"),
                          "--log-file", str(tmp_path / "log"))
    reviews = [r for r in found["requests"] if r.startswith("POST /apis/authorization.k8s.io/v1/selfsubject")]
    assert len(reviews) == 2  # list and watch of the storage across all namespaces: the check ran
    assert (found["clients"], found["context_reads"]) == (1, 0)


def _batched(request: str) -> str:
    """``request`` with the release names of a ``name in (...)`` selector left out: one batched read whatever
    the count."""
    head, found, tail = request.partition("name%20in%20%28")
    return head + found + tail.partition("%29")[2] if found else request


def test_noop_pass_makes_the_same_api_calls_for_one_package_and_for_four(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path,
) -> None:
    # A no-op pass read each release's records at quorum and each monitor's manifest on its own: two API
    # calls per package (and a quorum list per release scans the namespace's records: O(n^2) on the server).
    pkgs = flaky(tmp_path / "p", namespace, "{message: one}")
    args = ["reconcile", "--once", "--no-lease", *cluster_args(helm, kube_target, namespace, pkgs, tmp_path / "log")]

    def noop_requests() -> list[str]:
        assert helmdeck(*args).returncode == 0  # installs what is new: the next pass is a no-op
        return _observed(helm, tmp_path, *args)[1]

    one = noop_requests()
    text = (pkgs / "app.yaml").read_text()
    for name in ("app2", "app3", "app4"):
        (pkgs / f"{name}.yaml").write_text(text.replace("name: app\n", f"name: {name}\n"))
    four = noop_requests()
    # A watch is a stream opened once per kind, whatever the count; whether a --once command opens it before
    # it exits is a matter of timing, so the comparison is over the reads. So is the Events stream's first list:
    # its thread is started for the namespace and the pass does not wait for it (CI once exited before it).
    reads_one, reads_four = (sorted(_batched(r) for r in found if "watch=true" not in r and "/events?" not in r)
                             for found in (one, four))
    assert reads_four == reads_one, (reads_one, reads_four)
    assert not [r for r in four if "/secrets/sh.helm.release.v1." in r or "%2Cname%3D" in r], four
