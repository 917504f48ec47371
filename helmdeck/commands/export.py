"""``helmdeck export DIR``: a packages folder as Package, HelmRepository and OCIRepository objects
(:mod:`engine.package.export`)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from engine.base import wire
from helmdeck import startup
from helmdeck.console import usage_error
from helmdeck.parser import EXIT_FAILED, Subcommands


def add(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    export = sub.add_parser(
        "export", help="print a packages folder as Package, HelmRepository and OCIRepository objects",
        description=f"Print the packages folder DIR as {wire.API_VERSION} Package, HelmRepository and "
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
    export.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    """The objects on stdout, refusals on stderr (exit 1 with any, the rest printed)."""
    startup.started()  # no engine of ours to wait for
    import yaml

    from engine.package.export import export_folder

    if not args.directory.is_dir():
        raise usage_error(f"{args.directory} is not a directory")
    done = export_folder(args.directory, namespace=args.export_namespace,
                         allow_unsupported=args.allow_unsupported)
    for problem in [*done.errors, *done.refused]:
        print(f"error: {problem}", file=sys.stderr)
    for warning in done.warnings:
        print(f"warning: {warning}", file=sys.stderr)
    if done.skipped:
        print(done.skipped, file=sys.stderr)
    if not done.objects and done.ok:  # as kubectl apply: no objects is an error
        print(f"error: {args.directory} holds no Package, HelmRepository or OCIRepository", file=sys.stderr)
        return EXIT_FAILED
    class Expanded(yaml.SafeDumper):  # no anchors: each object whole, as kubectl prints them
        def ignore_aliases(self, data: Any) -> bool:
            return True

    sys.stdout.write(yaml.dump_all(done.objects, Dumper=Expanded, explicit_start=True, sort_keys=False,
                                   allow_unicode=True))
    return 0 if done.ok else EXIT_FAILED
