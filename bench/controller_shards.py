"""``helmdeck controller --shards auto`` at scale: N Package objects (default 1,000) applied from scratch with 1
replica and with 3, the time until all are Ready, each replica's peak RSS, and where the time goes.

In one run, on a private local cluster (kwok: no container runs; the chart is one ConfigMap from the cluster's OCI
registry, as bench/controller_packages.py), for each replica count (``--replicas``, default 1 and 3), in a fresh
namespace:

- the replicas are started as processes and, once each serves its health probes, N Packages are created;
- the time from the first create until every Package is Ready=True, with the rate per minute;
- per replica: peak RSS (``VmHWM``), its own CPU seconds, its helm processes' (its waited-for children's) CPU
  seconds and how many helm commands it ran (the audit's helm process log, testkit/release_audit.py);
- the CPU seconds of the API server, etcd, kube-controller-manager, kube-scheduler and kwok over the same time,
  and each group's share of the machine's CPU time (elapsed x CPUs): where the time went;
- Flux's published figure beside it: 8m12s for 1,000 HelmReleases (fluxcd/flux-benchmark, helm-controller at
  2 CPU, concurrency 10), another machine: a scale, not a ratio. The helm CLI's own figure (sequential
  ``helm install``) is bench/controller_packages.py's.

Then the placement with replicas as processes (``--placement``, default 3 and 10 members; none: skipped), over the
Packages of the last size (all Ready), with fresh replicas: for each member count, the spread (each member's
share, the largest against the mean; issue 21: within 1.2x) once every Package's ``status.controller.replica``
(written only by the replica it is placed on) names the member placement (consistent hashing with bounded loads
over the live membership Leases and every Package of the namespace) gives it; then one more replica joins and the
Packages whose owner changed are counted (issue 21: at most 1/N of them plus 5%, N the members after the join).
``--placement-namespace NS`` measures only the placement, over the Packages already in NS (a kept
``--cluster-dir``).

Run: ``python -m bench.controller_shards [--packages 1000] [--replicas 1 3] [--concurrency 4] [--mode auto]
[--placement 3 10] [--cluster-dir DIR]``. The load average is printed with the figures: the machine may be shared.
"""

from __future__ import annotations

import argparse
import math
import os
import signal
import sys
import time
import uuid
from collections import Counter
from pathlib import Path

from kubernetes import client

from bench.controller_packages import (
    FLUX,
    TICKS,
    _clock,
    _cpu,
    _objects,
    _peak_rss_mib,
    _publish,
    _ready_count,
    apply_package_crds,
    server_pids,
)
from bench.storage_common import private_cluster
from engine.base.wire import SHARD
from engine.helm import Helm
from engine.kube.client import KubeTarget, api_client
from engine.kube.rest import get_json
from engine.runtime.ledger.placement import assign, package_name
from localcluster import build
from localcluster.cluster import LocalCluster
from testkit.controller import GROUP, VERSION, Controller, endpoint, eventually, start_controller
from testkit.release_audit import helm_wrapper, read_processes, replica_of

ROOT = Path(__file__).resolve().parent.parent
SERVERS = ("kube-apiserver", "etcd", "kube-controller-manager", "kube-scheduler", "kwok")


