"""Snapshots and history (Flux semantics), pure unit tests."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

import pytest

from engine.reconcile.status import EngineStatus
from engine.storage import History, HistoryFormatError, Snapshot, TestHookRun, observation_from_release
from tests.storage_records import release


def snap(version: int, status: str = "superseded", test_phase: str | None = None, *phases: str) -> Snapshot:
    return Snapshot(
        digest=f"sha256:{version:064x}", name="web", namespace="demo", version=version, status=status,
        chart_name="web", chart_version="0.2.0", app_version="1.27", config_digest="sha256:" + "0" * 64,
        test_hooks=tuple(TestHookRun(f"web-test-{i}" if i else "web-test", p)
                         for i, p in enumerate((test_phase, *phases))) if test_phase is not None else (),
    )


def test_snapshot_from_observation_keeps_digests_and_test_runs() -> None:
    obs = observation_from_release(release(version=4))
    s = Snapshot.from_observation(obs)
    assert (s.digest, s.config_digest, s.version, s.status) == (obs.digest, obs.config_digest, 4, "deployed")
    assert (s.chart_name, s.chart_version, s.app_version) == ("web", "0.2.0", "1.27")
    # As metav1.Time writes them (helm-controller's ObservedToSnapshot: metav1.NewTime): UTC, whole seconds.
    assert (obs.first_deployed, obs.last_deployed) == ("2026-11-30T10:00:00.123456789Z", "2026-11-30T10:05:00.5+01:00")
    assert (s.first_deployed, s.last_deployed, s.deleted) == ("2026-11-30T10:00:00Z", "2026-11-30T09:05:00Z", "")
    assert (s.action, s.oci_digest) == ("", "")
    assert s.test_hooks == (TestHookRun("web-test", "Succeeded", "2026-11-30T10:06:00Z", "2026-11-30T10:06:05Z"),)
    assert s.has_been_tested() and s.has_test_in_phase("Succeeded") and not s.has_test_in_phase("Failed")


def test_snapshot_verifies_its_revision_by_fluxs_digest() -> None:
    """Flux's internal/action/verify.go ``VerifyReleaseObject``: a snapshot of ``apiVersion`` v2 verifies the stored
    revision whose digest it recorded; the same revision changed (another status) does not verify, nor does another
    revision. A snapshot persisted before (no ``apiVersion``, helmdeck's older digest) is not compared by digest:
    name, namespace and version decide, as Flux's migration from older snapshots."""
    obs = observation_from_release(release(version=4))
    s = Snapshot.from_observation(obs)
    assert s.api_version == "v2" and s.verifies(obs)
    changed = observation_from_release(release(version=4, status="superseded"))
    assert not s.verifies(changed)
    assert not s.verifies(observation_from_release(release(version=5)))
    legacy = Snapshot.from_dict({k: v for k, v in s.to_dict().items() if k != "api_version"} | {"digest": "sha256:x"})
    assert legacy.api_version == "" and legacy.verifies(obs) and legacy.verifies(changed)
    assert not legacy.verifies(observation_from_release(release(version=5)))
    assert Snapshot.from_dict(s.to_dict()) == s


def test_untested_snapshot() -> None:
    rel = release()
    rel["hooks"][0]["last_run"] = {"phase": "", "started_at": "", "completed_at": ""}
    s = Snapshot.from_observation(observation_from_release(rel))
    assert len(s.test_hooks) == 1 and not s.has_been_tested()


@pytest.mark.parametrize(("phases", "tested"), [
    ((), True), (("",), False), (("Succeeded",), True), (("Failed",), True), (("Succeeded", "Failed"), True),
    (("Failed", ""), True), (("Succeeded", ""), False), (("Running",), False), (("Unknown",), False)])
def test_has_been_tested_is_fluxs(phases: tuple[str, ...], tested: bool) -> None:
    """api/v2 snapshot_types.go ``Snapshot.HasBeenTested``, on the cases of its own test
    (snapshot_types_test.go ``TestSnapshots_HasBeenTested``): one failed hook, or every hook succeeded. No test hook
    at all counts as tested (Flux's empty result: helmdeck runs no ``helm test`` for a chart without any)."""
    assert snap(2, "deployed", *phases).has_been_tested() is tested
    # Only the hooks the filters select count: a failed one filtered out is not a result.
    assert snap(2, "deployed", "Failed", "").has_been_tested(lambda name: name != "web-test") is False


def test_history_is_newest_first_whatever_the_input_order() -> None:
    h = History((snap(1), snap(3, "deployed"), snap(2)))
    assert [s.version for s in h] == [3, 2, 1]
    assert h.latest() == snap(3, "deployed") and len(h) == 3 and h[1] == snap(2)
    assert History().latest() is None


def test_previous_is_the_first_older_deployed_or_superseded() -> None:
    h = History((snap(5, "failed"), snap(4, "failed"), snap(3, "uninstalled"), snap(2), snap(1, "deployed")))
    prev = h.previous()
    assert prev is not None and prev.version == 2
    assert History((snap(2, "deployed"),)).previous() is None
    assert History((snap(2), snap(1, "pending-upgrade"))).previous() is None


def test_previous_skips_failed_tests_unless_ignored() -> None:
    h = History((snap(3, "deployed"), snap(2, test_phase="Failed"), snap(1, test_phase="Succeeded")))
    prev = h.previous()
    assert prev is not None and prev.version == 1
    prev = h.previous(ignore_test_failures=True)
    assert prev is not None and prev.version == 2


def test_updated_replaces_the_snapshot_of_the_same_revision_only() -> None:
    pending = observation_from_release(release(version=2, status="pending-upgrade"))
    unlocked = observation_from_release(release(version=2, status="failed"))
    h = History((Snapshot.from_observation(pending), snap(1, "deployed")))
    after = h.updated(unlocked)
    assert [(s.version, s.status) for s in after] == [(2, "failed"), (1, "deployed")]
    assert after[0].digest == unlocked.digest != pending.digest and h[0].status == "pending-upgrade"
    other = observation_from_release(release(version=7))
    assert h.updated(other) is h  # not one of its revisions


def _versions(h: History) -> list[tuple[int, str]]:
    return [(s.version, s.status) for s in h]


def test_truncate_is_fluxs() -> None:
    """api/v2 snapshot_types.go ``Snapshots.Truncate`` on the inputs of its own test (snapshot_types_test.go
    ``TestSnapshots_Truncate``): down to the rollback target (Previous: deployed or superseded, its tests not
    failed unless ignored); without one, the 5 newest. The history itself is not changed."""
    h = History((snap(1), snap(3, "failed"), snap(2), snap(4, "deployed")))
    assert _versions(h.truncate()) == [(4, "deployed"), (3, "failed"), (2, "superseded")] and len(h) == 4
    tested = History((snap(4, "deployed"), snap(3, "superseded", "Failed", ""),
                      snap(2, "superseded", "Succeeded", "Succeeded", "Succeeded"), snap(1)))
    assert [s.version for s in tested.truncate()] == [4, 3, 2]
    assert [s.version for s in tested.truncate(ignore_tests=True)] == [4, 3]
    failed = History((snap(6, "deployed"), *(snap(v, "failed") for v in range(1, 6))))
    assert [s.version for s in failed.truncate()] == [6, 5, 4, 3, 2]
    assert [s.version for s in History((snap(1, "deployed"),)).truncate()] == [1]
    # Not bounded by 5 when the rollback target is older: Flux keeps it.
    far = History((snap(9, "failed"), *(snap(v, "failed") for v in range(2, 9)), snap(1)))
    assert [s.version for s in far.truncate()] == list(range(9, 0, -1))


def test_truncate_ignoring_previous_is_fluxs() -> None:
    """api/v2 ``Snapshots.TruncateIgnoringPreviousSnapshots`` (its test's inputs): the 5 newest, whatever they
    are (RetryOnFailure rolls nothing back)."""
    h = History((snap(1), snap(3, "failed"), snap(2), snap(4, "deployed")))
    assert _versions(h.truncate_ignoring_previous()) == _versions(h)
    h = History((snap(7, "deployed"), snap(6, "failed"), *(snap(v) for v in range(1, 6))))
    assert [s.version for s in h.truncate_ignoring_previous()] == [7, 6, 5, 4, 3]
    assert len(h.clear()) == 0 and len(h) == 7


def test_history_json_round_trip() -> None:
    h = History((snap(2, "deployed", "Failed"), snap(1)))
    text = h.to_json()
    doc = json.loads(text)
    assert doc["format"] == 1 and doc["snapshots"][0]["test_hooks"][0] == {
        "name": "web-test", "phase": "Failed", "started_at": "", "completed_at": ""}
    assert History.from_json(text) == h
    assert History.from_list(h.to_list()) == h
    # Unknown keys from a newer writer are ignored.
    newer = h.to_list()
    newer[0]["future"] = 1
    assert History.from_list(newer) == h


def _broken(**change: Any) -> list[dict[str, Any]]:
    item = snap(1).to_dict()
    item.update(change)
    return [item]


@pytest.mark.parametrize(
    "items",
    [_broken(version="1"), _broken(digest=None), _broken(version=True), _broken(test_hooks={}),
     _broken(test_hooks=[{"name": 1}]), [1]],
)
def test_bad_serialised_history_raises_the_typed_error(items: list[Any]) -> None:
    with pytest.raises(HistoryFormatError):
        History.from_list(items)


@pytest.mark.parametrize("text", ["{", "[]", '{"format": 2, "snapshots": []}', '{"format": 1, "snapshots": "x"}'])
def test_bad_history_json(text: str) -> None:
    with pytest.raises(HistoryFormatError):
        History.from_json(text)


def test_snapshots_are_frozen() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        snap(1).status = "x"  # type: ignore[misc]


def test_engine_status_json_round_trip_and_what_it_refuses() -> None:
    # A start reads every persisted status (orjson, json for what orjson cannot read): the same values either way.
    status = EngineStatus(history=History((snap(2, "deployed", "Succeeded"), snap(1))), adopted_revision=2,
                          package="apps/web", depends_on=("apps/db",))
    assert EngineStatus.from_json(status.to_json()) == status
    big = json.loads(status.to_json()) | {"adoptedRevision": 2**70}  # past 64 bits: orjson refuses, json reads
    assert EngineStatus.from_json(json.dumps(big)).adopted_revision == 2**70
    for text in ("{", "[]", '{"schema": "other"}', "NaN"):
        with pytest.raises(ValueError):
            EngineStatus.from_json(text)


OCI = "sha256:" + "a" * 64
OCI_NEW = "sha256:" + "b" * 64


def _obs(version: int, status: str, test_phase: str = "Succeeded") -> Any:
    rel = release(version=version, status=status)
    rel["hooks"][0]["last_run"]["phase"] = test_phase
    return observation_from_release(rel)


def _actions(h: History) -> list[tuple[int, str, str, str]]:
    return [(s.version, s.status, s.action, s.oci_digest) for s in h]


def test_record_an_install_and_an_upgrade_as_flux() -> None:
    """internal/reconcile/release.go ``recordOnObject`` with ``mutateOCIDigest`` and ``mutateAction``: the new
    revision records the action and the pass's OCI digest, hashed into its digest; the revision it superseded is
    recorded anew from its Observation, which carries no action, its OCI digest kept."""
    installed = History().record({1: _obs(1, "deployed")}, "install", OCI)
    assert _actions(installed) == [(1, "deployed", "install", OCI)]
    assert installed[0].digest == _obs(1, "deployed").digest_with(OCI) != _obs(1, "deployed").digest
    upgraded = installed.record({1: _obs(1, "superseded"), 2: _obs(2, "deployed")}, "upgrade", OCI_NEW)
    assert _actions(upgraded) == [(2, "deployed", "upgrade", OCI_NEW), (1, "superseded", "", OCI)]
    assert upgraded[1].digest == _obs(1, "superseded").digest_with(OCI) and upgraded[1].verifies(_obs(1, "superseded"))
    # A revision storage holds unchanged keeps its snapshot (the consistent read returns every revision).
    assert upgraded.record({1: _obs(1, "superseded"), 2: _obs(2, "deployed")}, "upgrade", OCI_NEW) == upgraded


def test_an_upgrade_after_revisions_made_beside_it_records_only_its_own() -> None:
    """internal/reconcile/release.go ``recordOnObject``: of the revisions an upgrade observed, only the newest is
    prepended; an older one is recorded only where a snapshot of it exists. Revisions someone else's helm made
    (Unmanaged: 2 and 3 here) are not recorded by the upgrade that follows them, nor is an existing release's
    past when the history is empty."""
    installed = History().record({1: _obs(1, "deployed")}, "install", OCI)
    beside = {1: _obs(1, "superseded"), 2: _obs(2, "superseded"), 3: _obs(3, "superseded"), 4: _obs(4, "deployed")}
    assert [s.version for s in installed.record(beside, "upgrade", OCI_NEW)] == [4, 1]
    assert _actions(History().record(beside, "upgrade", OCI_NEW)) == [(4, "deployed", "upgrade", OCI_NEW)]


def test_record_a_rollback_an_uninstall_an_unlock_and_a_test_as_flux() -> None:
    """rollback_remediation.go ``observeRollback``: the new revision is recorded without an OCI digest, then with
    the action ``rollback`` by the rollback's last write; the revision rolled back from records ``rollback``, its
    OCI digest kept. uninstall.go ``observeUninstall``: ``uninstall`` or ``uninstall-remediation``. unlock.go
    ``observeUnlock`` and test.go: the snapshot's own action and OCI digest."""
    h = History().record({1: _obs(1, "deployed")}, "install", OCI)
    h = h.record({1: _obs(1, "superseded"), 2: _obs(2, "failed")}, "upgrade", OCI_NEW)
    rolled = h.record({1: _obs(1, "superseded"), 2: _obs(2, "superseded"), 3: _obs(3, "deployed")}, "rollback",
                      OCI_NEW)
    assert _actions(rolled) == [(3, "deployed", "rollback", ""), (2, "superseded", "rollback", OCI_NEW),
                                (1, "superseded", "", OCI)]
    gone = rolled.record({3: _obs(3, "uninstalled")}, "uninstall-remediation", OCI_NEW)
    assert _actions(gone)[0] == (3, "uninstalled", "uninstall-remediation", "")
    pending = History().record({1: _obs(1, "pending-install")}, "install", OCI)
    assert _actions(pending.record({1: _obs(1, "failed")}, "unlock")) == [(1, "failed", "install", OCI)]
    untested = History().record({1: _obs(1, "deployed", test_phase="")}, "upgrade", OCI)
    tested = untested.record({1: _obs(1, "deployed")}, "test")
    assert _actions(tested) == _actions(untested) and tested[0].digest == untested[0].digest
    assert not untested[0].has_been_tested() and tested[0].has_been_tested()


def test_old_snapshot_times_read_as_metav1() -> None:
    """A snapshot persisted with helm's times (nanoseconds, an offset) reads back with Flux's."""
    item = snap(1).to_dict() | {"first_deployed": "2026-11-30T10:00:00.123456789+01:00", "deleted": ""}
    item["test_hooks"] = [{"name": "t", "phase": "Failed", "started_at": "2026-11-30T10:00:00.5Z",
                           "completed_at": ""}]
    read = Snapshot.from_dict(item)
    assert (read.first_deployed, read.deleted) == ("2026-11-30T09:00:00Z", "")
    assert read.test_hooks == (TestHookRun("t", "Failed", "2026-11-30T10:00:00Z", ""),)
