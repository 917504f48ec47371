"""Release state as the engine reports it, and the events announcing changes.

Everything here is an immutable value: subscribers get snapshots and can
keep them without locking. Times are Unix seconds.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Literal

from engine.base import label_selector
from engine.base.fields import PackageError
from engine.monitor.status import MonitorStatus
from engine.package.model import PackageSpec
from engine.reconcile.conditions import Condition
from engine.reconcile.status import ActionOutcome, FailureCounts
from engine.sources.updates import ChartUpdate
from engine.storage.observation import Observation
from engine.storage.records import ListedRevision

ReleaseKey = tuple[str, str]  # (namespace, release name)

# The engine's release states, after Flux helm-controller's state detection,
# plus Stalled (retries exhausted or no rollback target: the engine stopped) and TargetChanged (a chart of another
# name: uninstalled, then installed).
RELEASE_STATES = (
    "InSync", "OutOfSync", "Drifted", "Locked", "Untested", "Failed", "Unmanaged", "Absent", "Stalled",
    "TargetChanged",
)
CONDITION_TYPES = ("Ready", "Released", "TestSuccess", "Remediated", "Reconciling", "Stalled")


@dataclass(frozen=True)
class RunningAction:
    """An action in progress: name, start time and its helm timeout in seconds."""

    action: str
    started: float
    timeout: float


@dataclass(frozen=True)
class ControllerInfo:
    """A ``helmdeck controller`` holding a Lease of the cluster, as its Lease says: ``holder`` its
    ``holderIdentity`` (the pod's name in a cluster, ``<host>-<pid>-<hex>`` elsewhere), ``lease``
    ``namespace/name``, ``renewed`` the Unix seconds of its last heartbeat (``renewTime``), ``duration`` the
    Lease's seconds without renewal after which it is taken for dead, ``namespaces`` the namespaces whose
    Package objects it reconciles (() = all), ``metrics`` where it says its metrics are served ("" unknown),
    ``shard`` its shard's name ("" not sharded; ``--watch-label-selector``,
    :mod:`engine.runtime.cluster.shard_selector`) and ``selector`` that shard's label selector ("" every Package)."""

    holder: str
    lease: str
    renewed: float
    duration: float
    namespaces: tuple[str, ...] = ()
    metrics: str = ""
    shard: str = ""
    selector: str = ""

    def covers(self, namespace: str, labels: Mapping[str, str] | None = None) -> bool:
        """Does it reconcile the Package objects of ``namespace`` (labelled ``labels``: its shard's selector
        matches them; None: the namespace alone is asked)?"""
        if self.namespaces and namespace not in self.namespaces:
            return False
        if not self.selector or labels is None:
            return True
        try:
            return label_selector.matches(label_selector.parse(self.selector), labels)
        except label_selector.SelectorError:  # a Lease annotated by hand: it covers nothing it can be sure of
            return False


@dataclass(frozen=True)
class Attached:
    """A release whose package is a Package object a live controller reconciles (the app attached to it):
    ``ref`` the object's ``(namespace, name)``, ``controller`` the Lease holder, ``generation`` and
    ``observed`` (its status' ``observedGeneration``), the status' ``lastAttemptedRevision`` and
    ``lastAppliedRevision``, ``requested`` the requests made on it and not acknowledged yet (``"upgrade"``,
    ``"cancel"``... the app's action names); ``lease`` the covering controller's Lease (``namespace/name``),
    ``replica`` and ``shard`` who reconciles it, as its ``status.controller`` says ("" not said yet)."""

    ref: tuple[str, str]
    controller: str
    generation: int = 0
    observed: int = 0
    attempted: str = ""
    applied: str = ""
    requested: tuple[str, ...] = ()
    lease: str = ""
    replica: str = ""
    shard: str = ""


@dataclass(frozen=True)
class FluxRevision:
    """One entry of a HelmRelease's ``status.history``, newest first (helm-controller api/v2 ``Snapshot``):
    the Helm revision, its status, chart, app version, ``digest`` and ``configDigest`` as Flux wrote them,
    ``last_deployed`` Unix seconds (0 unknown)."""

    version: int
    status: str
    chart_name: str = ""
    chart_version: str = ""
    app_version: str = ""
    digest: str = ""
    config_digest: str = ""
    last_deployed: float = 0.0


