"""Where a release stands: the release state, decided in DESIGN's order (after Flux), spec first.

Pure: it reads the request (spec, chart, spec digest, engine status, and a
manifest checksum once something rendered) and the latest stored revision.
The one decision for the reconcile loop, the release service and ``plan``:

- :func:`content_state` — is the deployed release what the spec asks for?
  Maintenance hold, maintenance label, chart, spec digest, manifest checksum,
  absent resources. Spec first (as Flux): an unchanged spec digest decides
  without rendering; only a changed one asks for a render (``render``), and
  then an unchanged manifest checksum adopts the new spec digest (``adopt``,
  Deckhouse's smart upgrade) instead of making a revision.
- :func:`determine_state` — Flux's release state around it (storage,
  history, failures, tests); the caller supplies drift detection lazily so it
  only runs when everything else is in sync.
- :func:`made_from_request` — is the latest stored revision one helmdeck made
  from this very spec, though the history lacks it? Helm's storage is the truth
  of what ran: such a revision is recorded, not made again (issue 32).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from engine.base import wire
from engine.reconcile.request import Request
from engine.sources.repository import ChartTemplate
from engine.storage.helmtime import helm_time as helm_time  # re-exported: next_action asks it here
from engine.storage.observation import PENDING_STATUSES, Observation
from engine.storage.snapshot import Snapshot

ABSENT = "Absent"
LOCKED = "Locked"
UNMANAGED = "Unmanaged"
FAILED = "Failed"
OUT_OF_SYNC = "OutOfSync"
UNTESTED = "Untested"
DRIFTED = "Drifted"
IN_SYNC = "InSync"
UNKNOWN = "Unknown"
STALLED = "Stalled"
# The release target changed (its storage namespace, release namespace or name: release_target_changed; a chart of
# another name under upgrade.chartNameChangeStrategy Reinstall: target_changed): the release is uninstalled, then
# installed (its next pass).
TARGET_CHANGED = "TargetChanged"
# Not a state of the release: a pass that did not run, the package being suspended (the runtime's gate).
SUSPENDED = "Suspended"


@dataclass(frozen=True)
class ReleaseState:
    """A release state (one of the constants above) and why.

    ``render``: OutOfSync only because the spec digest changed — render and
    compare manifest checksums before deciding. ``adopt``: the spec changed but
    renders the manifest already released — record the new spec digest, make
    no revision. ``maintenance``: held in maintenance (NoResourceReconciliation),
    nothing is to be done, not even a forced upgrade. ``record``: the latest
    stored revision was made from this spec by helmdeck (:func:`made_from_request`)
    and the history lacks it: it is recorded as the engine's own, and the state is
    the one decided with it recorded.
    """

    status: str
    reason: str
    render: bool = False
    adopt: bool = False
    maintenance: bool = False
    record: bool = False


def in_maintenance(maintenance: str, status: str, release_labels: Mapping[str, str]) -> bool:
    """As nelm's Service: a package in maintenance whose release is deployed and already
    marked ``maintenance=true`` is left alone (nothing rendered, no monitor)."""
    return bool(maintenance) and status == "deployed" and release_labels.get(wire.MAINTENANCE) == "true"


def content_state(
    *,
    release_labels: Mapping[str, str],
    maintenance: str,
    spec_digest: str,
    adopted: str = "",
    chart: tuple[str, str] | None = None,
    want_chart: tuple[str, str] | None = None,
    checksum: str | None = None,
    absent: tuple[str, ...] = (),
    smart: bool = True,
) -> ReleaseState:
    """Whether a deployed release holds what the spec asks for, in this order:

    held in maintenance → InSync (maintenance); maintenance label differs from
    the mode → OutOfSync (entering/leaving); chart name or version differs
    (``chart`` as stored, ``want_chart`` resolved; skipped when unknown) →
    OutOfSync; spec digest equals the release's ``wire.SPEC_DIGEST``
    label or the digest ``adopted`` for this revision → (go on); else, with no
    ``checksum`` yet → OutOfSync with ``render``; checksum differs from the
    release's ``wire.MANIFEST_CHECKSUM`` (or it has none) → OutOfSync;
    else ``adopt`` and go on; resources absent → OutOfSync; else InSync. Without ``smart``
    (:attr:`PackageSpec.smart_upgrade`) a differing spec digest is OutOfSync with no render.
    """
    if in_maintenance(maintenance, "deployed", release_labels):
        return ReleaseState(IN_SYNC, "in maintenance (NoResourceReconciliation): the release is left as it is",
                            maintenance=True)
    want = "true" if maintenance else "false"
    if release_labels.get(wire.MAINTENANCE, "false") != want:
        return ReleaseState(OUT_OF_SYNC, "entering maintenance" if want == "true" else "leaving maintenance")
    if chart is not None and want_chart is not None and chart != want_chart:
        return ReleaseState(OUT_OF_SYNC, f"chart changed from {chart[0]}@{chart[1]} to {want_chart[0]}@{want_chart[1]}")
    adopt = False
    if spec_digest not in (release_labels.get(wire.SPEC_DIGEST), adopted or None):
        if not smart:
            return ReleaseState(OUT_OF_SYNC, "values or chart changed")
        if checksum is None:
            return ReleaseState(OUT_OF_SYNC, "values or chart files changed", render=True)
        if release_labels.get(wire.MANIFEST_CHECKSUM) != checksum:
            return ReleaseState(OUT_OF_SYNC, "values or chart files changed: the rendered manifest changed")
        adopt = True
    if absent:
        return ReleaseState(OUT_OF_SYNC, f"absent resources: {', '.join(absent[:5])}", adopt=adopt)
    reason = "spec changed but renders the released manifest: no new revision" if adopt else "release is in sync"
    return ReleaseState(IN_SYNC, reason, adopt=adopt)


# The release labels that say which package and spec made a revision (not the manifest checksum: it is the
# render's, known only once rendered), and its package set when the request names one (plan's and the quick
# state's do not: whose release it is, the pass's ownership check says first).
_MADE_BY = (wire.MANAGED_BY, wire.PACKAGE, wire.SPEC_DIGEST, wire.MAINTENANCE)


def made_from_request(req: Request, latest: Observation, ours: Snapshot | None) -> bool:
    """Was ``latest`` (a revision the history's newest snapshot ``ours`` is not) made by helmdeck from ``req``'s
    very spec? Deployed, carrying the release labels ``req`` stamps (package, spec digest, package set,
    maintenance), its chart and stored values (``config``) ``req``'s, and not older than the history's newest (a
    revision the history lacks, or holds as it was while it ran: pending).

    Such a revision is what an install or upgrade of this spec makes: one made by another controller replica
    that stopped before keeping it (SIGSTOP, a crash, a claim taken over while its helm ran on), or by this
    engine before a restart. Helm's storage is the truth of what ran, so it is recorded, not made again (issue
    32: one edit, one upgrade). Unlike Flux (whose Unmanaged state upgrades again), as Flux's history cannot
    tell its own revision from another's and this one can. A hand ``helm upgrade`` keeps the previous
    revision's custom labels (helm's ``mergeCustomLabels``), so a revision whose chart and values are those of
    ``ours`` is not taken for one of this spec's (it is a change outside helmdeck: Unmanaged). Pure."""
    if latest.status != "deployed" or (ours is not None and latest.version < ours.version):
        return False
    stamped = latest.label_map
    wanted = req.release_labels
    if any(stamped.get(k) != wanted.get(k) for k in (*_MADE_BY, *([wire.PACKAGE_SET] if req.package_set else []))):
        return False
    if (latest.chart_name, latest.chart_version) != (req.chart.name, req.chart.version) or \
            latest.config != dict(req.values):
        return False
    return ours is None or ours.version == latest.version or (ours.chart_version, ours.config_digest) != (
        latest.chart_version, latest.config_digest)


