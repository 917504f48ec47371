"""Table-driven unit tests of the pure decisions: release state and next action."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any, cast

import pytest

from engine.base import wire
from engine.package.model import InstallSpec, PackageSpec, TestSpec, UpgradeSpec
from engine.reconcile import next_action as na
from engine.reconcile import state as st
from engine.reconcile.action import ActionContext
from engine.reconcile.atomic import AtomicRelease
from engine.reconcile.errors import ExceededMaxRetries, MissingRollbackTarget, ReleaseLocked
from engine.reconcile.request import Request
from engine.reconcile.status import EngineStatus, FailureCounts
from engine.sources.chart import Chart
from engine.sources.repository import ChartTemplate, SourceRef
from engine.storage.observation import Observation, observation_from_release
from engine.storage.snapshot import History, Snapshot

CHART = Chart(Path("/charts/app"), "app", "1.0.0", "1.0", "sha256:c")
DIGEST = "d" * 32
NOW = time.time()


def obs(version: int = 1, status: str = "deployed", *, chart_version: str = "1.0.0", digest: str = DIGEST,
        tests: dict[str, str] | None = None, deployed: float = NOW) -> Observation:
    rel: dict[str, Any] = {
        "name": "app", "namespace": "ns", "version": version,
        "info": {"status": status, "last_deployed": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(deployed))},
        "chart": {"metadata": {"name": "app", "version": chart_version}},
        "config": {}, "manifest": "",
        "hooks": [{"name": n, "kind": "Job", "events": ["test"], "last_run": {"phase": p}}
                  for n, p in (tests or {}).items()],
    }
    return observation_from_release(rel, labels={wire.SPEC_DIGEST: digest})


def request(*history: Observation, spec: PackageSpec | None = None, failures: FailureCounts | None = None,
            last: str = "", force: bool = False) -> Request:
    status = EngineStatus(history=History(tuple(Snapshot.from_observation(o) for o in history)),
                          failures=failures or FailureCounts(), last_attempted_release_action=last)
    base = spec or PackageSpec(Path("/p/app.yaml"), "app", "ns", CHART.path, "app")
    return Request(base, CHART, {}, DIGEST, status, force=force)


def with_spec(**changes: Any) -> PackageSpec:
    return dataclasses.replace(PackageSpec(Path("/p/app.yaml"), "app", "ns", CHART.path, "app"), **changes)


TESTED = with_spec(test=TestSpec(enable=True))


@pytest.mark.parametrize(
    ("latest", "history", "spec", "last", "expected"),
    [
        (None, [], None, "", st.ABSENT),
        (obs(status="pending-upgrade"), [], None, "", st.LOCKED),
        (obs(status="pending-install"), [obs()], None, "", st.LOCKED),
        (obs(status="uninstalled"), [], None, "", st.ABSENT),
        (obs(), [], None, "", st.UNMANAGED),
        (obs(2), [obs(1)], None, "", st.UNMANAGED),  # upgraded outside helmdeck
        (obs(1, "failed"), [obs(1, "failed")], None, "", st.FAILED),
        (obs(1, "uninstalled"), [obs(1, "uninstalled")], None, "", st.ABSENT),
        (obs(chart_version="0.9.0"), [obs(chart_version="0.9.0")], None, "", st.OUT_OF_SYNC),
        (obs(digest="e" * 32), [obs(digest="e" * 32)], None, "", st.OUT_OF_SYNC),
        (obs(tests={"t": ""}), [obs(tests={"t": ""})], TESTED, "", st.UNTESTED),
        (obs(), [obs()], TESTED, "", st.IN_SYNC),  # no test hooks: nothing to run
        (obs(tests={"t": "Succeeded"}), [obs(tests={"t": "Succeeded"})], TESTED, "install", st.IN_SYNC),
        (obs(tests={"t": "Failed"}), [obs(tests={"t": "Failed"})], TESTED, "upgrade", st.FAILED),
        (obs(tests={"t": "Failed"}), [obs(tests={"t": "Failed"})],
         with_spec(test=TestSpec(enable=True, ignore_failures=True)), "upgrade", st.IN_SYNC),
        (obs(), [obs()], None, "", st.IN_SYNC),
        (obs(1, "superseded"), [obs(1, "superseded")], None, "", st.UNKNOWN),
    ],
)
def test_release_state(latest: Observation | None, history: list[Observation], spec: PackageSpec | None,
                       last: str, expected: str) -> None:
    assert st.determine_state(request(*history, spec=spec, last=last), latest).status == expected


def test_drift_is_only_looked_at_when_enabled_and_otherwise_in_sync() -> None:
    calls: list[int] = []

    def drifted() -> bool:
        calls.append(1)
        return True

    assert st.determine_state(request(obs()), obs(), drifted).status == st.IN_SYNC
    assert calls == []
    spec = with_spec(drift_detection="warn")
    assert st.determine_state(request(obs(), spec=spec), obs(), drifted).status == st.DRIFTED
    assert st.determine_state(request(obs(chart_version="0"), spec=spec), obs(chart_version="0"),
                              drifted).status == st.OUT_OF_SYNC
    assert calls == [1]


def state(status: str) -> st.ReleaseState:
    return st.ReleaseState(status, "test")


@pytest.mark.parametrize(
    ("status", "req", "expected"),
    [
        (st.IN_SYNC, request(obs()), None),
        (st.IN_SYNC, request(obs(), force=True), na.UPGRADE),
        (st.ABSENT, request(), na.INSTALL),
        (st.UNMANAGED, request(), na.UPGRADE),
        (st.OUT_OF_SYNC, request(obs()), na.UPGRADE),
        (st.UNTESTED, request(obs()), na.TEST),
        (st.DRIFTED, request(obs(), spec=with_spec(drift_detection="warn")), None),
        (st.DRIFTED, request(obs(), spec=with_spec(drift_detection="enabled")), na.CORRECT_DRIFT),
        # Failed without an active remediation, or with its count reset: upgrade.
        (st.FAILED, request(obs(1, "failed")), na.UPGRADE),
        (st.FAILED, request(obs(1, "failed"), last="upgrade"), na.UPGRADE),
        # Install failure with retries left: install remediation always uninstalls.
        (st.FAILED, request(obs(1, "failed"), spec=with_spec(install=InstallSpec(retries=2)), last="install",
                            failures=FailureCounts(install=1, total=1)), na.UNINSTALL_REMEDIATION),
        # Upgrade failure, rollback strategy, a previous deployed snapshot exists.
        (st.FAILED, request(obs(2, "failed"), obs(1, "superseded"), spec=with_spec(upgrade=UpgradeSpec(retries=1)),
                            last="upgrade", failures=FailureCounts(upgrade=1, total=1)), na.ROLLBACK),
        (st.FAILED, request(obs(2, "failed"), obs(1, "superseded"),
                            spec=with_spec(upgrade=UpgradeSpec(retries=1, strategy="uninstall")),
                            last="upgrade", failures=FailureCounts(upgrade=1, total=1)), na.UNINSTALL_REMEDIATION),
        # Unlimited retries never run out.
        (st.FAILED, request(obs(2, "failed"), obs(1, "superseded"), spec=with_spec(upgrade=UpgradeSpec(retries=-1)),
                            last="upgrade", failures=FailureCounts(upgrade=99, total=99)), na.ROLLBACK),
        # Exhausted, but the last failure is remediated.
        (st.FAILED, request(obs(2, "failed"), obs(1, "superseded"), spec=with_spec(upgrade=UpgradeSpec(retries=1)),
                            last="upgrade", failures=FailureCounts(upgrade=2, total=2)), na.ROLLBACK),
        # An install's last failure only when remediateLastFailure says so (api/v2 InstallRemediation).
        (st.FAILED, request(obs(1, "failed"), last="install", failures=FailureCounts(install=2, total=2),
                            spec=with_spec(install=InstallSpec(retries=1, remediate_last_failure=True))),
         na.UNINSTALL_REMEDIATION),
    ],
)
def test_next_action(status: str, req: Request, expected: str | None) -> None:
    assert na.next_action(req, state(status), None) == expected


@pytest.mark.parametrize(
    ("status", "req", "error"),
    [
        (st.ABSENT, request(last="install", failures=FailureCounts(install=1, total=1)), ExceededMaxRetries),
        (st.OUT_OF_SYNC, request(obs(), last="upgrade", failures=FailureCounts(upgrade=1, total=1)),
         ExceededMaxRetries),
        (st.FAILED, request(obs(2, "failed"), obs(1, "superseded"), last="upgrade",
                            failures=FailureCounts(upgrade=1, total=1)), ExceededMaxRetries),
        (st.FAILED, request(obs(1, "failed"), spec=with_spec(upgrade=UpgradeSpec(retries=3)), last="upgrade",
                            failures=FailureCounts(upgrade=1, total=1)), MissingRollbackTarget),
        # helm-controller api/v2 helmrelease_types.go InstallRemediation.MustRemediateLastFailure: false unless
        # set, so a failed last install stays for inspection.
        (st.FAILED, request(obs(1, "failed"), spec=with_spec(install=InstallSpec(retries=1)), last="install",
                            failures=FailureCounts(install=2, total=2)), ExceededMaxRetries),
        (st.UNKNOWN, request(obs()), ReleaseLocked),
    ],
)
def test_next_action_stops(status: str, req: Request, error: type[Exception]) -> None:
    with pytest.raises(error):
        na.next_action(req, state(status), None)


def test_previous_skips_failed_tests_unless_ignored() -> None:
    spec = with_spec(upgrade=UpgradeSpec(retries=1), test=TestSpec(enable=True))
    req = request(obs(3, "failed"), obs(2, "superseded", tests={"t": "Failed"}), obs(1, "superseded"),
                  spec=spec, last="upgrade", failures=FailureCounts(upgrade=1, total=1))
    prev = req.status.history.previous(False)
    assert prev is not None and prev.version == 1
    prev = req.status.history.previous(True)
    assert prev is not None and prev.version == 2


def test_locked_is_unlocked_only_when_stale_and_not_ours() -> None:
    req = request(obs(), spec=with_spec(timeout=60.0))
    fresh = obs(2, "pending-upgrade", deployed=NOW - 30)
    stale = obs(2, "pending-upgrade", deployed=NOW - 600)
    with pytest.raises(ReleaseLocked):
        na.next_action(req, state(st.LOCKED), fresh, now=NOW)
    with pytest.raises(ReleaseLocked):
        na.next_action(req, state(st.LOCKED), stale, now=NOW, action_running=True)
    assert na.next_action(req, state(st.LOCKED), stale, now=NOW) == na.UNLOCK


def test_a_pending_revision_is_stale_after_the_timeout_of_the_action_it_names() -> None:
    """A pending-upgrade under a 15m upgrade.timeout (spec.timeout 1m) is someone's helm still running until
    15m have passed; a pending-install goes by install's timeout, here spec.timeout (api/v2 Install.GetTimeout)."""
    req = request(obs(), spec=with_spec(timeout=60.0, upgrade=UpgradeSpec(timeout=900.0)))
    with pytest.raises(ReleaseLocked, match="after 905s"):
        na.next_action(req, state(st.LOCKED), obs(2, "pending-upgrade", deployed=NOW - 600), now=NOW)
    assert na.next_action(req, state(st.LOCKED), obs(2, "pending-install", deployed=NOW - 600), now=NOW) == na.UNLOCK


