"""The release audit's logic (testkit/release_audit.py) on small in-memory inputs: who acted on a release when,
and what it must refuse; the Events' start and end reasons it reads (engine/runtime/cluster/object_status.py); the
helm process log its wrapper writes."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from engine.runtime.cluster.object_status import event_reason, micro_time
from engine.runtime.state import LogEntry
from testkit.release_audit import (
    ActionEvent,
    AuditInput,
    HelmProcess,
    Revision,
    audit,
    extra_upgrades,
    helm_wrapper,
    intervals,
    read_processes,
    replica_of,
)

WEB = ("apps", "web")


def _action(replica: str, start: float, end: float | None, action: str = "upgrade",
            release: tuple[str, str] = WEB) -> list[ActionEvent]:
    word = action.capitalize()
    out = [ActionEvent(release, replica, action, f"{word}Started", start)]
    if end is not None:
        out.append(ActionEvent(release, replica, action, f"{word}Succeeded", end))
    return out


def _kinds(data: AuditInput) -> list[str]:
    return [f.kind for f in audit(data)]


def test_actions_one_after_another_by_two_replicas_pass() -> None:
    events = _action("a", 10.0, 14.0) + _action("b", 14.5, 18.0) + _action("a", 20.0, 22.0, release=("apps", "db"))
    revisions = [Revision(WEB, 1, "superseded", 10.2), Revision(WEB, 2, "deployed", 14.6)]
    assert audit(AuditInput(events, revisions, until=100.0)) == []


def test_two_replicas_acting_on_one_release_at_once_are_flagged() -> None:
    events = _action("a", 10.0, 14.0) + _action("b", 13.0, 18.0)
    [found] = audit(AuditInput(events, until=100.0))
    assert found.kind == "overlap" and found.release == WEB
    assert "UpgradeStarted by a [10.000, 14.000]" in found.text and "by b [13.000, 18.000]" in found.text


def test_overlaps_on_different_releases_are_not_flagged() -> None:
    events = _action("a", 10.0, 14.0) + _action("b", 11.0, 18.0, release=("apps", "db"))
    assert audit(AuditInput(events, until=100.0)) == []


def test_one_replica_acting_twice_at_once_is_flagged() -> None:
    events = _action("a", 10.0, 14.0) + _action("a", 12.0, 13.0, action="test")
    [found] = audit(AuditInput(events, until=100.0))
    assert found.kind == "overlap" and found.text.startswith("one replica twice")


def test_a_paused_replica_acted_until_its_helm_process_ended() -> None:
    # a's controller is SIGSTOPped at 11 and continued at 40: it records the end only then, though its helm (not
    # stopped) ended at 13; b took the release over at 20.
    events = _action("a", 10.0, 40.0) + _action("b", 20.0, 25.0)
    helm = [HelmProcess(WEB, "a", "upgrade", 10.1, 13.0), HelmProcess(WEB, "b", "upgrade", 20.1, 24.9)]
    assert audit(AuditInput(events, processes=helm, until=100.0)) == []
    assert _kinds(AuditInput(events, until=100.0)) == ["overlap"]  # the Events alone cannot tell
    late = [HelmProcess(WEB, "a", "upgrade", 10.1, 21.0), helm[1]]  # a's helm still ran when b's began
    assert "overlap" in _kinds(AuditInput(events, processes=late, until=100.0))


def test_a_killed_replicas_action_lasts_until_its_death_and_its_orphaned_helm_until_it_ends() -> None:
    events = _action("a", 10.0, None) + _action("b", 16.0, 19.0)
    orphan = [HelmProcess(WEB, "a", "upgrade", 10.1, 15.0)]
    assert audit(AuditInput(events, processes=orphan, deaths={"a": 12.0}, until=100.0)) == []
    # Its helm's end cuts the action short too; with neither known, the action never ended: b's overlaps it.
    assert audit(AuditInput(events, processes=orphan, until=100.0)) == []
    assert _kinds(AuditInput(events, until=100.0)) == ["overlap"]
    # b began while a's orphaned helm still ran (a release b would find pending, or a second helm on it).
    still = [HelmProcess(WEB, "a", "upgrade", 10.1, 17.0)]
    [found] = audit(AuditInput(events, processes=still, deaths={"a": 12.0}, until=100.0))
    assert found.kind == "overlap" and "helm upgrade by a" in found.text


def test_a_start_whose_helm_was_not_run_is_no_action() -> None:
    # a froze between its claim and the spawn (SIGSTOP); b took the claim over and upgraded; woken, a's recheck
    # refused its helm (engine/reconcile/action.py: "Helm upgrade not run: ...") and closed its Event late.
    refused = [ActionEvent(WEB, "a", "upgrade", "UpgradeStarted", 10.0),
               ActionEvent(WEB, "a", "upgrade", "UpgradeCancelled", 30.0,
                           "Helm upgrade not run: no membership Lease write for over 2s since the claim")]
    events = refused + _action("b", 20.0, 25.0)
    helm = [HelmProcess(WEB, "b", "upgrade", 20.1, 24.9)]
    assert audit(AuditInput(events, processes=helm, until=100.0)) == []
    assert audit(AuditInput(events, until=100.0)) == []
    # A helm process of a's within it says it ran after all: the overlap stands.
    ran = [HelmProcess(WEB, "a", "upgrade", 19.0, 22.0), *helm]
    assert "overlap" in _kinds(AuditInput(events, processes=ran, until=100.0))


def test_a_start_without_an_end_ends_at_the_next_start() -> None:
    spans = intervals(_action("a", 10.0, None) + _action("a", 30.0, 31.0))
    assert [(s.start, s.end) for s in spans] == [(10.0, 30.0), (30.0, 31.0)]


def test_pending_in_progress_and_unaccounted_revisions_are_flagged() -> None:
    events = [*_action("a", 10.0, 14.0), ActionEvent(
        WEB, "b", "upgrade", "UpgradeFailed", 30.0,
        "Helm upgrade failed: another operation (install/upgrade/rollback) is in progress")]
    revisions = [Revision(WEB, 1, "deployed", 10.5), Revision(WEB, 2, "pending-upgrade", 50.0)]
    found = audit(AuditInput(events, revisions, logs=["x\nError: UPGRADE FAILED: another operation "
                                                      "(install/upgrade/rollback) is in progress\n"], until=100.0))
    assert sorted(f.kind for f in found) == ["in-progress", "in-progress", "pending", "unaccounted"]
    assert any(f.kind == "pending" and "revision 2 left pending-upgrade" in f.text for f in found)


def test_packages_not_converged_are_findings() -> None:
    found = audit(AuditInput(unconverged={WEB: "generation 3, observed 2"}, until=1.0))
    assert [str(f) for f in found] == ["not-converged apps/web: generation 3, observed 2"]


def _made(version: int, status: str, values: str, description: str = "Upgrade complete") -> Revision:
    return Revision(WEB, version, status, 10.0 * version, description, f"0.1.0 {values}")


def test_more_upgrades_than_edits_or_one_edit_upgraded_twice_are_findings() -> None:
    install = _made(1, "superseded", "v0", "Install complete")
    # Two edits, two upgrades (a rollback is no upgrade): fine. A release not counted (no Package) is not judged.
    fine = [install, _made(2, "superseded", "e1"), _made(3, "superseded", "e2"), _made(4, "deployed", "e1",
                                                                                       "Rollback to 2")]
    assert extra_upgrades(fine, {WEB: 2}) == []
    assert extra_upgrades([install, _made(2, "superseded", "e1"), _made(3, "deployed", "e2")], {}) == []
    # One edit upgraded twice (a takeover redoing what the paused replica's helm finished): both findings.
    twice = [install, _made(2, "superseded", "e1"), _made(3, "deployed", "e1")]
    found = [str(f) for f in extra_upgrades(twice, {WEB: 1})]
    assert found == ["upgrades apps/web: 2 upgrades for 1 edits: revisions 2 (superseded), 3 (deployed)",
                     "upgrades apps/web: revisions 2 and 3 were both upgrades to the same chart and values"]
    # A cancelled upgrade (a handover) redone by the new owner: the same edit twice, though two edits were made.
    redone = [install, _made(2, "failed", "e2"), _made(3, "deployed", "e2")]
    assert [f.kind for f in extra_upgrades(redone, {WEB: 2})] == ["upgrades"]
    # ... and the audit reports them with the rest.
    assert "upgrades" in _kinds(AuditInput(revisions=twice, edits={WEB: 1}, until=100.0))


def test_the_replica_of_a_default_identity_is_its_pid() -> None:
    assert replica_of("ctl-host-4242-a1b2") == "pid 4242"
    assert replica_of("helmdeck-member-x") == "helmdeck-member-x"


def test_an_action_start_and_every_end_are_event_reasons() -> None:
    def reason(action: str, outcome: str) -> str | None:
        return event_reason(LogEntry(0.0, WEB, "web", action, outcome, ""))

    assert reason("upgrade", "started") == "UpgradeStarted"
    assert reason("correct-drift", "started") == "CorrectDriftStarted"
    assert reason("uninstall-remediation", "started") == "UninstallStarted"
    assert reason("correct-drift", "failed") == "CorrectDriftFailed"  # an end for every start
    assert reason("unlock", "failed") == "UnlockFailed"
    assert reason("upgrade", "succeeded") == "UpgradeSucceeded"
    assert reason("reconcile", "info") is None
    assert micro_time(1796161607.25) == "2026-12-01T21:46:47.250000Z"


def test_the_helm_wrapper_logs_each_process_and_passes_on_its_exit_code(tmp_path: Path) -> None:
    fake = tmp_path / "helm"
    fake.write_text("#!/bin/sh\nsleep \"${SLEEP:-0}\"\nexit 3\n")
    fake.chmod(0o755)
    wrapper, log = helm_wrapper(tmp_path, str(fake))
    done = subprocess.run([str(wrapper), "upgrade", "web", "chart", "--namespace", "apps"], check=False)
    assert done.returncode == 3
    subprocess.run([str(wrapper), "upgrade", "web", "chart", "--dry-run=server", "--namespace", "apps"], check=False)
    subprocess.run([str(wrapper), "version"], check=False)
    # The controller cancels by signalling helm's process group: helm stops, the wrapper still writes the end.
    proc = subprocess.Popen([str(wrapper), "install", "db", "chart", "--namespace", "apps"], start_new_session=True,
                            env={**os.environ, "SLEEP": "30"})
    time.sleep(0.5)
    os.killpg(proc.pid, signal.SIGTERM)
    assert proc.wait(10) != 0
    first, second = read_processes(log)
    assert (first.release, first.command, first.replica) == (WEB, "upgrade", f"pid {os.getpid()}")
    assert first.end is not None and first.end >= first.start
    assert (second.release, second.command) == (("apps", "db"), "install")
    assert second.end is not None and second.end - second.start < 10
