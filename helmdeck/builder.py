"""The engines the command line builds: :func:`engine` (the app and the headless commands, from the shared
flags) and :func:`controller_engine` (``helmdeck controller``), and :func:`engine_command`, the checks every
command of :func:`engine` makes on its flags before it runs.

The engine is imported when a command builds one: ``--help`` and ``cluster`` start fast.
"""

from __future__ import annotations

import argparse
import functools
import logging
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Literal

from helmdeck import startup
from helmdeck.console import usage_error
from helmdeck.parser import EXIT_FAILED, EXIT_USAGE

if TYPE_CHECKING:
    from engine.package.substitute import Variables
    from engine.runtime.engine import Engine
    from engine.storage.observer import FirstRows

log = logging.getLogger("helmdeck")


def engine_command(run: Callable[[argparse.Namespace], int]) -> Callable[[argparse.Namespace], int]:
    """``run`` (a command that builds its engine with :func:`engine`) after the checks of the shared flags:
    ``--concurrency`` at least 1, ``--packages`` a folder, the ``--kustomize`` flags (:func:`kustomize_flags`);
    an unreadable kubeconfig is a usage error (exit 2)."""

    @functools.wraps(run)
    def checked(args: argparse.Namespace) -> int:
        if getattr(args, "concurrency", 1) < 1:
            raise usage_error("--concurrency must be at least 1")
        if args.packages is not None and not args.packages.is_dir():
            raise usage_error(f"--packages {args.packages} is not a directory")
        kustomize_flags(args)
        from engine.kube.client import KubeConfigError

        try:
            return run(args)
        except KubeConfigError as exc:
            raise usage_error(str(exc)) from None

    return checked


def kustomize_flags(args: argparse.Namespace) -> None:
    """``--kustomize DIR`` stands for ``--packages``: it names the package set, and the engine builds it
    (:func:`kustomize_variables` and the flags, given to it as they are). Its variable flags need it."""
    if getattr(args, "kustomize", None) is None:
        if getattr(args, "vars", None) or getattr(args, "vars_from", None) or getattr(args, "vars_from_cluster", None):
            raise usage_error("--var, --vars-from and --vars-from-cluster go with --kustomize DIR")
        return
    if args.packages is not None:
        raise usage_error("give --packages DIR or --kustomize DIR, not both")
    if not args.kustomize.is_dir():
        raise usage_error(f"--kustomize {args.kustomize} is not a directory")
    for file in args.vars_from or ():
        if not file.is_file():
            raise usage_error(f"--vars-from {file} is not a file")
    kustomize_variables(args)  # a bad --var is a usage error before anything else
    args.packages = args.kustomize


def kustomize_variables(args: argparse.Namespace) -> Variables:
    """The variables of ``--kustomize``'s ``--var`` flags (none without ``--kustomize``). Exits with a usage error
    on a bad one."""
    from engine.package.substitute import NO_VARIABLES, SubstitutionError, parse_var, variables

    if getattr(args, "kustomize", None) is None:
        return NO_VARIABLES
    try:
        return variables((parse_var(v) for v in args.vars or ()), "--var")
    except SubstitutionError as exc:
        raise usage_error(str(exc)) from None


