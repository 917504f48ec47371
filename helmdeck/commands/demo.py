"""``helmdeck demo``: the local cluster started (or reused), the example charts published to its registry and
an HTTP chart repository, and the app opened on it with the example packages."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from helmdeck import app, startup
from helmdeck.parser import EXIT_USAGE, Subcommands, common_flags, example_packages


def add(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    # The demo opens the app on its own cluster with its own helm build and the examples (or --packages).
    demo_common = common_flags(without=("--kubeconfig", "--context", "--helm", "--packages", "--kustomize", "--var",
                                        "--vars-from", "--vars-from-cluster"))
    demo = sub.add_parser(
        "demo", parents=[demo_common], help="start the local cluster and open the app on the example packages",
        description="Build (or reuse) and start the local control plane, publish the example charts to its "
                    "OCI registry and to an HTTP chart repository served on 127.0.0.1 while the app runs, then "
                    "open the app on it with the example packages. The cluster keeps running afterwards; "
                    "`helmdeck cluster down` stops it.")
    demo.add_argument("--cluster-dir", type=Path, help="local cluster state directory")
    demo.add_argument("--packages", type=Path,
                      help=f"folder of package files (default: the examples, {example_packages()}) run from "
                           "a copy in <cluster dir>/demo/examples with those of examples/sources, whose charts come "
                           "from the local OCI registry and an HTTP chart repository the demo serves")
    demo.add_argument("--helm-major", choices=["3", "4"], default="4", help="which built helm to use")
    app.add_flags(demo)
    demo.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    startup.started()  # no engine of ours to wait for
    # The local cluster and its builds are this command's job: it may import localcluster (pyproject.toml).
    from helmdeck.demo import DemoError, start_sources
    from localcluster import build
    from localcluster.build import BuildError
    from localcluster.cluster import ClusterError, LocalCluster

    examples = example_packages().parent
    if args.packages is not None and not args.packages.is_dir():
        print(f"error: --packages {args.packages} is not a directory", file=sys.stderr)
        return EXIT_USAGE
    cluster = LocalCluster(args.cluster_dir)
    try:
        cluster.up(progress=lambda m: print(m, flush=True))
        build.build(build.COMPONENTS[f"helm{args.helm_major}"], progress=print)
        helm = str(build.binary(f"helm{args.helm_major}"))
        # The example charts in the local OCI registry and an HTTP repository served until the app ends.
        sources = start_sources(cluster.state_dir, cluster.registry or "", helm, examples, progress=print)
    except (BuildError, ClusterError, DemoError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    args.kubeconfig = cluster.kubeconfig
    args.context = None
    args.packages = args.packages or sources.packages
    args.helm = helm
    try:
        code = app.open_app(args)
    finally:
        sources.stop()
    print(f"The local cluster is still running (KUBECONFIG={cluster.kubeconfig}); "
          "`helmdeck cluster down` stops it.")
    return code
