"""``helmdeck status``: every release with its engine state, read-only."""

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
    status = sub.add_parser("status", parents=[common], help="print every release and its engine state",
                            description="Print every release with its engine state (read-only).")
    status.add_argument("-o", "--output", choices=["table", "json"], default="table")
    status.set_defaults(run=run)


@builder.engine_command
def run(args: argparse.Namespace) -> int:
    from engine.runtime.report import status_row, table
    from helmdeck.access import report as report_access

    setup_logging(args.log_level, args.log_file)
    engine = builder.engine(args, readonly=True, watch=False)

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
