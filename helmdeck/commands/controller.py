"""``helmdeck controller``: the engine in the cluster, over the API server's Package objects.

The same :class:`~engine.runtime.engine.Engine` as the app and ``helmdeck reconcile`` (its packages come
from :class:`~engine.runtime.cluster.objects.PackageObjects` instead of a folder), one acting instance per
package set through its Lease, status and Events written back on the objects
(:mod:`engine.runtime.cluster.object_status`), a deleted Package's release uninstalled through a finalizer
(:mod:`engine.runtime.cluster.finalizer`), health and metrics served on their addresses.
SIGTERM (or SIGINT) stops taking work, lets running helm actions finish for ``--stop-deadline`` seconds, then
cancels them (their pending revision unlocked, as :meth:`Engine.stop`), writes their Package objects' status, and
gives the Lease up.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
import tempfile
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.base import wire
from helmdeck import builder, startup
from helmdeck.logs import setup_logging
from helmdeck.parser import EXIT_FAILED, EXIT_USAGE, Subcommands

if TYPE_CHECKING:
    from engine.runtime.engine import Engine
    from helmdeck.endpoints import Health

log = logging.getLogger("helmdeck.controller")


def add(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    ctl = sub.add_parser(
        "controller", help="reconcile the cluster's Package objects, around the clock (in the cluster)",
        description=f"Reconcile the Package, HelmRepository and OCIRepository objects ({wire.API_VERSION}) of "
                    "every namespace, or of --watch-namespace, with the same engine as the app; status and Events "
                    "are written on the objects. One instance acts (a Lease); others wait and take over. Cluster "
                    "access, as controller-runtime finds it: --kubeconfig, else $KUBECONFIG, else in-cluster "
                    "config (the ServiceAccount's token, CA and KUBERNETES_SERVICE_HOST/PORT), else "
                    "~/.kube/config; the log says which. SIGTERM lets running helm actions finish for "
                    "--stop-deadline.")
    ctl.add_argument("--kubeconfig", type=Path,
                     help="kubeconfig file (default: $KUBECONFIG, else in-cluster config, else ~/.kube/config)")
    ctl.add_argument("--context", help="kubeconfig context (default: its current-context; not in-cluster)")
    ctl.add_argument("--serviceaccount-dir", type=Path, default=None, metavar="DIR",
                     help="in-cluster: the ServiceAccount's token, ca.crt and namespace "
                          "(default: /var/run/secrets/kubernetes.io/serviceaccount)")
    ctl.add_argument("--watch-namespace", action="append", dest="watch_namespaces", metavar="NAMESPACE",
                     help="only this namespace's objects (repeatable; default: all namespaces)")
    ctl.add_argument("--watch-label-selector", metavar="SELECTOR",
                     help="only the Package objects this label selector matches, and the sources they use: a "
                          f"static shard with its own Lease, as Flux's ({wire.SHARD_KEY}=shard1 on a shard, "
                          f"'!{wire.SHARD_KEY}' on the main instance; default: every Package)")
    ctl.add_argument("--package-set", metavar="NAME",
                     help="the package set's name: its releases' label and its Lease (default: cluster, or "
                          "cluster-<digest> of the --watch-namespace list)")
    ctl.add_argument("--lease-namespace", default=None,
                     help="namespace of the Lease (default: the pod's namespace, else default)")
    ctl.add_argument("--lease-duration", type=float, default=None,
                     help="seconds without renewal after which another instance takes over (default: 15, with "
                          "--shards auto 5: a member's packages are taken over that long after "
                          "its last renewal)")
    ctl.add_argument("--shards", choices=["auto"], default=None,
                     help="auto: every replica acts, each on the Packages placed on it (bounded-load hashing over the "
                          "live replicas, each holding its own membership Lease), one replica per release at a time "
                          "(an actor claim in the Package's status); default: one acting instance per package set")
    ctl.add_argument("--default-service-account", default="", metavar="NAME",
                     help="a Package without spec.serviceAccountName acts as this ServiceAccount of its namespace "
                          "(Flux's multi-tenancy lockdown; default: the controller's own)")
    ctl.add_argument("--concurrency", type=int, default=4, help="packages reconciled at once (default: 4)")
    ctl.add_argument("--stop-deadline", type=float, default=30.0,
                     help="on SIGTERM, seconds running helm actions may take to finish (default: %(default)s)")
    ctl.add_argument("--health-addr", default=":8081", help="/healthz and /readyz (default: %(default)s)")
    ctl.add_argument("--metrics-addr", default=":8080", help="Prometheus /metrics (default: %(default)s)")
    ctl.add_argument("--helm", help="helm binary (default: $HELMDECK_HELM, else helm on PATH)")
    ctl.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    ctl.add_argument("--log-file", type=Path, help="log file (default: standard error, for the pod's log)")
    ctl.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """Run until SIGTERM/SIGINT; 0 when every running action finished on its own, else 1."""
    startup.started()  # no engine of ours to wait for
    from engine.kube.client import KubeConfigError
    from engine.package.identity import valid_service_account_name
    from engine.runtime.cluster.shard_selector import ShardSelectorError, shard_for
    from engine.runtime.package_set import PackageSetNameError
    from helmdeck.endpoints import parse_addr
    from helmdeck.helm_binary import HelmNotFound

    if args.concurrency < 1:
        print("error: --concurrency must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    if args.default_service_account and not valid_service_account_name(args.default_service_account):
        print(f"error: --default-service-account: {args.default_service_account!r} is not a valid ServiceAccount "
              "name (use lower-case letters, digits, '-' and '.')", file=sys.stderr)
        return EXIT_USAGE
    try:
        shard_for(args.watch_label_selector, auto=args.shards == "auto")
    except ShardSelectorError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    for flag, addr in (("--health-addr", args.health_addr), ("--metrics-addr", args.metrics_addr)):
        try:
            parse_addr(addr)
        except ValueError as exc:
            print(f"error: {flag}: {exc}", file=sys.stderr)
            return EXIT_USAGE
    setup_logging(args.log_level, args.log_file, stderr=True)
    with tempfile.TemporaryDirectory(prefix="helmdeck-controller-") as private:
        try:
            engine = builder.controller_engine(args, Path(private))
        except (KubeConfigError, PackageSetNameError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except HelmNotFound as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_FAILED
        return asyncio.run(_run(engine, args))


async def _run(engine: Engine, args: argparse.Namespace) -> int:
    from engine.base.wire import METRICS
    from helmdeck.endpoints import Health, serve_health, serve_metrics
    from helmdeck.metrics import ControllerMetrics

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    engine.subscribe(_log_signal)
    health = Health()
    metrics = ControllerMetrics(engine.releases, engine.queue_depth, engine.placed_here, engine.queue_waiting)
    engine.subscribe(metrics.on_signal)
    log.info("health probes on %s:%d", *serve_health(args.health_addr, health))
    host, port = serve_metrics(args.metrics_addr, metrics.registry)
    log.info("metrics on %s:%d", host, port)
    engine.advertise({METRICS: f"http://{host}:{port}"})  # on the Lease: the app reads the pulses there
    heartbeat = asyncio.create_task(_beat(health))
    await engine.start(reconcile=True)
    health.ready = True
    for err in engine.package_errors:
        log.warning("package problem: %s", err)
    log.info("controller started")
    await stop.wait()
    health.ready = False  # stop taking work: no new pass starts
    log.info("stopping: running helm actions have %.0fs to finish", args.stop_deadline)
    clean = await engine.stop(args.stop_deadline)
    heartbeat.cancel()
    log.info("stopped (%s)", "clean" if clean else "running actions cancelled")
    return 0 if clean else EXIT_FAILED


async def _beat(health: Health) -> None:
    while True:  # the event loop turns: /healthz
        health.beat()
        await asyncio.sleep(1)


def _log_signal(signal_: Any) -> None:
    from engine.runtime.state import EntryLogged

    if isinstance(signal_, EntryLogged) and signal_.event.outcome != "started":
        ev = signal_.event
        log.info("%s/%s: %s %s: %s", ev.key[0], ev.key[1], ev.action, ev.outcome, ev.message)