def engine(
    args: argparse.Namespace, *, readonly: bool | None = None, watch: bool = True, monitors: bool = True,
    records_of: Literal["packages", "package set"] | None = None, labels_ahead: FirstRows | None = None,
    started: bool = True,
) -> Engine:
    """Build the engine the flags describe (not started). Exits with a message on a bad kubeconfig.
    ``records_of``: the release records the command needs, when not every release's
    (:func:`engine.runtime.assemble.build_engine`). ``labels_ahead`` (the app: which of the releases listed its
    first screen shows): storage's labels are listed from the moment the kubeconfig is read, then those
    releases' records (:class:`engine.storage.observer.LabelsAhead`), while the engine's modules import (and,
    after, the app's). ``started`` False: start-up goes on after the build, the caller
    calls :func:`helmdeck.startup.started` (the app, once its modules are imported)."""
    from engine.kube.client import KubeConfigError, KubeTarget, api_client
    from helmdeck.access import scope_fallback

    target = KubeTarget(args.kubeconfig, args.context)
    namespaces, note = None if args.all_namespaces else args.namespaces, ""
    try:
        api = api_client(target)  # one client (kubeconfig read, connection) for the access check and the engine
        if namespaces is None and not args.all_namespaces:  # neither -n nor -A: may fall back
            namespaces, note = scope_fallback(target, api)
    except KubeConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
    ahead = None
    if labels_ahead is not None:
        from engine.storage.observer import LabelsAhead

        ahead = LabelsAhead(api, namespaces, first=labels_ahead)
    from engine.base.wire import ROLE
    from engine.helm import Helm
    from engine.runtime.assemble import build_engine
    from engine.runtime.engine import APP, RECONCILE, LeaseConfig
    from engine.runtime.package_set import PackageSetNameError, package_set_for

    startup.imported()
    lease = None
    readonly = args.readonly if readonly is None else readonly
    name = getattr(args, "package_set", None)
    try:
        package_set = package_set_for(args.packages, name) if args.packages is not None else None
    except PackageSetNameError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
    # A read-only instance never competes for the lease: it would block the one that acts.
    if package_set is not None and not getattr(args, "no_lease", True) and not readonly:
        # labelled with what holds it, so another instance kept waiting can say so (engine.runtime.drive.lease)
        role = RECONCILE if args.command == "reconcile" else APP
        lease = LeaseConfig(package_set.lease_name, getattr(args, "lease_namespace", "default"),
                            labels=((ROLE, role),))
    engine = build_engine(
        target, Helm(_helm(args), target), args.packages,
        namespaces=namespaces,
        readonly=readonly,
        concurrency=getattr(args, "concurrency", 4), prune=getattr(args, "prune", False),
        lease=lease, watch_packages=watch, monitors=monitors, package_set=name,
        allow_unsupported=getattr(args, "allow_unsupported", False),
        kustomize=getattr(args, "kustomize", None), kustomize_variables=kustomize_variables(args),
        vars_from=tuple(getattr(args, "vars_from", None) or ()),
        vars_from_cluster=getattr(args, "vars_from_cluster", None) or "",
        kustomize_root=getattr(args, "kustomize_root", None),
        # the app attaches to the cluster's helmdeck controllers when one runs; status names their packages' owners
        attach=args.command in (None, "demo", "status"),
        controller_metrics=tuple(getattr(args, "controller_metrics", ())), api=api, records_of=records_of,
        labels_ahead=ahead,
    )
    engine.scope_note = note
    if started:
        startup.started()
    return engine


def _helm(args: argparse.Namespace) -> str:
    """The helm binary to run (see helmdeck.helm_binary), logged.

    When none is found, commands that need helm exit with the reason; ``status`` and the app go on
    (they run helm only for actions, which then report it).
    """
    from helmdeck.helm_binary import HelmNotFound, find_helm

    try:
        choice = find_helm(args.helm)
    except HelmNotFound as exc:
        if args.command in (None, "status"):
            log.warning("%s", exc)
            return str(args.helm or "helm")
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_FAILED) from None
    log.info("using helm %s", choice.describe())
    return choice.path


def controller_engine(args: argparse.Namespace, private: Path) -> Engine:
    """The engine ``helmdeck controller``'s flags describe (not started). Raises KubeConfigError, HelmNotFound,
    PackageSetNameError."""
    from engine.helm import Helm
    from engine.kube.client import SERVICE_ACCOUNT_DIR, controller_target, pod_namespace
    from engine.runtime.assemble import build_engine
    from engine.runtime.cluster.shard_selector import controller_lease, shard_for
    from engine.runtime.package_set import cluster_package_set
    from helmdeck.helm_binary import find_helm

    log = logging.getLogger("helmdeck.controller")
    target, source = controller_target(args.kubeconfig, args.context, private,
                                       args.serviceaccount_dir or SERVICE_ACCOUNT_DIR)
    log.info("cluster: %s", source)
    namespaces = sorted(set(args.watch_namespaces)) if args.watch_namespaces else None
    package_set = cluster_package_set(args.package_set, namespaces)
    lease_ns = args.lease_namespace or pod_namespace(args.serviceaccount_dir or SERVICE_ACCOUNT_DIR) or "default"
    shard = shard_for(args.watch_label_selector)
    auto = args.shards == "auto"
    lease = controller_lease(package_set, lease_ns, watch_namespaces=namespaces, shard=shard, auto=auto,
                             duration=args.lease_duration)
    helm = find_helm(args.helm)
    log.info("using helm %s; package set %s%s, Lease %s/%s%s", helm.describe(), package_set.identity,
             f", shard {shard.name} ({shard.selector})" if shard else "", lease.namespace, lease.name,
             f" (--shards auto, replica {lease.identity})" if auto else "")
    return build_engine(target, Helm(helm.path, target), None, namespaces=namespaces,
                        concurrency=args.concurrency, lease=lease, package_set=package_set.identity,
                        cluster_packages=True, default_service_account=args.default_service_account, shard=shard,
                        auto_shards=auto, stop_deadline=args.stop_deadline)