def test_failure_counters_reset_when_the_spec_changes() -> None:
    req = request(obs(), failures=FailureCounts(upgrade=3, total=3))
    req.status = dataclasses.replace(req.status, last_attempted_spec_digest=DIGEST,
                                     last_attempted_chart_version=CHART.version)
    assert not AtomicRelease.reset_on_spec_change(req)
    assert req.status.failures.upgrade == 3
    req.spec_digest = "f" * 32
    assert AtomicRelease.reset_on_spec_change(req)
    assert req.status.failures == FailureCounts()


def labelled(version: int = 1, **extra: str) -> Observation:
    """A deployed revision carrying the given release labels (digest DIGEST unless given)."""
    rel: dict[str, Any] = {"name": "app", "namespace": "ns", "version": version, "info": {"status": "deployed"},
                           "chart": {"metadata": {"name": "app", "version": "1.0.0"}}, "config": {}, "manifest": ""}
    return observation_from_release(rel, labels={wire.SPEC_DIGEST: DIGEST, **extra})


CHECKSUM = "c" * 32
OTHER = "f" * 32


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        # Same spec digest: in sync, decided without a render.
        ({}, st.ReleaseState(st.IN_SYNC, "release is in sync")),
        # Held in maintenance (deployed, marked): nothing to do, whatever changed.
        ({"maintenance": "NoResourceReconciliation", "spec_digest": OTHER,
          "release_labels": {wire.MAINTENANCE: "true"}},
         st.ReleaseState(st.IN_SYNC, "in maintenance (NoResourceReconciliation): the release is left as it is",
                         maintenance=True)),
        ({"maintenance": "NoResourceReconciliation"}, st.ReleaseState(st.OUT_OF_SYNC, "entering maintenance")),
        ({"release_labels": {wire.MAINTENANCE: "true"}}, st.ReleaseState(st.OUT_OF_SYNC, "leaving maintenance")),
        ({"chart": ("app", "1.0.0"), "want_chart": ("app", "1.1.0")},
         st.ReleaseState(st.OUT_OF_SYNC, "chart changed from app@1.0.0 to app@1.1.0")),
        # Changed spec: render first ...
        ({"spec_digest": OTHER}, st.ReleaseState(st.OUT_OF_SYNC, "values or chart files changed", render=True)),
        # ... then a different manifest upgrades, the same one is adopted (no revision).
        ({"spec_digest": OTHER, "checksum": "0" * 32},
         st.ReleaseState(st.OUT_OF_SYNC, "values or chart files changed: the rendered manifest changed")),
        ({"spec_digest": OTHER, "checksum": CHECKSUM},
         st.ReleaseState(st.IN_SYNC, "spec changed but renders the released manifest: no new revision", adopt=True)),
        # Already adopted for this revision: in sync, no render.
        ({"spec_digest": OTHER, "adopted": OTHER}, st.ReleaseState(st.IN_SYNC, "release is in sync")),
        # Absent resources upgrade even when the spec is unchanged.
        ({"absent": ("ConfigMap/ns/a",)}, st.ReleaseState(st.OUT_OF_SYNC, "absent resources: ConfigMap/ns/a")),
    ],
)
def test_content_state(kwargs: dict[str, Any], expected: st.ReleaseState) -> None:
    args: dict[str, Any] = {"maintenance": "", "spec_digest": DIGEST}
    args.update(kwargs)
    args["release_labels"] = {wire.SPEC_DIGEST: DIGEST, wire.MANIFEST_CHECKSUM: CHECKSUM,
                              **kwargs.get("release_labels", {})}
    assert st.content_state(**args) == expected


