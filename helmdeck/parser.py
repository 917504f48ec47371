"""The ``helmdeck`` argument parser and exit codes (the commands themselves are in :mod:`helmdeck.cli`)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any

from helmdeck import __version__
from helmdeck.logs import default_log_file

# `helmdeck reconcile --once` exit codes.
EXIT_CONVERGED = 0
EXIT_FAILED = 1
EXIT_USAGE = 2
EXIT_STALLED = 3
# `helmdeck diff` exit codes (as terraform plan -detailed-exitcode): 0 no change, 1 error, 2 changes.
EXIT_NO_CHANGES = 0
EXIT_CHANGES = 2


def _common(*, without: tuple[str, ...] = ()) -> argparse.ArgumentParser:
    """Flags every command that talks to a cluster takes (kubectl's spelling where it has one), less the
    options named in ``without`` (``demo`` brings its own cluster and helm).

    The top-level parser takes them and so do the subcommands: :class:`HelmdeckParser` makes a flag given
    before the subcommand mean the same as after it.
    """
    p = argparse.ArgumentParser(add_help=False)

    def flag(group: Any, *names: str, **kw: Any) -> None:
        if names[-1] not in without:
            group.add_argument(*names, **kw)

    g = p.add_argument_group("cluster and packages")
    flag(g, "--kubeconfig", type=Path, help="kubeconfig file (default: $KUBECONFIG or ~/.kube/config)")
    flag(g, "--context", help="kubeconfig context (default: its current-context)")
    flag(g, "-n", "--namespace", action="append", dest="namespaces", metavar="NAMESPACE",
         help="only this namespace (repeatable; default: all namespaces)")
    flag(g, "-A", "--all-namespaces", action="store_true", default=False,
         help="all namespaces (the default)")
    flag(g, "--packages", type=Path, help="folder of package files (its own files; subfolders are not read)")
    flag(g, "--kustomize", type=Path, metavar="DIR",
         help="instead of --packages: a repository path built with kustomize as Flux's kustomize-controller "
              "builds it (subfolders included), its objects read as package files")
    flag(g, "--var", action="append", dest="vars", metavar="KEY=VALUE",
         help="--kustomize: a post-build variable for ${KEY} (repeatable; over --vars-from)")
    flag(g, "--vars-from", action="append", dest="vars_from", type=Path, metavar="FILE",
         help="--kustomize: post-build variables from a YAML file (a mapping, or ConfigMap/Secret documents) or "
              "a .env file of KEY=VALUE lines (repeatable; later files win)")
    flag(g, "--vars-from-cluster", metavar="NAMESPACE/NAME",
         help="--kustomize: also the post-build variables of this Flux Kustomization on the cluster "
              "(spec.postBuild.substitute and the ConfigMaps and Secrets of substituteFrom; read-only)")
    flag(g, "--allow-unsupported", action="store_true", default=False,
         help="read Flux documents with fields helmdeck does not implement (spec.kubeConfig, verify, ...): "
              "leave those fields out with a warning instead of refusing the document")
    flag(g, "--package-set", metavar="NAME",
         help="name of the folder's package set: its releases' helmdeck.dev/package-set label and its Lease "
              "(default: the folder's name and a digest of its path; give one to keep it when the folder moves)")
    flag(g, "--readonly", action="store_true", default=False,
         help="never change the cluster; refuse every action")
    flag(g, "--helm", help="helm binary (default: $HELMDECK_HELM, else helm on PATH, else helmdeck's own "
                           "build in its cache; --version and the log say which)")
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


def _metrics_url(text: str) -> str:
    """``--controller-metrics``: an http(s) URL (a bare HOST:PORT gets http:// and /metrics)."""
    from engine.runtime.pulses import check_url

    try:
        return check_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _add_app_flags(p: argparse.ArgumentParser) -> None:
    """The app's own flags (no command, and ``demo``, which opens it)."""
    p.add_argument("--theme", help="app theme, e.g. helmdeck-dark, helmdeck-light, helmdeck-high-contrast "
                                   "(remembered; user themes in $XDG_CONFIG_HOME/helmdeck/themes/)")
    p.add_argument("--controller-metrics", action="append", default=[], metavar="URL", type=_metrics_url,
                   help="a helmdeck controller replica's metrics (repeatable), for the controller view (P), "
                        "e.g. http://127.0.0.1:8080/metrics after kubectl port-forward; a controller running "
                        "on this machine is found through its Lease without it")


class _Version(argparse.Action):
    """``--version``: helmdeck's version and which helm it resolves (``--helm`` given before it counts)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace, values: Any,
                 option_string: str | None = None) -> None:
        from helmdeck.helm_binary import HelmNotFound, find_helm, helm_version

        try:
            choice = find_helm(getattr(namespace, "helm", None))
            helm = f"helm {helm_version(choice.path)} at {choice.describe()}"
        except HelmNotFound as exc:
            helm = f"helm: {exc}"
        print(f"helmdeck {__version__}\n{helm}")
        parser.exit()


class HelmdeckParser(argparse.ArgumentParser):
    """The top-level parser: a flag it takes means the same before the subcommand as after it
    (``helmdeck --kubeconfig FILE controller``), and one the subcommand does not take is refused in
    either position (before it, argparse alone would keep it unused).

    argparse parses a subcommand's words into a namespace of their own and copies every attribute of it
    over the top level's, defaults included, so a value given before the subcommand was lost to the
    subcommand's default. :meth:`share_defaults` therefore takes the default of every flag the top level
    has out of all the parsers, and :meth:`parse_known_args` fills the ones not given in afterwards, the
    subcommand's own default over the top level's.
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(**kw)
        self._shared_options: dict[str, str] = {}  # dest -> its option strings, of the top level's flags
        # command (None: the app) -> dest -> default
        self._shared_defaults: dict[str | None, dict[str, Any]] = {None: {}}
        self._takes: dict[str, set[str]] = {}  # command -> every dest its parser (and its subparsers) sets

    def share_defaults(self) -> None:
        """Called once, when every subcommand is added."""
        shared = [a for a in self._actions
                  if a.option_strings and a.default is not argparse.SUPPRESS and not isinstance(a, _Version)]
        self._shared_options = {a.dest: "/".join(a.option_strings) for a in shared}
        actions: list[tuple[str | None, argparse.Action]] = [(None, a) for a in shared]
        for name, parser in subcommands(self).items():
            self._takes[name] = _dests(parser)
            actions += [(name, a) for a in parser._actions if a.dest in self._shared_options]
        # Collected before any is changed: parsers made with the same parents share those action objects.
        for command, action in actions:
            if action.default is not argparse.SUPPRESS:
                self._shared_defaults.setdefault(command, {})[action.dest] = action.default
        for _, action in actions:
            action.default = argparse.SUPPRESS

    def parse_known_args(self, args: Any = None, namespace: Any = None) -> Any:
        ns, rest = super().parse_known_args(args, namespace)
        command = getattr(ns, "command", None)
        if command is not None:
            for dest, option in self._shared_options.items():
                if hasattr(ns, dest) and dest not in self._takes[command]:
                    self.error(f"{option}: `helmdeck {command}` does not take this flag "
                               f"(see helmdeck {command} --help)")
        for dest, value in {**self._shared_defaults[None], **self._shared_defaults.get(command, {})}.items():
            if not hasattr(ns, dest):
                setattr(ns, dest, value)
        return ns, rest


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """``parser``'s subcommands by name (empty when it has none)."""
    return {name: sub for action in parser._actions if isinstance(action, argparse._SubParsersAction)
            for name, sub in action.choices.items()}


def _dests(parser: argparse.ArgumentParser) -> set[str]:
    return {a.dest for a in parser._actions} | {d for sub in subcommands(parser).values() for d in _dests(sub)}


def build_parser() -> HelmdeckParser:
    common = _common()
    parser = HelmdeckParser(
        prog="helmdeck", parents=[_common()],
        description="Operate Helm releases from the terminal: the app without a command, headless with one.")
    parser.add_argument("--version", action=_Version, nargs=0,
                        help="print helmdeck's version and the helm binary it would run, then exit")
    _add_app_flags(parser)
    # Plain parsers: HelmdeckParser's rule is the top level's alone.
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=argparse.ArgumentParser)

    # The demo opens the app on its own cluster with its own helm build and the examples (or --packages).
    demo_common = _common(without=("--kubeconfig", "--context", "--helm", "--packages", "--kustomize", "--var",
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
    _add_app_flags(demo)

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
                    f"settled (a suspended package is left as it is). --once exit codes: {EXIT_CONVERGED} every "
                    f"package converged or is suspended, {EXIT_FAILED} "
                    f"one failed, {EXIT_STALLED} one stalled (retries exhausted).")
    rec.add_argument("--once", action="store_true", help="one settled pass per package, then exit")
    rec.add_argument("--json", action="store_true", help="print events as JSON lines")
    rec.add_argument("--wait", type=float, default=600.0,
                     help="--once: give up after this many seconds (default: %(default)s)")
    rec.add_argument("--stop-deadline", type=float, default=30.0,
                     help="on ctrl+c, seconds running helm actions may take to finish (default: %(default)s)")

    ctl = sub.add_parser(
        "controller", help="reconcile the cluster's Package objects, around the clock (in the cluster)",
        description="Reconcile the Package, HelmRepository and OCIRepository objects (helmdeck.dev/v1alpha1) of "
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
                          "static shard with its own Lease, as Flux's (sharding.helmdeck.dev/key=shard1 on a shard, "
                          "'!sharding.helmdeck.dev/key' on the main instance; default: every Package)")
    ctl.add_argument("--package-set", metavar="NAME",
                     help="the package set's name: its releases' label and its Lease (default: cluster, or "
                          "cluster-<digest> of the --watch-namespace list)")
    ctl.add_argument("--lease-namespace", default=None,
                     help="namespace of the Lease (default: the pod's namespace, else default)")
    ctl.add_argument("--lease-duration", type=float, default=None,
                     help="seconds without renewal after which another instance takes over (default: 15, with "
                          "--shards auto 8: a member's packages are taken over that long after its last renewal)")
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

    status = sub.add_parser("status", parents=[common], help="print every release and its engine state",
                            description="Print every release with its engine state (read-only).")
    status.add_argument("-o", "--output", choices=["table", "json"], default="table")

    diff_codes = (f"Exit codes (as terraform plan -detailed-exitcode, for CI): {EXIT_NO_CHANGES} nothing would "
                  f"change, {EXIT_CHANGES} something would, {EXIT_FAILED} error (usage errors included).")
    for name, text, more in (
        ("render", "print the manifests an upgrade of PACKAGE would apply", ""),
        ("diff", "print what an upgrade of PACKAGE would change (deployed vs desired)", diff_codes),
    ):
        p = sub.add_parser(name, parents=[common], help=text, description=f"{text} (secrets masked). {more}")
        p.add_argument("package", help="a package file, or a package name in --packages")
        p.add_argument("--show-secrets", action="store_true", help="print secret values instead of masking them")

    versions = sub.add_parser(
        "versions", parents=[common], help="list the chart versions PACKAGE's repository offers",
        description="List the chart versions the repository of PACKAGE offers (spec.chart.spec or "
                    "spec.chartRef), newest first, with app version and date, marking the deployed version "
                    f"and whether each is inside the package's range. Exit {EXIT_FAILED} for a package with a "
                    "local chart or a repository that fails.")
    versions.add_argument("package", help="a package file, or a package name in --packages")
    versions.add_argument("-o", "--output", choices=["table", "json"], default="table")

    plan = sub.add_parser(
        "plan", parents=[common], help="print what a reconcile would do to every package (acts on nothing)",
        description="For every package of --packages, in dependency order: its state, the next action, why, "
                    "and the objects an install or upgrade would add, change or remove (no values: secrets "
                    f"never show). {diff_codes}")
    plan.add_argument("--base", metavar="GIT_REF",
                      help="plan the change from this commit's packages to the working tree's (both rendered; the "
                           "cluster's drift does not show): what merging a pull request would change")
    plan.add_argument("-o", "--output", choices=["text", "json", "markdown"], default="text",
                      help="markdown: a pull-request comment (a summary table, then a collapsed section per release)")

    export = sub.add_parser(
        "export", help="print a packages folder as Package, HelmRepository and OCIRepository objects",
        description="Print the packages folder DIR as helmdeck.dev/v1alpha1 Package, HelmRepository and "
                    "OCIRepository objects (multi-document YAML) for `kubectl apply -f -`; a Flux HelmRelease "
                    "becomes the Package with its spec. Values are printed as written (they are yours: mind "
                    "where the output goes). A package whose chart folder or values files are on disk cannot move "
                    "into the cluster: it is refused on standard error, naming it, and the others are still "
                    f"printed; the exit code is then {EXIT_FAILED} (as kubectl apply with an invalid object: use "
                    "`set -o pipefail`).")
    export.add_argument("directory", type=Path, metavar="DIR", help="the packages folder")
    export.add_argument("--namespace", dest="export_namespace", default="default", metavar="NAMESPACE",
                        help="namespace of the objects whose document names none (default: %(default)s, as the "
                             "package loader reads them)")
    export.add_argument("--allow-unsupported", action="store_true",
                        help="read Flux documents with fields helmdeck does not implement, leaving them out")

    clean = sub.add_parser("cleanup", parents=[common], help="uninstall managed releases no package declares",
                           description="Uninstall every release of the package set of --packages that no "
                                       "package there declares (other sets' releases and releases not managed "
                                       "by helmdeck are never touched). It lists them first and asks on a "
                                       "terminal; without one it needs --yes.")
    clean.add_argument("--dry-run", action="store_true", help="only list what would be uninstalled")
    clean.add_argument("-y", "--yes", action="store_true",
                       help="uninstall without asking (needed when there is no terminal to ask on)")
    clean.add_argument("--ignore-namespace", action="append", default=[], metavar="NAMESPACE",
                       help="never clean up in this namespace (repeatable)")
    parser.share_defaults()
    return parser


def example_packages() -> Path:
    """The example packages: ``helmdeck/examples`` links to the repository's ``examples/`` and an
    installed helmdeck carries them as package data."""
    return Path(__file__).resolve().parent / "examples" / "packages"
