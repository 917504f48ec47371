"""The ``helmdeck`` command line.

``helmdeck`` opens the app on a cluster chosen as kubectl does;
``helmdeck demo`` opens it on the local control plane with the example
packages; ``helmdeck cluster up|down|status|kubeconfig`` manages that local
control plane.
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Sequence
from pathlib import Path

from helmdeck import __version__
from helmdeck.logs import setup_logging


def _add_common(p: argparse.ArgumentParser) -> None:
    p.add_argument("--kubeconfig", type=Path, help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    p.add_argument("--context", help="kubeconfig context (default: its current-context)")
    p.add_argument("--packages", type=Path, help="folder of package files to reconcile")
    p.add_argument("-n", "--namespace", action="append", dest="namespaces",
                   help="watch only this namespace (repeatable; default: all namespaces)")
    p.add_argument("--helm", default=os.environ.get("HELMDECK_HELM", "helm"),
                   help="helm binary (default: $HELMDECK_HELM or helm on PATH)")
    p.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    p.add_argument("--log-file", type=Path, help="log file (default: ~/.local/state/helmdeck/helmdeck.log)")
    p.add_argument("--readonly", action="store_true", help="watch only: every action key is removed and refused")
    p.add_argument("--theme", help="app theme, e.g. helmdeck-dark, helmdeck-light, helmdeck-high-contrast "
                                   "(remembered; user themes in $XDG_CONFIG_HOME/helmdeck/themes/)")


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="helmdeck", description="Operate Helm releases from the terminal.")
    parser.add_argument("--version", action="version", version=f"helmdeck {__version__}")
    _add_common(parser)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    demo = sub.add_parser("demo", help="start the local cluster and open the app on the example packages",
                          description="Build (or reuse) and start the local control plane, then open "
                                      "the app on it with the example packages. The cluster keeps "
                                      "running afterwards; `helmdeck cluster down` stops it.")
    demo.add_argument("--cluster-dir", type=Path, help="local cluster state directory")
    demo.add_argument("--helm-major", choices=["3", "4"], default="4", help="which built helm to use")
    demo.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])

    cluster = sub.add_parser("cluster", help="manage the local control plane",
                             description="Manage the local control plane (etcd, kube-apiserver, "
                                         "kube-controller-manager, kube-scheduler, kwok).")
    csub = cluster.add_subparsers(dest="cluster_command", metavar="ACTION", required=True)
    for name, text in (
        ("up", "build (or reuse) the binaries and start the cluster; no-op when it runs"),
        ("down", "stop the processes the cluster started"),
        ("status", "show processes, kubeconfig, server and log files"),
        ("kubeconfig", "print the kubeconfig path"),
    ):
        p = csub.add_parser(name, help=text, description=text)
        p.add_argument("--cluster-dir", type=Path, help="state directory (default: ~/.local/state/helmdeck/cluster)")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.command == "cluster":
        return _cluster(args)
    if args.command == "demo":
        return _demo(args)
    return _app(args)


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
        return 2
    cluster = LocalCluster(args.cluster_dir)
    try:
        cluster.up(progress=lambda m: print(m, flush=True))
        helm_bin = build.binary(f"helm{args.helm_major}")
        build.build(build.COMPONENTS[f"helm{args.helm_major}"], progress=print)
    except (BuildError, ClusterError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    args.kubeconfig = cluster.kubeconfig
    args.context = None
    args.packages = packages
    args.helm = str(helm_bin)
    code = _app(args)
    print(f"The local cluster is still running (KUBECONFIG={cluster.kubeconfig}); "
          "`helmdeck cluster down` stops it.")
    return code


def _app(args: argparse.Namespace) -> int:
    from engine.helm import Helm
    from engine.kube import KubeConfigError, KubeTarget, current_context
    from engine.runtime import Engine
    from tui.app import HelmdeckApp
    from tui.settings import Settings, config_dir

    log_file = setup_logging(args.log_level, getattr(args, "log_file", None))
    target = KubeTarget(args.kubeconfig, args.context)
    try:
        context = current_context(target)
    except KubeConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.packages is not None and not args.packages.is_dir():
        print(f"error: --packages {args.packages} is not a directory", file=sys.stderr)
        return 2
    helm = Helm(args.helm, target)
    engine = Engine(target, helm, args.packages, namespaces=getattr(args, "namespaces", None),
                    readonly=getattr(args, "readonly", False))
    HelmdeckApp(engine, context=context, settings=Settings(config_dir()), theme=getattr(args, "theme", None),
                log_file=log_file).run()
    return 0
