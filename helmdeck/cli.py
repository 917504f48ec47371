"""The ``helmdeck`` command line.

``helmdeck`` opens the app on a cluster chosen as kubectl does; ``helmdeck
demo`` opens it on the local control plane with the example packages;
``helmdeck cluster ...`` manages that control plane; ``reconcile``,
``status``, ``render``, ``diff`` and ``cleanup`` run headless.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from helmdeck import __version__
from helmdeck.logs import default_log_file, setup_logging

# `helmdeck reconcile --once` exit codes.
EXIT_CONVERGED = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_STALLED = 3


def _common(*, defaults: bool = True) -> argparse.ArgumentParser:
    """Flags every command that talks to a cluster takes (kubectl's spelling where it has one).

    The top-level parser takes them with their defaults; each subcommand with ``defaults=False``
    (every default ``SUPPRESS``), so a flag given before the subcommand (``helmdeck --context
    staging cleanup``) is kept instead of being overwritten by the subcommand's default, and means
    the same in either position.
    """
    p = argparse.ArgumentParser(add_help=False)

    def flag(group: Any, *names: str, default: Any = None, **kw: Any) -> None:
        group.add_argument(*names, default=default if defaults else argparse.SUPPRESS, **kw)

    g = p.add_argument_group("cluster and packages")
    flag(g, "--kubeconfig", type=Path, help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    flag(g, "--context", help="kubeconfig context (default: its current-context)")
    flag(g, "-n", "--namespace", action="append", dest="namespaces", metavar="NAMESPACE",
         help="only this namespace (repeatable; default: all namespaces)")
    flag(g, "-A", "--all-namespaces", action="store_true", default=False,
         help="all namespaces (the default)")
    flag(g, "--packages", type=Path, help="folder of package files")
    flag(g, "--readonly", action="store_true", default=False,
         help="never change the cluster; refuse every action")
    flag(g, "--helm", default=os.environ.get("HELMDECK_HELM", "helm"),
         help="helm binary (default: $HELMDECK_HELM or helm on PATH)")
    flag(g, "--log-level", default="info", choices=["debug", "info", "warning", "error"])
    flag(g, "--log-file", type=Path, help=f"log file (default: {default_log_file()})")
    e = p.add_argument_group("engine")
    concurrency = min(4, (os.cpu_count() or 2) * 2)
    flag(e, "--concurrency", type=int, default=concurrency,
         help=f"packages reconciled at once (default: {concurrency})")
    flag(e, "--prune", action="store_true", default=False,
         help="uninstall the release of a removed package file (default: report it as orphaned)")
    flag(e, "--no-lease", action="store_true", default=False,
         help="do not take the engine lease (several instances would then all act)")
    flag(e, "--lease-namespace", default="default", help="namespace of the engine lease (default: default)")
    return p


def _add_theme(p: argparse.ArgumentParser, default: Any = None) -> None:
    p.add_argument("--theme", default=default,
                   help="app theme, e.g. helmdeck-dark, helmdeck-light, helmdeck-high-contrast "
                        "(remembered; user themes in $XDG_CONFIG_HOME/helmdeck/themes/)")


def build_parser() -> argparse.ArgumentParser:
    common = _common(defaults=False)
    parser = argparse.ArgumentParser(
        prog="helmdeck", parents=[_common()],
        description="Operate Helm releases from the terminal: the app without a command, headless with one.")
    parser.add_argument("--version", action="version", version=f"helmdeck {__version__}")
    _add_theme(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser(
        "demo", help="start the local cluster and open the app on the example packages",
        description="Build (or reuse) and start the local control plane, then open the app on it with "
                    "the example packages. The cluster keeps running afterwards; `helmdeck cluster down` "
                    "stops it.")
    demo.add_argument("--cluster-dir", type=Path, help="local cluster state directory")
    demo.add_argument("--helm-major", choices=["3", "4"], default="4", help="which built helm to use")
    # Also accepted before `demo`; SUPPRESS keeps a value given there.
    demo.add_argument("--log-level", default=argparse.SUPPRESS, choices=["debug", "info", "warning", "error"])
    _add_theme(demo, default=argparse.SUPPRESS)

    cluster = sub.add_parser("cluster", help="manage the local control plane",
                             description="Manage the local control plane (etcd, kube-apiserver, "
                                         "kube-controller-manager, kube-scheduler, kwok) and its "
                                         "OCI registry (127.0.0.1, plain HTTP, no auth).")
    csub = cluster.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    for name, text in (
        ("up", "build (or reuse) the binaries and start the cluster; no-op when it runs"),
        ("down", "stop the processes the cluster started"),
        ("status", "show processes, kubeconfig, server and log files (exit 3 when not ready)"),
        ("kubeconfig", "print the kubeconfig path"),
    ):
        p = csub.add_parser(name, help=text, description=text)
        p.add_argument("--cluster-dir", type=Path, help="state directory (default: ~/.local/state/helmdeck/cluster)")
        if name == "status":
            p.add_argument("-o", "--output", choices=["table", "json"], default="table",
                           help="json: an object with kubeconfig, server, registry (host:port), ready, ...")

    rec = sub.add_parser(
        "reconcile", parents=[common], help="reconcile the packages headless",
        description="Reconcile every package of --packages without the app. Runs until interrupted "
                    "(ctrl+c lets running helm actions finish), or with --once until every package "
                    f"settled. --once exit codes: {EXIT_CONVERGED} every package converged, {EXIT_FAILED} "
                    f"one failed, {EXIT_STALLED} one stalled (retries exhausted).")
    rec.add_argument("--once", action="store_true", help="one settled pass per package, then exit")
    rec.add_argument("--json", action="store_true", help="print events as JSON lines")
    rec.add_argument("--wait", type=float, default=600.0,
                     help="--once: give up after this many seconds (default: %(default)s)")
    rec.add_argument("--stop-deadline", type=float, default=30.0,
                     help="on ctrl+c, seconds running helm actions may take to finish (default: %(default)s)")

    status = sub.add_parser("status", parents=[common], help="print every release and its engine state",
                            description="Print every release with its engine state (read-only).")
    status.add_argument("-o", "--output", choices=["table", "json"], default="table")

    for name, text in (("render", "print the manifests an upgrade of PACKAGE would apply"),
                       ("diff", "print what an upgrade of PACKAGE would change (deployed vs desired)")):
        p = sub.add_parser(name, parents=[common], help=text, description=text + " (secrets masked)")
        p.add_argument("package", help="a package file, or a package name in --packages")
        p.add_argument("--show-secrets", action="store_true", help="print secret values instead of masking them")

    clean = sub.add_parser("cleanup", parents=[common], help="uninstall managed releases no package declares",
                           description="Uninstall every helmdeck-managed release no package in --packages "
                                       "declares (releases not managed by helmdeck are never touched).")
    clean.add_argument("--dry-run", action="store_true", help="only list what would be uninstalled")
    clean.add_argument("--ignore-namespace", action="append", default=[], metavar="NAMESPACE",
                       help="never clean up in this namespace (repeatable)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "cluster":
        return _cluster(args)
    if args.command == "demo":
        return _demo(args)
    if getattr(args, "concurrency", 1) < 1:
        print("error: --concurrency must be at least 1", file=sys.stderr)
        return EXIT_USAGE
    if args.packages is not None and not args.packages.is_dir():
        print(f"error: --packages {args.packages} is not a directory", file=sys.stderr)
        return EXIT_USAGE
    from engine.kube import KubeConfigError

    handlers = {None: _app, "reconcile": _reconcile, "status": _status, "render": _render, "diff": _diff,
                "cleanup": _cleanup}
    try:
        return handlers[args.command](args)
    except KubeConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_USAGE


# -- local cluster -----------------------------------------------------------------
def _cluster(args: argparse.Namespace) -> int:
    from localcluster.build import BuildError
    from localcluster.cluster import ClusterError, LocalCluster

    cluster = LocalCluster(args.cluster_dir)
    if args.cluster_command == "up":
        try:
            cluster.up(progress=lambda m: print(m, flush=True))
        except (BuildError, ClusterError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"export KUBECONFIG={cluster.kubeconfig}")
        return 0
    if args.cluster_command == "down":
        stopped = cluster.down()
        print(f"stopped: {', '.join(stopped)}" if stopped else "local cluster was not running")
        return 0
    if args.cluster_command == "status":
        status = cluster.status()
        if args.output == "json":
            print(json.dumps(status.to_json(), indent=2))
        else:
            print("\n".join(status.lines()))
        return 0 if status.ready else 3
    print(cluster.kubeconfig)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from localcluster import build
    from localcluster.build import BuildError
    from localcluster.cluster import ClusterError, LocalCluster
    from tui.app import default_packages_dir

    packages = args.packages or default_packages_dir()
    if not packages.is_dir():
        print(f"error: example packages not found at {packages}; pass --packages DIR", file=sys.stderr)
        return EXIT_USAGE
    cluster = LocalCluster(args.cluster_dir)
    try:
        cluster.up(progress=lambda m: print(m, flush=True))
        build.build(build.COMPONENTS[f"helm{args.helm_major}"], progress=print)
    except (BuildError, ClusterError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    args.kubeconfig = cluster.kubeconfig
    args.context = None
    args.packages = packages
    args.helm = str(build.binary(f"helm{args.helm_major}"))
    code = _app(args)
    print(f"The local cluster is still running (KUBECONFIG={cluster.kubeconfig}); "
          "`helmdeck cluster down` stops it.")
    return code


# -- engine ------------------------------------------------------------------------
def _engine(
    args: argparse.Namespace, *, readonly: bool | None = None, watch: bool = True, monitors: bool = True,
) -> Any:
    """Build the engine the flags describe (not started). Exits with a message on a bad kubeconfig."""
    from engine.helm import Helm
    from engine.kube import KubeConfigError, KubeTarget, current_context
    from engine.runtime import Engine
    from engine.runtime.engine import LeaseConfig
    from engine.runtime.lease import lease_name_for

    target = KubeTarget(args.kubeconfig, args.context)
    try:
        args.context_name = current_context(target)
    except KubeConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
    lease = None
    readonly = args.readonly if readonly is None else readonly
    # A read-only instance never competes for the lease: it would block the one that acts.
    if args.packages is not None and not getattr(args, "no_lease", True) and not readonly:
        lease = LeaseConfig(lease_name_for(str(args.packages.resolve())), getattr(args, "lease_namespace", "default"))
    return Engine(
        target, Helm(args.helm, target), args.packages,
        namespaces=None if args.all_namespaces else args.namespaces,
        readonly=readonly,
        concurrency=getattr(args, "concurrency", 4), prune=getattr(args, "prune", False),
        lease=lease, watch_packages=watch, monitors=monitors,
    )


def _app(args: argparse.Namespace) -> int:
    from tui.app import HelmdeckApp
    from tui.settings import Settings, config_dir

    log_file = setup_logging(args.log_level, getattr(args, "log_file", None))
    engine = _engine(args)
    app = HelmdeckApp(engine, context=args.context_name, settings=Settings(config_dir()),
                      theme=getattr(args, "theme", None), log_file=log_file)
    app.run()
    return app.return_code or 0  # non-zero when the app ended on an error


def _reconcile(args: argparse.Namespace) -> int:
    from engine.runtime.report import event_line
    from engine.runtime.state import EventLogged

    if args.packages is None:
        print("error: reconcile needs --packages DIR", file=sys.stderr)
        return EXIT_USAGE
    if args.readonly:
        print("error: --readonly reconciles nothing; use `helmdeck status` to look", file=sys.stderr)
        return EXIT_USAGE
    setup_logging(args.log_level, args.log_file)
    engine = _engine(args, watch=not args.once)

    def show(event: object) -> None:
        if not isinstance(event, EventLogged):
            return
        ev = event.event
        if args.json:
            print(json.dumps(event_line(ev)), flush=True)
        elif ev.outcome != "started":
            print(f"{ev.key[0]}/{ev.key[1]}: {ev.action} {ev.outcome}: {ev.message}", flush=True)

    engine.subscribe(show)
    return asyncio.run(_reconcile_async(engine, args))


async def _reconcile_async(engine: Any, args: argparse.Namespace) -> int:
    from engine.reconcile import state as st

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await engine.start(reconcile=not args.once)
    for err in engine.package_errors:
        print(f"package error: {err}", file=sys.stderr)
    if not args.once:
        await stop.wait()
        clean = await engine.stop(args.stop_deadline)
        return 0 if clean else EXIT_FAILED
    if not await engine.wait_for_lease():
        print(f"error: {engine.lease_holder or 'another instance'} holds the engine lease; "
              "nothing was reconciled", file=sys.stderr)
        await engine.stop()
        return EXIT_FAILED
    keys = sorted(engine.packages)
    results = await engine.settle(keys, args.wait, stop=stop)
    interrupted = stop.is_set() and len(results) < len(keys)
    await engine.stop(args.stop_deadline)
    codes = []
    for key, result in sorted(results.items()):
        converged = result.state == st.IN_SYNC
        if args.json:
            print(json.dumps({"type": "result", "namespace": key[0], "release": key[1], "state": result.state,
                              "converged": converged, "message": result.message}), flush=True)
        else:
            print(f"{key[0]}/{key[1]}: {result.state}{'' if converged else ': ' + result.message}")
        codes.append(EXIT_CONVERGED if converged else EXIT_STALLED if result.state == st.STALLED
                     else EXIT_FAILED)
    if interrupted or engine.package_errors or len(results) < len(engine.packages):
        codes.append(EXIT_FAILED)
    if EXIT_STALLED in codes:
        return EXIT_STALLED
    return max(codes, default=EXIT_CONVERGED)


def _status(args: argparse.Namespace) -> int:
    from engine.runtime.report import status_row, table

    setup_logging(args.log_level, args.log_file)
    engine = _engine(args, readonly=True, watch=False)

    async def collect() -> list[dict[str, Any]]:
        await engine.start(reconcile=False)
        await engine.monitors_ready()  # monitors list their resources: absent ones are reported
        try:
            return [status_row(v) for v in engine.releases()]
        finally:
            await engine.stop()

    rows = asyncio.run(collect())
    print(json.dumps(rows, indent=2) if args.output == "json" else table(rows))
    for err in engine.package_errors:
        print(f"package error: {err}", file=sys.stderr)
    return 1 if engine.package_errors else 0


def _find_package(args: argparse.Namespace) -> Any:
    """The spec PACKAGE names (a file, or a package name in --packages); exits with a message otherwise."""
    from engine.package import PackageError, load_package, load_packages

    candidate = Path(args.package)
    try:
        if candidate.is_file():
            return load_package(candidate)
        if args.packages is not None:
            specs, _ = load_packages(args.packages)
            for spec in specs:
                if args.package in (spec.name, spec.release_name):
                    return spec
    except PackageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
    print(f"error: no package file or package named {args.package!r}"
          f"{'' if args.packages else ' (pass --packages DIR to look packages up by name)'}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def _one_package(args: argparse.Namespace, what: str) -> int:
    """``render`` or ``diff`` of one package, through a read-only engine on its namespace."""
    from engine.helm import HelmError
    from engine.package import PackageError
    from engine.runtime.engine import ActionRefused, NotAvailable

    setup_logging(args.log_level, args.log_file)
    spec = _find_package(args)
    args.packages = spec.file.parent
    args.namespaces, args.all_namespaces, args.no_lease = [spec.namespace], False, True
    engine = _engine(args, readonly=True, watch=False, monitors=False)

    async def run() -> str:
        await engine.start(reconcile=False)
        try:
            if what == "diff":
                return str(await engine.diff(spec.key, reveal=args.show_secrets))
            manifest = str(await engine.render(spec.key))
            return manifest if args.show_secrets else engine.masker.mask_manifest(manifest)
        finally:
            await engine.stop()

    try:
        out = asyncio.run(run())
    except (PackageError, HelmError, ActionRefused, NotAvailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if what == "diff" and not out:
        print(f"{spec.namespace}/{spec.release_name}: an upgrade would change nothing", file=sys.stderr)
    sys.stdout.write(out)
    return 0


def _render(args: argparse.Namespace) -> int:
    return _one_package(args, "render")


def _diff(args: argparse.Namespace) -> int:
    return _one_package(args, "diff")


def _cleanup(args: argparse.Namespace) -> int:
    from engine.runtime.engine import ActionRefused, NotAvailable

    if args.packages is None:
        print("error: cleanup needs --packages DIR (releases no package there declares are removed)",
              file=sys.stderr)
        return EXIT_USAGE
    setup_logging(args.log_level, args.log_file)
    args.no_lease = True  # an operator's one-off action, as with the helm CLI
    dry_run = args.dry_run or args.readonly
    engine = _engine(args, watch=False, monitors=False)

    async def run() -> list[Any]:
        await engine.start(reconcile=False)
        try:
            items: list[Any] = await engine.cleanup(dry_run=dry_run, ignore_namespaces=tuple(args.ignore_namespace))
            return items
        finally:
            await engine.stop()

    try:
        items = asyncio.run(run())
    except (ActionRefused, NotAvailable) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if not items:
        print("nothing to clean up: every helmdeck-managed release is declared by a package")
    for item in items:
        note = f" ({item.message})" if item.message else ""
        print(f"{item.result:<13} {item.namespace}/{item.name}{note}")
    return 1 if any(i.result == "failed" for i in items) else 0
