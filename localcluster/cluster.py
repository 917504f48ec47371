"""Start, inspect and stop the local control plane as plain processes.

Layout of a cluster's state directory (default
``$XDG_STATE_HOME/helmdeck/cluster``, else ``~/.local/state/helmdeck/cluster``)::

    state.json     ports and the PID + start time of every process started
    kubeconfig     admin kubeconfig (context ``helmdeck-local``)
    pki/           CA, serving, admin and service-account keys
    etcd/          etcd data (kept across down/up)
    registry.yml   the local OCI registry's configuration
    registry/      its blobs (kept across down/up)
    chartrepo.json the HTTP chart repository a running ``helmdeck demo`` serves (URL, PID + start time)
    kwok.yaml      kwok's configuration: a ClusterLogs serving container-logs.log for every container
    container-logs.log  the log lines every fake container serves (CRI log format), written by ``up``
    logs/<component>.log

``up`` is idempotent: a healthy cluster is left alone; a partly running one is
stopped and started again. ``down`` stops exactly the processes recorded in
``state.json`` (checked by PID *and* process start time, so a reused PID is
never signalled) and waits until none of the recorded ports accepts
connections.
"""

from __future__ import annotations

import json
import re
import ssl
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

from engine.base.paths import xdg_dir
from localcluster import build, registry
from localcluster.chartrepo import serving
from localcluster.pki import Pki, ensure_pki, write_kubeconfig
from localcluster.process import ProcessRecord, http_ok, listen_ports, port_open, proc_start_time, stop_processes
from localcluster.state import ORDER, ClusterStatus, Ports

CONTEXT = "helmdeck-local"
FAKE_NODE = "kwok-node-0"
# kwok's kubelet server listens here; the node's InternalIP so the API server can proxy pods/log to it.
NODE_IP = "127.0.0.1"
CONTAINER_LOG_LINES = (
    "helmdeck local cluster: kwok serves these lines as every container's log",
    "(ClusterLogs in the cluster's kwok.yaml; a real kubelet serves the container's output)",
    "ready",
)
SERVICE_CIDR = "10.0.0.0/24"
_SERVER_NAMES = ("localhost", "127.0.0.1", "10.0.0.1", "kubernetes", "kubernetes.default")

Progress = Callable[[str], None]


class ClusterError(RuntimeError):
    """The local cluster could not be started; the message names the component, why (when its log
    says) and its log. ``port_in_use`` is the port a component could not listen on, if that was why."""

    def __init__(self, message: str, port_in_use: int | None = None):
        super().__init__(message)
        self.port_in_use = port_in_use


_IN_USE = re.compile(r"(?:127\.0\.0\.1|localhost|\[::\]|0\.0\.0\.0)?:(\d+):? bind: address already in use")
_START_ATTEMPTS = 3


def exit_reason(log: Path) -> tuple[str, int | None]:
    """Why a component exited, from the tail of its log: ``("port N is in use", N)``, else the last
    line (bounded) and None."""
    try:
        with log.open("rb") as fh:
            fh.seek(max(0, log.stat().st_size - 16384))
            tail = fh.read().decode(errors="replace")
    except OSError:
        return "", None
    found = _IN_USE.findall(tail)
    if found:
        return f"port {found[-1]} is in use", int(found[-1])
    lines = [line.strip() for line in tail.splitlines() if line.strip() and not line.startswith("--- ")]
    return (lines[-1][:300] if lines else ""), None


def _exited(component: str, what: str, log: Path) -> ClusterError:
    reason, port = exit_reason(log)
    return ClusterError(f"{component} {what}{': ' + reason if reason else ''}; see {log}", port)


def default_state_dir() -> Path:
    """``$HELMDECK_CLUSTER_DIR``, else the XDG state directory (see module docstring)."""
    return xdg_dir("HELMDECK_CLUSTER_DIR", "XDG_STATE_HOME", ".local/state", "helmdeck", "cluster")