def test_release_state_is_spec_first_and_adopts_per_revision() -> None:
    latest = labelled(2, **{wire.MANIFEST_CHECKSUM: CHECKSUM})
    req = request(latest)
    req.spec_digest = OTHER
    assert st.determine_state(req, latest).render
    req.manifest_checksum = CHECKSUM
    assert st.determine_state(req, latest).adopt
    # Adopted for revision 2: no render needed any more; adopted for revision 1 only: render again.
    req.manifest_checksum = None
    req.status = dataclasses.replace(req.status, adopted_spec_digest=OTHER, adopted_revision=2)
    assert st.determine_state(req, latest) == st.ReleaseState(st.IN_SYNC, "release is in sync")
    req.status = dataclasses.replace(req.status, adopted_revision=1)
    assert st.determine_state(req, latest).render
    # Tests still count after an adoption.
    tested = dataclasses.replace(req, spec=TESTED, manifest_checksum=CHECKSUM)
    assert st.determine_state(tested, latest).status == st.IN_SYNC


def test_maintenance_hold_comes_before_history_and_stops_even_a_forced_upgrade() -> None:
    held = labelled(3, **{wire.MAINTENANCE: "true"})
    spec = with_spec(maintenance="NoResourceReconciliation")
    req = request(labelled(1), spec=spec, force=True)  # revision 3 was made by hand, meanwhile
    state_ = st.determine_state(req, held)
    assert (state_.status, state_.maintenance) == (st.IN_SYNC, True)
    assert na.next_action(req, state_, held) is None
    # Failed in maintenance: no remediation, an upgrade (as nelm's Service), within the retries.
    failed = request(obs(1, "failed"), spec=dataclasses.replace(spec, upgrade=UpgradeSpec(retries=1)),
                     last="upgrade", failures=FailureCounts(upgrade=1, total=1))
    assert na.next_action(failed, state(st.FAILED), None) == na.UPGRADE
    failed.status = dataclasses.replace(failed.status, failures=FailureCounts(upgrade=2, total=2))
    with pytest.raises(ExceededMaxRetries):
        na.next_action(failed, state(st.FAILED), None)


