"""``helmdeck cluster up|down|status|kubeconfig``: the local control plane (:mod:`localcluster`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from helmdeck import startup
from helmdeck.parser import Subcommands


def add(sub: Subcommands, common: argparse.ArgumentParser) -> None:
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
    cluster.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    startup.started()  # no engine of ours to wait for
    # The local cluster is this command's subject: it may import localcluster (pyproject.toml).
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