def release_target_changed(previous: tuple[str, str] | None, key: tuple[str, str], *, stored_in: str = "",
                           storage_ns: str = "") -> str | None:
    """Why the release ``key`` (``(namespace, name)``, stored in ``storage_ns``) is not the one its package drove
    before, None when it is. ``previous`` is that release (the newest snapshot of the status the package left: the
    book's :meth:`~engine.runtime.ledger.book.ReleaseBook.target_change`), ``stored_in`` the storage namespace
    that status recorded (``""``: unknown, not compared). Compared as Flux's helm-controller compares them, in
    this order (internal/action/verify.go ``ReleaseTargetChanged``): the storage namespace
    (``storageNamespace``), the release namespace (``targetNamespace``), the release name (``releaseName``).
    Then the previous release is uninstalled from its storage before this one is installed
    (internal/controller/helmrelease_controller.go ``reconcileRelease``). Pure."""
    if previous is None:
        return None
    old = f"{previous[0]}/{previous[1]}"
    if stored_in and stored_in != storage_ns:
        return (f"storage namespace changed from {stored_in} to {storage_ns}: uninstall {old} (stored in "
                f"{stored_in}), then install")
    if previous == key:
        return None
    what = "release namespace" if previous[0] != key[0] else "release name"
    return f"{what} changed from {old} to {key[0]}/{key[1]}: uninstall {old}, then install"


