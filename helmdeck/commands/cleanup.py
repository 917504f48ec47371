"""``helmdeck cleanup``: uninstall the managed releases of a package set that no package declares."""

from __future__ import annotations

import argparse
import asyncio
import sys
from typing import Any

from helmdeck import builder
from helmdeck.console import Refused, confirmed
from helmdeck.logs import setup_logging
from helmdeck.parser import EXIT_USAGE, Subcommands


def add(sub: Subcommands, common: argparse.ArgumentParser) -> None:
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
    clean.set_defaults(run=run)


@builder.engine_command
def run(args: argparse.Namespace) -> int:
    from engine.runtime.engine import ActionRefused, NotAvailable
    from helmdeck.access import report as report_access

    if args.packages is None:
        print("error: cleanup needs --packages DIR (releases no package there declares are removed)",
              file=sys.stderr)
        return EXIT_USAGE
    setup_logging(args.log_level, args.log_file)
    args.no_lease = True  # an operator's one-off action, as with the helm CLI
    dry_run = args.dry_run or args.readonly
    engine = builder.engine(args, watch=False, monitors=False)
    ignore = tuple(args.ignore_namespace)

    async def clean() -> list[Any]:
        await engine.start(reconcile=False)
        try:
            if report_access(engine.access()):
                raise Refused("cannot clean up: releases in storage that cannot be read would be missed")
            listed: list[Any] = await engine.cleanup(dry_run=True, ignore_namespaces=ignore)
            refs = [f"{i.namespace}/{i.name}" for i in listed if i.result == "would-remove"]
            if dry_run or not refs:
                return listed
            if not args.yes:
                _print(listed)
            if not confirmed(args.yes, "Uninstall the release listed, with its helm history?" if len(refs) == 1
                             else f"Uninstall the {len(refs)} releases listed, with their helm history?"):
                raise Refused("nothing uninstalled" if sys.stdin.isatty() else
                              "cleanup uninstalls releases: with no terminal to ask on, pass --yes "
                              "(or --dry-run to list them only)")
            items: list[Any] = await engine.cleanup(ignore_namespaces=ignore, confirmed=refs)
            return items
        finally:
            await engine.stop()

    try:
        items = asyncio.run(clean())
    except (ActionRefused, NotAvailable, Refused) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if not any(i.result in ("would-remove", "removed", "failed") for i in items):
        print("nothing to clean up: every release of this package set is declared by a package")
    _print(items)
    return 1 if any(i.result == "failed" for i in items) else 0


def _print(items: list[Any]) -> None:
    for item in items:
        note = f" ({item.message})" if item.message else ""
        print(f"{item.result:<13} {item.namespace}/{item.name}{note}")
