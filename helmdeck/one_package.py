"""``render`` and ``diff``: one package, named on the command line, through a read-only engine on its
namespace."""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path
from typing import Any

from helmdeck import builder
from helmdeck.console import Refused
from helmdeck.logs import setup_logging
from helmdeck.parser import EXIT_CHANGES, EXIT_USAGE


def add_arguments(p: argparse.ArgumentParser) -> None:
    """PACKAGE and ``--show-secrets``."""
    p.add_argument("package", help="a package file, or a package name in --packages")
    p.add_argument("--show-secrets", action="store_true", help="print secret values instead of masking them")


def _find_package(args: argparse.Namespace) -> Any:
    """The spec PACKAGE names (a file, or a package name in --packages); exits with a message otherwise."""
    from engine.base.fields import PackageError
    from engine.package.load import load_package, load_packages

    candidate = Path(args.package)
    try:
        allow = getattr(args, "allow_unsupported", False)
        if candidate.is_file():
            return load_package(candidate, allow_unsupported=allow)  # a file of several: named with --packages
        if args.packages is not None:
            specs, _ = load_packages(args.packages, allow_unsupported=allow)
            for spec in specs:
                if args.package in (spec.name, spec.release_name):
                    return spec
    except PackageError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
    print(f"error: no package file or package named {args.package!r}"
          f"{'' if args.packages else ' (pass --packages DIR to look packages up by name)'}", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def _built_package(engine: Any, name: str) -> Any:
    """The package ``name`` (its name or release name) of a ``--kustomize`` path; exits with a message."""
    for spec in engine.packages.values():
        if name in (spec.name, spec.release_name):
            return spec
    for err in engine.package_errors:
        print(f"package error: {err}", file=sys.stderr)
    print(f"error: no package named {name!r} in the --kustomize path", file=sys.stderr)
    raise SystemExit(EXIT_USAGE)


def run(args: argparse.Namespace, what: str) -> int:
    """``render`` or ``diff`` (``what``) of one package: the manifests (diff: exit 2 with changes, 0 without),
    1 on an error."""
    from engine.base.fields import PackageError
    from engine.helm import HelmError
    from engine.runtime.engine import ActionRefused, NotAvailable
    from helmdeck.access import report as report_access

    setup_logging(args.log_level, args.log_file)
    if getattr(args, "kustomize", None) is not None:  # the package is one of the built path's
        args.no_lease = True
        engine = builder.engine(args, readonly=True, watch=False, monitors=False)
        spec = _built_package(engine, args.package)
    else:
        spec = _find_package(args)
        args.packages = spec.file.parent
        args.namespaces, args.all_namespaces, args.no_lease = (sorted({spec.namespace, spec.release_namespace}),
                                                               False, True)
        engine = builder.engine(args, readonly=True, watch=False, monitors=False)

    async def collect() -> str:
        await engine.start(reconcile=False)
        try:
            if report_access(engine.access()):
                raise Refused(f"cannot {what} {spec.release_namespace}/{spec.release_name}: its release storage "
                              "cannot be read")
            if what == "diff":
                return str(await engine.diff(spec.key, reveal=args.show_secrets))
            return str(await engine.render(spec.key, reveal=args.show_secrets))
        finally:
            await engine.stop()

    try:
        out = asyncio.run(collect())
    except (PackageError, HelmError, ActionRefused, NotAvailable, Refused) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if what == "diff" and not out:
        print(f"{spec.release_namespace}/{spec.release_name}: an upgrade would change nothing", file=sys.stderr)
    sys.stdout.write(out)
    return EXIT_CHANGES if what == "diff" and out else 0