class LocalCluster:
    """One local control plane rooted in ``state_dir`` (see module docstring)."""

    def __init__(self, state_dir: Path | None = None, *, extra_apiserver_args: tuple[str, ...] = ()):
        self.state_dir = (state_dir or default_state_dir()).resolve()
        self.extra_apiserver_args = extra_apiserver_args
        self.logs_dir = self.state_dir / "logs"
        self.kubeconfig = self.state_dir / "kubeconfig"
        self._state_file = self.state_dir / "state.json"
        self.chartrepo_record = self.state_dir / "chartrepo.json"

    # -- state -------------------------------------------------------------
    def _load(self) -> tuple[Ports, dict[str, ProcessRecord]]:
        try:
            data = json.loads(self._state_file.read_text())
        except (OSError, ValueError):
            return Ports(), {}
        ports = Ports(**data.get("ports", {}))
        procs = {name: ProcessRecord(**rec) for name, rec in data.get("processes", {}).items()}
        return ports, procs

    def _save(self, ports: Ports, procs: dict[str, ProcessRecord]) -> None:
        self.state_dir.mkdir(parents=True, exist_ok=True)
        tmp = self._state_file.with_suffix(".tmp")
        tmp.write_text(json.dumps(
            {"ports": asdict(ports), "processes": {k: asdict(v) for k, v in procs.items()}},
            indent=2,
        ))
        tmp.replace(self._state_file)

    @property
    def server(self) -> str | None:
        ports, _ = self._load()
        return f"https://127.0.0.1:{ports.apiserver}" if ports.apiserver else None

    @property
    def registry(self) -> str | None:
        """``127.0.0.1:<port>`` of the local OCI registry (plain HTTP, no auth); None before ``up``."""
        ports, _ = self._load()
        return f"127.0.0.1:{ports.registry}" if ports.registry else None

    def log_path(self, component: str) -> Path:
        return self.logs_dir / f"{component}.log"

    # -- health ------------------------------------------------------------
    def _ssl_context(self) -> ssl.SSLContext:
        pki = Pki(self.state_dir / "pki")
        ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
        ctx.load_cert_chain(str(pki.admin_cert), str(pki.admin_key))
        return ctx

    def _api(
        self, method: str, path: str, body: dict[str, Any] | None = None,
        content_type: str = "application/json",
    ) -> tuple[int, Any]:
        server = self.server
        if server is None:
            return 0, None
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(server + path, data=data, method=method)
        req.add_header("Content-Type", content_type)
        try:
            with urllib.request.urlopen(req, context=self._ssl_context(), timeout=5) as resp:
                raw = resp.read()
                return resp.status, json.loads(raw) if raw.startswith(b"{") else raw.decode()
        except urllib.error.HTTPError as exc:
            return exc.code, None
        except (OSError, ssl.SSLError):
            return 0, None

    def is_ready(self) -> bool:
        """True when every recorded process is alive and the apiserver's /readyz is ok."""
        _, procs = self._load()
        if set(procs) != set(ORDER) or not all(p.alive() for p in procs.values()):
            return False
        code, _ = self._api("GET", "/readyz")
        return code == 200

    def status(self) -> ClusterStatus:
        """Report processes, kubeconfig, server and log files; never raises."""
        _, procs = self._load()
        running = {c: procs[c].alive() if c in procs else False for c in ORDER}
        versions: dict[str, str] = {}
        ready = False
        if running["kube-apiserver"]:
            code, body = self._api("GET", "/version")
            if code == 200 and isinstance(body, dict):
                versions["kube-apiserver"] = str(body.get("gitVersion", ""))
            ready = self.is_ready()
        return ClusterStatus(
            state_dir=self.state_dir,
            kubeconfig=self.kubeconfig,
            server=self.server,
            running=running,
            logs={c: self.log_path(c) for c in ORDER},
            ready=ready,
            versions=versions,
            registry=self.registry,
            chartrepo=serving(self.chartrepo_record),
        )

    # -- up ----------------------------------------------------------------
    def up(self, progress: Progress = lambda _m: None, timeout: float = 120.0) -> None:
        """Build (or reuse) the binaries and start the cluster unless it is ready.

        Raises :class:`build.BuildError` when a component does not build and
        :class:`ClusterError` when a component does not come up in ``timeout``
        seconds (the message names the component and its log file).
        """
        if self.is_ready():
            outdated = self._outdated()
            if not outdated:
                progress(f"local cluster already running ({self.server})")
                return
            progress(f"restarting the local cluster: {', '.join(outdated)} changed since it started")
        build.build_all(progress=progress)
        self.down()
        self.state_dir.mkdir(parents=True, exist_ok=True)
        self.logs_dir.mkdir(exist_ok=True)
        pki = ensure_pki(self.state_dir / "pki", _SERVER_NAMES)
        old_ports, _ = self._load()
        fresh = iter(listen_ports(len(asdict(old_ports))))
        ports = Ports(**{
            name: port if port and not port_open(port) else next(fresh)
            for name, port in asdict(old_ports).items()
        })
        deadline = time.monotonic() + timeout
        for attempt in range(1, _START_ATTEMPTS + 1):
            try:
                self._start(pki, ports, deadline, progress)
                break
            except ClusterError as exc:
                # Another process took a port between the choice and the bind: other ports, again.
                if exc.port_in_use is None or attempt == _START_ATTEMPTS:
                    raise
                progress(f"{exc}; starting again on other ports")
                ports = Ports(*listen_ports(len(asdict(ports)), avoid={exc.port_in_use}))
        progress(f"local cluster ready: {self.server} (kubeconfig: {self.kubeconfig})")

    def _start(self, pki: Pki, ports: Ports, deadline: float, progress: Progress) -> None:
        """Start every component on ``ports``; on failure stop what started (the logs stay) and raise
        ClusterError."""
        procs: dict[str, ProcessRecord] = {}
        self._save(ports, procs)
        write_kubeconfig(self.kubeconfig, pki, f"https://127.0.0.1:{ports.apiserver}", CONTEXT)
        self._write_kwok_config()
        try:
            progress("starting the OCI registry")
            procs["registry"] = self._spawn("registry", self._registry_cmd(ports))
            self._save(ports, procs)
            progress("starting etcd")
            procs["etcd"] = self._spawn("etcd", self._etcd_cmd(ports))
            self._save(ports, procs)
            self._wait("etcd", deadline, lambda: http_ok(f"http://127.0.0.1:{ports.etcd_client}/health"), procs)
            progress("starting kube-apiserver")
            procs["kube-apiserver"] = self._spawn("kube-apiserver", self._apiserver_cmd(pki, ports))
            self._save(ports, procs)
            self._wait("kube-apiserver", deadline, lambda: self._api("GET", "/readyz")[0] == 200, procs)
            progress("starting kube-controller-manager, kube-scheduler, kwok")
            for comp, cmd in (
                ("kube-controller-manager", self._controller_manager_cmd(pki, ports)),
                ("kube-scheduler", self._scheduler_cmd(ports)),
                ("kwok", self._kwok_cmd(ports)),
            ):
                procs[comp] = self._spawn(comp, cmd)
                self._save(ports, procs)
            self._ensure_node(deadline, procs, ports)
            self._wait(
                "kube-controller-manager", deadline,
                lambda: self._api("GET", "/api/v1/namespaces/default/serviceaccounts/default")[0] == 200,
                procs,
            )
            self._wait("kwok", deadline, self._node_ready, procs)
            self._wait("registry", deadline, lambda: registry.ping(ports.registry), procs)
            self._heal_pods()
        except BaseException:
            self.down()
            raise

    def _spawn(self, component: str, cmd: list[str]) -> ProcessRecord:
        log = self.log_path(component)
        with log.open("ab") as fh:
            fh.write(f"\n--- {time.strftime('%Y-%m-%dT%H:%M:%S')} {' '.join(cmd)}\n".encode())
            fh.flush()
            # A session of its own: the cluster outlives `helmdeck cluster up`.
            proc = subprocess.Popen(
                cmd, stdin=subprocess.DEVNULL, stdout=fh, stderr=subprocess.STDOUT,
                start_new_session=True, cwd=self.state_dir,
            )
        start = None
        for _ in range(50):
            start = proc_start_time(proc.pid)
            if start is not None:
                break
            time.sleep(0.01)
        if start is None:
            raise _exited(component, "exited at once", log)
        return ProcessRecord(component, proc.pid, start, str(log), list(cmd))

    def _wait(
        self, component: str, deadline: float, check: Callable[[], bool],
        procs: dict[str, ProcessRecord],
    ) -> None:
        while time.monotonic() < deadline:
            for rec in procs.values():
                if not rec.alive():
                    raise _exited(rec.component, "exited during start-up", Path(rec.log))
            if check():
                return
            time.sleep(0.2)
        raise ClusterError(f"{component} was not ready in time; see {self.log_path(component)}")

    def _registry_cmd(self, ports: Ports) -> list[str]:
        config = self.state_dir / "registry.yml"
        if not config.exists() or f"127.0.0.1:{ports.registry}" not in config.read_text():
            registry.write_config(config, port=ports.registry, storage=self.state_dir / "registry")
        return registry.command(config)

    def _etcd_cmd(self, ports: Ports) -> list[str]:
        client = f"http://127.0.0.1:{ports.etcd_client}"
        peer = f"http://127.0.0.1:{ports.etcd_peer}"
        return [
            str(build.binary("etcd")),
            "--name=helmdeck",
            f"--data-dir={self.state_dir / 'etcd'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=helmdeck={peer}",
            "--unsafe-no-fsync=true",
            "--log-level=warn",
        ]

    def _apiserver_cmd(self, pki: Pki, ports: Ports) -> list[str]:
        return [
            str(build.binary("kubernetes", "kube-apiserver")),
            f"--etcd-servers=http://127.0.0.1:{ports.etcd_client}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            f"--secure-port={ports.apiserver}",
            f"--cert-dir={self.state_dir / 'pki'}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=RBAC",
            "--allow-privileged=true",
            "--endpoint-reconciler-type=none",
            "--enable-priority-and-fairness=false",
            # The fake node's InternalIP is where kwok serves pods/log (its Hostname does not resolve).
            "--kubelet-preferred-address-types=InternalIP",
            *self.extra_apiserver_args,
        ]

    def _controller_manager_cmd(self, pki: Pki, ports: Ports) -> list[str]:
        return [
            str(build.binary("kubernetes", "kube-controller-manager")),
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports.controller_manager}",
            f"--service-account-private-key-file={pki.sa_key}",
            f"--root-ca-file={pki.ca_cert}",
            "--use-service-account-credentials=false",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--cert-dir={self.state_dir / 'pki' / 'kcm'}",
        ]

    def _scheduler_cmd(self, ports: Ports) -> list[str]:
        return [
            str(build.binary("kubernetes", "kube-scheduler")),
            f"--kubeconfig={self.kubeconfig}",
            f"--authentication-kubeconfig={self.kubeconfig}",
            f"--authorization-kubeconfig={self.kubeconfig}",
            "--leader-elect=false",
            "--bind-address=127.0.0.1",
            f"--secure-port={ports.scheduler}",
            f"--cert-dir={self.state_dir / 'pki' / 'scheduler'}",
        ]

    def _write_kwok_config(self) -> None:
        """Write kwok's configuration (``kwok.yaml``) and the log it serves.

        A ClusterLogs (kwok.x-k8s.io/v1alpha1) whose one entry names no containers is every
        container's log (kwok's rule: the entry without ``containers`` is the default). The file is
        in the CRI log format kwok reads (``<RFC 3339 time> stdout F <line>``).
        """
        log_file = self.state_dir / "container-logs.log"
        log_file.write_text("".join(f"2026-01-01T00:00:00Z stdout F {line}\n" for line in CONTAINER_LOG_LINES))
        (self.state_dir / "kwok.yaml").write_text(json.dumps({
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "ClusterLogs",
            "metadata": {"name": "helmdeck-container-logs"},
            "spec": {"logs": [{"logsFile": str(log_file)}]},
        }, indent=2) + "\n")

    def _kwok_cmd(self, ports: Ports) -> list[str]:
        return [
            str(build.binary("kwok")),
            f"--kubeconfig={self.kubeconfig}",
            f"--config={self.state_dir / 'kwok.yaml'}",
            "--manage-all-nodes=false",
            "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake",
            "--cidr=10.0.1.0/24",
            f"--node-ip={NODE_IP}",
            f"--node-port={ports.kwok}",
            f"--server-address={NODE_IP}:{ports.kwok}",
            # Heartbeat through a node Lease (as kubelets do): without it kwok posts node status only
            # every 20-45 s, and on a busy machine the node controller marks the node NotReady.
            "--node-lease-duration-seconds=40",
        ]

    def _ensure_node(self, deadline: float, procs: dict[str, ProcessRecord], ports: Ports) -> None:
        # Where the API server proxies pods/log (kwok's server); kept in etcd, so set again on every up.
        endpoint = {
            "addresses": [{"type": "InternalIP", "address": NODE_IP}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": ports.kwok}},
        }
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": FAKE_NODE,
                "annotations": {"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "0"},
                "labels": {
                    "kubernetes.io/hostname": FAKE_NODE,
                    "kubernetes.io/os": "linux",
                    "kubernetes.io/arch": "amd64",
                    "type": "kwok",
                },
            },
            "status": {
                "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "1000"},
                "capacity": {"cpu": "64", "memory": "256Gi", "pods": "1000"},
                **endpoint,
            },
        }

        def created() -> bool:
            code, body = self._api("GET", f"/api/v1/nodes/{FAKE_NODE}")
            if code == 200 and isinstance(body, dict):
                status = body.get("status") or {}
                if all(status.get(k) == v for k, v in endpoint.items()):
                    return True
                code, _ = self._api("PATCH", f"/api/v1/nodes/{FAKE_NODE}/status", {"status": endpoint},
                                    content_type="application/merge-patch+json")
                return code == 200
            code, _ = self._api("POST", "/api/v1/nodes", node)
            return code in (200, 201, 409)

        self._wait("kwok", deadline, created, procs)

    def _heal_pods(self) -> None:
        """Delete running pods the node controller marked not ready while kwok was down.

        A kubelet re-checks its pods when it comes back; kwok only plays a pod's
        stages once, so such pods would stay not ready (and their Deployments
        unavailable) for good. Their controllers create fresh ones.
        """
        code, body = self._api("GET", f"/api/v1/pods?fieldSelector=spec.nodeName%3D{FAKE_NODE}")
        if code != 200 or not isinstance(body, dict):
            return
        for pod in body.get("items") or []:
            status = pod.get("status") or {}
            ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
            owned = bool((pod.get("metadata") or {}).get("ownerReferences"))
            if status.get("phase") == "Running" and not ready and owned:
                meta = pod["metadata"]
                self._api("DELETE", f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}")

    def _node_ready(self) -> bool:
        code, body = self._api("GET", f"/api/v1/nodes/{FAKE_NODE}")
        if code != 200 or not isinstance(body, dict):
            return False
        conds = body.get("status", {}).get("conditions") or []
        return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conds)

    # -- restart -----------------------------------------------------------
    def restart(self, component: str, grace: float = 20.0, timeout: float = 60.0) -> None:
        """Stop one running component and start it again with the same command and ports.

        For tests of clients that must survive a restart (e.g. of the API
        server): SIGTERM, then SIGKILL after ``grace`` seconds (the API server
        waits up to a minute for open watches otherwise). Returns when the
        cluster is ready again; raises :class:`ClusterError` when
        ``component`` is not running or does not come back within ``timeout``
        seconds.
        """
        ports, procs = self._load()
        rec = procs.get(component)
        if rec is None or not rec.alive():
            raise ClusterError(f"{component} is not running in {self.state_dir}")
        stop_processes([rec], grace)
        self._write_kwok_config()
        procs[component] = self._spawn(component, self._commands(ports)[component]())
        self._save(ports, procs)
        self._wait(component, time.monotonic() + timeout, self.is_ready, procs)

    def _commands(self, ports: Ports) -> dict[str, Callable[[], list[str]]]:
        pki = Pki(self.state_dir / "pki")
        return {
            "registry": lambda: self._registry_cmd(ports),
            "etcd": lambda: self._etcd_cmd(ports),
            "kube-apiserver": lambda: self._apiserver_cmd(pki, ports),
            "kube-controller-manager": lambda: self._controller_manager_cmd(pki, ports),
            "kube-scheduler": lambda: self._scheduler_cmd(ports),
            "kwok": lambda: self._kwok_cmd(ports),
        }

    def _outdated(self) -> list[str]:
        """Running components whose command line differs from what ``up`` would run now
        (another version or other flags, e.g. after an upgrade of helmdeck)."""
        ports, procs = self._load()
        if not all(build.COMPONENTS[c].is_built() for c in ("etcd", "kubernetes", "kwok", "registry")):
            return list(procs)
        want = self._commands(ports)
        return [c for c, rec in procs.items() if c in want and rec.cmd != want[c]()]

    # -- down --------------------------------------------------------------
    def down(self, timeout: float = 20.0) -> list[str]:
        """Stop the processes this cluster started; return the components stopped.

        SIGTERM first, SIGKILL after ``timeout`` seconds; then waits until none
        of the recorded ports accepts connections. Data is kept for the next ``up``.
        """
        ports, procs = self._load()
        running = [procs[c] for c in reversed(ORDER) if c in procs and procs[c].alive()]
        deadline = stop_processes(running, timeout)
        stopped = [rec.component for rec in running]
        while any(port_open(p) for p in ports.all()) and time.monotonic() < deadline + 5:
            time.sleep(0.1)
        if procs:
            self._save(ports, {})
        return stopped
