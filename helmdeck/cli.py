"""The ``helmdeck`` command line.

``helmdeck`` opens the app on a cluster chosen as kubectl does; ``helmdeck
demo`` opens it on the local control plane with the example packages;
``helmdeck cluster ...`` manages that control plane; ``reconcile``,
``status``, ``plan``, ``render``, ``diff``, ``versions`` and ``cleanup`` run headless.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gc
import json
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from helmdeck.logs import setup_logging
from helmdeck.parser import (
    EXIT_CHANGES,
    EXIT_CONVERGED,
    EXIT_FAILED,
    EXIT_NO_CHANGES,
    EXIT_STALLED,
    EXIT_USAGE,
    build_parser,
    example_packages,
)

if TYPE_CHECKING:  # the engine is imported when a command needs it (``--help`` and ``cluster`` start fast)
    from engine.runtime.engine import Engine
    from tui.engine_client import ContextSwitch

__all__ = ["EXIT_CHANGES", "EXIT_CONVERGED", "EXIT_FAILED", "EXIT_NO_CHANGES", "EXIT_STALLED", "EXIT_USAGE",
           "build_parser", "example_packages", "main"]

log = logging.getLogger("helmdeck")

# A reader that closed the pipe (``helmdeck status | head``): the shell's status for a command ended by
# SIGPIPE, as `helm status | head` and coreutils report it.
EXIT_PIPE = 128 + signal.SIGPIPE


def main(argv: Sequence[str] | None = None) -> int:
    global _collector_paused
    if argv is None and gc.isenabled():  # this process's own command line (tests call main with theirs)
        # Start-up makes ~700 modules' worth of objects and no garbage; the cycle collector's full passes over
        # them were ~100 ms of a headless command's CPU. It runs again once the engine is built (_started).
        gc.disable()
        _collector_paused = True
    parsed = argparse.Namespace()
    try:
        args = build_parser().parse_args(argv, parsed)
        return _run(args)
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_PIPE
    except SystemExit as exc:  # argparse and the usage checks
        code = exc.code if isinstance(exc.code, int) else EXIT_FAILED
        # diff's exit codes gate CI (terraform plan -detailed-exitcode): 2 means "changes" only, so its usage
        # errors are errors (1). The subcommand is set before its own arguments are parsed.
        return EXIT_FAILED if getattr(parsed, "command", None) in ("diff", "plan") and code == EXIT_USAGE else code


_collector_paused = False  # main paused the cycle collector for start-up


def _imported() -> None:
    """The command's modules are imported: kept out of the cycle collector's passes from now on
    (``gc.freeze``, as long-running Python services do after start). Not the engine: an engine the app
    leaves on a context switch is collected."""
    if _collector_paused and not gc.isenabled():
        gc.freeze()


def _started() -> None:
    """Start-up is over: the cycle collector runs again (when main paused it)."""
    global _collector_paused
    if _collector_paused:
        _imported()
        _collector_paused = False
        gc.enable()


def _quiet_stdout() -> None:
    """Point stdout at /dev/null: the interpreter's last flush would otherwise hit the closed pipe again
    (as the Python docs' "Note on SIGPIPE" says)."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _usage_error(message: str) -> SystemExit:
    print(f"error: {message}", file=sys.stderr)
    return SystemExit(EXIT_USAGE)


def _run(args: argparse.Namespace) -> int:
    if args.command in ("cluster", "demo", "controller", "export"):  # no engine of ours to wait for
        _started()
    if args.command == "cluster":
        return _cluster(args)
    if args.command == "demo":
        return _demo(args)
    if args.command == "controller":
        from helmdeck.controller import run_controller

        return run_controller(args)
    if args.command == "export":
        return _export(args)
    if getattr(args, "concurrency", 1) < 1:
        raise _usage_error("--concurrency must be at least 1")
    if args.packages is not None and not args.packages.is_dir():
        raise _usage_error(f"--packages {args.packages} is not a directory")
    _kustomize_flags(args)
    from engine.kube.client import KubeConfigError

    handlers = {None: _app, "reconcile": _reconcile, "status": _status, "render": _render, "diff": _diff,
                "cleanup": _cleanup, "versions": _versions, "plan": _plan}
    try:
        return handlers[args.command](args)
    except KubeConfigError as exc:
        raise _usage_error(str(exc)) from None


def _kustomize_flags(args: argparse.Namespace) -> None:
    """``--kustomize DIR`` stands for ``--packages``: it names the package set, and the engine builds it
    (:func:`_kustomize_source`). Its variable flags need it."""
    if getattr(args, "kustomize", None) is None:
        if getattr(args, "vars", None) or getattr(args, "vars_from", None) or getattr(args, "vars_from_cluster", None):
            raise _usage_error("--var, --vars-from and --vars-from-cluster go with --kustomize DIR")
        return
    if args.packages is not None:
        raise _usage_error("give --packages DIR or --kustomize DIR, not both")
    if not args.kustomize.is_dir():
        raise _usage_error(f"--kustomize {args.kustomize} is not a directory")
    for file in args.vars_from or ():
        if not file.is_file():
            raise _usage_error(f"--vars-from {file} is not a file")
    _kustomize_source(args)  # a bad --var is a usage error before anything else
    args.packages = args.kustomize


def _kustomize_source(args: argparse.Namespace) -> Any:
    """The KustomizeSource of ``--kustomize`` and its variable flags (None without it)."""
    if getattr(args, "kustomize", None) is None:
        return None
    from engine.package.substitute import SubstitutionError, parse_var, variables
    from engine.runtime.drive.kustomized import KustomizeSource

    try:
        given = variables((parse_var(v) for v in args.vars or ()), "--var")
    except SubstitutionError as exc:
        raise _usage_error(str(exc)) from None
    return KustomizeSource(args.kustomize, given, tuple(args.vars_from or ()), args.vars_from_cluster or "",
                           getattr(args, "kustomize_root", None))


# -- local cluster -----------------------------------------------------------------
def _cluster(args: argparse.Namespace) -> int:
    from localcluster.build import BuildError
    from localcluster.cluster import ClusterError, LocalCluster

    cluster = LocalCluster(args.cluster_dir)
    if args.cluster_command == "up":
        try:
            cluster.up(progress=lambda m: print(m, flush=True))
        except (BuildError, ClusterError) as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(f"export KUBECONFIG={cluster.kubeconfig}")
        return 0
    if args.cluster_command == "down":
        stopped = cluster.down()
        print(f"stopped: {', '.join(stopped)}" if stopped else "local cluster was not running")
        return 0
    if args.cluster_command == "status":
        status = cluster.status()
        if args.output == "json":
            print(json.dumps(status.to_json(), indent=2))
        else:
            print("\n".join(status.lines()))
        return 0 if status.ready else 3
    print(cluster.kubeconfig)
    return 0


def _demo(args: argparse.Namespace) -> int:
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
        code = _app(args)
    finally:
        sources.stop()
    print(f"The local cluster is still running (KUBECONFIG={cluster.kubeconfig}); "
          "`helmdeck cluster down` stops it.")
    return code


# -- engine ------------------------------------------------------------------------
def _engine(
    args: argparse.Namespace, *, readonly: bool | None = None, watch: bool = True, monitors: bool = True,
) -> Engine:
    """Build the engine the flags describe (not started). Exits with a message on a bad kubeconfig."""
    from engine.helm import Helm
    from engine.kube.client import KubeConfigError, KubeTarget, api_client
    from engine.runtime.assemble import build_engine
    from engine.runtime.engine import LeaseConfig
    from engine.runtime.package_set import PackageSetNameError, package_set_for
    from helmdeck.access import scope_fallback

    _imported()
    target = KubeTarget(args.kubeconfig, args.context)
    namespaces, note = None if args.all_namespaces else args.namespaces, ""
    try:
        api = api_client(target)  # one client (kubeconfig read, connection) for the access check and the engine
        if namespaces is None and not args.all_namespaces:  # neither -n nor -A: may fall back
            namespaces, note = scope_fallback(target, api)
    except KubeConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
    lease = None
    readonly = args.readonly if readonly is None else readonly
    name = getattr(args, "package_set", None)
    try:
        package_set = package_set_for(args.packages, name) if args.packages is not None else None
    except PackageSetNameError as exc:
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_USAGE) from None
    # A read-only instance never competes for the lease: it would block the one that acts.
    if package_set is not None and not getattr(args, "no_lease", True) and not readonly:
        lease = LeaseConfig(package_set.lease_name, getattr(args, "lease_namespace", "default"))
    engine = build_engine(
        target, Helm(_helm(args), target), args.packages,
        namespaces=namespaces,
        readonly=readonly,
        concurrency=getattr(args, "concurrency", 4), prune=getattr(args, "prune", False),
        lease=lease, watch_packages=watch, monitors=monitors, package_set=name,
        allow_unsupported=getattr(args, "allow_unsupported", False), kustomize=_kustomize_source(args),
        # the app attaches to the cluster's helmdeck controllers when one runs; status names their packages' owners
        attach=args.command in (None, "demo", "status"),
        controller_metrics=tuple(getattr(args, "controller_metrics", ())), api=api,
    )
    engine.scope_note = note
    _started()
    return engine


