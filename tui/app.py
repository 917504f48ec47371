"""The helmdeck app: every release live, with keys for every action an operator needs.

The app publishes engine events as signals the screens subscribe to, runs
every operator action from one table (:mod:`tui.operations`) with one
runner, and owns what is app-wide: themes, settings, the help screen and
the command palette. Everything reaches the engine through one door
(:class:`~tui.engine_client.EngineClient`). Every engine call is guarded: a
failure becomes a notification saying what failed and where to look, never
a crash.
"""

from __future__ import annotations

import asyncio
import logging
import sys
import time
from collections import deque
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from textual import events, on, work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.theme import Theme

from engine.base.masking import Masker
from engine.runtime import Engine, EngineSignal, PackageProblems
from engine.runtime.engine import ActionRefused, NotAvailable
from engine.runtime.ledger.owners import has_key
from engine.runtime.state import (
    AccessProblems,
    ActionOutcome,
    ControllerChanged,
    LeaseChanged,
    ReleaseKey,
    ReleaseRemoved,
    Requested,
)
from tui.collector import Collector
from tui.engine_client import ContextSwitch, EngineClient
from tui.messages import EngineMessage, EngineSignals, OpenDetail
from tui.operations import BY_NAME, OPERATIONS, Context, Notice, Operation, Report, operation_bindings
from tui.screens.base import EngineScreen
from tui.screens.main import MainScreen
from tui.screens.picker import PickerScreen
from tui.settings import Settings
from tui.themes import DEFAULT_THEME, SHIPPED_DIR, load_themes

# The screens a key opens (detail, help, confirmation, controller view) are imported when first opened: not
# before the first table (~30 ms of a launch's imports; bench/tui_launch.py).

log = logging.getLogger(__name__)
T = TypeVar("T")
ALL_RELEASES: ReleaseKey = ("", "")  # what an operation on every release (cleanup) acts on
# The event loop shares the interpreter lock with the storage threads (listing and decoding records, each
# write's watch event): a thread waiting for the lock gets it after this long at most. Python's 5 ms was
# paid on many of a frame's steps while a list decoded (the first table at 10,000 releases: 0.54-1.0 s
# against 0.49-0.66 s, bench/tui_bench.py).
SWITCH_INTERVAL = 0.0005


@runtime_checkable
class SelectsRelease(Protocol):
    """A screen whose actions act on one release (the main list's cursor, a detail screen's release)."""

    def selected_release(self) -> ReleaseKey | None: ...


@runtime_checkable
class PicksRollback(Protocol):
    """A screen that names the revision a rollback goes to (the detail screen's History tab)."""

    def rollback_target(self) -> int | None: ...


NO_RELEASE_HERE = "this screen shows no release: escape goes back to the release list"


def _no_release_on(screen: Screen[Any], op: Operation) -> bool:
    """Whether ``op`` acts on one release and ``screen`` (an engine screen such as the controller view) shows none."""
    return op.per_release and isinstance(screen, EngineScreen) and not isinstance(screen, SelectsRelease)