@dataclass(frozen=True)
class FluxObject:
    """The HelmRelease object owning a release, as the app reads it in the cluster
    (:mod:`engine.runtime.cockpit.flux`): ``ref`` its ``(namespace, name)``, ``generation`` and ``observed``
    (``status.observedGeneration``), ``suspended`` (``spec.suspend``), ``history`` (``status.history``,
    newest first), the request annotations (``reconcile.fluxcd.io/requestedAt``, ``forceAt``, ``resetAt``:
    ``requested_at``, ``force_at``, ``reset_at``) and the last handled ones (``status.lastHandledReconcileAt``,
    ``lastHandledForceAt``, ``lastHandledResetAt``), ``attempted`` ``status.lastAttemptedRevision``."""

    ref: tuple[str, str]
    generation: int = 0
    observed: int = 0
    suspended: bool = False
    history: tuple[FluxRevision, ...] = ()
    requested_at: str = ""
    force_at: str = ""
    reset_at: str = ""
    handled_reconcile: str = ""
    handled_force: str = ""
    handled_reset: str = ""
    attempted: str = ""

    @property
    def requested(self) -> tuple[str, ...]:
        """The requests made and not handled yet: ``"force"``, ``"reset"`` (each only with an equal
        ``requestedAt``, as helm-controller's api/v2 ``ShouldHandleForceRequest``/``ShouldHandleResetRequest``
        act on them), else ``"reconcile"``."""
        out = tuple(name for name, token, handled in (("force", self.force_at, self.handled_force),
                                                       ("reset", self.reset_at, self.handled_reset))
                    if token and token == self.requested_at and token != handled)
        if not out and self.requested_at and self.requested_at != self.handled_reconcile:
            return ("reconcile",)
        return out


@dataclass(frozen=True)
class Requested:
    """An action the app asked the controller for, on the Package object ``ref``: ``action`` (the app's name),
    ``text`` one sentence (``requested: the controller upgrades web/web (<wire.FORCE_REQUEST>=...)``)."""

    key: ReleaseKey
    ref: tuple[str, str]
    action: str
    text: str


@dataclass(frozen=True)
class Pulse:
    """One controller replica's pulses (the app's ``P`` view, :mod:`engine.runtime.cockpit.pulses`), oldest first, one
    value per interval between two readings of its metrics: ``succeeded`` and ``failed`` reconciles per
    minute, ``p50``/``p99`` of its helm actions' durations in seconds (0 when none ended); ``queue`` the queue
    depth at each reading; ``problem`` why the last reading failed ("" when it did not)."""

    replica: str
    url: str
    succeeded: tuple[float, ...] = ()
    failed: tuple[float, ...] = ()
    queue: tuple[float, ...] = ()
    p50: tuple[float, ...] = ()
    p99: tuple[float, ...] = ()
    problem: str = ""

    @property
    def failing_more(self) -> bool:
        """The failure rate rises: the last interval failed and more than the intervals before did on average."""
        if not self.failed or self.failed[-1] <= 0:
            return False
        earlier = self.failed[:-1]
        return not earlier or self.failed[-1] > sum(earlier) / len(earlier)


@dataclass(frozen=True)
class ControllerChanged:
    """The controller the app is attached to changed (None: no live controller holds a Lease)."""

    controller: ControllerInfo | None


@dataclass(frozen=True)
class ReleaseView:
    """One release as the app shows it.

    ``observation`` is None while a package's release is not installed.
    ``state`` is the engine's release state (one of RELEASE_STATES) or None
    when the engine does not manage the release (no package).
    ``ready`` summarises the Ready condition (None = unknown).
    ``maintenance`` is the effective mode (``""`` or ``NoResourceReconciliation``);
    ``suspended`` is set by the package file or by a hand rollback/suspend.
    ``warnings`` counts the recent Kubernetes Warning events of its objects (see :mod:`engine.monitor.events`).
    ``chart_update`` is a newer chart version its repository offers than the deployed one (None: none known).
    ``listed`` is set only while the engine starts: the release as storage's labels say, before its records
    are decoded and its state is known (:meth:`ReleaseBook.preview <engine.runtime.ledger.book.ReleaseBook.preview>`).
    ``flux_owned``: its package is a HelmRelease document whose HelmRelease exists in the cluster (Flux owns
    the release, decided from the cluster: :meth:`PackageController.observe_flux`); ``state`` then says how
    the release stands against the document as Flux's state detection reads it.
    ``flux``: the HelmRelease object owning the release, read in the cluster (the row's Ready, conditions,
    failure counters, suspension and, without a package, state, come from its status: Flux's cockpit).
    ``status_dropped``: the release's stored engine status that was not taken (left behind by something else:
    :meth:`ReleaseBook.load_statuses <engine.runtime.ledger.book.ReleaseBook.load_statuses>`), as
    ``(object, why)``: its ConfigMap's ``namespace/name`` and the reason; None when none was dropped.
    """

    namespace: str
    name: str
    observation: Observation | None = None
    package: PackageSpec | None = None
    state: str | None = None
    ready: bool | None = None
    conditions: tuple[Condition, ...] = ()
    monitor: MonitorStatus = field(default_factory=MonitorStatus)
    maintenance: str = ""
    suspended: bool = False
    running: RunningAction | None = None
    last: ActionOutcome | None = None
    failures: FailureCounts = field(default_factory=FailureCounts)
    unreadable: str | None = None
    warnings: int = 0
    chart_update: ChartUpdate | None = None
    listed: ListedRevision | None = None
    flux_owned: bool = False
    attached: Attached | None = None
    flux: FluxObject | None = None
    status_dropped: tuple[str, str] | None = None

    @property
    def key(self) -> ReleaseKey:
        return (self.namespace, self.name)

    @classmethod
    def from_listed(cls, revision: ListedRevision) -> ReleaseView:
        """``ReleaseView(namespace=…, name=…, listed=revision)``, the view of a release known only from its
        storage labels, made without the dataclass's ``__init__`` (one assignment per field): 10,000 of these
        at start-up took 30 ms, now ~3 ms. Its other fields are the defaults, shared (frozen values)."""
        view = object.__new__(cls)
        view.__dict__.update(_LISTED_DEFAULTS, namespace=revision.namespace, name=revision.name, listed=revision)
        return view

    def condition(self, type_: str) -> Condition | None:
        return next((c for c in self.conditions if c.type == type_), None)


