"""The app, opened without a command (and by ``helmdeck demo``): its own flags, the engine it runs on and
the switch to another kubeconfig context."""

from __future__ import annotations

import argparse
import shutil
from typing import TYPE_CHECKING, Any

from helmdeck import builder, startup
from helmdeck.logs import setup_logging

if TYPE_CHECKING:
    from engine.runtime.engine import Engine
    from engine.runtime.state import ReleaseKey
    from tui.engine_client import ContextSwitch


def _metrics_url(text: str) -> str:
    """``--controller-metrics``: an http(s) URL (a bare HOST:PORT gets http:// and /metrics)."""
    from engine.runtime.cockpit.pulses import check_url

    try:
        return check_url(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_flags(p: argparse.ArgumentParser) -> None:
    """The app's own flags (no command, and ``demo``, which opens it)."""
    p.add_argument("--theme", help="app theme, e.g. helmdeck-dark, helmdeck-light, helmdeck-high-contrast "
                                   "(remembered; user themes in $XDG_CONFIG_HOME/helmdeck/themes/)")
    p.add_argument("--controller-metrics", action="append", default=[], metavar="URL", type=_metrics_url,
                   help="a helmdeck controller replica's metrics (repeatable), for the controller view (P), "
                        "e.g. http://127.0.0.1:8080/metrics after kubectl port-forward; a controller running "
                        "on this machine is found through its Lease without it")


def open_app(args: argparse.Namespace) -> int:
    """Open the app on the engine the flags describe; its exit code (non-zero when it ended on an error)."""
    from engine.kube.client import KubeTarget, current_context

    log_file = setup_logging(args.log_level, getattr(args, "log_file", None))
    # Storage's labels are listed while the engine's modules and the app's screens import (~0.4 s of CPU), then
    # the records of the rows the first screen shows; decoded with the cycle collector still paused (a page of
    # 5,000 labels: 17 ms, 45 ms with it running).
    engine = builder.engine(args, labels_ahead=_first_rows, started=False)
    from tui.app import HelmdeckApp
    from tui.settings import Settings, config_dir

    # The context's name, for the app's header: read here, not by every command (the kubeconfig is parsed again).
    context = current_context(KubeTarget(args.kubeconfig, args.context))
    app = HelmdeckApp(engine, context=context, settings=Settings(config_dir()),
                      theme=getattr(args, "theme", None), log_file=log_file, contexts=context_switch(args, context))
    startup.started()  # the app pauses the collector again while its engine starts (tui.collector)
    app.run()
    return app.return_code or 0


def _first_rows(keys: list[ReleaseKey]) -> list[ReleaseKey]:
    """Of the releases ``keys``, those the app's first screen shows (at most the terminal's height), in its order
    (:func:`tui.model.first_rows`). Called in the labels list's thread, while the app imports."""
    from tui.model import first_rows

    return first_rows(keys, shutil.get_terminal_size().lines)


# ``helmdeck`` without a command: the app on the cluster the flags name.
run = builder.engine_command(open_app)


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
        return builder.engine(argparse.Namespace(**{**vars(args), **moved}))

    def note(name: str) -> str:
        if folder is None or name == context:
            return ""
        return (f"{folder} is reconciled on context {context} only: {name} is shown without it (releases can "
                f"still be acted on by hand; start helmdeck with --context {name} to reconcile it there)")

    return ContextSwitch(lambda: contexts(target), on_context, note)