class HelmdeckApp(App[None]):
    """The whole app over one :class:`Engine`.

    ``clock`` gives Unix seconds for ages and progress (fixed in snapshot
    tests); ``settings`` is where the theme choice and user themes live
    (None: nothing is read or written); ``theme`` is ``--theme``;
    ``log_file`` is named in error notifications.
    """

    CSS_PATH = "app.tcss"
    TITLE = "helmdeck"
    BINDINGS = [
        *operation_bindings(),
        Binding("C", "context", "Context", tooltip="Switch the cluster context (as k9s's :ctx)"),
        # In the footer while a controller (or its metrics) is known; the key works always (the fallback).
        Binding("P", "pulses(1)", "Pulses", tooltip="The controller view: its pulses, as k9s's"),
        Binding("P", "pulses(0)", show=False),
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        engine: Engine,
        *,
        context: str = "",
        start_engine: bool = True,
        clock: Callable[[], float] = time.time,
        settings: Settings | None = None,
        theme: str | None = None,
        log_file: Path | None = None,
        masker: Masker | None = None,
        contexts: ContextSwitch | None = None,
    ):
        super().__init__()
        self.engine = engine  # for tests and the command line; the app itself uses only the door
        self.client = EngineClient(engine, masker)
        self.signals = EngineSignals(self)
        self.clock = clock
        self.settings = settings
        self.log_file = log_file
        self._start_engine = start_engine
        self._requested_theme = theme
        self._startup_problems: list[str] = []
        self._package_errors_said: set[str] = set()  # the package file errors toasted, until they go
        self._main = MainScreen(self.client, self.signals, clock, context)
        self._kube_context = context
        self._contexts = contexts
        self._events: deque[EngineSignal] = deque()
        self._events_posted = False
        self._unsubscribe = self.client.subscribe(self._on_engine_event)
        self._collector = Collector()
        self._register_themes()
        # Before the app runs: the stylesheet's refresh for the theme comes before any widget exists (set on
        # mount, it restyled every widget and laid the screen out again before the first table).
        self.theme = self._initial_theme()

    # -- lifecycle -------------------------------------------------------------------
    def get_default_screen(self) -> Screen[None]:
        return self._main

    def on_load(self) -> None:
        # Before the screens are composed and styled: storage's labels are listed meanwhile (the first rows
        # come sooner); what the engine says before the screens subscribe waits in the queue (on_engine_message).
        if self._start_engine:
            self.start_engine()

    def on_mount(self) -> None:
        self._remember_theme(self.current_theme)  # --theme, or the fallback from a theme that is gone
        self.theme_changed_signal.subscribe(self, self._remember_theme)
        self.signals.lease.subscribe(self, self._lease_changed, immediate=True)
        self.signals.controller.subscribe(self, self._controller_changed, immediate=True)
        self.signals.problems.subscribe(self, self._package_problems, immediate=True)
        self.signals.access.subscribe(self, self._access_problems, immediate=True)
        for problem in self._startup_problems:
            self.notify(problem, title="Theme problem", severity="error", timeout=20)
        self.set_interval(60.0, self._collector.reclaim)

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, (events.Key, events.MouseDown)):
            self._collector.input_seen()
        await super().on_event(event)

    @work(exclusive=True, group="engine", exit_on_error=False)
    async def start_engine(self) -> None:
        self._collector.pause()  # no full passes over the growing heap while the first table is made
        sys.setswitchinterval(SWITCH_INTERVAL)
        try:
            await self.client.start()
        except Exception as exc:  # the app stays up to show what it can, and says why
            log.exception("engine start failed")
            self.notify(f"{exc}\nDetails: {self._log_hint()}", title="Cannot start the engine",
                        severity="error", timeout=30)
        # What start-up made (every release's view, the table's rows) lives as long as the app: out of the
        # collector's full passes, which otherwise stall the event loop (tui/collector.py). Cancelled (the app
        # quit first): its unmount stopped the collector.
        self._collector.start()

    async def action_quit(self) -> None:
        """Quit; running helm actions may finish first (up to 30 s), and the screen says so."""
        running = [f"{v.running.action} {v.namespace}/{v.name}" for v in self.client.releases() if v.running]
        if running and self._start_engine:
            self.notify("Waiting up to 30 s for running helm actions to finish: " + ", ".join(running),
                        title="Quitting", timeout=35)
            await asyncio.sleep(0.1)  # let the notification draw
            await self.client.stop()
            self._start_engine = False  # stopped already
        self.exit()

    async def on_unmount(self) -> None:
        self._unsubscribe()
        self._collector.stop()
        if self._start_engine:
            await self.client.stop()

    # -- the controller view ------------------------------------------------------------
    def action_pulses(self, _shown: int = 0) -> None:
        """Open the controller view (P), or close it when it is open."""
        from tui.screens.pulses import PulsesScreen

        if isinstance(self.screen, PulsesScreen):
            self.pop_screen()
        else:
            self.push_screen(PulsesScreen(self.client, self.signals, self.clock))

    def _controller_changed(self, _event: ControllerChanged) -> None:
        self.refresh_bindings()

    # -- cluster contexts --------------------------------------------------------------
    def action_context(self) -> None:
        """Pick a kubeconfig context and rebuild the engine on it (filter and sort stay)."""
        self._pick_context()

    @work(group="context", exclusive=True, exit_on_error=False)
    async def _pick_context(self) -> None:
        if self._contexts is None:
            self.notify("This app was not given a kubeconfig to switch in", severity="warning")
            return
        try:
            names = self._contexts.names()
        except Exception as exc:  # a bad kubeconfig: say so, keep the current engine
            self.notify(str(exc), title="Cannot list contexts", severity="error")
            return
        initial = names.index(self._kube_context) if self._kube_context in names else 0
        choices = [(f"{n}  (current)" if n == self._kube_context else n, n) for n in names]
        chosen = await self.push_screen_wait(PickerScreen[str]("Switch cluster context:", choices, initial,
                                                               note="enter switches · escape cancels"))
        if chosen is None or chosen == self._kube_context:
            return
        try:
            engine = self._contexts.build(chosen)
        except (Exception, SystemExit) as exc:  # the command line's builder exits on a bad kubeconfig
            self.notify(f"{chosen}: {exc}", title="Cannot switch context", severity="error")
            return
        note = self._contexts.note(chosen)
        self.notify(f"Switching to context {chosen} …" + (f"\n{note}" if note else ""), timeout=10 if note else 3)
        old = [(v.namespace, v.name) for v in self.client.releases()]
        await self.client.stop()
        for key in old:  # the rows of the previous cluster go; the new engine announces its own
            self.signals.publish(ReleaseRemoved(key))
        self._kube_context = chosen
        self._main.set_context(chosen)
        try:
            await self.client.switch(engine)
        except Exception as exc:
            log.exception("engine start failed")
            self.notify(f"{exc}\nDetails: {self._log_hint()}", title="Cannot start the engine", severity="error")
        self.refresh_bindings()

    # -- themes ----------------------------------------------------------------------
    def _register_themes(self) -> None:
        folders: list[Path] = [SHIPPED_DIR]
        if self.settings is not None:
            folders.append(self.settings.themes_dir)
        themes, errors = load_themes(folders)
        # Textual's built-in themes were not made for this app (the ANSI ones cannot colour its
        # states): offer only helmdeck's and the user's, plus Textual's default as a last resort.
        for name in list(self.available_themes):
            if name != "textual-dark":
                self.unregister_theme(name)
        for theme in themes:
            self.register_theme(theme)
        self._startup_problems += [f"{err}; using the other themes" for err in errors]

    def _initial_theme(self) -> str:
        wanted = self._requested_theme
        if wanted is None and self.settings is not None:
            wanted, problem = self.settings.load_theme()
            if problem:
                self._startup_problems.append(problem)
        if wanted is None:
            return DEFAULT_THEME
        if wanted not in self.available_themes:
            names = ", ".join(sorted(n for n in self.available_themes if n.startswith("helmdeck")))
            self._startup_problems.append(f"theme {wanted!r} is not installed (helmdeck themes: {names}; "
                                          f"user themes go in the settings folder's themes/); using {DEFAULT_THEME}")
            return DEFAULT_THEME
        return wanted

    def _remember_theme(self, theme: Theme) -> None:
        if self.settings is None:
            return
        try:
            self.settings.save_theme(theme.name)
        except OSError as exc:
            self.notify(f"Cannot save the theme choice to {self.settings.file}: {exc}", severity="warning")

    # -- engine events ------------------------------------------------------------------
    def _on_engine_event(self, event: EngineSignal) -> None:
        # Appended before the flag is read: either a drain under way takes it, or a new message is posted.
        self._events.append(event)
        if not self._events_posted:
            self._events_posted = True
            self.post_message(EngineMessage())

    def on_engine_message(self, _message: EngineMessage) -> None:
        self._events_posted = False
        while self._events:
            self.signals.publish(self._events.popleft())

    def _lease_changed(self, _lease: LeaseChanged) -> None:
        self.refresh_bindings()

    def _package_problems(self, event: PackageProblems) -> None:
        # Each error once: a reload after another file's change says the same errors again (toasts piled up).
        said, self._package_errors_said = self._package_errors_said, {str(err) for err in event.errors}
        for err in event.errors:
            if str(err) not in said:
                self.notify(str(err), title="Package file error", severity="error", timeout=20)

    def _access_problems(self, event: AccessProblems) -> None:
        for missing in event.missing:  # the header keeps them; a toast makes them seen
            self.notify(missing, title="Missing permission", severity="error", timeout=30)

    @on(OpenDetail)
    def _open_detail(self, message: OpenDetail) -> None:
        from tui.screens.detail import ReleaseDetailScreen

        self.push_screen(ReleaseDetailScreen(self.client, self.signals, message.key, self.clock))

    # -- availability (the engine's answer, worded once) -----------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Operations: hidden in read-only mode and where the selected row has no such key (a Flux row's
        rollback, maintenance and uninstall: engine.runtime.ledger.owners.has_key), shown disabled while the
        engine cannot do them. A hidden key still says why, through its fallback (operation_bindings)."""
        if action == "pulses":
            return not parameters[0] or bool(self.client.controllers() or self.client.pulse_sources())
        if action != "operation":
            return True
        if self.client.readonly:
            return False
        name = str(parameters[0])
        if _no_release_on(self.screen, BY_NAME[name]):
            return False  # the key falls through to its refusal, which says so
        if BY_NAME[name].per_release and isinstance(self.screen, SelectsRelease):
            key = self._selected(self.screen)
            if key is not None and not has_key(self.client.owner(key), name):
                return False
        return True if self.client.why_not(name) is None else None

    def refusal(self, name: str) -> str:
        """Why operation ``name`` cannot run now on the screen shown (on its selected release, if it acts on one)."""
        return self._reason(BY_NAME[name], self.screen) or "available"

    def action_refuse(self, name: str) -> None:
        """A disabled or hidden operation's key: say why nothing happens."""
        self.notify(f"{BY_NAME[name].label}: {self.refusal(name)}", title="Not available", severity="warning")

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Context (C)", "Switch the cluster context: the kubeconfig's contexts, as k9s's :ctx",
                            self.action_context)
        yield SystemCommand("Controller view (P)", "The cluster's helmdeck controllers: reconciles per minute, queue "
                            "depth, helm action durations, live", self.action_pulses)
        yield SystemCommand("Help (?)", "Every key, what each action does and why one is unavailable",
                            self.action_help)
        errors = self.client.package_problems().errors
        if errors:  # the toasts go after a while; the header names only the files
            yield SystemCommand(f"Package file errors ({len(errors)})", "Every error of the package files, again",
                                self.show_package_errors)
        if self.client.readonly:
            return
        for op in OPERATIONS:
            reason = self._reason(op, screen)
            text = op.summary if reason is None else f"Unavailable: {reason}"
            yield SystemCommand(f"{op.label} ({op.key_display})", text, partial(self._palette_action, op.name))

    def show_package_errors(self) -> None:
        """Every package file error now, in one notification."""
        errors = self.client.package_problems().errors
        self.notify("\n".join(str(err) for err in errors) or "none", title=f"Package file errors ({len(errors)})",
                    severity="error" if errors else "information", timeout=60)

    def _palette_action(self, name: str) -> None:
        if self.check_action("operation", (name,)):
            self.action_operation(name)
        else:
            self.action_refuse(name)

    def _selected(self, screen: Screen[Any]) -> ReleaseKey | None:
        selected = screen.selected_release() if isinstance(screen, SelectsRelease) else None
        return selected if selected is not None and self.client.release(selected) is not None else None

    def _reason(self, op: Operation, screen: Screen[Any]) -> str | None:
        """Why ``op`` may not run now on the release selected on ``screen`` (the gate, then the operation's
        precheck, as the runner asks them), for help and the palette; None: it may."""
        if _no_release_on(screen, op):
            return NO_RELEASE_HERE
        key = self._selected(screen) if op.per_release else None
        if key is None:
            return self.client.why_not(op.name)
        ctx = Context(self.client, key, self.client.release(key), self.clock(), None, self._pick)
        return self.client.why_not(op.name, key) or op.precheck(ctx)

    def action_help(self) -> None:
        from tui.screens.help import HelpFacts, HelpScreen

        reasons = {op.name: self._reason(op, self.screen) for op in OPERATIONS}
        settings = str(self.settings.directory) if self.settings else None
        key = self._selected(self.screen)
        self.push_screen(HelpScreen(HelpFacts(reasons, self.client.readonly, self._log_hint(), settings,
                                              self.theme, f"{key[0]}/{key[1]}" if key else "")))

    # -- the one runner ------------------------------------------------------------------
    def _log_hint(self) -> str:
        return str(self.log_file) if self.log_file else "the helmdeck log (--log-file)"

    def action_operation(self, name: str) -> None:
        """Run operation ``name`` on the selected release: precheck now, the rest as a worker."""
        op, screen, key = BY_NAME[name], self.screen, ALL_RELEASES
        if op.per_release:
            selected = screen.selected_release() if isinstance(screen, SelectsRelease) else None
            if selected is None or self.client.release(selected) is None:
                self.notify("No release selected", severity="warning")
                return
            key = selected
        target = screen.rollback_target() if isinstance(screen, PicksRollback) else None
        ctx = Context(self.client, key, self.client.release(key), self.clock(), target, self._pick)
        why = self.client.why_not(op.name, key if op.per_release else None)
        if why is not None:
            self.notify(f"{op.label}: {why}", title="Not available", severity="warning")
            return
        problem = op.precheck(ctx) if op.per_release else None
        if problem is not None:
            self.notify(problem, severity="warning")
            return
        self._run(op, ctx)

    @work(group="operations", exit_on_error=False)
    async def _run(self, op: Operation, ctx: Context) -> None:
        prepared = await self._guard(op.preview or f"{op.label} {ctx.ref}", op.prepare(ctx))
        if prepared is None:
            return
        step = prepared[0]
        if isinstance(step, Notice):
            self._notice(step)
            return
        call = step.call
        if step.confirmation is not None:
            from tui.screens.confirm import ConfirmScreen

            choice = await self.push_screen_wait(ConfirmScreen(step.confirmation))
            if not choice:
                return
            if choice == "alternative" and step.alternative is not None:
                call = step.alternative
        attached = ctx.view is not None and (ctx.view.attached is not None or ctx.view.flux is not None)
        if step.starting and not attached:  # a request is written at once: the controller acts
            self.notify(step.starting)
        done = await self._guard(step.what, call())
        if done is None:
            return
        if isinstance(done[0], Requested):  # the gate's wording: the controller carries it out
            self.notify(done[0].text, title=f"{op.label} {ctx.ref}: requested")
        else:
            self._report(ctx.key, step.report(done[0]))

    async def _pick(self, title: str, choices: list[tuple[str, int]], initial: int) -> int | None:
        return await self.push_screen_wait(PickerScreen[int](title, choices, initial,
                                                             note="enter picks · escape cancels"))

    async def _guard(self, what: str, call: Awaitable[T]) -> tuple[T] | None:
        """Await ``call``: its result (in a 1-tuple), or None when it was refused or failed (notified)."""
        try:
            return (await call,)
        except ActionRefused as exc:
            self.notify(str(exc), title=f"{what}: refused", severity="warning", timeout=10)
        except NotAvailable as exc:
            self.notify(str(exc), title=f"{what}: not available", severity="warning", timeout=10)
        except Exception as exc:  # any engine failure: reported, never a crash
            log.exception("%s failed", what)
            self.notify(f"{exc}\nDetails: {self._log_hint()}", title=f"{what} failed", severity="error",
                        timeout=20)
        return None

    def _notice(self, notice: Notice) -> None:
        if not notice.message:
            return  # cancelled: nothing to say
        if notice.timeout is None:
            self.notify(notice.message, title=notice.title, severity=notice.severity)
        else:
            self.notify(notice.message, title=notice.title, severity=notice.severity, timeout=notice.timeout)

    def _report(self, key: ReleaseKey, report: Report) -> None:
        if not isinstance(report, ActionOutcome):
            if report is not None:
                self._notice(report)
            return
        title = f"{report.action} {key[0]}/{key[1]}"
        if report.ok:
            self.notify(report.message, title=title)
        else:
            detail = "\n".join(report.tail[-4:])
            self.notify(f"{report.message}\n{detail}\nMore: the release's Events tab, {self._log_hint()}".strip(),
                        title=title, severity="error", timeout=20)
