"""Reconcile scenarios end to end: real local cluster, real helm, one namespace each."""

from __future__ import annotations

import shutil
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes import client

from engine.base import wire
from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.reconcile import conditions as cond
from engine.reconcile import state as st
from engine.storage.codec import record_name
from testkit.release_audit import helm_wrapper
from tests.reconcile_harness import EXAMPLES, Scenario

pytestmark = pytest.mark.cluster


@pytest.fixture
async def sc(helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path) -> AsyncIterator[Scenario]:
    scenario = Scenario(helm, kube_target, namespace, tmp_path)
    yield scenario
    await scenario.stop()


def condition(sc: Scenario, type_: str) -> cond.Condition | None:
    assert sc.engine is not None
    status = sc.engine.status(sc.key)
    return cond.get(status.conditions, type_) if status else None


async def test_in_sync_does_nothing_also_after_a_restart(sc: Scenario) -> None:
    sc.write()
    await sc.start()
    first = await sc.run()
    assert [o.action for o in first.outcomes] == ["install"] and first.state == st.IN_SYNC
    again = await sc.run()
    assert again.outcomes == () and again.state == st.IN_SYNC
    await sc.restart()  # a new engine reads the persisted status
    after = await sc.run()
    assert after.outcomes == () and after.state == st.IN_SYNC
    assert sc.revisions() == [(1, "deployed")]
    ready = condition(sc, cond.READY)
    assert ready is not None and ready.status == "True" and ready.reason == cond.INSTALL_SUCCEEDED


async def test_forced_upgrade_of_an_in_sync_release(sc: Scenario) -> None:
    sc.write()
    await sc.start()
    await sc.run()
    forced = await sc.run(force=True)
    assert [o.action for o in forced.outcomes] == ["upgrade"]
    assert sc.revisions()[0] == (2, "deployed")


async def test_values_and_chart_changes_upgrade(sc: Scenario, tmp_path: Path) -> None:
    chart = tmp_path / "chart"
    shutil.copytree(EXAMPLES / "charts" / "flaky", chart)
    sc.chart = str(chart)  # an absolute path works as the chart reference too
    sc.write("{message: one}")
    await sc.start()
    await sc.run()
    sc.write("{message: two}")
    result = await sc.run()
    assert [o.action for o in result.outcomes] == ["upgrade"] and sc.revisions()[0] == (2, "deployed")
    latest = sc.latest()
    assert latest is not None and latest.config == {"message": "two"}
    # A chart file changes without a version bump: still an upgrade.
    (chart / "templates" / "extra.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-extra\ndata: {a: b}\n")
    result = await sc.run()
    assert [o.action for o in result.outcomes] == ["upgrade"] and sc.revisions()[0] == (3, "deployed")
    # A chart version bump: upgrade, and the chart version is the new one.
    meta = chart / "Chart.yaml"
    meta.write_text(meta.read_text().replace("version: 0.1.0", "version: 0.2.0"))
    await sc.run()
    latest = sc.latest()
    assert latest is not None and (latest.version, latest.chart_version) == (4, "0.2.0")


def _helm_commands(log: Path) -> list[list[str]]:
    """The commands :func:`testkit.release_audit.helm_wrapper` logged, helm's version query left out."""
    lines = [line.split()[4:] for line in log.read_text().splitlines() if line.startswith("start ")]
    return [args for args in lines if args[0] != "version"]


async def test_an_install_and_an_upgrade_are_one_helm_process_each_labelled_with_their_checksum(
        any_helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path) -> None:
    """Issue 36: an install, and an upgrade decided without a render (forced), run helm once: no server dry run
    first for the checksum label, which is set on the revision afterwards from helm's answer, equal to what a
    render computes (the smart upgrade compares them); an upgrade drops the previous revision's checksum
    (helm's ``null``: helm's action/upgrade.go mergeCustomLabels carries labels over). Helm 3 and 4."""
    wrapper, log = helm_wrapper(tmp_path, any_helm.binary)
    folder = tmp_path / "packages"
    folder.mkdir()
    sc = Scenario(Helm(wrapper, kube_target, any_helm.env), kube_target, namespace, folder)
    try:
        sc.write()
        engine = await sc.start()
        assert [o.action for o in (await sc.run()).outcomes] == ["install"]
        assert [args[0] for args in _helm_commands(log)] == ["install"]
        await sc.run(force=True)
        commands = _helm_commands(log)
        assert [args[0] for args in commands] == ["install", "upgrade"]
        assert not any(a.startswith("--dry-run") for args in commands for a in args)
        assert f"{wire.MANIFEST_CHECKSUM}={wire.DROPPED}" in ",".join(commands[1])
        latest = sc.latest()
        assert latest is not None and latest.version == 2
        # A server dry run: the render the decision compares with the label.
        rendered = await engine.service.checksum(namespace, engine.book.spec(sc.key))
        assert latest.label_map[wire.MANIFEST_CHECKSUM] == rendered
        assert engine.history(sc.key)[0].digest == latest.digest  # the history holds the labelled revision
        # A values change renders to decide, then upgrades once: its revision carries the new render's checksum.
        sc.write("{message: changed}")
        assert [o.action for o in (await sc.run()).outcomes] == ["upgrade"]
        latest = sc.latest()
        assert latest is not None and latest.version == 3
        changed = await engine.service.checksum(namespace, engine.book.spec(sc.key))
        assert latest.label_map[wire.MANIFEST_CHECKSUM] == changed != rendered
        # ... and a pass on the unchanged spec decides in sync from the labels, without a render.
        before = len(_helm_commands(log))
        assert (await sc.run()).outcomes == () and len(_helm_commands(log)) == before
    finally:
        await sc.stop()


