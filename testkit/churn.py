"""The churn: several ``helmdeck controller`` replicas as processes over many Packages whose upgrades take a few
seconds, while replicas die (SIGKILL), pause (SIGSTOP for longer than their Lease, then SIGCONT) and join, and
specs are edited throughout; then the audit (testkit/release_audit.py) of who acted on which release when. Used by
tests/cluster/test_controller_churn.py (a few Packages) and bench/controller_churn.py (300, and the takeover times).

The chart is tests/data/charts/slow: a Deployment with ``minReadySeconds`` (kwok marks pods ready at once, the
Deployment controller counts them available only after it, and helm's ``--wait`` waits for that).
"""

from __future__ import annotations

import random
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.helm import Helm
from testkit.controller import GROUP, VERSION, Controller, create, eventually, publish_chart, start_controller
from testkit.packages import package_doc
from testkit.release_audit import Finding, audit, collect, helm_wrapper, read_processes

SLOW = Path(__file__).resolve().parent.parent / "tests" / "data" / "charts" / "slow"  # beside the tests' charts


def ready_now(obj: dict[str, Any], *, current: bool = True) -> bool:
    """Is the Package ``obj`` Ready=True (``current``: at its current generation, Flux's ``observedGeneration``)?"""
    status = obj.get("status") or {}
    ready: dict[str, Any] = next((c for c in status.get("conditions") or () if c.get("type") == "Ready"), {})
    return ready.get("status") == "True" and (
        not current or status.get("observedGeneration") == obj["metadata"]["generation"])


@dataclass
class Replica:
    """One controller process of the churn; ``paused``: its SIGSTOP..SIGCONT windows (epoch seconds)."""

    name: str
    ctl: Controller
    killed: float | None = None
    paused: list[tuple[float, float]] = field(default_factory=list)

    @property
    def replica(self) -> str:
        """As the audit names it (the pid in its default identity and the helm process log)."""
        return f"pid {self.ctl.pid}"

    @property
    def alive(self) -> bool:
        return self.killed is None and self.ctl.proc.poll() is None

    @property
    def paused_now(self) -> bool:
        return bool(self.paused) and self.paused[-1][1] == float("inf")


