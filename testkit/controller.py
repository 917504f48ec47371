"""`helmdeck controller` as a subprocess on the local cluster, and Package objects to feed it: what the
controller tests (their pytest fixtures: tests/controller_fixtures.py) and the controller benchmarks share.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time
import urllib.request
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from prometheus_client.parser import text_string_to_metric_families

from engine.helm import Helm
from testkit.chart_sources import helm_run, package_chart, push_oci
from testkit.packages import package_doc

GROUP, VERSION = "helmdeck.dev", "v1alpha1"
EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
T = TypeVar("T")


@dataclass
class Controller:
    """One `helmdeck controller` process; ``log`` its standard error."""

    proc: subprocess.Popen[bytes]
    log: Path
    args: list[str] = field(default_factory=list)

    @property
    def pid(self) -> int:
        return self.proc.pid

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout)


def start_controller(kubeconfig: Path | None, namespace: str, helm: Helm, work: Path, *extra: str,
                     name: str = "c", env: dict[str, str] | None = None, wrap: tuple[str, ...] = (),
                     before: tuple[str, ...] = ()) -> Controller:
    """Start a controller watching ``namespace`` (its Lease there, 6 s without renewal to take over); without
    ``kubeconfig`` it finds its cluster itself (``env``, ``before`` and ``extra`` then say where). ``wrap``: a
    command the controller's command line is given to (it must exec it: the pid stays the controller's);
    ``before``: flags given before the ``controller`` word."""
    log = work / f"controller-{name}-{uuid.uuid4().hex[:4]}.log"
    access = ["--kubeconfig", str(kubeconfig), "--lease-namespace", namespace] if kubeconfig else []
    args = [*wrap, sys.executable, "-m", "helmdeck", *before, "controller", *access,
            "--watch-namespace", namespace, "--lease-duration", "6",
            "--helm", helm.binary, "--log-level", "debug", "--stop-deadline", "20",
            "--health-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0", *extra]
    with log.open("wb") as out:
        proc = subprocess.Popen(args, stdout=out, stderr=subprocess.STDOUT,
                                env={**os.environ, **helm.env, **(env or {})})
    return Controller(proc, log, args)


def sees_live(ctl: Controller, n: int) -> bool:
    """Has ``ctl`` last logged ``n`` live controllers, itself among them (its Membership logs the live set each
    time it changes)?"""
    lines = re.findall(r"live members: (.*)", ctl.text())
    return bool(lines) and len(lines[-1].split(", ")) == n


def eventually(probe: Callable[[], T | None], timeout: float, what: str, *, every: float = 0.3,
               logs: Callable[[], str] | None = None) -> T:
    """``probe()``'s first truthy value within ``timeout`` seconds; AssertionError naming ``what`` otherwise."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(every)
    raise AssertionError(f"not within {timeout}s: {what} (last: {last!r})\n{logs() if logs else ''}")


def publish_web(helm: Helm, work: Path, registry: str, helm_home: dict[str, str], *versions: str) -> str:
    """Push the web example chart at each of ``versions`` to a fresh repository of the local registry;
    returns its ``host:port/path`` (without the chart name)."""
    base = f"{registry}/ctl-{uuid.uuid4().hex[:8]}"
    for version in versions:
        push_oci(helm.binary, package_chart(helm.binary, work, version, marker=f"m-{version}"), base, env=helm_home)
    return base


def oci_repository(namespace: str, base: str, semver: str = ">=0.1.0") -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "OCIRepository",
            "metadata": {"name": "web", "namespace": namespace},
            "spec": {"url": f"oci://{base}/web", "insecure": True, "interval": "1m", "ref": {"semver": semver}}}


def package(namespace: str, name: str, **spec: Any) -> dict[str, Any]:
    """A Package of the OCIRepository ``web`` (:func:`oci_repository`), timeout 1m unless ``spec`` says."""
    return package_doc(name, namespace, **{"chartRef": {"kind": "OCIRepository", "name": "web"}, "timeout": "1m",
                                           **spec})


def create(objects: client.CustomObjectsApi, obj: dict[str, Any]) -> dict[str, Any]:
    plural = {"Package": "packages", "OCIRepository": "ocirepositories", "HelmRepository": "helmrepositories"}
    out: Any = objects.create_namespaced_custom_object(
        GROUP, VERSION, obj["metadata"]["namespace"], plural[obj["kind"]], obj)
    return dict(out)


def get_package(objects: client.CustomObjectsApi, namespace: str, name: str) -> dict[str, Any] | None:
    try:
        out: Any = objects.get_namespaced_custom_object(GROUP, VERSION, namespace, "packages", name)
        return dict(out)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def releases(core: client.CoreV1Api, namespace: str, name: str) -> list[tuple[int, str]]:
    """(revision, status) of every stored revision of release ``name`` (helm's Secrets driver), oldest first."""
    found: Any = core.list_namespaced_secret(namespace, label_selector=f"owner=helm,name={name}").items
    return sorted((int(s.metadata.labels["version"]), str(s.metadata.labels["status"])) for s in found)


def lease_holder(coordination: client.CoordinationV1Api, namespace: str) -> str:
    """The holder of the controller's Lease in ``namespace`` ("" when none)."""
    items: Any = coordination.list_namespaced_lease(namespace).items
    leases = [x for x in items if x.metadata.name.startswith("helmdeck-cluster")]
    return str(leases[0].spec.holder_identity or "") if leases else ""


def publish_chart(helm: Helm, chart: Path, work: Path, registry: str, helm_home: dict[str, str]) -> str:
    """Push the chart folder ``chart`` (as it is) to a fresh repository of the local registry; returns its
    ``host:port/path``."""
    base = f"{registry}/ctl-{uuid.uuid4().hex[:8]}"
    out = work / "packaged"
    out.mkdir(exist_ok=True)
    archive = helm_run(helm.binary, "package", str(chart), "-d", str(out), env=helm_home).strip().rsplit(" ", 1)[-1]
    push_oci(helm.binary, Path(archive), base, env=helm_home)
    return base


def endpoint(text: str, what: str) -> str:
    """``http://host:port`` the controller's log says ``what`` (health probes, metrics) is served on."""
    for line in text.splitlines():
        if f"{what} on " in line:
            return "http://" + line.split(f"{what} on ", 1)[1].split("'")[0].strip()
    return ""


def passes_ended(ctl: Controller) -> float | None:
    """The passes ``ctl`` ended (``helmdeck_reconciles_total`` over its results) while none is due
    (``helmdeck_queue_depth`` 0); None while one is due or before its metrics serve."""
    where = endpoint(ctl.text(), "metrics")
    if not where:
        return None
    with urllib.request.urlopen(where + "/metrics", timeout=5) as resp:
        samples = [s for f in text_string_to_metric_families(resp.read().decode()) for s in f.samples]
    if any(s.name == "helmdeck_queue_depth" and s.value for s in samples):
        return None
    return sum(s.value for s in samples if s.name == "helmdeck_reconciles_total")


def released(ctl: Controller) -> float:
    """The sum of ``helmdeck_releases{state}`` on ``ctl``'s metrics endpoint: the packages it counts as its own."""
    with urllib.request.urlopen(endpoint(ctl.text(), "metrics") + "/metrics", timeout=5) as resp:
        families = text_string_to_metric_families(resp.read().decode())
        return sum(s.value for f in families if f.name == "helmdeck_releases" for s in f.samples)