def busy_cpu() -> float:
    """CPU seconds the whole machine has been busy (/proc/stat: every state but idle and iowait)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    return (sum(fields) - fields[3] - fields[4]) / TICKS


def _helm_env(work: Path) -> dict[str, str]:
    return {"HELM_CONFIG_HOME": str(work / "hc"), "HELM_CACHE_HOME": str(work / "hcache"),
            "HELM_DATA_HOME": str(work / "hd")}


def run_size(cluster: LocalCluster, work: Path, args: argparse.Namespace, replicas: int) -> str:
    """One replica count's throughput run (printed); returns its namespace, its Packages left in place."""
    assert cluster.kubeconfig is not None and cluster.registry is not None
    target = KubeTarget(cluster.kubeconfig)
    api = api_client(target)
    core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
    namespace = f"shards-{replicas}-{uuid.uuid4().hex[:6]}"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=namespace)))
    env = _helm_env(work)
    helm = str(build.binary("helm4"))
    url = _publish(helm, work, cluster.registry, env)
    run_dir = work / namespace
    run_dir.mkdir()
    wrapper, calls = helm_wrapper(run_dir, helm)
    mode = ("--shards", "auto") if args.mode == "auto" else ()
    ctls: list[Controller] = [start_controller(
        cluster.kubeconfig, namespace, Helm(wrapper, target, env), run_dir, *mode, "--log-level", "info",
        "--lease-duration", "15", "--concurrency", str(args.concurrency), name=f"r{i + 1}") for i in range(replicas)]
    try:
        for ctl in ctls:
            eventually(lambda: all(endpoint(c.text(), "health probes") for c in ctls), 120,
                       "every replica serves its probes", logs=ctl.text)
        time.sleep(3)  # the replicas see each other's membership Leases before the Packages come
        pids = server_pids(cluster.state_dir, SERVERS)
        servers_before = {name: _cpu(pid)[0] for name, pid in pids.items()}
        ctl_before = {ctl.pid: _cpu(ctl.pid) for ctl in ctls}
        load_before = os.getloadavg()
        busy_before = busy_cpu()
        started = time.perf_counter()
        for obj in _objects(namespace, url, args.packages):
            plural = "ocirepositories" if obj["kind"] == "OCIRepository" else "packages"
            custom.create_namespaced_custom_object(GROUP, VERSION, namespace, plural, obj)
        print(f"  {replicas} replica(s): {args.packages} Packages created in {time.perf_counter() - started:.1f}s",
              flush=True)
        ready = failed = 0
        loads: list[float] = []
        while time.perf_counter() < started + args.timeout:
            ready, failed = _ready_count(api, namespace)
            loads.append(os.getloadavg()[0])
            if ready + failed >= args.packages:
                break
            print(f"  {time.perf_counter() - started:6.1f}s: {ready} Ready, {failed} failed", flush=True)
            time.sleep(args.poll)
        elapsed = time.perf_counter() - started
        busy = busy_cpu() - busy_before
        own = {ctl.pid: tuple(a - b for a, b in zip(_cpu(ctl.pid), ctl_before[ctl.pid], strict=True)) for ctl in ctls}
        peaks = {ctl.pid: _peak_rss_mib(ctl.pid) for ctl in ctls}
        servers = {name: _cpu(pid)[0] - servers_before[name] for name, pid in pids.items()}
        ran = Counter(p.replica for p in read_processes(calls))
        dead = [ctl for ctl in ctls if ctl.proc.poll() is not None]
    finally:
        for ctl in ctls:
            ctl.stop(timeout=90)
    cpus = os.cpu_count() or 1
    print(f"\n{replicas} replica(s) {' '.join(mode) or '(one Lease)'}, {args.packages} Packages, --concurrency "
          f"{args.concurrency} each (load average before {load_before[0]:.1f}, during max {max(loads or [0]):.1f}, "
          f"mean {sum(loads) / max(1, len(loads)):.1f}; {cpus} CPUs)")
    print(f"  all Ready:        {_clock(elapsed)} ({ready} Ready, {failed} Ready=False"
          f"{'' if ready + failed >= args.packages else ', TIMED OUT'}); {ready / elapsed * 60:.0f} per minute"
          + (f"; {len(dead)} replica(s) EXITED" if dead else ""))
    total = elapsed * cpus
    helm_all = sum(cpu[1] for cpu in own.values())
    for i, ctl in enumerate(ctls):
        mine, children = own[ctl.pid]
        print(f"  replica r{i + 1}:       peak RSS {peaks[ctl.pid]:.0f} MiB, helmdeck {mine:.1f} CPU s, its helm "
              f"processes {children:.1f} CPU s ({ran.get(f'pid {ctl.pid}', 0)} mutating helm commands)")
    print("  where the CPU went (share of elapsed x CPUs):")
    groups = {"helmdeck (the replicas)": sum(cpu[0] for cpu in own.values()), "helm processes": helm_all,
              **{name: cpu for name, cpu in sorted(servers.items())}}
    for name, cpu in groups.items():
        print(f"    {name + ':':26} {cpu:7.1f} CPU s  {cpu / total * 100:5.1f}%")
    others = busy - sum(groups.values())
    print(f"    {'other processes (shared)':26} {others:7.1f} CPU s  {others / total * 100:5.1f}%")
    print(f"    {'idle':26} {total - busy:7.1f} CPU s  {(total - busy) / total * 100:5.1f}%")
    return namespace