async def test_release_installed_by_plain_helm_is_adopted(sc: Scenario) -> None:
    sc.helm_cli("install", "app", str(EXAMPLES / "charts" / "flaky"))
    sc.write()
    await sc.start()
    assert sc.engine is not None
    view = sc.engine.release(sc.key)
    assert view is not None and view.state == st.UNMANAGED
    result = await sc.run()
    assert [o.action for o in result.outcomes] == ["upgrade"] and result.state == st.IN_SYNC
    latest = sc.latest()
    assert latest is not None and latest.version == 2 and latest.label_map[wire.MANAGED_BY] == "helmdeck"


async def test_upgrade_rollback_and_uninstall_outside_helmdeck_are_detected(sc: Scenario) -> None:
    chart = str(EXAMPLES / "charts" / "flaky")
    sc.write()
    await sc.start()
    await sc.run()
    sc.helm_cli("upgrade", "app", chart, "--set", "message=by-hand")
    result = await sc.run()
    assert result.outcomes[0].action == "upgrade" and sc.revisions()[0] == (3, "deployed")
    latest = sc.latest()
    assert latest is not None and latest.config == {}

    sc.helm_cli("rollback", "app", "2")
    result = await sc.run()
    assert [o.action for o in result.outcomes] == ["upgrade"] and sc.revisions()[0] == (5, "deployed")

    sc.helm_cli("uninstall", "app")
    result = await sc.run()
    assert [o.action for o in result.outcomes] == ["install"] and sc.revisions() == [(1, "deployed")]


async def test_latest_record_deleted_outside(sc: Scenario, core_api: client.CoreV1Api) -> None:
    sc.write("{message: a}")
    await sc.start()
    await sc.run()
    sc.write("{message: b}")
    await sc.run()
    assert sc.revisions() == [(2, "deployed"), (1, "superseded")]
    core_api.delete_namespaced_secret(record_name("app", 2), sc.namespace)
    await _until(lambda: sc.revisions() == [(1, "superseded")])
    result = await sc.run()
    assert [o.action for o in result.outcomes] == ["upgrade"] and result.state == st.IN_SYNC
    assert sc.revisions()[0] == (2, "deployed")


async def test_install_failure_without_remediation_stalls_until_the_spec_changes(sc: Scenario) -> None:
    sc.write("{fail: true}")
    await sc.start()
    result = await sc.run()
    assert [(o.action, o.ok) for o in result.outcomes] == [("install", False)]
    assert result.state == st.STALLED and result.next == "stop"
    stalled = condition(sc, cond.STALLED)
    assert stalled is not None and stalled.reason == cond.RETRIES_EXCEEDED
    again = await sc.run()
    assert again.outcomes == () and again.state == st.STALLED and sc.revisions() == [(1, "failed")]

    sc.write("{fail: false}")
    fixed = await sc.run()
    assert [(o.action, o.ok) for o in fixed.outcomes] == [("upgrade", True)] and fixed.state == st.IN_SYNC
    assert condition(sc, cond.STALLED) is None
    assert sc.engine is not None and sc.engine.status(sc.key) is not None


async def test_install_failure_with_remediation_uninstalls_and_retries_then_keeps_the_last(sc: Scenario) -> None:
    # The last failed install is kept for inspection: helm-controller api/v2 helmrelease_types.go
    # InstallRemediation.MustRemediateLastFailure is false unless remediateLastFailure says true.
    sc.write("{fail: true}", "  install:\n    remediation: {retries: 1}\n")
    await sc.start()
    results = await sc.converge()
    actions = [(o.action, o.ok) for r in results for o in r.outcomes]
    assert actions == [("install", False), ("uninstall-remediation", True), ("install", False)]
    assert results[-1].state == st.STALLED
    latest = sc.latest()
    assert latest is not None and latest.status == "failed"
    assert sc.engine is not None
    status = sc.engine.status(sc.key)
    assert status is not None and status.failures.install == 2


