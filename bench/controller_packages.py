"""``helmdeck controller`` at scale: N Package objects (default 1,000) applied at once, the time until all are
Ready, and what the time went to.

In one run, on a private local cluster (kwok: no container runs, so the chart is one ConfigMap, from the
cluster's OCI registry; no ``--wait`` is needed):

- the controller is started and, once it holds its Lease, N Packages are created (one OCIRepository);
- the time from the first create until every Package is Ready=True, with the rate per minute;
- the controller's peak RSS (``VmHWM``) and CPU seconds; the CPU of the helm processes it ran (its waited-for
  children) and of the API server and etcd; helm processes spawned, by subcommand (a wrapper counts them);
- the helm CLI beside it: ``helm install`` of the same chart from the same registry, sequentially, K times
  (``--helm-sample``, all N by default up to 100), extrapolated to N when K < N; time and CPU, each as a
  ratio (helmdeck's CPU: the controller's and its helm processes'), and the API server's and etcd's CPU beside
  it; then helm with the flags the controller passes (``--wait``, ...), in a namespace holding as many
  ConfigMaps as the controller's did (helm 4's ``--wait`` watches every object of the chart's kinds there);
- the CPU per Package of helm, the controller, the API server and etcd, and the time N installs need at least
  when every CPU is busy with them (their CPU over the CPUs): the bound on a CPU-bound machine;
- Flux's published figure: 8m12s for 1,000 HelmReleases (fluxcd/flux-benchmark, helm-controller at 2 CPU,
  concurrency 10), a different machine: a scale, not a ratio.

``HELMDECK_BENCH_BASELINE=DIR`` runs the controller of the checkout in DIR first, on the same cluster (before and
after in the same run).

Run: ``python -m bench.controller_packages [--packages 1000] [--concurrency 4] [--helm-sample 100]
[--controller-log FILE] [--controller-profile FILE] [--cluster-dir DIR]``. The load average is printed with the
figures: the machine may be shared.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import resource
import shutil
import stat
import subprocess
import sys
import threading
import time
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client
from prometheus_client.parser import text_string_to_metric_families

from bench.service_common import CHART
from bench.storage_common import private_cluster
from engine.helm.crds import CREATE_REPLACE, apply_crds
from engine.kube import rest
from engine.kube.client import KubeTarget, api_client, watch_lines
from engine.kube.rest import get_json
from engine.kube.stream import list_all, open_watch
from localcluster import build
from localcluster.cluster import LocalCluster
from testkit.chart_sources import helm_run, push_oci
from testkit.packages import package_doc

ROOT = Path(__file__).resolve().parent.parent
GROUP, VERSION = "helmdeck.dev", "v1alpha1"
FLUX = (1000, 8 * 60 + 12)  # fluxcd/flux-benchmark: 1,000 HelmReleases Ready in 8m12s
TICKS = os.sysconf("SC_CLK_TCK")
# Another checkout whose controller runs first in the same run, on the same cluster (before and after)
BASELINE = Path(os.environ["HELMDECK_BENCH_BASELINE"]) if os.environ.get("HELMDECK_BENCH_BASELINE") else None


def _cpu(pid: int) -> tuple[float, float]:
    """(own, waited-for children's) CPU seconds of ``pid`` (/proc/PID/stat utime+stime, cutime+cstime)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0, 0.0
    return (int(fields[11]) + int(fields[12])) / TICKS, (int(fields[13]) + int(fields[14])) / TICKS


def _peak_rss_mib(pid: int) -> float:
    """The peak resident set of ``pid`` (/proc/PID/status VmHWM), MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def apply_package_crds(api: client.ApiClient) -> None:
    """The deploy chart's CRDs (Package and the sources) applied, as the chart installs them."""
    crds = [yaml.safe_load(p.read_text()) for p in sorted((ROOT / "deploy" / "chart" / "crds").glob("*.yaml"))]
    apply_crds(api, crds, CREATE_REPLACE, 60)


def server_pids(state_dir: Path, names: tuple[str, ...] = ("kube-apiserver", "etcd")) -> dict[str, int]:
    """The PIDs of the local cluster's processes called ``names`` (their command lines name its state directory)."""
    found: dict[str, int] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmd = (entry / "cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if cmd and str(state_dir).encode() in b" ".join(cmd):
            name = Path(cmd[0].decode(errors="replace")).name
            if name in names:
                found[name] = int(entry.name)
    return found


def _helm_wrapper(work: Path, helm: str) -> tuple[Path, Path]:
    """A helm that records its subcommand in a file before running the real one: the processes spawned."""
    calls = work / "helm-calls"
    calls.touch()
    wrapper = work / "helm"
    wrapper.write_text(f'#!/bin/sh\necho "$1" >> {calls}\nexec {helm} "$@"\n')
    wrapper.chmod(wrapper.stat().st_mode | stat.S_IXUSR)
    return wrapper, calls


def _publish(helm: str, work: Path, registry: str, env: dict[str, str]) -> str:
    """The ConfigMap chart pushed to the local registry; returns ``oci://host:port/path/bench``."""
    root = work / "chart" / "bench"
    for rel, text in CHART.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    out = work / "packaged"
    out.mkdir(exist_ok=True)
    archive = helm_run(helm, "package", str(root), "-d", str(out), env=env).strip().rsplit(" ", 1)[-1]
    base = f"{registry}/bench-{uuid.uuid4().hex[:6]}"
    push_oci(helm, Path(archive), base, env=env)
    return f"oci://{base}/bench"


def _objects(namespace: str, url: str, count: int) -> Iterator[dict[str, Any]]:
    yield {"apiVersion": f"{GROUP}/{VERSION}", "kind": "OCIRepository", "metadata": {"name": "bench",
           "namespace": namespace}, "spec": {"url": url, "insecure": True, "interval": "10m", "ref": {"tag": "0.1.0"}}}
    for i in range(count):
        yield package_doc(f"p{i:05d}", namespace, chartRef={"kind": "OCIRepository", "name": "bench"},
                          values={"value": f"v{i}"}, timeout="2m", interval="1h")


def _ready_count(api: client.ApiClient, namespace: str) -> tuple[int, int]:
    """(Packages Ready=True, Packages Ready=False) now, read a page of 500 at a time."""
    ready = failed = 0
    token = ""
    while True:
        query = [("limit", "500")] + ([("continue", token)] if token else [])
        body = get_json(api, f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/packages", query)
        for obj in body.get("items") or ():
            cond = next((c for c in (obj.get("status") or {}).get("conditions") or () if c.get("type") == "Ready"),
                        None)
            if cond is not None and cond.get("status") == "True":
                ready += 1
            elif cond is not None and cond.get("status") == "False":
                failed += 1
        token = str((body.get("metadata") or {}).get("continue") or "")
        if not token:
            return ready, failed


def follow_packages(api: client.ApiClient, path: str, saw: Callable[[dict[str, Any]], None], stop: threading.Event,
                    *, timeout: int) -> None:
    """Call ``saw`` with each Package at ``path`` as listed, then as a watch brings it (added or modified), listed
    again when the watch breaks (a state seen late, never early), until ``stop`` is set; ``timeout``: the watch's
    seconds before it is opened again."""
    while not stop.is_set():
        with contextlib.suppress(Exception):
            resp = open_watch(api, path, list_all(api, path, saw), timeout=timeout)
            for line in watch_lines(resp):
                event = json.loads(line)
                if event.get("type") in ("ADDED", "MODIFIED"):
                    saw(event["object"])
                if stop.is_set():
                    return


class _ReadyWatch:
    """Each Package's Ready status in ``namespace`` as a watch brings it (listed again when the watch breaks): the
    count costs the API server a watch, not a list of every Package every few seconds, and is seen on arrival."""

    def __init__(self, api: client.ApiClient, namespace: str):
        self._api, self._path = api, rest.path(f"{GROUP}/{VERSION}", "packages", namespace)
        self._ready: dict[str, str] = {}  # name -> Ready's status ("True", "False", "Unknown")
        self._lock = threading.Lock()
        self._stop = threading.Event()
        threading.Thread(target=self._follow, name="ready-watch", daemon=True).start()

    def _follow(self) -> None:
        follow_packages(self._api, self._path, self._saw, self._stop, timeout=60)

    def _saw(self, obj: dict[str, Any]) -> None:
        cond = next((c for c in (obj.get("status") or {}).get("conditions") or () if c.get("type") == "Ready"), None)
        with self._lock:
            self._ready[obj["metadata"]["name"]] = str(cond.get("status")) if cond else ""

    def counts(self) -> tuple[int, int]:
        """(Packages Ready=True, Packages Ready=False) seen so far."""
        with self._lock:
            values = list(self._ready.values())
        return values.count("True"), values.count("False")

    def stop(self) -> None:
        self._stop.set()


def _metrics(text: str) -> dict[str, float]:
    return {f"{s.name}{sorted(s.labels.items())}": s.value
            for family in text_string_to_metric_families(text) for s in family.samples}


def _api_requests(api: client.ApiClient) -> Counter[str]:
    """The API server's requests so far by ``verb resource[/subresource]`` (its apiserver_request_total)."""
    out: Counter[str] = Counter()
    text = rest.get(api, "/metrics", accept="text/plain").data.decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name != "apiserver_request_total":
                continue
            labels = sample.labels
            sub = f"/{labels['subresource']}" if labels.get("subresource") else ""
            out[f"{labels.get('verb')} {labels.get('resource')}{sub}"] += int(sample.value)
    return out


def _endpoint(log: Path, what: str, timeout: float) -> str:
    """``http://host:port`` the controller's log says ``what`` is served on."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for line in log.read_text(errors="replace").splitlines():
            if f"{what} on " in line:
                return "http://" + line.split(f"{what} on ", 1)[1].split("'")[0].strip()
        time.sleep(0.2)
    raise SystemExit(f"the controller did not serve {what} within {timeout}s; see {log}")


def _wait_ready(health: str, timeout: float) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(health + "/readyz", timeout=2) as resp:
                if resp.status == 200:
                    return
        except OSError:
            pass
        time.sleep(0.2)
    raise SystemExit(f"the controller was not ready within {timeout}s")


def _helm_cli(helm: str, target: KubeTarget, url: str, namespace: str, sample: int,
              env: dict[str, str], flags: tuple[str, ...] = ()) -> tuple[float, float]:
    """(seconds, CPU seconds) of ``sample`` sequential ``helm install``s of the chart, as a user would run them
    (with ``flags`` added)."""
    assert target.kubeconfig is not None
    started, cpu = time.perf_counter(), _children_cpu()
    for i in range(sample):
        helm_run(helm, "install", f"h{i:05d}", url, "--version", "0.1.0", "--plain-http", "-n", namespace,
                 "--kubeconfig", str(target.kubeconfig), "--set", f"value=v{i}", *flags, env=env)
    return time.perf_counter() - started, _children_cpu() - cpu


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def _clock(seconds: float) -> str:
    return f"{int(seconds // 60)}m{seconds % 60:04.1f}s"


def run(cluster: LocalCluster, work: Path, args: argparse.Namespace, source: Path = ROOT) -> None:
    """One controller of the helmdeck in ``source`` (a checkout) over fresh namespaces, then helm beside it."""
    assert cluster.kubeconfig is not None and cluster.registry is not None
    target = KubeTarget(cluster.kubeconfig)
    api = api_client(target)
    apply_package_crds(api)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    namespace, cli_ns = f"bench-{uuid.uuid4().hex[:6]}", f"bench-cli-{uuid.uuid4().hex[:6]}"
    for ns in (namespace, cli_ns):
        core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=ns)))
    helm = str(build.binary("helm4"))
    env = {"HELM_CONFIG_HOME": str(work / "hc"), "HELM_CACHE_HOME": str(work / "hcache"),
           "HELM_DATA_HOME": str(work / "hd")}
    url = _publish(helm, work, cluster.registry, env)
    wrapper, calls = _helm_wrapper(work, helm)
    log = work / "controller.log"
    # cProfile sees the event loop's thread only (the watches' threads are not in it); it slows that thread too
    profile = ["-m", "cProfile", "-o", str(args.controller_profile)] if args.controller_profile else []
    with log.open("wb") as out:
        ctl = subprocess.Popen(
            [sys.executable, *profile, "-m", "helmdeck", "controller", "--kubeconfig", str(cluster.kubeconfig),
             "--watch-namespace", namespace, "--lease-namespace", namespace, "--helm", str(wrapper),
             "--concurrency", str(args.concurrency), "--health-addr", "127.0.0.1:0", "--metrics-addr", "127.0.0.1:0",
             "--log-level", "info"],
            stdout=out, stderr=subprocess.STDOUT, cwd=source,
            env={**os.environ, **env, "PYTHONPATH": str(source)})
    try:
        _wait_ready(_endpoint(log, "health probes", 60), 120)
        metrics = _endpoint(log, "metrics", 5)
        pids = server_pids(cluster.state_dir)
        before = {name: _cpu(pid)[0] for name, pid in pids.items()}
        ctl_before, helm_before = _cpu(ctl.pid)
        spawned_before = len(calls.read_text().splitlines())
        requests_before = _api_requests(api)
        load_before = os.getloadavg()
        watch = _ReadyWatch(api, namespace)
        started = time.perf_counter()
        for obj in _objects(namespace, url, args.packages):
            plural = "ocirepositories" if obj["kind"] == "OCIRepository" else "packages"
            custom.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, obj)
        created = time.perf_counter() - started
        print(f"{args.packages} Packages created in {created:.1f}s", flush=True)
        ready = failed = 0
        first: float | None = None
        loads: list[float] = []
        deadline = started + args.timeout
        shown = started
        while time.perf_counter() < deadline:
            ready, failed = watch.counts()
            if ready and first is None:
                first = time.perf_counter() - started
            if ready + failed >= args.packages:
                break
            if time.perf_counter() - shown >= args.poll:
                shown = time.perf_counter()
                loads.append(os.getloadavg()[0])
                print(f"  {shown - started:6.1f}s: {ready} Ready, {failed} failed", flush=True)
            time.sleep(0.05)
        elapsed = time.perf_counter() - started
        watch.stop()
        if ctl.poll() is not None:
            raise SystemExit(f"the controller exited ({ctl.returncode}); see {log}")
        ctl_cpu, helm_cpu = (a - b for a, b in zip(_cpu(ctl.pid), (ctl_before, helm_before), strict=True))
        server_cpu = {name: _cpu(pid)[0] - before[name] for name, pid in pids.items()}
        peak = _peak_rss_mib(ctl.pid)
        with urllib.request.urlopen(metrics + "/metrics", timeout=10) as resp:
            samples = _metrics(resp.read().decode())
        spawned = Counter(calls.read_text().splitlines()[spawned_before:])
        requests = _api_requests(api) - requests_before
    finally:
        ctl.terminate()
        ctl.wait(60)
        if args.controller_log is not None:
            shutil.copyfile(log, args.controller_log)
    sample = min(args.packages, args.helm_sample)
    cpus = os.cpu_count() or 1
    cli_before = {name: _cpu(pid)[0] for name, pid in pids.items()}
    cli_requests_before = _api_requests(api)
    cli, cli_cpu = _helm_cli(helm, target, url, cli_ns, sample, env)
    cli_server = {name: _cpu(pid)[0] - cli_before[name] for name, pid in pids.items()}
    cli_requests = _api_requests(api) - cli_requests_before
    # helm with the flags the controller passes by default (Flux's: engine.reconcile.options), in a namespace of its
    # own as full as the controller's was: helm 4's --wait watches every object of the chart's kinds there
    wait_ns = f"bench-wait-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=wait_ns)))
    for i in range((args.packages - sample) // 2):  # as many as the controller's installs saw, on average
        core.create_namespaced_config_map(wait_ns, client.V1ConfigMap(
            metadata=client.V1ObjectMeta(name=f"fill{i:05d}"), data={"value": f"v{i}"}))
    wait_before = {name: _cpu(pid)[0] for name, pid in pids.items()}
    flux_flags = ("--wait", "--take-ownership", "--server-side=true", "--force-conflicts", "--timeout", "2m")
    waited, waited_cpu = _helm_cli(helm, target, url, wait_ns, sample, env, flux_flags)
    wait_server = {name: _cpu(pid)[0] - wait_before[name] for name, pid in pids.items()}
    cli_n = cli * args.packages / sample

    print(f"\nhelmdeck controller ({source}), {args.packages} Packages, --concurrency {args.concurrency} "
          f"(load average before {load_before[0]:.1f}, during max {max(loads or [0]):.1f}, "
          f"mean {sum(loads) / max(1, len(loads)):.1f}; {os.cpu_count()} CPUs)")
    print(f"  all Ready:         {_clock(elapsed)} ({ready} Ready, {failed} Ready=False"
          f"{'' if ready + failed >= args.packages else ', TIMED OUT'}); "
          f"{ready / elapsed * 60:.0f} per minute; the first Ready after {first or 0:.1f}s")
    print(f"  controller:        peak RSS {peak:.0f} MiB, {ctl_cpu:.1f} CPU s "
          f"({ctl_cpu / elapsed * 100:.0f}% of one CPU)")
    kinds = ", ".join(f"{k} {v}" for k, v in spawned.most_common())
    print(f"  helm processes:    {sum(spawned.values())} spawned ({kinds}), {helm_cpu:.1f} CPU s")
    for name, cpu in sorted(server_cpu.items()):
        print(f"  {name + ':':18} {cpu:.1f} CPU s")
    writes = {k: v for k, v in requests.items() if k.split()[0] in ("POST", "PUT", "PATCH", "DELETE", "APPLY")}
    reads = {k: v for k, v in requests.items() if k not in writes}
    print(f"  API requests:      {sum(requests.values())} ({sum(writes.values())} writes: "
          + ", ".join(f"{k} {v}" for k, v in Counter(writes).most_common(10)) + "; reads: "
          + ", ".join(f"{k} {v}" for k, v in Counter(reads).most_common(10)) + ")")
    actions = {k: v for k, v in samples.items() if k.startswith("helmdeck_helm_action_duration_seconds_sum")}
    for key, total in sorted(actions.items()):
        labels = dict(re.findall(r"\('(\w+)', '([^']*)'\)", key))
        count = samples.get(key.replace("_sum", "_count"), 0)
        print(f"  helm {labels.get('action')} {labels.get('result')}: {count:.0f} actions, mean "
              f"{total / max(1, count):.2f}s, {total:.0f}s in all")
    reconciles = samples.get("helmdeck_reconcile_duration_seconds_sum[]", 0)
    count = samples.get("helmdeck_reconcile_duration_seconds_count[]", 0)
    print(f"  passes:            {count:.0f}, mean {reconciles / max(1, count):.2f}s")
    how = "all of them" if sample == args.packages else f"a sample of {sample}, extrapolated to {args.packages}"
    print(f"helm CLI, sequential helm install of the same chart ({how}): {_clock(cli_n)} "
          f"({cli / sample:.2f}s and {cli_cpu / sample:.2f} CPU s each); helmdeck/helm CLI: {elapsed / cli_n:.2f} "
          f"in time, {(helm_cpu + ctl_cpu) / (cli_cpu * args.packages / sample):.2f} in CPU (helm and helmdeck)")
    # The CPU bound: on a machine whose CPUs are all busy, N installs take at least their CPU over the CPUs.
    per = {"helm": helm_cpu, "controller": ctl_cpu, **server_cpu}
    total = sum(per.values()) / args.packages
    print("CPU per Package:   " + ", ".join(f"{k} {v / args.packages * 1000:.0f} ms" for k, v in per.items())
          + f"; all {total * 1000:.0f} ms: {args.packages} installs need {_clock(total * args.packages / cpus)} "
          f"of {cpus} CPUs at full use")
    print("sequential helm install's own: " + ", ".join(
        f"{k} {v / sample * 1000:.0f} ms" for k, v in {"helm": cli_cpu, **cli_server}.items())
        + f"; {sum(cli_requests.values()) / sample:.1f} API requests per install")
    print(f"helm install {' '.join(flux_flags)} (the controller's flags), {(args.packages - sample) // 2} ConfigMaps "
          f"beside them: {waited / sample:.2f}s each; helmdeck/that: {elapsed / (waited * args.packages / sample):.2f} "
          "in time; its CPU: " + ", ".join(f"{k} {v / sample * 1000:.0f} ms" for k, v in
                                           {"helm": waited_cpu, **wait_server}.items()))
    flux_n = FLUX[1] * args.packages / FLUX[0]
    print(f"Flux helm-controller (published, fluxcd/flux-benchmark, 2 CPU, concurrency 10): {_clock(FLUX[1])} for "
          f"{FLUX[0]}" + (f" ({_clock(flux_n)} for {args.packages} at that rate)" if args.packages != FLUX[0] else ""))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packages", type=int, default=1000, help="Package objects to apply (default 1000)")
    parser.add_argument("--concurrency", type=int, default=4, help="the controller's --concurrency (default 4)")
    parser.add_argument("--helm-sample", type=int, default=100,
                        help="sequential helm installs measured for the CLI figure (default 100)")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds to wait for all Ready (default 3600)")
    parser.add_argument("--poll", type=float, default=2.0, help="seconds between progress lines (default 2)")
    parser.add_argument("--controller-log", type=Path, help="keep the controller's log in this file")
    parser.add_argument("--controller-profile", type=Path,
                        help="run the controller under cProfile and write its stats to this file (pstats)")
    parser.add_argument("--cluster-dir", type=Path, help="reuse (and keep) the local cluster in this directory")
    args = parser.parse_args(argv)
    with private_cluster(args.cluster_dir) as (cluster, work):
        if BASELINE is not None:
            run(cluster, work, args, BASELINE)
        run(cluster, work, args)


if __name__ == "__main__":
    main()