@dataclass
class Churn:
    """The churn's cluster side: its namespace, the Packages, the replicas started (``extra``: their flags
    besides start_controller's, e.g. ``--shards auto``), the helm process log, the edits made."""

    api: client.ApiClient
    kubeconfig: Path
    namespace: str
    helm: Helm
    work: Path
    registry: str
    extra: Sequence[str] = ()
    lease: float = 6.0
    out: Callable[[str], None] = print
    replicas: list[Replica] = field(default_factory=list)
    edits: int = 0
    _stop_edits: threading.Event = field(default_factory=threading.Event)
    _edit_lock: threading.Lock = field(default_factory=threading.Lock)

    def __post_init__(self) -> None:
        self.began = time.monotonic()
        wrapper, self.helm_log = helm_wrapper(self.work, self.helm.binary)
        self.audited_helm = Helm(wrapper, self.helm.target, self.helm.env)
        self.objects = client.CustomObjectsApi(self.api)

    def say(self, text: str) -> None:
        self.out(f"{time.monotonic() - self.began:6.1f}s {text}")

    # -- set-up --------------------------------------------------------------------------------------------------

    def packages(self, count: int, delay: int, timeout: str = "1m") -> list[str]:
        """Publish the slow chart, create its OCIRepository and ``count`` Packages of it (``delay``: each install
        and upgrade's seconds); returns their names."""
        base = publish_chart(self.helm, SLOW, self.work, self.registry, self.helm.env)
        create(self.objects, {"apiVersion": f"{GROUP}/{VERSION}", "kind": "OCIRepository",
                              "metadata": {"name": "slow", "namespace": self.namespace},
                              "spec": {"url": f"oci://{base}/slow", "insecure": True, "interval": "10m",
                                       "ref": {"tag": "0.1.0"}}})
        names = [f"p{i:04d}" for i in range(count)]
        for name in names:
            create(self.objects, package_doc(name, self.namespace, chartRef={"kind": "OCIRepository", "name": "slow"},
                                             timeout=timeout, interval="1h", values={"delay": delay, "value": "v0"}))
        self.names = names
        return names

    def start(self, name: str) -> Replica:
        """One more replica (its Lease ``lease`` seconds), running helm through the audit's wrapper."""
        ctl = start_controller(self.kubeconfig, self.namespace, self.audited_helm, self.work, *self.extra,
                               "--lease-duration", f"{self.lease:g}", name=name)
        replica = Replica(name, ctl)
        self.replicas.append(replica)
        self.say(f"  started replica {name} (pid {ctl.pid})")
        return replica

    # -- what happens to them ------------------------------------------------------------------------------------

    def running(self, command: str | None = None) -> dict[int, int]:
        """Controller pid -> its helm processes running now (of ``command``, e.g. upgrade, when given)."""
        out: dict[int, int] = {}
        for proc in read_processes(self.helm_log):
            if proc.end is None and command in (None, proc.command):
                pid = int(proc.replica.split()[1])
                out[pid] = out.get(pid, 0) + 1
        return out

    def acting(self, command: str | None = None, timeout: float = 30.0) -> Replica | None:
        """A live replica running a helm process (of ``command``) now, waiting up to ``timeout`` for one."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            busy = self.running(command)
            found = [r for r in self.replicas if r.alive and not r.paused_now and busy.get(r.ctl.pid)]
            if found:
                return random.choice(found)
            time.sleep(0.2)
        return None

    def kill(self, replica: Replica) -> float:
        """SIGKILL ``replica`` (its helm processes run on); returns when (epoch seconds)."""
        replica.ctl.proc.send_signal(signal.SIGKILL)
        replica.killed = time.time()
        replica.ctl.proc.wait(30)
        self.say(f"  SIGKILL {replica.name} (pid {replica.ctl.pid}), "
                 f"{self.running().get(replica.ctl.pid, 0)} helm processes left running")
        return replica.killed

    def pause(self, replica: Replica, seconds: float) -> None:
        """SIGSTOP ``replica`` for ``seconds`` (its helm processes go on), then SIGCONT."""
        stopped = time.time()
        replica.ctl.proc.send_signal(signal.SIGSTOP)
        replica.paused.append((stopped, float("inf")))
        self.say(f"  SIGSTOP {replica.name} (pid {replica.ctl.pid}) for {seconds:.0f}s, "
                 f"{self.running().get(replica.ctl.pid, 0)} helm processes running")
        time.sleep(seconds)
        replica.ctl.proc.send_signal(signal.SIGCONT)
        replica.paused[-1] = (stopped, time.time())
        self.say(f"  SIGCONT {replica.name}")

    def edit(self, name: str) -> None:
        """Change Package ``name``'s ``value`` (a new generation: an upgrade rolling a new pod)."""
        with self._edit_lock:
            self.edits += 1
            value = f"e{self.edits}"
        try:
            self.objects.patch_namespaced_custom_object(GROUP, VERSION, self.namespace, "packages", name,
                                                        {"spec": {"values": {"value": value}}})
        except ApiException as exc:
            self.say(f"  edit of {name} failed: {exc.reason}")

    def edit_throughout(self, every: float) -> threading.Thread:
        """Edit a random Package every ``every`` seconds until :meth:`stop_edits`."""
        self._stop_edits.clear()

        def loop() -> None:
            while not self._stop_edits.wait(every):
                self.edit(random.choice(self.names))

        thread = threading.Thread(target=loop, name="churn-edits", daemon=True)
        thread.start()
        return thread

    def stop_edits(self) -> None:
        self._stop_edits.set()

    # -- reading -------------------------------------------------------------------------------------------------

    def ready(self, *, current: bool = True) -> int:
        """Packages Ready=True now: at their current generation, else at any (installed, an edit may be
        pending)."""
        body: Any = self.objects.list_namespaced_custom_object(GROUP, VERSION, self.namespace, "packages")
        return sum(1 for obj in body.get("items") or () if ready_now(obj, current=current))

    def wait_ready(self, count: int, timeout: float, *, current: bool = True) -> float:
        """Seconds until at least ``count`` Packages are Ready (``current``: at their generation; AssertionError
        after ``timeout``, with the replicas' logs' tails)."""
        started = time.monotonic()
        eventually(lambda: self.ready(current=current) >= count, timeout, f"{count} Packages Ready", every=1.0,
                   logs=self.tails)
        return time.monotonic() - started

    def tails(self) -> str:
        return "\n".join(f"--- {r.name} (pid {r.ctl.pid}):\n" + "\n".join(r.ctl.text().splitlines()[-30:])
                         for r in self.replicas)

    def audit(self) -> list[Finding]:
        """The audit of everything that happened in the namespace so far."""
        deaths = {r.replica: r.killed for r in self.replicas if r.killed is not None}
        data = collect(self.api, self.namespace, processes=read_processes(self.helm_log),
                       logs=[r.ctl.text() for r in self.replicas], deaths=deaths, until=time.time())
        self.say(f"  audit: {len(data.events)} Events, {len(data.revisions)} revisions, {len(data.processes)} "
                 f"helm processes, {len(data.unconverged)} Packages not converged")
        return audit(data)

    def stop(self) -> None:
        """SIGTERM every live replica (SIGCONT first: a paused one would not hear it), SIGKILL any left."""
        for replica in self.replicas:
            if replica.ctl.proc.poll() is None:
                replica.ctl.proc.send_signal(signal.SIGCONT)
                replica.ctl.proc.send_signal(signal.SIGTERM)
        for replica in self.replicas:
            try:
                replica.ctl.proc.wait(60)
            except subprocess.TimeoutExpired:  # it must not outlive the churn
                replica.ctl.proc.kill()