def _helm(args: argparse.Namespace) -> str:
    """The helm binary to run (see helmdeck.helm_binary), logged.

    When none is found, commands that need helm exit with the reason; ``status`` and the app go on
    (they run helm only for actions, which then report it).
    """
    from helmdeck.helm_binary import HelmNotFound, find_helm

    try:
        choice = find_helm(args.helm)
    except HelmNotFound as exc:
        if args.command in (None, "status"):
            log.warning("%s", exc)
            return str(args.helm or "helm")
        print(f"error: {exc}", file=sys.stderr)
        raise SystemExit(EXIT_FAILED) from None
    log.info("using helm %s", choice.describe())
    return choice.path


def _app(args: argparse.Namespace) -> int:
    from engine.kube.client import KubeTarget, current_context
    from tui.app import HelmdeckApp
    from tui.settings import Settings, config_dir

    log_file = setup_logging(args.log_level, getattr(args, "log_file", None))
    engine = _engine(args)
    # The context's name, for the app's header: read here, not by every command (the kubeconfig is parsed again).
    context = current_context(KubeTarget(args.kubeconfig, args.context))
    app = HelmdeckApp(engine, context=context, settings=Settings(config_dir()),
                      theme=getattr(args, "theme", None), log_file=log_file, contexts=context_switch(args, context))
    app.run()
    return app.return_code or 0  # non-zero when the app ended on an error