_LISTED_DEFAULTS = dict(ReleaseView("", "").__dict__)  # ReleaseView.from_listed's fields before its own


@dataclass(frozen=True)
class LogEntry:
    """One entry of a package's event log: an action and how it ended.

    ``outcome`` is "started", "succeeded", "failed" or "info"; ``tail`` holds
    helm's last output lines on failure.
    """

    at: float
    key: ReleaseKey
    package: str
    action: str
    outcome: str
    message: str
    tail: tuple[str, ...] = ()


@dataclass(frozen=True)
class CleanupItem:
    """One release cleanup found: ``<namespace>/<release>`` and what happened to it."""

    namespace: str
    name: str
    result: Literal["removed", "failed", "skipped", "would-remove"]
    message: str = ""


@dataclass(frozen=True)
class ReleaseUpdated:
    """Something about one release changed; ``view`` is its new snapshot."""

    view: ReleaseView


@dataclass(frozen=True)
class ReleasesListed:
    """While the engine starts: releases listed from storage's labels alone (each view's ``listed`` set),
    said as one event per page of the labels list (:meth:`ReleaseBook.preview
    <engine.runtime.ledger.book.ReleaseBook.preview>`), so 10,000 releases cost one event, not 10,000."""

    views: tuple[ReleaseView, ...]


@dataclass(frozen=True)
class ReleaseRemoved:
    """A release left the view (no stored revision and no package declares it)."""

    key: ReleaseKey


@dataclass(frozen=True)
class PackageProblems:
    """The package folder was (re)loaded; ``errors`` lists the bad files (empty when all good)."""

    errors: tuple[PackageError, ...]


@dataclass(frozen=True)
class EntryLogged:
    """A :class:`LogEntry` was added to a package's log."""

    event: LogEntry


@dataclass(frozen=True)
class LeaseChanged:
    """Who holds the engine lease; ``leader`` is True when this instance acts."""

    holder: str
    leader: bool


@dataclass(frozen=True)
class AccessProblems:
    """What this engine cannot see of Helm's storage, to say where the user looks (not only in the log).

    ``missing``: one sentence per permission the API server refuses, naming verb, resource and namespace
    (``missing RBAC permission: list secrets in namespace "team-a" (API server: ...)``); empty once every
    watch is allowed. ``scope``: a note when the namespaces watched were narrowed (``""`` otherwise), e.g.
    the fall-back to the kubeconfig context's namespace when the cluster scope is forbidden. ``unread``: one
    sentence per namespace whose storage was never listed for another reason (the API server unreachable),
    so that an empty list does not read as "no releases"; empty once each one was listed.
    """

    missing: tuple[str, ...] = ()
    scope: str = ""
    unread: tuple[str, ...] = ()


__all__ = [
    "RELEASE_STATES",
    "AccessProblems",
    "ActionOutcome",
    "Attached",
    "CleanupItem",
    "Condition",
    "ControllerChanged",
    "ControllerInfo",
    "EngineSignal",
    "EntryLogged",
    "FailureCounts",
    "FluxObject",
    "FluxRevision",
    "LeaseChanged",
    "LogEntry",
    "PackageProblems",
    "Pulse",
    "ReleaseKey",
    "ReleaseRemoved",
    "ReleaseUpdated",
    "ReleaseView",
    "ReleasesListed",
    "Requested",
    "RunningAction",
]

@dataclass(frozen=True)
class PassFinished:
    """A pass of ``key``'s package ended; ``spec`` is the package it ran with (what the controller's status
    reports as observed: Flux sets observedGeneration when a reconcile ends); ``result`` and ``seconds`` feed
    the controller's metrics."""

    key: ReleaseKey
    spec: PackageSpec
    result: str = "success"  # "success", or "failure" (an error, a stall, a retry: backoff, stop, retry interval)
    seconds: float = 0.0  # how long the pass took


EngineSignal = (ReleaseUpdated | ReleasesListed | ReleaseRemoved | PackageProblems | EntryLogged | LeaseChanged
                | AccessProblems | PassFinished | ControllerChanged)