async def test_the_loop_renders_only_for_a_changed_spec_and_records_an_adoption() -> None:
    renders: list[str] = []

    async def checksum(req: Request) -> str:
        renders.append(req.spec_digest)
        return CHECKSUM

    ctx = ActionContext(helm=None, observer=cast(Any, None), api=None, checksum=checksum)
    loop = AtomicRelease(ctx)
    latest = labelled(1, **{wire.MANIFEST_CHECKSUM: CHECKSUM})
    req = request(latest)
    assert (await loop._decide(req, latest)).status == st.IN_SYNC
    assert renders == []
    req.spec_digest = OTHER
    decided = await loop._decide(req, latest)
    assert (decided.status, decided.adopt, renders) == (st.IN_SYNC, True, [OTHER])
    assert (req.status.adopted_spec_digest, req.status.adopted_revision) == (OTHER, 1)
    # A fresh request (a new process, the status persisted): decided without rendering.
    again = request(latest)
    again.spec_digest = OTHER
    again.status = dataclasses.replace(again.status, adopted_spec_digest=OTHER, adopted_revision=1)
    assert (await loop._decide(again, latest)).status == st.IN_SYNC
    assert renders == [OTHER]


def made(version: int, *, values: dict[str, Any] | None = None, status: str = "deployed",
         description: str = "Upgrade complete", tests: tuple[str, ...] = (),
         extra: dict[str, str] | None = None) -> Observation:
    """A revision as helmdeck's install or upgrade of ``request()``'s spec stores it (its release labels), with
    ``values`` (default none), test hooks ``tests`` (never run) and ``extra`` labels over them."""
    rel: dict[str, Any] = {"name": "app", "namespace": "ns", "version": version,
                           "info": {"status": status, "description": description},
                           "chart": {"metadata": {"name": "app", "version": "1.0.0"}}, "config": values or {},
                           "manifest": "", "hooks": [{"name": n, "kind": "Job", "events": ["test"]} for n in tests]}
    return observation_from_release(rel, labels={**request().release_labels, **(extra or {})})