def context_switch(args: argparse.Namespace, context: str) -> ContextSwitch:
    """The app's switch to another kubeconfig context, started on ``context`` with ``args``: the same flags on
    the other context (its own lease: the lease lives in that cluster), but the packages folder (or
    ``--kustomize`` path) is the started context's: another context is shown and acted on by hand, never
    reconciled from it, as k9s's ``:ctx`` changes only what is viewed (switching to a production context
    reconciled the demo's packages there)."""
    from engine.kube.client import KubeTarget, contexts
    from tui.engine_client import ContextSwitch

    target = KubeTarget(args.kubeconfig)
    folder = args.packages or getattr(args, "kustomize", None)

    def on_context(name: str) -> Engine:
        moved: dict[str, Any] = {"context": name}
        if folder is not None and name != context:
            moved.update(packages=None, kustomize=None, prune=False)
        return _engine(argparse.Namespace(**{**vars(args), **moved}))

    def note(name: str) -> str:
        if folder is None or name == context:
            return ""
        return (f"{folder} is reconciled on context {context} only: {name} is shown without it (releases can "
                f"still be acted on by hand; start helmdeck with --context {name} to reconcile it there)")

    return ContextSwitch(lambda: contexts(target), on_context, note)


def _reconcile(args: argparse.Namespace) -> int:
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
    engine = _engine(args, watch=not args.once)
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
            _quiet_stdout()
            stop.set()

    engine.subscribe(show)
    code: int = asyncio.run(_reconcile_async(engine, args, stop))
    if closed:
        return EXIT_PIPE
    access = engine.access()
    return max(code, EXIT_FAILED) if access.missing or access.unread else code


async def _reconcile_async(engine: Engine, args: argparse.Namespace, stop: asyncio.Event) -> int:
    from engine.reconcile import state as st
    from engine.runtime.engine import FLUX_OWNED

    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    await engine.start(reconcile=not args.once)
    for err in engine.package_errors:
        print(f"package error: {err}", file=sys.stderr)
    _notes(engine)
    if not args.once:
        await stop.wait()
        clean = await engine.stop(args.stop_deadline)
        return 0 if clean else EXIT_FAILED
    duration = engine.lease_duration
    if not engine.acting and engine.lease_holder and duration is not None:
        # The wait proves the holder alive (a killed one's lease runs out): say why nothing happens meanwhile.
        print(f"note: {engine.lease_holder} holds the engine lease; waiting up to {duration:.0f} s for it to go",
              file=sys.stderr, flush=True)
    if not await engine.wait_for_lease():
        print(f"error: {engine.lease_holder or 'another instance'} holds the engine lease; "
              "nothing was reconciled", file=sys.stderr)
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


def _status(args: argparse.Namespace) -> int:
    from engine.runtime.report import status_row, table
    from helmdeck.access import report as report_access

    setup_logging(args.log_level, args.log_file)
    engine = _engine(args, readonly=True, watch=False)

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
    _notes(engine)
    denied = report_access(access)  # an empty table must not hide a refused permission
    return EXIT_FAILED if engine.package_errors or denied else 0


class _Refused(RuntimeError):
    """A headless command refused to go on; the message says why."""


def _notes(engine: Any) -> None:
    """The packages folder's objects skipped (one line) and Flux fields left out (a warning each), on stderr."""
    if engine.skipped:
        print(engine.skipped, file=sys.stderr)
    for item in engine.left_out:
        print(f"warning: {item}", file=sys.stderr)


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


