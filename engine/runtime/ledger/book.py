"""The release book: the one holder of per-release state and the projection the app shows.

For every release the engine knows (stored in Helm storage, declared by a
package, or with an unreadable record) the book holds the declared package
spec, the engine status (history, counters, conditions, overrides; persisted
in the cluster), the last pass's release state, the monitor's status, the
action running on it and its event log. From these and the observer's
latest revision it makes :class:`~engine.runtime.state.ReleaseView`, the one
row the app renders, and announces every change to its subscribers
(:data:`~engine.runtime.state.EngineSignal`). It also owns the per-release
running-action guard: at most one action of this engine runs on a release.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import logging
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Collection, Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from engine.base.listeners import Listeners
from engine.monitor.status import MonitorStatus
from engine.package.model import PackageSpec
from engine.reconcile import conditions as cond
from engine.reconcile import state as st
from engine.reconcile.options import kube_user
from engine.reconcile.request import Request
from engine.reconcile.state import FAILED
from engine.reconcile.status import ActionOutcome, EngineStatus
from engine.reconcile.store import StatusStore
from engine.reconcile.uninstall import Uninstall
from engine.reconcile.uninstall_remediation import UninstallRemediation
from engine.resolve.release import CACHE as RESOLVED
from engine.runtime.state import (
    EngineSignal,
    EntryLogged,
    LogEntry,
    ReleaseKey,
    ReleaseRemoved,
    ReleasesListed,
    ReleaseUpdated,
    ReleaseView,
    RunningAction,
)
from engine.sources.updates import AvailableVersions, newer
from engine.storage.helmtime import helm_time
from engine.storage.observation import Observation
from engine.storage.observer import Observer
from engine.storage.records import ListedRevision

log = logging.getLogger(__name__)

EVENT_LOG_SIZE = 200
KEEP = object()  # set_status: leave the release state as it is
Subscriber = Callable[[EngineSignal], None]
# The release state before a pass decided it: (key, latest observation) -> state or None.


class ActionRefused(RuntimeError):
    """An action was not started (busy release, no package, read-only, ...)."""


class BadPackageFiles(ActionRefused):
    """Cleanup or prune refused while package files have errors: the release a bad file declares would look
    removed (as Flux's kustomize-controller garbage-collects nothing while its build fails). ``files``: the bad
    files, sorted."""

    def __init__(self, action: str, files: Collection[Path]):
        self.files = sorted(set(files))
        names = ", ".join(f.name for f in self.files[:3]) + (" …" if len(self.files) > 3 else "")
        super().__init__(f"{len(self.files)} package file(s) have errors ({names}): the release a bad file "
                         f"declares would look removed, so {action} removes nothing until they are fixed (helmdeck "
                         "plan lists the errors)")


class ActionCancelled(ActionRefused):
    """The action was cancelled by the operator (:meth:`ReleaseBook.cancel`) before it finished."""


class NotAvailable(RuntimeError):
    """This engine cannot perform the action at all; the message says why."""


# The engine's actions that uninstall a release: a stored status they were last is current with nothing stored.
UNINSTALLS = frozenset({Uninstall.name, UninstallRemediation.name})
GOING = frozenset({"uninstalling", "uninstalled"})  # a revision as helm's uninstall leaves it before it is purged
STARTED_GRACE = 5.0  # seconds past its timeout a controller's started action is still shown running
CATCH_UP = 10.0  # seconds a claim waits for this replica's storage watch to show a revision another replica made


@dataclasses.dataclass(frozen=True)
class TargetChange:
    """A release a package drove before its release target changed (:meth:`ReleaseBook.target_change`):
    ``previous`` (``(namespace, name)``), the namespace it is stored in (``stored_in``), and why it goes."""

    previous: ReleaseKey
    stored_in: str
    why: str


def busy_reason(key: ReleaseKey, running: RunningAction | None) -> str:
    """The one wording for "an action already runs on this release"."""
    action = running.action if running is not None else "an action"
    return f"{action} is already running on {key[0]}/{key[1]}"


def _controller_running(obs: Observation | None, spec: PackageSpec,
                        started: RunningAction | None = None) -> RunningAction | None:
    """The action a controller runs on a release: the one its latest ``<Action>Started`` Event names
    (``started``, no end of it seen since: engine.runtime.cockpit.attach), until its helm timeout (plus
    STARTED_GRACE seconds: an end Event lost with its controller does not show it running for ever); else as
    its pending revision shows it (``pending-upgrade``: upgrade, since Helm stamped it, within the package's
    timeout). The Event names what no revision shows (a test, a drift correction, the time before helm writes)."""
    if started is not None and time.time() < started.started + started.timeout + STARTED_GRACE:
        return started
    if obs is None or not obs.is_pending:
        return None
    return RunningAction(obs.status.removeprefix("pending-"), helm_time(obs.last_deployed) or time.time(),
                         spec.action_timeout(obs.status))


class ReleaseBook:
    """Per-release state of one engine; see the module docstring.

    ``observer`` supplies the stored revisions; ``store`` persists engine statuses (None: nothing is persisted,
    e.g. offline); ``writable`` says whether this instance may write them
    (not read-only, holding the lease); ``let_go(key)`` is awaited when the running-action guard lets a
    release go, before another action may take it (shards: the actor claim persisted and cleared,
    :meth:`engine.runtime.cluster.shards.Shards.let_go`).
    """

    def __init__(
        self,
        observer: Observer,
        *,
        store: StatusStore | None = None,
        writable: Callable[[], bool] = lambda: True,
        let_go: Callable[[ReleaseKey], Awaitable[None]] | None = None,
    ):
        self.observer = observer
        # A declared package's release is read from the storage namespace it declares (Flux's storageNamespace),
        # not another storage's records of a release of that name (one left by a storage namespace change).
        observer.set_storage_of(self._storage_of)
        self.store = store
        self._writable = writable
        self.packages: dict[ReleaseKey, PackageSpec] = {}
        self._statuses: dict[ReleaseKey, EngineStatus] = {}
        # package (``namespace/name``) -> the keys whose status names it and holds a history, made when first asked
        # after a status changed (None): previous_target asks it per package, plan and the first screen for each.
        self._drove: dict[str, tuple[ReleaseKey, ...]] | None = None
        self._states: dict[ReleaseKey, str] = {}
        self._monitors: dict[ReleaseKey, MonitorStatus] = {}
        self._warnings: dict[ReleaseKey, int] = {}
        self._offered: dict[ReleaseKey, AvailableVersions | None] = {}  # what its chart's repository offers
        self._flux_owned: set[ReleaseKey] = set()  # HelmRelease documents whose HelmRelease the cluster holds
        self._file_problems: dict[Path, str] = {}  # a bad package file -> its first error
        self._views: dict[ReleaseKey, ReleaseView] = {}
        # Releases whose package is a Package object a live controller reconciles: their view's fields
        # from the object (engine.runtime.cockpit.attach); a package of this engine's own wins.
        self._attached: dict[ReleaseKey, dict[str, Any]] = {}
        # Releases a HelmRelease object in the cluster owns: their view's fields from it (Flux's cockpit,
        # engine.runtime.cockpit.flux).
        self._flux: dict[ReleaseKey, dict[str, Any]] = {}
        self._events: dict[ReleaseKey, deque[LogEntry]] = {}
        self._locks: dict[ReleaseKey, asyncio.Lock] = {}
        self._holders: dict[ReleaseKey, asyncio.Task[Any]] = {}  # the task running each held release's action
        self._cancelled: set[ReleaseKey] = set()
        # Stored statuses not taken on load (left behind by something else): (object, why), for `status -o json`.
        self._dropped: dict[ReleaseKey, tuple[str, str]] = {}
        self._subscribers: Listeners[[EngineSignal]] = Listeners("engine subscriber")
        self._said: dict[type, EngineSignal] = {}
        # True while the engine starts (storage listed, statuses read): a view made then would show a release
        # as absent or unmanaged for a moment, so none is made until its state can be known.
        self.reading = False
        # Masks the secrets the engine knows in what the book keeps and says (set to the engine's masker's scrub).
        self.scrub: Callable[[str], str] = lambda text: text
        self._let_go = let_go

    # -- subscribers ---------------------------------------------------------------
    def subscribe(self, callback: Subscriber) -> Callable[[], None]:
        """Call ``callback`` with every :data:`EngineSignal`; returns an unsubscribe function."""
        return self._subscribers.add(callback)

    def emit(self, event: EngineSignal) -> None:
        """Give ``event`` to every subscriber (a failing subscriber is logged, the rest still get it)."""
        self._subscribers.emit(event)

    def emit_changed(self, event: EngineSignal, *, unsaid: EngineSignal | None = None) -> None:
        """:meth:`emit` an engine-wide event unless it equals the last one of its kind said
        (``unsaid``: what counts as said before the first)."""
        if self._said.get(type(event), unsaid) != event:
            self._said[type(event)] = event
            self.emit(event)

    # -- reading -------------------------------------------------------------------
    def views(self) -> list[ReleaseView]:
        """Every known release, sorted by namespace and name."""
        return [self._views[k] for k in sorted(self._views)]

    def view(self, key: ReleaseKey) -> ReleaseView | None:
        return self._views.get(key)

    def known(self) -> list[ReleaseKey]:
        """Every release with a view."""
        return list(self._views)

    def status(self, key: ReleaseKey) -> EngineStatus | None:
        """The package's engine status, if any."""
        return self._statuses.get(key)

    def state(self, key: ReleaseKey) -> str | None:
        return self._states.get(key)

    def events(self, key: ReleaseKey) -> list[LogEntry]:
        """The release's event log, oldest first (at most the last :data:`EVENT_LOG_SIZE`)."""
        return list(self._events.get(key, ()))

    def maintenance(self, key: ReleaseKey) -> str:
        """The effective maintenance mode: set from the app (kept in the status), else the package file's."""
        status = self._statuses.get(key)
        if status is not None and status.maintenance is not None:
            return status.maintenance
        pkg = self.packages.get(key)
        return pkg.maintenance if pkg else ""

    def suspended(self, key: ReleaseKey) -> bool:
        """Suspended by the package file or by the operator (kept in the status)."""
        pkg = self.packages.get(key)
        status = self._statuses.get(key)
        return bool((pkg and pkg.suspend) or (status and status.suspended))

    def spec(self, key: ReleaseKey) -> PackageSpec:
        """The package spec with the effective maintenance mode; KeyError without a package."""
        spec = self.packages[key]
        mode = self.maintenance(key)
        return spec if spec.maintenance == mode else dataclasses.replace(spec, maintenance=mode)

    def _storage_of(self, namespace: str, name: str) -> str | None:
        """The storage namespace the package of release ``(namespace, name)`` declares, None without a package
        (the observer's readers ask it: :meth:`engine.storage.observer.Observer.set_storage_of`)."""
        spec = self.packages.get((namespace, name))
        return spec.storage_ns if spec is not None else None

    def previous_target(self, key: ReleaseKey, spec: PackageSpec) -> ReleaseKey | None:
        """The release ``spec``'s package drove before its release target changed (``releaseName``,
        ``targetNamespace``): another release whose persisted status names the package (``namespace/name``) and
        holds a history, and which no package declares now; None when ``key``'s own status has a history (the
        target is known) or there is none. What Flux's helm-controller reads from the HelmRelease's
        ``status.history`` (internal/action/verify.go ``ReleaseTargetChanged``)."""
        own = self._statuses.get(key)
        if own is not None and own.history.latest() is not None:
            return None
        if self._drove is None:
            drove: dict[str, list[ReleaseKey]] = {}
            for other, status in self._statuses.items():
                if status.package and status.history.latest() is not None:
                    drove.setdefault(status.package, []).append(other)
            self._drove = {package: tuple(keys) for package, keys in drove.items()}
        return next((other for other in self._drove.get(f"{spec.namespace}/{spec.name}", ())
                     if other != key and other not in self.packages), None)

    def target_change(self, key: ReleaseKey, spec: PackageSpec) -> TargetChange | None:
        """The release ``spec``'s package (driving ``key``) must uninstall before it installs ``key``, None when
        there is none: the release its status's history ends with (its own status's, else :meth:`previous_target`'s)
        when its storage namespace, release namespace or name changed (the one rule:
        :func:`engine.reconcile.state.release_target_changed`, after Flux's internal/action/verify.go
        ``ReleaseTargetChanged``). The pass acts on it, ``plan`` and the first screen (:meth:`quick_state`) say it.
        A chart of another name is decided with the chart, in the pass (engine.reconcile.state.target_changed)."""
        own = self._statuses.get(key)
        previous = key if own is not None and own.history.latest() is not None else self.previous_target(key, spec)
        if previous is None:
            return None
        stored_in = self._statuses[previous].storage_namespace
        why = st.release_target_changed(previous, key, stored_in=stored_in, storage_ns=spec.storage_ns)
        return TargetChange(previous, stored_in or previous[0], why) if why is not None else None

    def ours(self, key: ReleaseKey, obs: Observation) -> bool:
        """True when ``obs`` is a revision the engine's own history holds as it is (our write)."""
        status = self._statuses.get(key)
        if status is None:
            return False
        return any(s.verifies(obs) for s in status.history.snapshots)

    # -- writing -------------------------------------------------------------------
    def set_packages(self, specs: Mapping[ReleaseKey, PackageSpec]) -> None:
        """Replace the declared packages (the views are refreshed by the caller)."""
        self.packages = dict(specs)
        self._flux_owned &= set(self.packages)  # a finding about a document no longer declared is void

    def set_file_problems(self, problems: Mapping[Path, str]) -> None:
        """Replace the bad package files (each with its first error) and refresh the views of the packages they
        hold: such a package runs on its file's last good spec, and its row says the file is bad (LAST ACTION
        ``✖ package file``), where a duplicate release name left it saying InSync with no sign."""
        old, self._file_problems = self._file_problems, dict(problems)
        files = {f for f in set(old) | set(problems) if old.get(f) != problems.get(f)}
        for key, spec in self.packages.items():
            if spec.file in files:
                self.refresh(key)

    def set_attached(self, fields: Mapping[ReleaseKey, dict[str, Any]]) -> None:
        """Replace the attached releases (their view fields from the Package objects) and refresh the changed."""
        old, self._attached = self._attached, dict(fields)
        for key in set(old) | set(fields):
            if old.get(key) != fields.get(key):
                self.refresh(key)

    def update_attached(self, key: ReleaseKey, **changes: Any) -> None:
        """Change fields of one attached release's view (its controller's last action, from an Event)."""
        if key in self._attached:
            self._attached[key] = {**self._attached[key], **changes}
            self.refresh(key)

    def set_flux(self, fields: Mapping[ReleaseKey, dict[str, Any]]) -> None:
        """Replace the releases HelmRelease objects own (their view fields from the objects, ``flux`` a
        :class:`~engine.runtime.state.FluxObject`) and refresh the changed."""
        old, self._flux = self._flux, dict(fields)
        for key in set(old) | set(fields):
            if old.get(key) != fields.get(key):
                self.refresh(key)

    def put_flux(self, key: ReleaseKey, fields: dict[str, Any] | None) -> None:
        """Set (None: drop) one release's fields from the HelmRelease object owning it, and refresh it if
        they changed."""
        if self._flux.get(key) == fields:
            return
        if fields is None:
            self._flux.pop(key, None)
        else:
            self._flux[key] = fields
        self.refresh(key)

    def update_flux(self, key: ReleaseKey, **changes: Any) -> None:
        """Change fields of one Flux-owned release's view (helm-controller's last action, from an Event)."""
        if key in self._flux:
            self._flux[key] = {**self._flux[key], **changes}
            self.refresh(key)

    def set_status(self, key: ReleaseKey, status: EngineStatus, *, state: str | object | None = KEEP,
                   show: bool = True) -> None:
        """Replace ``key``'s engine status; ``state`` also sets the release state (None forgets it).

        ``show`` False leaves the view as it is until the next :meth:`refresh`: an
        action records its result while it still holds the release and shows it
        once it let go, so a state shown as settled never belongs to a release
        still held (a write seen while held is taken for the action's own).
        """
        if any(self.scrub(c.message) != c.message for c in status.conditions):  # e.g. helm echoing a value
            status = dataclasses.replace(status, conditions=tuple(
                dataclasses.replace(c, message=self.scrub(c.message)) for c in status.conditions))
        self._statuses[key] = status
        self._drove = None
        self._dropped.pop(key, None)  # the book's own now: a status dropped on load is overwritten when persisted
        if state is not KEEP:
            self._set_state(key, state if isinstance(state, str) else None)
        if show:
            self.refresh(key)

    def update_status(self, key: ReleaseKey, **changes: Any) -> EngineStatus:
        """Change fields of ``key``'s engine status (a fresh one when it has none); returns the new one."""
        status = dataclasses.replace(self._statuses.get(key) or EngineStatus(), **changes)
        self.set_status(key, status)
        return status

    def set_state(self, key: ReleaseKey, state: str | None) -> None:
        """The release state a pass decided; None forgets it (storage or the spec changed under it)."""
        self._set_state(key, state)
        self.refresh(key)

    def _set_state(self, key: ReleaseKey, state: str | None) -> None:
        if state is None:
            self._states.pop(key, None)
        else:
            self._states[key] = state

    def set_monitor(self, key: ReleaseKey, status: MonitorStatus) -> None:
        before = self._monitors.get(key)
        self._monitors[key] = status
        if status.problem and (before is None or before.problem != status.problem):
            self.log(key, "monitor", "failed", f"{status.problem}: absent or unready objects go unnoticed")
        elif before is not None and before.problem and not status.problem and status.state == "active":
            self.log(key, "monitor", "info", "the monitor watches every object again")
        self.refresh(key)

    def set_warnings(self, key: ReleaseKey, count: int) -> None:
        """The number of recent Kubernetes Warning events of ``key``'s objects (engine.monitor.events)."""
        self._warnings[key] = count
        self.refresh(key)

    def flux_owned(self, key: ReleaseKey) -> bool:
        """Whether Flux owns ``key``'s release (as the controller last found it in the cluster for its document)."""
        return key in self._flux_owned and key in self.packages

    def set_flux_owned(self, key: ReleaseKey, owned: bool) -> None:
        """Whether Flux owns ``key``'s release (a HelmRelease of its document's name exists in the cluster); the
        release state is judged again (:func:`engine.reconcile.state.flux_state` while Flux owns it)."""
        if owned == (key in self._flux_owned):
            return
        if owned:
            self._flux_owned.add(key)
        else:
            self._flux_owned.discard(key)
        self.set_state(key, None)

    def set_offered(self, key: ReleaseKey, offered: AvailableVersions | None) -> None:
        """What the repository of ``key``'s chart offers (engine.sources), for the newer-version marker."""
        if self._offered.get(key) != offered:
            self._offered[key] = offered
            self.refresh(key)

    def log(self, key: ReleaseKey, action: str, outcome: str, message: str, tail: tuple[str, ...] = ()) -> None:
        """Add an event, stamped now, to ``key``'s log; a "started" event names the running action."""
        pkg = self.packages.get(key)
        self.add_event(LogEntry(time.time(), key, pkg.name if pkg else "", action, outcome, message, tail))

    def add_event(self, event: LogEntry) -> None:
        """Add ``event`` to its release's log (known secrets masked) and announce it (:class:`EntryLogged`)."""
        message, tail = self.scrub(event.message), tuple(self.scrub(line) for line in event.tail)
        if message != event.message or tail != event.tail:
            event = dataclasses.replace(event, message=message, tail=tail)
        key = event.key
        self._events.setdefault(key, deque(maxlen=EVENT_LOG_SIZE)).append(event)
        view = self._views.get(key)
        if event.outcome == "started" and view is not None and view.running is not None:
            # Name the running action as it is ("upgrade", "test"...), not just "reconcile".
            self.refresh(key, running=dataclasses.replace(view.running, action=event.action))
        log.info("event %s/%s %s %s: %s", key[0], key[1], event.action, event.outcome, event.message)
        self.emit(EntryLogged(event))

    def quick_state(self, key: ReleaseKey, obs: Observation | None) -> str | None:
        """The release state before the first pass: TargetChanged when the package's release target changed
        (:meth:`target_change`, the pass's rule), else the decision on the last resolution (no I/O,
        no render, no drift; a changed spec shows OutOfSync until a pass renders). None without a
        package or before its first resolution."""
        if key not in self.packages:
            return None
        if key not in self._flux_owned and self.target_change(key, self.packages[key]) is not None:
            return st.TARGET_CHANGED
        resolved = RESOLVED.last(self.packages[key])
        if resolved is None:
            return None
        req = Request.from_resolved(resolved, self.status(key) or EngineStatus())
        if key in self._flux_owned:  # not helmdeck's to decide: how it stands against the document
            return st.flux_state(req, obs).status
        if cond.is_true(req.status.conditions, cond.STALLED):
            return st.STALLED
        return st.determine_state(req, obs).status

    @contextlib.contextmanager
    def reading_storage(self) -> Iterator[None]:
        """While the engine lists storage and reads the statuses at start (:attr:`reading`)."""
        self.reading = True
        try:
            yield
        finally:
            self.reading = False

    def refresh(self, key: ReleaseKey, **changes: Any) -> None:
        """Remake ``key``'s view from what the book and the observer hold (``changes`` override fields);
        announce it when it changed, or its removal when nothing knows the release any more. Nothing while
        :attr:`reading` (the engine's start refreshes every release after)."""
        if self.reading:
            return
        obs = self.observer.latest(*key)
        pkg = self.packages.get(key)
        cur = self._views.get(key)
        status = self._statuses.get(key)
        bad = self.observer.unreadable_release(*key)
        attached = self._attached.get(key) if pkg is None else None
        # A HelmRelease's object gives a row without a package, or its document's (a Package keeps its own)
        flux = self._flux.get(key) if pkg is None or key in self._flux_owned else None
        if obs is None and pkg is None and bad is None and attached is None and flux is None:
            if cur is not None and cur.running is None and not changes:
                del self._views[key]
                self.emit(ReleaseRemoved(key))
                return
            if cur is None:
                return
        base = cur or ReleaseView(namespace=key[0], name=key[1])
        fields: dict[str, Any] = {
            "observation": obs,
            "package": pkg,
            "maintenance": self.maintenance(key),
            "suspended": self.suspended(key),
            "monitor": self._monitors.get(key) or MonitorStatus(),
            "warnings": self._warnings.get(key, 0),
            "chart_update": newer(obs.chart_version if obs is not None else "", self._offered.get(key)),
            "unreadable": f"revision {bad.revision}: {bad.reason}" if bad is not None else None,
            "listed": None,
            "flux_owned": pkg is not None and key in self._flux_owned,
            "status_dropped": self.dropped(key),
        }
        if status is not None:
            ready = cond.get(status.conditions, cond.READY)
            fields.update(
                conditions=status.conditions,
                failures=status.failures,
                last=status.last,
                ready=None if ready is None or ready.status == "Unknown" else ready.status == "True",
            )
            if ready is not None and ready.status == "False" and ready.reason in cond.UNRESOLVED_REASONS:
                # The pass stopped before any action: say so in STATE and LAST ACTION, not only in Ready.
                fields.update(state=FAILED, last=ActionOutcome(
                    "resolve", False, f"{ready.reason}: {ready.message}", at=ready.last_transition))
        problem = self._file_problems.get(pkg.file) if pkg is not None else None
        if problem is not None:  # its file's later edits are not applied until it is fixed
            fields["last"] = ActionOutcome("package file", False, f"{problem} (the package keeps its last good "
                                           "spec until the file is fixed)")
        if attached is not None:  # the controller's status, and its running action as storage shows it
            fields.update(attached, running=_controller_running(obs, attached["package"], attached.get("running")))
        else:
            fields["attached"] = None
        if flux is not None:  # Flux's status; a document's state says how the release stands against it
            fields.update({k: v for k, v in flux.items() if pkg is None or k != "state"})
        else:
            fields["flux"] = None
        state = self._states.get(key)
        if state is None and pkg is not None:
            # Until a pass decides (or after storage changed under it): a quick verdict, kept so that
            # later refreshes (monitor, progress) do not hash the chart again.
            state = self.quick_state(key, obs)
            if state is not None:
                self._states[key] = state
        fields.setdefault("state", state if pkg is not None or status is not None else None)
        fields.update(changes)
        new = dataclasses.replace(base, **fields)
        if new != cur:
            self._views[key] = new
            self.emit(ReleaseUpdated(new))

    def preview(self, revisions: Iterable[ListedRevision]) -> bool:
        """While :attr:`reading`: a view of each release from its newest revision's storage labels alone
        (:attr:`ReleaseView.listed`), announced, so the app lists every release before the records are
        decoded and the statuses read (one :class:`ReleasesListed` for them all); the start's
        :meth:`refresh_all` remakes (or removes) each one. A view made before storage was read (a
        package's, when the folder loaded) said "not installed" without knowing: the labels' view replaces
        it; packages loaded after the labels (the engine lists storage first) make no view while reading
        (:meth:`refresh`), so the labels' one stays. A release whose newest record the observer holds already
        (read first: the rows on screen) gets it in its view, as :meth:`preview_records` makes it. True when
        views were announced."""
        if not self.reading:
            return False
        newest: dict[ReleaseKey, ListedRevision] = {}
        for revision in revisions:
            key = (revision.namespace, revision.name)
            if key not in newest or revision.version > newest[key].version:
                newest[key] = revision
        views, known, latest = self._views, [], self.observer.latest
        for key, revision in newest.items():
            cur = views.get(key)
            if (cur is None or (cur.listed is None and cur.observation is None)
                    or (cur.listed is not None and revision.version > cur.listed.version)):
                view = views[key] = ReleaseView.from_listed(revision)
                obs = latest(*key)
                if obs is not None and obs.version >= revision.version:  # its records read first: shown at once
                    view = views[key] = dataclasses.replace(view, observation=obs, listed=None)
                known.append(view)
        if known:  # one event for the page: 10,000 releases would otherwise cost 10,000 dispatches
            self.emit(ReleasesListed(tuple(known)))
        return bool(known)

    def preview_records(self, keys: Iterable[ReleaseKey]) -> bool:
        """While :attr:`reading`: the labels' views of ``keys`` (the rows on screen) remade with their newest
        decoded records, announced as one :class:`ReleasesListed` (the app draws them as it drew the labels);
        the start's :meth:`refresh_all` remakes each one. True when views were announced."""
        if not self.reading:
            return False
        made = []
        for key in keys:
            cur, obs = self._views.get(key), self.observer.latest(*key)
            if cur is not None and cur.listed is not None and cur.observation is None and obs is not None:
                view = self._views[key] = dataclasses.replace(cur, observation=obs, listed=None)
                made.append(view)
        if made:
            self.emit(ReleasesListed(tuple(made)))
        return bool(made)

    def refresh_all(self, keys: Iterable[ReleaseKey] = ()) -> None:
        """Refresh ``keys``, every stored, declared and unreadable release, and every view."""
        # An unreadable record is keyed by its storage namespace: a declared package's row is the release's
        declared = {(spec.storage_ns, key[1]): key for key, spec in self.packages.items()}
        unreadable = [declared.get(stored, stored) for stored in self.observer.unreadable_releases()]
        for key in dict.fromkeys([*keys, *self.observer.releases(), *self.packages, *unreadable, *self._views]):
            self.refresh(key)

    # -- the running-action guard ------------------------------------------------------
    def busy(self, key: ReleaseKey) -> bool:
        """True while an action of this engine runs on ``key``."""
        lock = self._locks.get(key)
        return lock is not None and lock.locked()

    @contextlib.asynccontextmanager
    async def running(self, key: ReleaseKey, action: str, timeout: float) -> AsyncIterator[None]:
        """Hold ``key`` for ``action`` (shown as running, with its helm ``timeout`` in seconds).

        Raises ActionRefused at once when another action holds it.
        """
        lock = self._locks.setdefault(key, asyncio.Lock())
        if lock.locked():
            view = self._views.get(key)
            raise ActionRefused(busy_reason(key, view.running if view else None))
        async with lock:
            task = asyncio.current_task()
            if task is not None:
                self._holders[key] = task
            self.refresh(key, running=RunningAction(action, time.time(), timeout))
            try:
                yield
            except asyncio.CancelledError:
                if key not in self._cancelled or task is None:
                    raise
                # The operator's cancel, not a shutdown: the caller sees a refused (cancelled) action
                # and its task goes on (a queue worker keeps working).
                task.uncancel()
                raise ActionCancelled(f"{action} on {key[0]}/{key[1]} was cancelled") from None
            finally:
                self._holders.pop(key, None)
                self._cancelled.discard(key)
                if self._let_go is not None:
                    try:
                        await self._let_go(key)
                    except Exception:  # the claim is taken over later; the action's own outcome stands
                        log.exception("letting %s/%s go", *key)
                self.refresh(key, running=None)

    def cancel(self, key: ReleaseKey, by: str = "by the operator") -> bool:
        """Cancel the action holding ``key`` (its helm is stopped: terminated, then killed after a grace
        period); it then raises :class:`ActionCancelled` to its caller. ``by`` (who asked) is the
        cancellation's message, which the action records. False when nothing runs on it."""
        task = self._holders.get(key)
        if task is None or task.done():
            return False
        self._cancelled.add(key)
        task.cancel(by)
        return True

    async def released(self, key: ReleaseKey) -> None:
        """Wait until no action of this engine holds ``key``."""
        lock = self._locks.get(key)
        if lock is not None and lock.locked():
            async with lock:
                pass

    # -- persistence ---------------------------------------------------------------
    async def load_statuses(self, namespaces: list[str] | None) -> set[ReleaseKey]:
        """Read the persisted statuses of ``namespaces`` (None: all); returns the keys whose status changed.

        A store that cannot be read is logged and leaves the statuses as they are.
        """
        if self.store is None:
            return set()
        try:
            stored = await asyncio.to_thread(self.store.list, namespaces)
        except Exception as exc:  # the engine still works without persisted status
            log.warning("cannot read persisted engine status: %s", exc)
            return set()
        changed = set()
        blind = {p.namespace for p in self.observer.denied()}  # storage not readable there
        seen = {(item.namespace, item.release) for item in stored}
        for key in [k for k in self._dropped if k not in seen and (namespaces is None or k[0] in namespaces)]:
            del self._dropped[key]  # removed since
            changed.add(key)
        for item in stored:
            key = (item.namespace, item.release)
            if key not in self._statuses:
                stale = self._stale(key, item.status, blind)
                if stale is not None:
                    where = self.store.where(item.namespace, item.release)
                    if self._dropped.get(key) != (where, stale):  # said once, not at every follower's read
                        log.info("ignoring the stored engine status %s of %s/%s: %s", where, *key, stale)
                        self._dropped[key] = (where, stale)
                        changed.add(key)
                    continue
            if self._statuses.get(key) != item.status:
                self._statuses[key] = item.status
                self._drove = None
                self._dropped.pop(key, None)
                changed.add(key)
        return changed

    def dropped(self, key: ReleaseKey) -> tuple[str, str] | None:
        """The stored status of ``key`` that was not taken, as ``(object, why)`` (``namespace/name`` of its
        ConfigMap and the reason, :meth:`_stale`), None when none was dropped or the book holds a status."""
        return None if key in self._statuses else self._dropped.get(key)

    def _stale(self, key: ReleaseKey, status: EngineStatus, blind: set[str | None]) -> str | None:
        """Why a stored ``status`` is not ``key``'s current one, None when it is: the newest revision its history
        holds is stored as it was (same digest), or helmdeck uninstalled it and nothing was stored since: the
        history recorded that revision ``uninstalling`` (Flux's UninstallRemediation observes the uninstall into its
        newest snapshot, internal/reconcile/uninstall_remediation.go, observeUninstall) or the last action was
        helmdeck's successful uninstall. An uninstall remediation keeps the history and the status says Stalled
        once install retries are exhausted; an uninstall by hand clears the history.

        Else the status was left behind by something else: an uninstall outside helmdeck (the revision is gone)
        or a release made again by plain helm (a revision the history does not hold); adopting it would make the
        next install look like drift. Unknown (storage not readable: ``key``'s namespace or all, None, in
        ``blind``) counts as current."""
        latest = status.history.latest()
        if latest is None or key[0] in blind or None in blind:
            return None
        stored = self.observer.history(*key, storage=status.storage_namespace or None)  # where it was stored
        if any(latest.verifies(obs) for obs in stored):
            return None
        last = status.last
        if not stored:
            # helmdeck's own uninstall: its history saw the revision go (only helmdeck's actions record it), or it
            # was the last action and succeeded (a watch that missed the "uninstalling" write)
            if latest.status in GOING or (last is not None and last.ok and last.action in UNINSTALLS):
                return None
            return (f"revision {latest.version} its history ends with is gone and helmdeck did not uninstall it "
                    "(uninstalled outside helmdeck)")
        newest = max(obs.version for obs in stored)
        held = (f"storage's revision {newest} is another one" if newest == latest.version
                else f"storage's newest is revision {newest}")
        return (f"its history ends with revision {latest.version}; {held} (the release was made again or changed "
                "outside helmdeck)")

    async def reload_status(self, key: ReleaseKey, *, before_acting: bool = False) -> bool:
        """Read ``key``'s persisted status again and take it when its history holds the release's latest
        stored revision and the book's does not (another controller replica acted on the release since this
        one last read it, ``--shards auto``; a status older than the book's, say one whose write failed, is
        not taken); True when it was taken. A store that cannot be read is logged and changes nothing.

        ``before_acting`` (a claim just taken): read it even when storage's latest revision known here is this
        engine's own, since this replica's storage watch may lag (after a pause): when the status names a newer
        revision, wait for the watch to show it (at most :data:`CATCH_UP` seconds), then decide as above."""
        spec = self.packages.get(key)
        latest = self.observer.latest(*key)
        if self.store is None or latest is None or (self.ours(key, latest) and not before_acting):
            return False
        try:
            stored = await asyncio.to_thread(self.store.load, spec.storage_ns if spec else key[0], key[1])
        except Exception as exc:  # as load_statuses: the engine still works without persisted status
            log.warning("cannot read the persisted engine status of %s/%s: %s", key[0], key[1], exc)
            return False
        newest = stored.history.latest() if stored is not None else None
        if newest is not None and newest.version > latest.version:  # written after what this watch has seen
            deadline = time.monotonic() + CATCH_UP
            while (seen := self.observer.latest(*key)) is not None and seen.version < newest.version:
                if time.monotonic() > deadline:
                    log.warning("storage of %s/%s not seen at revision %d after %.0fs: deciding on revision %d",
                                key[0], key[1], newest.version, CATCH_UP, seen.version)
                    break
                await asyncio.sleep(0.1)
            latest = self.observer.latest(*key) or latest
        if self.ours(key, latest):
            return False
        if stored is None or not any(s.verifies(latest) for s in stored.history.snapshots):
            return False
        self.set_status(key, stored, state=None)
        return True

    async def drop_status(self, key: ReleaseKey, storage_ns: str | None = None) -> None:
        """Forget ``key``'s engine status and remove it from the cluster, from ``storage_ns`` (default: the
        release's namespace) (its release was uninstalled: prune, ``cleanup``); failures are logged only (a
        leftover is ignored on load, see :meth:`load_statuses`)."""
        self._statuses.pop(key, None)
        self._drove = None
        self._states.pop(key, None)
        if self.store is None or not self._writable():
            return
        try:
            await asyncio.to_thread(self.store.delete, storage_ns or key[0], key[1])
        except Exception as exc:
            log.warning("cannot remove the engine status of %s/%s: %s", key[0], key[1], exc)

    async def persist(self, key: ReleaseKey) -> None:
        """Write ``key``'s status to the cluster (when this instance may); failures are logged only."""
        spec = self.packages.get(key)
        status = self._statuses.get(key)
        if self.store is None or status is None or not self._writable():
            return
        ns = spec.storage_ns if spec else key[0]
        if spec is not None:  # who it is and what it depends on outlive its file (cleanup's order)
            status = self._statuses[key] = dataclasses.replace(
                status, package=f"{spec.namespace}/{spec.name}", depends_on=tuple(str(d) for d in spec.depends_on))
            self._drove = None
        try:
            await asyncio.to_thread(self.store.save, ns, key[1], spec.name if spec else "", status,
                                    as_user=kube_user(spec))
        except Exception as exc:  # keep reconciling; the next pass writes again
            log.warning("cannot persist engine status of %s/%s: %s", key[0], key[1], exc)