def target_changed(req: Request) -> str | None:
    """Why ``req``'s release must be uninstalled before it is installed again, None when it need not: the newest
    snapshot of the history was made from a chart of another name, and ``upgrade.chartNameChangeStrategy`` is
    ``Reinstall`` (the default), as Flux's helm-controller decides (internal/action/verify.go
    ``ReleaseTargetChanged``, acted on by internal/controller/helmrelease_controller.go ``reconcileRelease``: an
    uninstall of the history's latest release, the history and failure counters cleared, then the install).
    Under ``InPlaceUpdate`` the new chart is an upgrade (:func:`content_state`). Pure."""
    ours = req.status.history.latest()
    if ours is None or ours.chart_name == req.chart.name or req.spec.upgrade.chart_name_change != "Reinstall":
        return None
    return (f"chart name changed from {ours.chart_name} to {req.chart.name} (upgrade.chartNameChangeStrategy "
            "Reinstall): uninstall, then install")


def determine_state(
    req: Request,
    latest: Observation | None,
    drift: Callable[[], bool] | None = None,
) -> ReleaseState:
    """Decide the release state, in this order (DESIGN, "Reconcile" and "Deciding without rendering"):

    no release → Absent; held in maintenance → InSync; the chart's name changed
    (:func:`target_changed`) → TargetChanged; pending-* → Locked; a latest
    revision helmdeck made from this spec that the history lacks
    (:func:`made_from_request`) → decided as if recorded, with ``record``;
    no history of ours → Absent if uninstalled, else Unmanaged; latest stored
    release differs from our latest snapshot (digest) → Unmanaged; failed →
    Failed; uninstalled → Absent; deployed: :func:`content_state` (OutOfSync,
    maybe asking for a render); tests enabled and not run → Untested; a test
    failed under an active remediation that does not ignore test failures →
    Failed; drift detection on and drift found → Drifted; else InSync. Any
    other stored status → Unknown. Nothing here renders or reads the cluster.
    """
    if latest is None:
        return ReleaseState(ABSENT, "no release in storage")
    release_labels = latest.label_map
    if in_maintenance(req.spec.maintenance, latest.status, release_labels):
        return content_state(release_labels=release_labels, maintenance=req.spec.maintenance,
                             spec_digest=req.spec_digest)
    if (changed := target_changed(req)) is not None:
        return ReleaseState(TARGET_CHANGED, changed)
    if latest.status in PENDING_STATUSES:
        return ReleaseState(LOCKED, f"release revision {latest.version} is {latest.status}")
    ours = req.status.history.latest()
    if (ours is None or not ours.verifies(latest)) and \
            made_from_request(req, latest, ours):
        held = _held_state(req, latest, Snapshot.from_observation(latest), drift)
        return dataclasses.replace(held, record=True, reason=f"{held.reason} (revision {latest.version}, made from "
                                                             "this spec, recorded from storage)")
    if ours is None:
        if latest.status == "uninstalled":
            return ReleaseState(ABSENT, "found an uninstalled release in storage")
        return ReleaseState(UNMANAGED, "found a release in storage that helmdeck did not make")
    if not ours.verifies(latest):
        return ReleaseState(UNMANAGED, f"release revision {latest.version} changed outside helmdeck "
                                       "(it does not match the last snapshot)")
    return _held_state(req, latest, ours, drift)


