"""``helmdeck controller``: the engine in the cluster, over the API server's Package objects.

The same :class:`~engine.runtime.engine.Engine` as the app and ``helmdeck reconcile`` (its packages come
from :class:`~engine.runtime.drive.objects.PackageObjects` instead of a folder), one acting instance per
package set through its Lease, status and Events written back on the objects
(:mod:`engine.runtime.drive.object_status`), a deleted Package's release uninstalled through a finalizer
(:mod:`engine.runtime.drive.finalizer`), health and metrics served on their addresses.
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
from typing import Any

from engine.helm import Helm
from engine.kube.client import SERVICE_ACCOUNT_DIR, KubeConfigError, controller_target, pod_namespace
from engine.package.identity import valid_service_account_name
from engine.runtime import assemble
from engine.runtime.drive.lease import (
    CONTROLLER,
    METRICS,
    ROLE,
    SELECTOR,
    SHARD,
    WATCH_NAMESPACES,
    LeaseConfig,
    default_identity,
)
from engine.runtime.drive.members import AUTO_LEASE_DURATION, member_lease
from engine.runtime.engine import Engine
from engine.runtime.package_set import PackageSetNameError, cluster_package_set
from engine.runtime.shard import ShardSelectorError, shard_for
from engine.runtime.state import EntryLogged
from helmdeck.endpoints import Health, parse_addr, serve_health, serve_metrics
from helmdeck.helm_binary import HelmNotFound, find_helm
from helmdeck.logs import setup_logging
from helmdeck.metrics import ControllerMetrics
from helmdeck.parser import EXIT_FAILED, EXIT_USAGE

log = logging.getLogger("helmdeck.controller")


def build_engine(args: argparse.Namespace, private: Path) -> Engine:
    """The engine ``helmdeck controller``'s flags describe (not started). Raises KubeConfigError, HelmNotFound,
    PackageSetNameError."""
    target, source = controller_target(args.kubeconfig, args.context, private,
                                       args.serviceaccount_dir or SERVICE_ACCOUNT_DIR)
    log.info("cluster: %s", source)
    namespaces = sorted(set(args.watch_namespaces)) if args.watch_namespaces else None
    package_set = cluster_package_set(args.package_set, namespaces)
    lease_ns = args.lease_namespace or pod_namespace(args.serviceaccount_dir or SERVICE_ACCOUNT_DIR) or "default"
    shard = shard_for(args.watch_label_selector)
    # Labelled and annotated so the app finds it and attaches (engine.runtime.drive.attach); a shard's Lease is
    # its own, named from its selector.
    labels, notes = [(ROLE, CONTROLLER)], [(WATCH_NAMESPACES, ",".join(namespaces or ()))]
    if shard is not None:
        labels.append((SHARD, shard.name))
        notes.append((SELECTOR, shard.selector))
    auto = args.shards == "auto"
    duration = args.lease_duration or (AUTO_LEASE_DURATION if auto else LeaseConfig.duration)
    # --shards auto: each replica its own membership Lease (engine.runtime.drive.members).
    lease = (member_lease(default_identity(), lease_ns, duration, tuple(notes)) if auto else
             LeaseConfig(shard.lease_name(package_set) if shard else package_set.lease_name, lease_ns,
                         duration=duration, retry=max(0.5, min(2.0, duration / 5)),
                         labels=tuple(labels), annotations=tuple(notes)))
    helm = find_helm(args.helm)
    log.info("using helm %s; package set %s%s, Lease %s/%s%s", helm.describe(), package_set.identity,
             f", shard {shard.name} ({shard.selector})" if shard else "", lease.namespace, lease.name,
             f" (--shards auto, replica {lease.identity})" if auto else "")
    return assemble.build_engine(target, Helm(helm.path, target), None, namespaces=namespaces,
                                 concurrency=args.concurrency, lease=lease, package_set=package_set.identity,
                                 cluster_packages=True, default_service_account=args.default_service_account,
                                 shard=shard, auto_shards=auto, stop_deadline=args.stop_deadline)


def run_controller(args: argparse.Namespace) -> int:
    """Run until SIGTERM/SIGINT; 0 when every running action finished on its own, else 1."""
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
            engine = build_engine(args, Path(private))
        except (KubeConfigError, PackageSetNameError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_USAGE
        except HelmNotFound as exc:
            print(f"error: {exc}", file=sys.stderr)
            return EXIT_FAILED
        return asyncio.run(_run(engine, args))


async def _run(engine: Engine, args: argparse.Namespace) -> int:
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
    if isinstance(signal_, EntryLogged) and signal_.event.outcome != "started":
        ev = signal_.event
        log.info("%s/%s: %s %s: %s", ev.key[0], ev.key[1], ev.action, ev.outcome, ev.message)
