"""``helmdeck status``: the releases of a packages folder's packages with their engine state, read-only; every
release of the namespaces with ``--all`` or without a folder."""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from helmdeck import builder
from helmdeck.console import notes
from helmdeck.logs import setup_logging
from helmdeck.parser import EXIT_FAILED, Subcommands


def add(sub: Subcommands, common: argparse.ArgumentParser) -> None:
    status = sub.add_parser(
        "status", parents=[common], help="print the packages' releases (or every release) and their engine state",
        description="Print the releases of the folder's packages with their engine state (read-only), as flux get "
                    "helmreleases lists what Flux manages; every release of the namespaces with --all or without "
                    "--packages/--kustomize, as helm list.")
    status.add_argument("-o", "--output", choices=["table", "json"], default="table")
    status.add_argument("--all", action="store_true", dest="every_release",
                        help="every release of the namespaces, not only the folder's packages'")
    status.set_defaults(run=run)


@builder.engine_command
def run(args: argparse.Namespace) -> int:
    from engine.runtime.report import status_row, table
    from helmdeck.access import report as report_access

    setup_logging(args.log_level, args.log_file)
    # A folder's status reads the records of its packages' releases alone (an empty folder's none), as plan and
    # reconcile --once do: over 10,000 releases of other tools that is the difference between 0.4 s and 3 s.
    folder = args.packages is not None or getattr(args, "kustomize", None) is not None
    engine = builder.engine(args, readonly=True, watch=False,
                            records_of="packages" if folder and not args.every_release else None)

    async def collect() -> tuple[list[dict[str, Any]], Any]:
        await engine.start(reconcile=False)
        await engine.monitors_ready()  # monitors list their resources: absent ones are reported
        await engine.controllers_read()  # a live controller's Package objects: their owner (replica, shard)
        try:
            unreadable = engine.unreadable_releases()
            return [status_row(v, unreadable.get(v.key)) for v in engine.releases()], engine.access()
        finally:
            await engine.stop()

    rows, access = asyncio.run(collect())
    print(json.dumps(rows, indent=2) if args.output == "json" else table(rows))
    for err in engine.package_errors:
        print(f"package error: {err}", file=sys.stderr)
    notes(engine)
    denied = report_access(access)  # an empty table must not hide a refused permission
    return EXIT_FAILED if engine.package_errors or denied else 0