def test_a_revision_made_from_this_spec_that_the_history_lacks_is_recorded_not_made_again() -> None:
    # Issue 32: a replica's helm upgraded to this spec (revision 2) while the replica was stopped; the one taking
    # over has revision 1 (of other values) as its newest. Helm's storage is the truth of what ran.
    old, new = made(1, values={"v": 0}, description="Install complete"), made(2)
    found = st.determine_state(request(old), new)
    assert (found.status, found.record) == (st.IN_SYNC, True), found
    assert "revision 2, made from this spec, recorded from storage" in found.reason
    assert st.determine_state(request(), made(1, description="Install complete")).record  # no status at all
    assert st.determine_state(request(made(2, status="pending-upgrade")), new).record  # kept while it ran
    # Tests still count: a recorded revision whose tests did not run is Untested.
    assert st.determine_state(request(old, spec=TESTED), made(2, tests=("t",))).status == st.UNTESTED

    # Not of this spec, or not made by an install or upgrade of it: Unmanaged, as before.
    other = request(old)
    other.values = {"v": 1}
    assert st.determine_state(other, new).status == st.UNMANAGED  # other values than the spec's
    assert st.determine_state(request(old), made(2, extra={wire.SPEC_DIGEST: OTHER})).status == st.UNMANAGED
    owned = request(old)
    owned.package_set = "mine"
    assert st.determine_state(owned, made(2, extra={wire.PACKAGE_SET: "elsewhere"})).status == st.UNMANAGED
    assert st.determine_state(owned, made(2, extra={wire.PACKAGE_SET: "mine"})).record
    assert st.determine_state(request(old), made(2, status="failed")).status == st.UNMANAGED
    # A hand `helm upgrade` keeps the last revision's labels: of the chart and values the history already
    # holds, it is a change outside helmdeck, not this spec's upgrade.
    assert st.determine_state(request(made(1)), made(2)).status == st.UNMANAGED
    assert st.determine_state(request(made(3)), made(2)).status == st.UNMANAGED  # older than the history's


