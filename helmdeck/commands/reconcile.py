"""``helmdeck reconcile``: the packages reconciled headless, until interrupted or, with ``--once``, until
every package settled."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import signal
import sys
from typing import TYPE_CHECKING, Any

from helmdeck import builder
from helmdeck.console import EXIT_PIPE, notes, quiet_stdout
from helmdeck.logs import setup_logging
from helmdeck.parser import EXIT_CONVERGED, EXIT_FAILED, EXIT_STALLED, EXIT_USAGE, Subcommands

if TYPE_CHECKING:
    from engine.runtime.engine import Engine


def add(sub: Subcommands, common: argparse.ArgumentParser) -> None:
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
    rec.set_defaults(run=run)


@builder.engine_command
def run(args: argparse.Namespace) -> int:
    from engine.runtime.report import event_line
    from engine.runtime.state import AccessProblems, EntryLogged
    from helmdeck.access import report as report_access

    if args.packages is None:
        print("error: reconcile needs --packages DIR or --kustomize DIR", file=sys.stderr)
        return EXIT_USAGE
    if args.readonly:
        print("error: --readonly reconciles nothing; use `helmdeck status` to look", file=sys.stderr)
        return EXIT_USAGE
    setup_logging(args.log_level, args.log_file)
    # One pass over the folder's packages needs their releases' records alone (--prune: the set's others too).
    engine = builder.engine(args, watch=not args.once,
                            records_of=None if not args.once else "package set" if args.prune else "packages")
    stop = asyncio.Event()  # a signal, or the reader of stdout gone
    closed = False

    def show(event: object) -> None:
        nonlocal closed
        if closed:
            return
        try:
            if isinstance(event, AccessProblems):
                report_access(event)  # said when it happens: a long-running reconcile may lose a permission
            if not isinstance(event, EntryLogged):
                return
            ev = event.event
            if args.json:
                print(json.dumps(event_line(ev)), flush=True)
            elif ev.outcome != "started":
                print(f"{ev.key[0]}/{ev.key[1]}: {ev.action} {ev.outcome}: {ev.message}", flush=True)
        except BrokenPipeError:
            # The reader is gone (``| head``): end as SIGPIPE would, once, instead of failing at every event.
            closed = True
            quiet_stdout()
            stop.set()

    engine.subscribe(show)
    code: int = asyncio.run(_reconcile(engine, args, stop))
    if closed:
        return EXIT_PIPE
    access = engine.access()
    return max(code, EXIT_FAILED) if access.missing or access.unread else code


async def _reconcile(engine: Engine, args: argparse.Namespace, stop: asyncio.Event) -> int:
    from engine.reconcile import state as st
    from engine.runtime.engine import FLUX_OWNED

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await engine.start(reconcile=not args.once)
    for err in engine.package_errors:
        print(f"package error: {err}", file=sys.stderr)
    notes(engine)
    if not args.once:
        await stop.wait()
        clean = await engine.stop(args.stop_deadline)
        return 0 if clean else EXIT_FAILED
    duration = engine.lease_duration
    held = engine.lease_held
    if held is not None and engine.lease_holder and duration is not None:
        # The wait proves the holder alive (it renews the lease; a killed one's runs out): say why nothing
        # happens meanwhile.
        print(f"note: {held[0]} holds the engine lease; waiting up to {duration:.0f} s for it to go "
              "(less once it is seen renewing it)", file=sys.stderr, flush=True)
    if not await engine.wait_for_lease():
        held = engine.lease_held
        holder, fix = held if held is not None else ("another instance", "")
        print(f"error: {holder} holds the engine lease; nothing was reconciled"
              + (f" ({fix})" if fix else ""), file=sys.stderr)
        await engine.stop()
        return EXIT_FAILED
    keys = sorted(engine.packages)
    results = await engine.settle(keys, args.wait, stop=stop)
    interrupted = stop.is_set() and len(results) < len(keys)
    pruned = await _prune_removed(engine) if args.prune and not interrupted else 0
    await engine.stop(args.stop_deadline)
    codes = [EXIT_FAILED] if pruned < 0 else []
    for key, result in sorted(results.items()):
        converged = result.state == st.IN_SYNC
        suspended = result.state == st.SUSPENDED  # left as it is on purpose: not a failure
        message = engine.masker.scrub(result.message)  # helm may echo a value that came from a Secret
        if args.json:
            print(json.dumps({"type": "result", "namespace": key[0], "release": key[1], "state": result.state,
                              "converged": converged, "suspended": suspended, "message": message}), flush=True)
        else:
            print(f"{key[0]}/{key[1]}: {result.state}{'' if converged else ': ' + message}")
        # A release Flux owns is Flux's to converge: helmdeck leaving it alone is no failure.
        codes.append(EXIT_CONVERGED if converged or suspended or result.state == FLUX_OWNED else
                     EXIT_STALLED if result.state == st.STALLED else EXIT_FAILED)
    if interrupted or engine.package_errors or len(results) < len(engine.packages):
        codes.append(EXIT_FAILED)
    if EXIT_STALLED in codes:
        return EXIT_STALLED
    return max(codes, default=EXIT_CONVERGED)


async def _prune_removed(engine: Any) -> int:
    """``reconcile --once --prune``: uninstall the releases of this package set that no package declares,
    as ``cleanup`` does, also when their files were gone before the run. Nothing is pruned while a package
    file has errors (its release may be one of them). Returns how many were removed, -1 on a failure."""
    from engine.runtime.engine import ActionRefused

    try:
        items = await engine.prune_removed()
    except ActionRefused as exc:
        print(f"prune skipped: {exc}", file=sys.stderr)
        return -1
    for item in items:
        if item.result != "skipped":
            print(f"{item.namespace}/{item.name}: prune {item.result}{': ' + item.message if item.message else ''}")
    return -1 if any(i.result == "failed" for i in items) else sum(i.result == "removed" for i in items)