def _owners(api: client.ApiClient, namespace: str) -> dict[str, str]:
    """Package name -> ``status.controller.replica``: the replica that wrote its status last (only the replica it
    is placed on writes it), "" when none did."""
    out: dict[str, str] = {}
    token = ""
    while True:
        query = [("limit", "500")] + ([("continue", token)] if token else [])
        body = get_json(api, f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/packages", query)
        for obj in body.get("items") or ():
            controller = (obj.get("status") or {}).get("controller") or {}
            out[str(obj["metadata"]["name"])] = str(controller.get("replica") or "")
        token = str((body.get("metadata") or {}).get("continue") or "")
        if not token:
            return out


def _members(api: client.ApiClient, namespace: str, ctls: list[Controller]) -> dict[str, Controller]:
    """Identity -> replica, of the membership Leases our live replicas hold."""
    live = {f"pid {c.pid}": c for c in ctls if c.proc.poll() is None}
    body = get_json(api, f"/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases",
                    [("labelSelector", f"{SHARD}=auto")])
    holders = [str((item.get("spec") or {}).get("holderIdentity") or "") for item in body.get("items") or ()]
    return {h: live[replica_of(h)] for h in holders if h and replica_of(h) in live}


def _settled(api: client.ApiClient, namespace: str, ctls: list[Controller],
             timeout: float) -> tuple[dict[str, str], dict[str, str], float]:
    """Wait until every replica in ``ctls`` is a member and every Package's status names the member placement
    (bounded loads over every Package of ``namespace``) gives it; returns (observed owners, placement's owners,
    seconds). After ``timeout`` returns what is there (the caller prints the disagreement)."""
    started = time.monotonic()
    while True:
        members = _members(api, namespace, ctls)
        observed = _owners(api, namespace)
        placed = assign([package_name(namespace, n) for n in observed], members)
        expected = {n: placed.get(package_name(namespace, n), "") for n in observed}
        took = time.monotonic() - started
        if len(members) == len(ctls) and observed == expected:
            return observed, expected, took
        if took > timeout:
            off = sorted(n for n in observed if observed[n] != expected[n])
            print(f"  NOT settled within {timeout:.0f}s: {len(members)} of {len(ctls)} replicas are members; "
                  f"{len(off)} statuses name another replica than placement's, e.g. "
                  + ", ".join(f"{n}: {observed[n] or '-'} (placed on {expected[n] or '-'})" for n in off[:5]))
            return observed, expected, took
        time.sleep(3)


def _spread_line(observed: dict[str, str], expected: dict[str, str], members: int, took: float) -> str:
    shares = Counter(observed.values())
    mean = len(observed) / members
    agree = sum(1 for n, o in observed.items() if o == expected[n])
    largest = max(shares.values(), default=0)
    placed = max(Counter(expected.values()).values(), default=0)
    return (f"  {members} members: shares {sorted(shares.values(), reverse=True)}; largest / mean "
            f"{largest / mean:.3f} (goal <= 1.2: {'met' if largest <= 1.2 * mean else 'NOT met'}; by placement "
            f"over the live Leases {placed / mean:.3f}); "
            f"{agree} of {len(observed)} statuses name the placed owner; settled in {took:.0f}s "
            f"(load average {os.getloadavg()[0]:.1f})")


def placement(cluster: LocalCluster, work: Path, args: argparse.Namespace, namespace: str) -> None:
    """The spread over ``args.placement`` member counts and the moves of one joining replica, with replicas as
    processes over the Packages of ``namespace`` (see the module docstring); printed."""
    assert cluster.kubeconfig is not None
    target = KubeTarget(cluster.kubeconfig)
    api = api_client(target)
    run_dir = work / f"placement-{namespace}"
    run_dir.mkdir()
    helm = Helm(str(build.binary("helm4")), target, _helm_env(work))
    ctls: list[Controller] = []

    def start(count: int) -> None:
        while len(ctls) < count:
            ctls.append(start_controller(
                cluster.kubeconfig, namespace, helm, run_dir, "--shards", "auto", "--log-level", "info",
                "--lease-duration", "15", "--concurrency", str(args.concurrency), name=f"m{len(ctls) + 1}"))

    total = len(_owners(api, namespace))
    print(f"\nplacement over {total} Packages of {namespace}, replicas as processes (--shards auto, Lease 15s; "
          f"load average {os.getloadavg()[0]:.1f})", flush=True)
    try:
        for members in args.placement:
            start(members)
            observed, expected, took = _settled(api, namespace, ctls, args.settle_timeout)
            print(_spread_line(observed, expected, members, took), flush=True)
            start(members + 1)
            joiner = ctls[-1]
            after, expected, took = _settled(api, namespace, ctls, args.settle_timeout)
            moved = [n for n in after if after[n] != observed[n]]
            to_joiner = sum(1 for n in moved if replica_of(after[n]) == f"pid {joiner.pid}")
            bound = math.ceil(total / (members + 1) + 0.05 * total)
            print(f"  a replica joining {members}: {len(moved)} Packages moved ({to_joiner} to it, "
                  f"{len(moved) - to_joiner} elsewhere), bound 1/{members + 1} + 5% = {bound} "
                  f"({'met' if len(moved) <= bound else 'NOT met'}); "
                  f"{sum(1 for n, o in after.items() if o == expected[n])} of {total} statuses name the placed "
                  f"owner; settled in {took:.0f}s (load average {os.getloadavg()[0]:.1f})", flush=True)
        peaks = [_peak_rss_mib(c.pid) for c in ctls if c.proc.poll() is None]
        print(f"  replicas' peak RSS: {min(peaks):.0f}-{max(peaks):.0f} MiB" if peaks else "  no replica left")
    finally:
        for ctl in ctls:
            ctl.stop(timeout=90)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--packages", type=int, default=1000, help="Package objects to apply (default 1000)")
    parser.add_argument("--replicas", type=int, nargs="+", default=[1, 3], help="replica counts (default 1 3)")
    parser.add_argument("--concurrency", type=int, default=4, help="each replica's --concurrency (default 4)")
    parser.add_argument("--mode", choices=["auto", "one-lease"], default="auto",
                        help="auto: --shards auto (default); one-lease: one acting instance, the others standing by")
    parser.add_argument("--timeout", type=float, default=3600, help="seconds to wait for all Ready (default 3600)")
    parser.add_argument("--poll", type=float, default=5.0, help="seconds between counts of Ready (default 5)")
    parser.add_argument("--placement", type=int, nargs="*", default=[3, 10],
                        help="member counts whose spread and join moves are measured (default 3 10; none: skipped)")
    parser.add_argument("--settle-timeout", type=float, default=900,
                        help="seconds for the placement to settle after replicas start (default 900)")
    parser.add_argument("--placement-namespace",
                        help="measure only the placement, over the Packages already in this namespace")
    parser.add_argument("--cluster-dir", type=Path, help="reuse (and keep) the local cluster in this directory")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))  # the replicas are stopped on the way out
    with private_cluster(args.cluster_dir) as (cluster, work):
        assert cluster.kubeconfig is not None
        if args.placement_namespace:
            placement(cluster, work, args, args.placement_namespace)
            return
        apply_package_crds(api_client(KubeTarget(cluster.kubeconfig)))
        namespace = ""
        for replicas in args.replicas:
            namespace = run_size(cluster, work, args, replicas)
        flux_n = FLUX[1] * args.packages / FLUX[0]
        print(f"\nFlux helm-controller (published, fluxcd/flux-benchmark, 2 CPU, concurrency 10): {_clock(FLUX[1])} "
              f"for {FLUX[0]}" + (f" ({_clock(flux_n)} for {args.packages} at that rate)"
                                  if args.packages != FLUX[0] else ""), flush=True)
        if args.placement and namespace:
            placement(cluster, work, args, namespace)


if __name__ == "__main__":
    main()