class _Storage:
    """The observer's view a pass reads: the latest revision of the one release (no watch, no API)."""

    def __init__(self, latest: Observation) -> None:
        self.revision = latest

    def latest(self, _ns: str, _name: str) -> Observation:
        return self.revision

    def subscribe(self, _callback: Any) -> Any:
        return lambda: None


async def test_a_pass_records_a_revision_made_from_this_spec_under_the_fence_and_runs_no_helm() -> None:
    fenced: list[str] = []

    async def fence(_key: tuple[str, str], action: str, _timeout: float, _spec: object) -> None:
        fenced.append(action)

    ctx = ActionContext(helm=None, observer=cast(Any, _Storage(made(2))), api=None, fence=fence)
    req = request(made(1, values={"v": 0}, description="Install complete"), last="upgrade")
    result = await AtomicRelease(ctx).reconcile(req)  # helm=None: any helm action would fail
    assert (result.state, result.next, result.outcomes) == (st.IN_SYNC, "interval", ())
    assert fenced == ["record"]  # the claim (--shards auto) is taken, as for an action
    assert [s.version for s in req.status.history] == [2, 1]
    released = next(c for c in req.status.conditions if c.type == "Released")
    assert (released.status, released.reason) == ("True", "UpgradeSucceeded"), released
    assert "recorded, not run again" in released.message
    assert req.status.last is not None and (req.status.last.action, req.status.last.ok) == ("upgrade", True)
    ready = next(c for c in req.status.conditions if c.type == "Ready")
    assert ready.status == "True", ready


@pytest.mark.parametrize(("strategy", "state", "action"), [
    ("Reinstall", st.TARGET_CHANGED, na.UNINSTALL), ("InPlaceUpdate", st.OUT_OF_SYNC, na.UPGRADE)])
def test_a_packages_chart_of_another_name_follows_the_chart_name_change_strategy(
        strategy: str, state: str, action: str) -> None:
    """The Package kind decides a chart name change by the HelmRelease's rule (issue 34, behaviour 8; Flux's
    internal/action/verify.go ``ReleaseTargetChanged`` against the history's latest snapshot): under the default
    Reinstall the release is uninstalled first, under InPlaceUpdate upgraded; a pending release is uninstalled
    too, as Flux checks the target before anything else."""
    renamed = dataclasses.replace(CHART, name="other")
    spec = with_spec(upgrade=UpgradeSpec(chart_name_change=strategy))
    req = dataclasses.replace(request(obs(), spec=spec), chart=renamed)
    decided = st.determine_state(req, obs())
    assert decided.status == state
    assert na.next_action(req, decided, obs()) == action
    if strategy == "Reinstall":
        assert st.determine_state(req, obs(2, "pending-upgrade")).status == st.TARGET_CHANGED


def test_a_flux_release_with_chart_values_files_compares_its_version_without_the_generation() -> None:
    """source-controller versions a HelmChart with ``valuesFiles`` ``<version>+<its generation>``
    (internal/controller/helmchart_controller.go ``buildFromHelmRepository``, ``VersionMetadata``): a release Flux
    made so is in sync with the document's chart; another version, or a chart without valuesFiles, is not."""
    template = ChartTemplate("app", SourceRef("HelmRepository", "charts", "ns"), values_files=("values-prod.yaml",))
    req = request(spec=with_spec(chart_source=template))
    assert st.flux_state(req, obs(chart_version="1.0.0+3")).status == st.IN_SYNC
    assert st.flux_state(req, obs(chart_version="0.9.0+3")).status == st.OUT_OF_SYNC
    plain = request(spec=with_spec(chart_source=dataclasses.replace(template, values_files=())))
    assert st.flux_state(plain, obs(chart_version="1.0.0+3")).status == st.OUT_OF_SYNC


@pytest.mark.parametrize(("previous", "why"), [
    (None, None), (("ns", "app"), None),
    (("old", "app"), "release namespace changed from old/app to ns/app: uninstall old/app, then install"),
    (("ns", "web"), "release name changed from ns/web to ns/app: uninstall ns/web, then install"),
])
def test_a_changed_release_target_is_named_as_flux_compares_it(previous: tuple[str, str] | None,
                                                               why: str | None) -> None:
    """internal/action/verify.go ``ReleaseTargetChanged``: the release namespace first, then the name; the same
    rule for a Package (its targetNamespace) and a HelmRelease."""
    assert st.release_target_changed(previous, ("ns", "app")) == why


