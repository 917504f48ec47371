"""The ``helmdeck`` argument parser's rule (:class:`HelmdeckParser`), the flags every command shares
(:func:`common_flags`) and the exit codes; each command's own arguments are in its module of
:mod:`helmdeck.commands`, and :func:`helmdeck.cli.build_parser` puts them together."""

from __future__ import annotations

import argparse
import os
from pathlib import Path
from typing import Any, TypeAlias

from engine.base import wire
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
DIFF_CODES = (f"Exit codes (as terraform plan -detailed-exitcode, for CI): {EXIT_NO_CHANGES} nothing would "
              f"change, {EXIT_CHANGES} something would, {EXIT_FAILED} error (usage errors included).")

# What a command's ``add`` adds its parser to.
Subcommands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def common_flags(*, without: tuple[str, ...] = ()) -> argparse.ArgumentParser:
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
         help=f"name of the folder's package set: its releases' {wire.PACKAGE_SET} label and its Lease "
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


class Version(argparse.Action):
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

    The top level takes no abbreviated flag: argparse looks at every word, the subcommand's too, for one, so
    ``status --all`` was refused as ambiguous (``--all-namespaces``, ``--allow-unsupported``). A subcommand's
    parser still takes abbreviations of its own flags.
    """

    def __init__(self, **kw: Any) -> None:
        super().__init__(allow_abbrev=False, **kw)
        self._shared_options: dict[str, str] = {}  # dest -> its option strings, of the top level's flags
        # command (None: the app) -> dest -> default
        self._shared_defaults: dict[str | None, dict[str, Any]] = {None: {}}
        self._takes: dict[str, set[str]] = {}  # command -> every dest its parser (and its subparsers) sets

    def share_defaults(self) -> None:
        """Called once, when every subcommand is added."""
        shared = [a for a in self._actions
                  if a.option_strings and a.default is not argparse.SUPPRESS and not isinstance(a, Version)]
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


def example_packages() -> Path:
    """The example packages: ``helmdeck/examples`` links to the repository's ``examples/`` and an
    installed helmdeck carries them as package data."""
    return Path(__file__).resolve().parent / "examples" / "packages"
