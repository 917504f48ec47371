"""``helmdeck plan``: every package's state, next action, why and objects (:mod:`engine.runtime.plan`).

Acts on nothing: a read-only engine without lease, package watch or monitors.
Exit codes as ``diff``: 0 nothing would change, 2 something would, 1 on error.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from helmdeck.logs import setup_logging
from helmdeck.parser import EXIT_CHANGES, EXIT_FAILED, EXIT_NO_CHANGES

if TYPE_CHECKING:
    from engine.runtime.engine import Engine


class _Refused(RuntimeError):
    """The plan cannot be made; the message says why."""


def run(args: argparse.Namespace, make_engine: Callable[..., Engine]) -> int:
    """Print the plan of ``args.packages`` (text, ``-o json`` or ``-o markdown``) and return the exit code."""
    from helmdeck.access import report as report_access

    if args.packages is None:
        print("error: plan needs --packages DIR or --kustomize DIR", file=sys.stderr)
        return EXIT_FAILED
    setup_logging(args.log_level, args.log_file)
    args.no_lease = True
    engine = make_engine(args, readonly=True, watch=False, monitors=False)

    async def plan_all() -> Any:
        await engine.start(reconcile=False)
        try:
            if report_access(engine.access()):
                raise _Refused("cannot plan: release storage that cannot be read would be missed")
            return await engine.plan()
        finally:
            await engine.stop()

    try:
        plan = asyncio.run(plan_all())
    except _Refused as exc:
        print(f"error: {exc}", file=sys.stderr)
        return EXIT_FAILED
    out = {"json": lambda: plan.as_json() + "\n", "markdown": plan.markdown}.get(args.output, plan.text)()
    sys.stdout.write(out)
    if plan.failed:
        return EXIT_FAILED
    return EXIT_CHANGES if plan.changes else EXIT_NO_CHANGES