def _held_state(req: Request, latest: Observation, ours: Snapshot,
                drift: Callable[[], bool] | None) -> ReleaseState:
    """:func:`determine_state` from "failed" on, ``latest`` being the history's newest snapshot ``ours``."""
    if latest.status == "failed":
        return ReleaseState(FAILED, f"release revision {latest.version} failed")
    if latest.status == "uninstalled":
        return ReleaseState(ABSENT, "release is uninstalled")
    if latest.status != "deployed":
        return ReleaseState(UNKNOWN, f"cannot decide for a release with status {latest.status}")
    status = req.status
    content = content_state(
        release_labels=latest.label_map, maintenance=req.spec.maintenance, spec_digest=req.spec_digest,
        adopted=status.adopted_spec_digest if status.adopted_revision == latest.version else "",
        chart=(latest.chart_name, latest.chart_version), want_chart=(req.chart.name, req.chart.version),
        checksum=req.manifest_checksum, absent=req.absent, smart=req.spec.smart_upgrade,
    )
    if content.status != IN_SYNC:
        return content
    test = req.spec.test
    # Only the hooks the filters select count (those never run otherwise), as Flux's helm-controller records
    # only the tests it ran (internal/reconcile/state.go DetermineReleaseState: Snapshot.HasBeenTested).
    if test.enable and not ours.has_been_tested(test.selects):
        return ReleaseState(UNTESTED, "release has not been tested", adopt=content.adopt)
    if (test.enable and req.active_remediation() is not None and not test.ignore_failures
            and ours.has_test_in_phase("Failed", test.selects)):
        return ReleaseState(FAILED, "release has failed tests", adopt=content.adopt)
    if req.spec.drift_detection != "disabled" and drift is not None and drift():
        return ReleaseState(DRIFTED, "cluster state differs from the release manifest", adopt=content.adopt)
    return content



def flux_state(req: Request, latest: Observation | None) -> ReleaseState:
    """Where a release Flux owns stands against its HelmRelease document, as Flux's helm-controller's state
    detection reads it, without a render: no release (or uninstalled) -> Absent; ``pending-*`` -> Locked;
    failed -> Failed; the chart's name changed under ``upgrade.chartNameChangeStrategy`` Reinstall -> TargetChanged
    (:func:`target_changed`'s rule, read against storage: Flux's history holds what it stored); the chart's name or
    version, or the values helm stored (``config``) differing from the
    document's -> OutOfSync (Flux's next reconcile upgrades it), its reason naming each difference in plan's
    words (``chart 1.0.0 → 1.1.0; values changed``); else InSync. Pure, no I/O."""
    if latest is None or latest.status == "uninstalled":
        return ReleaseState(ABSENT, "no release in storage: Flux installs it")
    if latest.status in PENDING_STATUSES:
        return ReleaseState(LOCKED, f"release revision {latest.version} is {latest.status}")
    if latest.status == "failed":
        return ReleaseState(FAILED, f"release revision {latest.version} failed")
    stored, wanted = (latest.chart_name, _flux_version(req, latest.chart_version)), (req.chart.name, req.chart.version)
    if stored[0] != wanted[0] and req.spec.upgrade.chart_name_change == "Reinstall":
        return ReleaseState(TARGET_CHANGED, f"chart {stored[0]} → {wanted[0]} (upgrade.chartNameChangeStrategy "
                                            "Reinstall): Flux uninstalls it, then installs")
    differs = []
    if stored[0] != wanted[0]:
        differs.append(f"chart {stored[0]} → {wanted[0]}")
    elif stored[1] != wanted[1]:
        differs.append(f"chart {stored[1]} → {wanted[1]}")
    if latest.config != dict(req.values):
        differs.append("values changed")
    if differs:
        return ReleaseState(OUT_OF_SYNC, "; ".join(differs))
    return ReleaseState(IN_SYNC, "release is in sync with the document")


def _flux_version(req: Request, stored: str) -> str:
    """The chart version Flux stored, as compared with the document's chart: without its build metadata when the
    chart has ``spec.chart.spec.valuesFiles``, which source-controller sets to the HelmChart object's generation
    (internal/controller/helmchart_controller.go ``buildFromHelmRepository``: ``VersionMetadata``), a counter a
    document does not hold."""
    form = req.spec.chart_source
    if isinstance(form, ChartTemplate) and form.values_files:
        return stored.split("+", 1)[0]
    return stored