@dataclass
class ChurnResult:
    """What :func:`run_churn` saw: the findings (empty: the proof holds), times (seconds), counts."""

    findings: list[Finding]
    churned: float  # from the first Package created to the last edit
    converged: float | None  # ... to every Package converged (None: not within the timeout)
    edits: int
    actions: dict[str, int]


def run_churn(churn: Churn, count: int, *, delay: int = 4, replicas: int = 3, edit_every: float = 0.5,
              tail: float = 20.0, timeout: float = 600.0) -> ChurnResult:
    """The scenario of issue 21 over ``count`` Packages: ``replicas`` replicas; once a third are installed, SIGKILL one
    that is running helm; SIGSTOP another during an upgrade for twice its Lease, then SIGCONT; start one more; edit
    a random Package every ``edit_every`` seconds from the start until ``tail`` seconds after the new one joined;
    then wait for every Package to converge (``timeout``) and audit."""
    churn.packages(count, delay)
    started = time.monotonic()
    for i in range(replicas):
        churn.start(f"r{i + 1}")
    churn.edit_throughout(edit_every)
    try:
        churn.wait_ready(max(1, count // 3), timeout, current=False)  # a third installed: the edits go on
        victim = churn.acting() or churn.replicas[0]
        churn.kill(victim)
        # Upgrades queue behind the installs still to do (at 300 Packages, minutes of them): wait for one.
        sleeper = churn.acting("upgrade", timeout=timeout)
        if sleeper is None:
            raise AssertionError(f"no replica ran an upgrade within {timeout:.0f}s to pause\n" + churn.tails())
        churn.pause(sleeper, 2 * churn.lease + 1)
        churn.start(f"r{replicas + 1}")
        time.sleep(tail)
    finally:
        churn.stop_edits()
    churn.say(f"  {churn.edits} edits made; waiting for every Package to converge")
    churned = time.monotonic() - started
    converged: float | None = None
    try:
        churn.wait_ready(count, timeout)
        converged = time.monotonic() - started
    except AssertionError:
        churn.say(f"  not every Package converged within {timeout:.0f}s: the audit says which")
    time.sleep(2)  # the last Events and status writes land
    findings = churn.audit()
    actions: dict[str, int] = {}
    for proc in read_processes(churn.helm_log):
        name = next((r.name for r in churn.replicas if r.replica == proc.replica), proc.replica)
        actions[name] = actions.get(name, 0) + 1
    return ChurnResult(findings, churned, converged, churn.edits, actions)