async def test_install_remediate_last_failure_uninstalls_the_last_failed_install(sc: Scenario) -> None:
    sc.write("{fail: true}", "  install:\n    remediation: {retries: 1, remediateLastFailure: true}\n")
    await sc.start()
    results = await sc.converge()
    actions = [(o.action, o.ok) for r in results for o in r.outcomes]
    assert actions == [("install", False), ("uninstall-remediation", True),
                       ("install", False), ("uninstall-remediation", True)]
    assert results[-1].state == st.STALLED
    assert sc.latest() is None  # uninstalled, history not kept


async def test_upgrade_failure_rolls_back(sc: Scenario) -> None:
    sc.write("{fail: false}", "  upgrade:\n    remediation: {retries: 1}\n")
    await sc.start()
    await sc.run()
    sc.write("{fail: true}", "  upgrade:\n    remediation: {retries: 1}\n")
    results = await sc.converge()
    actions = [(o.action, o.ok) for r in results for o in r.outcomes]
    assert actions == [("upgrade", False), ("rollback", True), ("upgrade", False), ("rollback", True)]
    assert results[-1].state == st.STALLED
    assert sc.revisions()[0] == (5, "deployed")
    latest = sc.latest()
    assert latest is not None and latest.config == {"fail": False}
    remediated = condition(sc, cond.REMEDIATED)
    ready = condition(sc, cond.READY)
    assert remediated is not None and remediated.status == "True" and remediated.reason == cond.ROLLBACK_SUCCEEDED
    assert ready is not None and ready.status == "False"


async def test_upgrade_failure_with_uninstall_remediation(sc: Scenario) -> None:
    extra = "  upgrade:\n    remediation: {retries: 1, strategy: uninstall}\n"
    sc.write("{fail: false}", extra)
    await sc.start()
    await sc.run()
    sc.write("{fail: true}", extra)
    result = await sc.run()
    assert [(o.action, o.ok) for o in result.outcomes] == [("upgrade", False), ("uninstall-remediation", True)]
    assert result.next == "now"
    assert sc.latest() is None


async def test_test_failure_rolls_back_unless_ignored(sc: Scenario) -> None:
    spec = "  test: {enable: true}\n  upgrade:\n    remediation: {retries: 1}\n"
    sc.write("{testFail: false}", spec)
    await sc.start()
    first = await sc.run()
    assert [(o.action, o.ok) for o in first.outcomes] == [("install", True), ("test", True)]
    sc.write("{testFail: true}", spec)
    result = await sc.run()
    assert [(o.action, o.ok) for o in result.outcomes] == [("upgrade", True), ("test", False), ("rollback", True)]
    test_cond = condition(sc, cond.TEST_SUCCESS)
    assert test_cond is not None and test_cond.status == "False"

    ignoring = "  test: {enable: true, ignoreFailures: true}\n"
    sc.write("{testFail: true, message: ignore}", ignoring)
    result = await sc.run()
    assert [(o.action, o.ok) for o in result.outcomes] == [("upgrade", True), ("test", False)]
    assert result.state == st.IN_SYNC
    ready = condition(sc, cond.READY)
    assert ready is not None and ready.status == "True"


async def test_drift_warn_reports_and_enabled_corrects(sc: Scenario, core_api: client.CoreV1Api) -> None:
    sc.write("{message: original}", "  driftDetection: {mode: warn}\n")
    await sc.start()
    await sc.run()
    core_api.patch_namespaced_config_map("app", sc.namespace, {"data": {"message": "edited by hand"}})
    warned = await sc.run()
    assert warned.state == st.DRIFTED and warned.outcomes == ()
    assert any("ConfigMap" in d.ref for d in warned.drift)
    assert sc.engine is not None
    assert any(e.action == "drift" for e in sc.engine.events(sc.key))
    cm = core_api.read_namespaced_config_map("app", sc.namespace)
    assert cm.data == {"message": "edited by hand"}

    sc.write("{message: original}", "  driftDetection: {mode: enabled}\n")
    corrected = await sc.run()
    assert [o.action for o in corrected.outcomes] == ["correct-drift"]
    assert core_api.read_namespaced_config_map("app", sc.namespace).data == {"message": "original"}
    assert sc.revisions()[0][0] == 1  # drift correction writes no new revision
    # A deleted object: the monitor sees it absent within moments and the next pass restores it
    # with an upgrade (the release service's rule), before drift detection would look.
    apps = client.AppsV1Api(core_api.api_client)
    apps.delete_namespaced_deployment("app", sc.namespace)
    await _until(lambda: bool(sc.engine and (v := sc.engine.release(sc.key)) and v.monitor.absent))
    restored = await sc.run()
    assert [o.action for o in restored.outcomes] == ["upgrade"]
    assert apps.read_namespaced_deployment("app", sc.namespace).metadata is not None
    assert (await sc.run()).state == st.IN_SYNC