def _one_package(args: argparse.Namespace, what: str) -> int:
    """``render`` or ``diff`` of one package, through a read-only engine on its namespace."""
    from engine.base.fields import PackageError
    from engine.helm import HelmError
    from engine.runtime.engine import ActionRefused, NotAvailable
    from helmdeck.access import report as report_access

    setup_logging(args.log_level, args.log_file)
    if getattr(args, "kustomize", None) is not None:  # the package is one of the built path's
        args.no_lease = True
        engine = _engine(args, readonly=True, watch=False, monitors=False)
        spec = _built_package(engine, args.package)
    else:
        spec = _find_package(args)
        args.packages = spec.file.parent
        args.namespaces, args.all_namespaces, args.no_lease = (sorted({spec.namespace, spec.release_namespace}),
                                                               False, True)
        engine = _engine(args, readonly=True, watch=False, monitors=False)

    async def run() -> str:
        await engine.start(reconcile=False)
        try:
            if report_access(engine.access()):
                raise _Refused(f"cannot {what} {spec.release_namespace}/{spec.release_name}: its release storage "
                               "cannot be read")
            if what == "diff":
                return str(await engine.diff(spec.key, reveal=args.show_secrets))
            return str(await engine.render(spec.key, reveal=args.show_secrets))
        finally:
            await engine.stop()

    try:
        out = asyncio.run(run())
    except (PackageError, HelmError, ActionRefused, NotAvailable, _Refused) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if what == "diff" and not out:
        print(f"{spec.release_namespace}/{spec.release_name}: an upgrade would change nothing", file=sys.stderr)
    sys.stdout.write(out)
    return EXIT_CHANGES if what == "diff" and out else 0


def _render(args: argparse.Namespace) -> int:
    return _one_package(args, "render")


def _diff(args: argparse.Namespace) -> int:
    return _one_package(args, "diff")


def _versions(args: argparse.Namespace) -> int:
    from helmdeck.versions import run

    return run(args, _engine)


def _export(args: argparse.Namespace) -> int:
    """``helmdeck export DIR``: the objects on stdout, refusals on stderr (exit 1 with any, the rest printed)."""
    import yaml

    from engine.package.export import export_folder

    if not args.directory.is_dir():
        raise _usage_error(f"{args.directory} is not a directory")
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


def _plan(args: argparse.Namespace) -> int:
    from helmdeck.plan import run

    return run(args, _engine)


def _cleanup(args: argparse.Namespace) -> int:
    from engine.runtime.engine import ActionRefused, NotAvailable
    from helmdeck.access import report as report_access

    if args.packages is None:
        print("error: cleanup needs --packages DIR (releases no package there declares are removed)",
              file=sys.stderr)
        return EXIT_USAGE
    setup_logging(args.log_level, args.log_file)
    args.no_lease = True  # an operator's one-off action, as with the helm CLI
    dry_run = args.dry_run or args.readonly
    engine = _engine(args, watch=False, monitors=False)
    ignore = tuple(args.ignore_namespace)

    async def run() -> list[Any]:
        await engine.start(reconcile=False)
        try:
            if report_access(engine.access()):
                raise _Refused("cannot clean up: releases in storage that cannot be read would be missed")
            listed: list[Any] = await engine.cleanup(dry_run=True, ignore_namespaces=ignore)
            refs = [f"{i.namespace}/{i.name}" for i in listed if i.result == "would-remove"]
            if dry_run or not refs:
                return listed
            if not args.yes:
                _print_cleanup(listed)
            if not _confirmed(args, "Uninstall the release listed, with its helm history?" if len(refs) == 1
                              else f"Uninstall the {len(refs)} releases listed, with their helm history?"):
                raise _Refused("nothing uninstalled" if sys.stdin.isatty() else
                               "cleanup uninstalls releases: with no terminal to ask on, pass --yes "
                               "(or --dry-run to list them only)")
            items: list[Any] = await engine.cleanup(ignore_namespaces=ignore, confirmed=refs)
            return items
        finally:
            await engine.stop()

    try:
        items = asyncio.run(run())
    except (ActionRefused, NotAvailable, _Refused) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    if not any(i.result in ("would-remove", "removed", "failed") for i in items):
        print("nothing to clean up: every release of this package set is declared by a package")
    _print_cleanup(items)
    return 1 if any(i.result == "failed" for i in items) else 0


def _print_cleanup(items: list[Any]) -> None:
    for item in items:
        note = f" ({item.message})" if item.message else ""
        print(f"{item.result:<13} {item.namespace}/{item.name}{note}")


def _confirmed(args: argparse.Namespace, question: str) -> bool:
    """True with ``--yes``, or when the operator answers yes on a terminal; False without one."""
    if getattr(args, "yes", False):
        return True
    if not sys.stdin.isatty():
        return False
    try:
        answer = input(f"{question} [y/N] ")
    except EOFError:
        return False
    return answer.strip().lower() in ("y", "yes")
