"""Table-driven unit tests of the pure decisions: release state and next action."""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path
from typing import Any

import pytest

from engine import labels
from engine.package import Chart, InstallSpec, PackageSpec, TestSpec, UpgradeSpec
from engine.reconcile import next_action as na
from engine.reconcile import state as st
from engine.reconcile.atomic import AtomicRelease
from engine.reconcile.errors import ExceededMaxRetries, MissingRollbackTarget, ReleaseLocked
from engine.reconcile.request import Request
from engine.reconcile.status import EngineStatus, FailureCounts
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
    return observation_from_release(rel, labels={labels.SPEC_DIGEST: digest})


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


def test_failure_counters_reset_when_the_spec_changes() -> None:
    req = request(obs(), failures=FailureCounts(upgrade=3, total=3))
    req.status = dataclasses.replace(req.status, last_attempted_spec_digest=DIGEST,
                                     last_attempted_chart_version=CHART.version)
    assert not AtomicRelease.reset_on_spec_change(req)
    assert req.status.failures.upgrade == 3
    req.spec_digest = "f" * 32
    assert AtomicRelease.reset_on_spec_change(req)
    assert req.status.failures == FailureCounts()


def test_maintenance_label_and_absent_resources_make_a_release_out_of_sync() -> None:
    in_maintenance = observation_from_release(
        {"name": "app", "namespace": "ns", "version": 1, "info": {"status": "deployed"},
         "chart": {"metadata": {"name": "app", "version": "1.0.0"}}, "config": {}, "manifest": ""},
        labels={labels.SPEC_DIGEST: DIGEST, labels.MAINTENANCE: "true"})
    req = request(in_maintenance)
    req.release_labels = {labels.MAINTENANCE: "false"}
    assert st.determine_state(req, in_maintenance) == st.ReleaseState(st.OUT_OF_SYNC, "leaving maintenance")
    req.release_labels = {labels.MAINTENANCE: "true"}
    assert st.determine_state(req, in_maintenance).status == st.IN_SYNC
    req = request(obs())
    req.absent = ("ConfigMap/ns/app",)
    assert st.determine_state(req, obs()).reason == "absent resources: ConfigMap/ns/app"
    req = request(obs())
    req.release_labels = {labels.MANIFEST_CHECKSUM: "x" * 32}
    assert st.determine_state(req, obs()).reason == "the rendered manifest changed"