async def _until(check: object, timeout: float = 10.0) -> None:
    import asyncio

    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not check():  # type: ignore[operator]
        assert loop.time() < end, "condition not met in time"
        await asyncio.sleep(0.05)


async def _hang_and_kill(sc: Scenario, status: str) -> None:
    """Leave revision 2 ``status`` (pending-*) behind, as a helm process killed mid-action does."""
    import asyncio
    import os
    import signal

    env = {**os.environ, **sc.helm.env}
    chart = str(EXAMPLES / "charts" / "flaky")
    if status == "pending-rollback":
        sc.helm_cli("upgrade", "app", chart, "--set", "hang=true", "--reset-values")  # rev 2, not waited on
        args = ["rollback", "app", "1", "--wait", "--timeout", "60s"]
    else:
        args = ["upgrade", "app", chart, "--set", "hang=true", "--reset-values", "--wait", "--timeout", "60s"]
    proc = await asyncio.create_subprocess_exec(sc.helm.binary, *args, "-n", sc.namespace,
                                                *sc.target.helm_args(), env=env, start_new_session=True)
    await _until(lambda: bool((latest := sc.latest()) and latest.status == status), 20)
    os.killpg(proc.pid, signal.SIGKILL)
    await proc.wait()


@pytest.mark.parametrize("status", ["pending-upgrade", "pending-rollback"])
async def test_a_stale_pending_release_is_unlocked_and_a_fresh_one_left_alone(sc: Scenario, status: str) -> None:
    sc.write("{}", timeout="3s")
    await sc.start()
    await sc.run()
    await _hang_and_kill(sc, status)
    latest = sc.latest()
    assert latest is not None and latest.status == status
    fresh = await sc.run()
    assert fresh.state == st.LOCKED and fresh.outcomes == () and fresh.next == "soon"
    assert fresh.retry_after is not None and 0 < fresh.retry_after <= 9
    import asyncio

    await asyncio.sleep(fresh.retry_after)
    results = await sc.converge()
    actions = [(o.action, o.ok) for r in results for o in r.outcomes]
    assert actions[0] == ("unlock", True)
    assert results[-1].state == st.IN_SYNC
    history = sc.revisions()
    assert history[0][1] == "deployed" and (history[0][0] - 1, "failed") in history
    unlocked = next(o for o in sc.engine.history(sc.key) if o.status == "failed") if sc.engine else None
    assert unlocked is not None and "unlocked by helmdeck" in unlocked.description


async def test_pending_install_left_by_a_killed_helm(sc: Scenario) -> None:
    import asyncio
    import os
    import signal

    sc.write("{hang: true}", timeout="3s")
    await sc.start()
    env = {**os.environ, **sc.helm.env}
    proc = await asyncio.create_subprocess_exec(
        sc.helm.binary, "install", "app", str(EXAMPLES / "charts" / "flaky"), "--set", "hang=true", "--wait",
        "--timeout", "60s", "-n", sc.namespace, *sc.target.helm_args(), env=env, start_new_session=True)
    await _until(lambda: bool((latest := sc.latest()) and latest.status == "pending-install"), 20)
    os.killpg(proc.pid, signal.SIGKILL)
    await proc.wait()
    sc.write("{}", timeout="3s")
    locked = await sc.run()
    assert locked.state == st.LOCKED
    await asyncio.sleep(locked.retry_after or 9)
    results = await sc.converge()
    actions = [o.action for r in results for o in r.outcomes]
    assert actions[0] == "unlock" and results[-1].state == st.IN_SYNC
    assert sc.revisions()[0][1] == "deployed"


async def test_a_forced_upgrade_of_a_stalled_release_runs_once_and_keeps_the_counters(sc: Scenario) -> None:
    # helm-controller internal/reconcile/atomic_release.go actionForState: "forcing upgrade for failed release",
    # the counters untouched (only internal/action/reset.go MustResetFailures clears them).
    sc.write("{fail: true}")
    await sc.start()
    stalled = await sc.run()
    assert stalled.state == st.STALLED
    assert (await sc.run()).outcomes == ()  # stalled: nothing runs by itself
    forced = await sc.run(force=True)
    assert [(o.action, o.ok) for o in forced.outcomes] == [("upgrade", False)] and forced.state == st.STALLED
    assert sc.engine is not None
    status = sc.engine.status(sc.key)
    assert status is not None and (status.failures.install, status.failures.upgrade) == (1, 1)
    assert (await sc.run()).outcomes == ()  # stalled again: the force was one upgrade