@pytest.mark.parametrize(("previous", "stored_in", "why"), [
    (("ns", "app"), "ns", None),
    (("ns", "app"), "", None),  # unknown: not compared
    (("ns", "app"), "flux",
     "storage namespace changed from flux to ns: uninstall ns/app (stored in flux), then install"),
    # a Package's targetNamespace moves its storage too: Flux names the storage namespace first
    (("old", "app"), "old",
     "storage namespace changed from old to ns: uninstall old/app (stored in old), then install"),
    (("old", "app"), "", "release namespace changed from old/app to ns/app: uninstall old/app, then install"),
    (("ns", "web"), "ns", "release name changed from ns/web to ns/app: uninstall ns/web, then install"),
])
def test_a_changed_storage_namespace_is_a_release_target_change_named_first(
    previous: tuple[str, str], stored_in: str, why: str | None,
) -> None:
    """internal/action/verify.go ``ReleaseTargetChanged`` compares ``GetStorageNamespace`` with the recorded
    ``status.storageNamespace`` before the release namespace and name (and skips it while none is recorded)."""
    assert st.release_target_changed(previous, ("ns", "app"), stored_in=stored_in, storage_ns="ns") == why


def test_untested_until_every_test_succeeded_or_one_failed() -> None:
    """internal/reconcile/state.go ``DetermineReleaseState`` asks api/v2 ``Snapshot.HasBeenTested``: a test hook
    still running (or never run beside one that succeeded) leaves the release untested."""
    for tests in ({"t": "Succeeded", "u": "Running"}, {"t": "Succeeded", "u": ""}):
        assert st.determine_state(request(obs(tests=tests), spec=TESTED), obs(tests=tests)).status == st.UNTESTED
    done = {"t": "Succeeded", "u": "Failed"}
    assert st.determine_state(request(obs(tests=done), spec=TESTED), obs(tests=done)).status == st.IN_SYNC


_EIGHT = (obs(8), *(obs(v, "failed") for v in range(7, 2, -1)), obs(2, "superseded"), obs(1, "superseded"))
_RETRY = UpgradeSpec(on_failure="RetryOnFailure")


@pytest.mark.parametrize(("state", "spec", "failures", "last", "kept"), [
    (st.IN_SYNC, None, None, "upgrade", 7),  # Truncate: down to the rollback target, 2
    (st.IN_SYNC, with_spec(upgrade=_RETRY), None, "upgrade", 5),  # TruncateIgnoringPreviousSnapshots
    (st.FAILED, with_spec(upgrade=UpgradeSpec(retries=3)), FailureCounts(upgrade=1, total=1), "upgrade", 7),
    (st.FAILED, None, FailureCounts(), "upgrade", 8),  # the failure predates a spec change: upgraded, not trimmed
    (st.FAILED, with_spec(upgrade=_RETRY), FailureCounts(upgrade=1, total=1), "upgrade", 5),
    (st.FAILED, None, FailureCounts(upgrade=1, total=1), "upgrade", 8),  # retries exhausted: stalls untrimmed
    (st.OUT_OF_SYNC, None, None, "upgrade", 8),
    (st.UNTESTED, None, None, "upgrade", 8),
])
def test_history_is_trimmed_where_flux_trims_it(state: str, spec: PackageSpec | None,
                                                failures: FailureCounts | None, last: str, kept: int) -> None:
    """internal/reconcile/atomic_release.go ``actionForState``: in sync, Truncate (or, under RetryOnFailure,
    TruncateIgnoringPreviousSnapshots); failed, the same before a remediation (or a RetryOnFailure upgrade), not
    before an upgrade for a changed spec nor once retries are exhausted; no other state trims. ``maxHistory``
    plays no part (it bounds helm's storage)."""
    req = request(*_EIGHT, spec=spec, failures=failures, last=last)
    req.spec = dataclasses.replace(req.spec, max_history=1)
    trimmed = na.trimmed_history(req, st.ReleaseState(state, ""))
    assert [s.version for s in trimmed] == list(range(8, 8 - kept, -1))
