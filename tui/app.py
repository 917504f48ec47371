"""The helmdeck app: every release live, with keys for every action an operator needs.

The app carries engine events to the screens (method calls down), turns the
screens' requests (messages up) and action keys into engine calls run as
workers, and owns what is app-wide: themes, settings, the help screen and
the command palette. Every engine call is guarded: a failure becomes a
notification saying what failed and where to look, never a crash.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Iterable
from functools import partial
from pathlib import Path
from typing import Any, Protocol, TypeVar, runtime_checkable

from textual import on, work
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.theme import Theme

from engine.masking import Masker
from engine.package import NO_RESOURCE_RECONCILIATION
from engine.runtime import Engine, EngineEvent, PackageProblems, ReleaseRemoved, ReleaseUpdated
from engine.runtime.engine import ActionRefused, NotAvailable
from engine.runtime.state import ActionOutcome, CleanupItem, EventLogged, LeaseChanged, ReleaseKey, ReleaseView
from tui import confirmations
from tui.actions import ACTIONS, BY_NAME, action_bindings
from tui.confirmations import Confirmation
from tui.engine_client import EngineClient
from tui.manifest import objects
from tui.messages import EngineMessage, OpenDetail
from tui.screens.confirm import ConfirmScreen
from tui.screens.detail import ReleaseDetailScreen
from tui.screens.help import HelpFacts, HelpScreen
from tui.screens.main import MainScreen
from tui.screens.picker import PickerScreen
from tui.settings import Settings
from tui.themes import DEFAULT_THEME, SHIPPED_DIR, load_themes
from tui.widgets.overview import previous_snapshot

log = logging.getLogger(__name__)
T = TypeVar("T")


@runtime_checkable
class SelectsRelease(Protocol):
    """A screen whose actions act on one release (the main list's cursor, a detail screen's release)."""

    def selected_release(self) -> ReleaseKey | None: ...


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
        *action_bindings(),
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
    ):
        super().__init__()
        self.engine = engine
        self.client = EngineClient(engine)
        self.context = context
        self.clock = clock
        self.settings = settings
        self.log_file = log_file
        self.masker = masker or engine.masker
        self._start_engine = start_engine
        self._requested_theme = theme
        self._startup_problems: list[str] = []
        self._main = MainScreen(self.client, clock, context)
        self._unsubscribe = engine.subscribe(self._on_engine_event)
        self._register_themes()

    # -- lifecycle -------------------------------------------------------------------
    def get_default_screen(self) -> Screen[None]:
        return self._main

    def on_mount(self) -> None:
        self.theme = self._initial_theme()
        self.theme_changed_signal.subscribe(self, self._remember_theme)
        for problem in self._startup_problems:
            self.notify(problem, title="Theme problem", severity="error", timeout=20)
        if self._start_engine:
            self.start_engine()

    @work(exclusive=True, group="engine", exit_on_error=False)
    async def start_engine(self) -> None:
        try:
            await self.engine.start()
        except Exception as exc:  # the app stays up to show what it can, and says why
            log.exception("engine start failed")
            self.notify(f"{exc}\nDetails: {self._log_hint()}", title="Cannot start the engine",
                        severity="error", timeout=30)

    async def action_quit(self) -> None:
        """Quit; running helm actions may finish first (up to 30 s), and the screen says so."""
        running = [f"{v.running.action} {v.namespace}/{v.name}" for v in self.engine.releases() if v.running]
        if running and self._start_engine:
            self.notify("Waiting up to 30 s for running helm actions to finish: " + ", ".join(running),
                        title="Quitting", timeout=35)
            await asyncio.sleep(0.1)  # let the notification draw
            await self.engine.stop()
            self._start_engine = False  # stopped already
        self.exit()

    async def on_unmount(self) -> None:
        self._unsubscribe()
        if self._start_engine:
            await self.engine.stop()

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
    def _on_engine_event(self, event: EngineEvent) -> None:
        self.post_message(EngineMessage(event))

    def on_engine_message(self, message: EngineMessage) -> None:
        event = message.event
        if isinstance(event, ReleaseUpdated):
            self._main.release_updated(event.view)
            for screen in self._detail_screens(event.view.key):
                screen.release_updated(event.view)
        elif isinstance(event, ReleaseRemoved):
            self._main.release_removed(event.key)
            for screen in self._detail_screens(event.key):
                screen.release_updated(None)
        elif isinstance(event, EventLogged):
            for screen in self._detail_screens(event.event.key):
                screen.event_logged(event.event)
        elif isinstance(event, LeaseChanged):
            self._main.lease_changed(event)
            self.refresh_bindings()
        elif isinstance(event, PackageProblems):
            self._main.package_problems(tuple(sorted({err.file.name for err in event.errors})))
            for err in event.errors:
                self.notify(str(err), title="Package file error", severity="error", timeout=20)

    def _detail_screens(self, key: ReleaseKey | None = None) -> Iterable[ReleaseDetailScreen]:
        for screen in self.screen_stack:
            if isinstance(screen, ReleaseDetailScreen) and (key is None or screen.key == key):
                yield screen

    @on(OpenDetail)
    def _open_detail(self, message: OpenDetail) -> None:
        self.push_screen(ReleaseDetailScreen(self.client, message.key, self.clock, self.masker))

    # -- availability --------------------------------------------------------------------
    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """Mutating actions: hidden in read-only mode, shown disabled while the engine cannot do them."""
        info = BY_NAME.get(action)
        if info is None:
            return True
        if self.client.readonly:
            return False
        return True if self.client.reason(info.capability) is None else None

    def refusal(self, name: str) -> str:
        """Why action ``name`` cannot run now."""
        if self.client.readonly:
            return "helmdeck runs read-only (--readonly): actions are disabled"
        return self.client.reason(BY_NAME[name].capability) or "available"

    def action_refuse(self, name: str) -> None:
        """A disabled action's key: say why nothing happens."""
        self.notify(f"{BY_NAME[name].label}: {self.refusal(name)}", title="Not available", severity="warning")

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        yield SystemCommand("Help (?)", "Every key, what each action does and why one is unavailable",
                            self.action_help)
        if self.client.readonly:
            return
        for info in ACTIONS:
            reason = self.client.reason(info.capability)
            text = info.summary if reason is None else f"Unavailable: {reason}"
            yield SystemCommand(f"{info.label} ({info.key_display})", text, partial(self._palette_action, info.name))

    def _palette_action(self, name: str) -> None:
        if self.check_action(name, ()):
            getattr(self, f"action_{name}")()
        else:
            self.action_refuse(name)

    def action_help(self) -> None:
        reasons = {a.name: self.client.reason(a.capability) for a in ACTIONS}
        settings = str(self.settings.directory) if self.settings else None
        self.push_screen(HelpScreen(HelpFacts(reasons, self.client.readonly, self._log_hint(), settings,
                                              self.theme)))

    # -- guarded engine calls ----------------------------------------------------------
    def _log_hint(self) -> str:
        return str(self.log_file) if self.log_file else "the helmdeck log (--log-file)"

    async def _guard(self, what: str, call: Awaitable[T]) -> T | None:
        """Await ``call``; refusals and failures become notifications (None returned)."""
        try:
            return await call
        except ActionRefused as exc:
            self.notify(str(exc), title=f"{what}: refused", severity="warning", timeout=10)
        except NotAvailable as exc:
            self.notify(str(exc), title=f"{what}: not available", severity="warning", timeout=10)
        except Exception as exc:  # any engine failure: reported, never a crash
            log.exception("%s failed", what)
            self.notify(f"{exc}\nDetails: {self._log_hint()}", title=f"{what} failed", severity="error",
                        timeout=20)
        return None

    def _report(self, key: ReleaseKey, outcome: ActionOutcome) -> None:
        title = f"{outcome.action} {key[0]}/{key[1]}"
        if outcome.ok:
            self.notify(outcome.message, title=title)
        else:
            detail = "\n".join(outcome.tail[-4:])
            self.notify(f"{outcome.message}\n{detail}\nMore: the release's Events tab, {self._log_hint()}".strip(),
                        title=title, severity="error", timeout=20)

    def _confirm(self, confirmation: Confirmation, then: Callable[[], object]) -> None:
        def answered(ok: bool | None) -> None:
            if ok:
                then()

        self.push_screen(ConfirmScreen(confirmation), answered)

    def _selected(self) -> tuple[ReleaseKey, ReleaseView] | None:
        screen = self.screen
        key = screen.selected_release() if isinstance(screen, SelectsRelease) else None
        view = self.client.release(key) if key is not None else None
        if key is None or view is None:
            self.notify("No release selected", severity="warning")
            return None
        return key, view

    @staticmethod
    def _ref(key: ReleaseKey) -> str:
        return f"{key[0]}/{key[1]}"

    # -- upgrade ---------------------------------------------------------------------
    def action_upgrade(self) -> None:
        picked = self._selected()
        if picked is None:
            return
        key, view = picked
        if not self.client.has_package(key):
            self.notify(f"No package declares {self._ref(key)}: nothing to upgrade it to "
                        "(add a package file for it)", severity="warning")
            return
        if self.client.reason("diff") is None or view.maintenance:
            self._preview_upgrade(key, view)
        else:
            self._run_upgrade(key)

    @work(group="actions", exit_on_error=False)
    async def _preview_upgrade(self, key: ReleaseKey, view: ReleaseView) -> None:
        diff: str | None = None
        reason = self.client.reason("diff")
        if reason is None:
            try:
                diff = await self.client.desired_diff(key)
            except Exception as exc:  # the preview is optional: say why it is missing, still offer to upgrade
                log.exception("diff of %s failed", key)
                reason = f"the diff failed ({exc})"
        self._confirm(confirmations.upgrade(view, diff, reason), lambda: self._run_upgrade(key))

    @work(group="actions", exit_on_error=False)
    async def _run_upgrade(self, key: ReleaseKey) -> None:
        self.notify(f"Upgrading {self._ref(key)} …")
        outcome = await self._guard(f"Upgrade {self._ref(key)}", self.client.upgrade(key))
        if outcome is not None:
            self._report(key, outcome)

    # -- rollback ----------------------------------------------------------------------
    def action_rollback(self) -> None:
        picked = self._selected()
        if picked is None:
            return
        key = picked[0]
        history = self.client.history(key)
        if len(history) < 2:
            self.notify(f"{self._ref(key)} has no earlier revision to roll back to", severity="warning")
            return
        current = history[0]
        screen = self.screen
        target = screen.rollback_target() if isinstance(screen, ReleaseDetailScreen) else None
        if target is not None and target != current.version:
            self._confirm_rollback(key, target)
            return
        choices = [(f"revision {o.version}  {o.status:<11} {o.chart_name}@{o.chart_version}  "
                    f"app {o.app_version or '-'}  {o.description}", o.version) for o in history[1:]]
        previous = previous_snapshot(history)
        initial = next((i for i, o in enumerate(history[1:]) if previous and o.version == previous.version), 0)

        def chosen(revision: int | None) -> None:
            if revision is not None:
                self._confirm_rollback(key, revision)

        self.push_screen(PickerScreen[int](f"Roll back {self._ref(key)} (now revision {current.version}) to:",
                                           choices, initial, note="enter picks · escape cancels"), chosen)

    def _confirm_rollback(self, key: ReleaseKey, revision: int) -> None:
        history = self.client.history(key)
        view = self.client.release(key)
        target = next((o for o in history if o.version == revision), None)
        if view is None or not history or target is None:
            self.notify(f"{self._ref(key)} has no stored revision {revision}", severity="warning")
            return
        if target.version == history[0].version:
            self.notify(f"Revision {revision} is the current revision of {self._ref(key)}", severity="warning")
            return
        self._confirm(confirmations.rollback(view, history[0], target), lambda: self._run_rollback(key, revision))

    @work(group="actions", exit_on_error=False)
    async def _run_rollback(self, key: ReleaseKey, revision: int) -> None:
        self.notify(f"Rolling back {self._ref(key)} to revision {revision} …")
        outcome = await self._guard(f"Roll back {self._ref(key)}", self.client.rollback(key, revision))
        if outcome is not None:
            self._report(key, outcome)

    # -- test ------------------------------------------------------------------------
    def action_test(self) -> None:
        picked = self._selected()
        if picked is not None:
            self._run_test(picked[0])

    @work(group="actions", exit_on_error=False)
    async def _run_test(self, key: ReleaseKey) -> None:
        self.notify(f"Testing {self._ref(key)} …")
        outcome = await self._guard(f"Test {self._ref(key)}", self.client.test(key))
        if outcome is not None:
            self._report(key, outcome)

    # -- monitor -------------------------------------------------------------------------
    def action_monitor(self) -> None:
        picked = self._selected()
        if picked is not None:
            key, view = picked
            self._run_monitor(key, resume=view.monitor.state == "paused")

    @work(group="actions", exit_on_error=False)
    async def _run_monitor(self, key: ReleaseKey, resume: bool) -> None:
        call = self.client.resume_monitor(key) if resume else self.client.pause_monitor(key)
        verb = "Resume" if resume else "Pause"
        counter = await self._guard(f"{verb} monitor of {self._ref(key)}", call)
        if counter is not None:  # the count the engine returned: the row's event may still be on its way
            state = f"paused ×{counter}" if counter else "active"
            self.notify(f"Monitor of {self._ref(key)}: {state} (pause counter {counter})")

    # -- maintenance -----------------------------------------------------------------------
    def action_maintenance(self) -> None:
        picked = self._selected()
        if picked is None:
            return
        key, view = picked
        if not self.client.has_package(key):
            self.notify(f"No package declares {self._ref(key)}: maintenance is a package mode", severity="warning")
            return
        entering = not view.maintenance
        mode = NO_RESOURCE_RECONCILIATION if entering else ""
        self._confirm(confirmations.maintenance(view, entering), lambda: self._run_maintenance(key, mode))

    @work(group="actions", exit_on_error=False)
    async def _run_maintenance(self, key: ReleaseKey, mode: str) -> None:
        what = f"{'Enter' if mode else 'Leave'} maintenance of {self._ref(key)}"
        result = await self._guard(what, self.client.set_maintenance(key, mode))
        if result is not None:
            self.notify(f"{self._ref(key)}: {'in maintenance' if mode else 'out of maintenance'}")

    # -- suspend ---------------------------------------------------------------------------
    def action_suspend(self) -> None:
        picked = self._selected()
        if picked is None:
            return
        key, view = picked
        if view.suspended:
            self._confirm(confirmations.resume(view), lambda: self._set_suspended(key, False))
        else:
            self._set_suspended(key, True)

    def _set_suspended(self, key: ReleaseKey, suspended: bool) -> None:
        verb = "Suspend" if suspended else "Resume"
        try:
            self.client.suspend(key, suspended)
        except (ActionRefused, NotAvailable) as exc:
            self.notify(str(exc), title=f"{verb} {self._ref(key)}: refused", severity="warning")
            return
        except Exception as exc:  # reported, never a crash
            log.exception("%s failed", verb)
            self.notify(f"{exc}\nDetails: {self._log_hint()}", title=f"{verb} failed", severity="error")
            return
        self.notify(f"Reconciliation of {self._ref(key)} {'suspended' if suspended else 'resumed'}")

    # -- unlock ---------------------------------------------------------------------------
    def action_unlock(self) -> None:
        picked = self._selected()
        if picked is None:
            return
        key, view = picked
        obs = view.observation
        if obs is None or not obs.status.startswith("pending"):
            status = obs.status if obs else "not installed"
            self.notify(f"{self._ref(key)} is {status}, not pending: nothing to unlock", severity="warning")
            return
        self._confirm(confirmations.unlock(view, self.clock()), lambda: self._run_unlock(key))

    @work(group="actions", exit_on_error=False)
    async def _run_unlock(self, key: ReleaseKey) -> None:
        result = await self._guard(f"Unlock {self._ref(key)}", self.client.unlock(key))
        if isinstance(result, ActionOutcome):
            self._report(key, result)
        elif result is not None:
            self.notify(f"{self._ref(key)} unlocked")

    # -- cleanup --------------------------------------------------------------------------
    def action_cleanup(self) -> None:
        self._preview_cleanup()

    @work(group="actions", exit_on_error=False)
    async def _preview_cleanup(self) -> None:
        items = await self._guard("Cleanup (dry run)", self.client.cleanup(dry_run=True))
        if items is None:
            return
        confirmation = confirmations.cleanup(items)
        if not any(i.result == "would-remove" for i in items):
            self.notify(confirmation.body, title=confirmation.title)  # nothing to confirm
            return
        self._confirm(confirmation, self._run_cleanup)

    @work(group="actions", exit_on_error=False)
    async def _run_cleanup(self) -> None:
        items = await self._guard("Cleanup", self.client.cleanup(dry_run=False))
        if items is not None:
            self._report_cleanup(items)

    def _report_cleanup(self, items: list[CleanupItem]) -> None:
        removed = [f"{i.namespace}/{i.name}" for i in items if i.result == "removed"]
        failed = [f"{i.namespace}/{i.name}: {i.message}" for i in items if i.result == "failed"]
        text = f"Removed {len(removed)}: {', '.join(removed) or '-'}"
        if failed:
            self.notify(f"{text}\nFailed {len(failed)}:\n" + "\n".join(failed), title="Cleanup", severity="error",
                        timeout=20)
        else:
            self.notify(text, title="Cleanup")

    # -- uninstall ------------------------------------------------------------------------
    def action_uninstall(self) -> None:
        picked = self._selected()
        if picked is None:
            return
        key, view = picked
        if view.observation is None or view.observation.status == "uninstalled":
            self.notify(f"{self._ref(key)} is not installed: nothing to uninstall", severity="warning")
            return
        self._preview_uninstall(key, view)

    @work(group="actions", exit_on_error=False)
    async def _preview_uninstall(self, key: ReleaseKey, view: ReleaseView) -> None:
        assert view.observation is not None  # checked by action_uninstall
        try:
            manifest = await self.client.manifest(key, view.observation.version)
            found, problem = objects(manifest, key[0]), None
        except Exception as exc:  # the list is informative: say why it is missing, still offer to uninstall
            log.exception("manifest of %s failed", key)
            found, problem = None, str(exc)
        self._confirm(confirmations.uninstall(view, found, problem), lambda: self._run_uninstall(key))

    @work(group="actions", exit_on_error=False)
    async def _run_uninstall(self, key: ReleaseKey) -> None:
        self.notify(f"Uninstalling {self._ref(key)} …")
        outcome = await self._guard(f"Uninstall {self._ref(key)}", self.client.uninstall(key))
        if outcome is not None:
            self._report(key, outcome)


def default_packages_dir() -> Path:
    """The examples/packages folder of a source checkout."""
    return Path(__file__).resolve().parent.parent / "examples" / "packages"
