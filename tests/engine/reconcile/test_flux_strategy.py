"""``spec.install.strategy`` / ``spec.upgrade.strategy`` (issue 34, behaviour 3) decided as Flux's helm-controller
v1.6.3 decides them: internal/reconcile/atomic_release.go (``actionForState``'s ReleaseStatusFailed: under
RetryOnFailure a failed release is upgraded, as a forced upgrade with no retries would be; ``Reconcile``: a second
release action in one pass, or an action's error, ends with ErrRetryAfterInterval and "retrying after <interval>"),
internal/controller/helmrelease_controller.go ``reconcileRelease`` (requeued after ``GetActiveRetry``'s interval),
internal/reconcile/install.go and upgrade.go ``success`` (failures cleared under a retry strategy). The strategy
that counts is the last attempted release action's (api/v2 helmrelease_types.go ``GetActiveRetry``).

The pure decisions and the loop over a fake helm first; then each behaviour on the local cluster with real helm.
"""

from __future__ import annotations

import dataclasses
import time
from pathlib import Path

import pytest
from kubernetes import client

from engine.helm import Helm, HelmError
from engine.kube.client import KubeTarget
from engine.package.model import InstallSpec, UpgradeSpec
from engine.reconcile import conditions as cond
from engine.reconcile import next_action as na
from engine.reconcile import state as st
from engine.reconcile.atomic import AtomicRelease, PassResult
from engine.reconcile.errors import ExceededMaxRetries
from engine.reconcile.install import Install
from engine.reconcile.status import ActionOutcome, FailureCounts
from engine.runtime.assemble import build_engine
from engine.runtime.drive.controller import verdict
from engine.runtime.drive.queue import RunResult
from testkit.chart_sources import write
from tests.engine.reconcile.test_flux_rules import Passes, flux_folder, helm_release, passes
from tests.engine.reconcile.test_reconcile_decisions import obs, request, state, with_spec
from tests.engine.resolve.test_values_from import until
from tests.fake_helm import offline_context
from tests.fake_helm import request as fake_request

__all__ = ["flux_folder", "passes"]  # the fixtures

RETRY = InstallSpec(on_failure="RetryOnFailure")
UPGRADE_RETRY = UpgradeSpec(on_failure="RetryOnFailure", retry_interval=90.0)


# -- the decision (pure) -----------------------------------------------------------------------------------


def test_a_failed_release_under_retry_on_failure_is_upgraded_however_many_failures() -> None:
    """ReleaseStatusFailed with GetActiveRetry != nil: NewUpgrade, before any remediation or retry count."""
    failed = obs(1, "failed")
    install = request(failed, spec=with_spec(install=RETRY), last="install",
                      failures=FailureCounts(install=5, total=5))
    assert na.next_action(install, state(st.FAILED), failed) == na.UPGRADE
    # Remediation settings do not apply: no rollback although retries remain and a target exists.
    upgrade = request(obs(2, "failed"), obs(1, "superseded"), last="upgrade", failures=FailureCounts(upgrade=1),
                      spec=with_spec(upgrade=dataclasses.replace(UPGRADE_RETRY, retries=3)))
    assert na.next_action(upgrade, state(st.FAILED), obs(2, "failed")) == na.UPGRADE
    assert na.next_action(dataclasses.replace(upgrade, spec=with_spec(upgrade=UpgradeSpec(retries=3))),
                          state(st.FAILED), obs(2, "failed")) == na.ROLLBACK  # RemediateOnFailure: as before


def test_the_strategy_that_counts_is_the_last_attempted_actions() -> None:
    """GetActiveRetry follows status.lastAttemptedReleaseAction: an install RetryOnFailure whose upgrade remediates
    stalls after a failed upgrade (upgrade retries 0), as Flux does."""
    req = request(obs(2, "failed"), spec=with_spec(install=RETRY), last="upgrade",
                  failures=FailureCounts(install=1, upgrade=1, total=2))
    assert req.active_retry() is None
    with pytest.raises(ExceededMaxRetries):
        na.next_action(req, state(st.FAILED), obs(2, "failed"))
    assert dataclasses.replace(req, status=dataclasses.replace(req.status, last_attempted_release_action="install")
                               ).active_retry() == 300.0


def test_an_absent_release_keeps_its_install_retry_count() -> None:
    """ReleaseStatusAbsent checks the install remediation's RetriesExhausted whatever the strategy."""
    req = request(spec=with_spec(install=RETRY), last="install", failures=FailureCounts(install=1, total=1))
    with pytest.raises(ExceededMaxRetries):
        na.next_action(req, state(st.ABSENT), None)


def test_a_retry_pass_is_requeued_after_its_interval() -> None:
    assert verdict(PassResult(st.FAILED, "retry", "x", retry_after=90.0), 600.0) == RunResult("interval", 90.0)


# -- the loop over a fake helm -----------------------------------------------------------------------------


def _reconciling(req: object) -> cond.Condition | None:
    return cond.get(req.status.conditions, cond.RECONCILING)  # type: ignore[attr-defined]


async def test_a_failed_install_retries_once_per_interval_and_a_success_clears_the_failures() -> None:
    ctx, helm, _ = offline_context()
    helm.write, helm.fail = "failed", HelmError("timed out waiting for the condition")
    req = fake_request(install=InstallSpec(on_failure="RetryOnFailure", retry_interval=90.0),
                       upgrade=UpgradeSpec(on_failure="RetryOnFailure", retry_interval=90.0))
    loop = AtomicRelease(ctx)
    first = await loop.reconcile(req)
    # The install failed; the upgrade it leads to would be a second release action: retry after the interval.
    assert [(o.action, o.ok) for o in first.outcomes] == [("install", False)]
    assert (first.state, first.next, first.retry_after) == (st.FAILED, "retry", 90.0)
    assert "retrying after 1m30s" in first.message
    reconciling = _reconciling(req)
    assert reconciling is not None and (reconciling.status, reconciling.reason, reconciling.message) == \
        ("True", cond.PROGRESSING_WITH_RETRY, "retrying after 1m30s")
    assert cond.get(req.status.conditions, cond.STALLED) is None  # no RetriesExceeded
    ready = cond.get(req.status.conditions, cond.READY)
    assert ready is not None and (ready.status, ready.reason) == ("False", cond.INSTALL_FAILED)
    assert [c[0] for c in helm.calls] == ["install"]  # not uninstalled: the failed release is kept

    second = await loop.reconcile(req)
    assert [(o.action, o.ok) for o in second.outcomes] == [("upgrade", False)] and second.next == "retry"
    assert req.status.failures == FailureCounts(install=1, upgrade=1, total=2)

    helm.write, helm.fail = "deployed", None
    third = await loop.reconcile(req)
    assert [(o.action, o.ok) for o in third.outcomes] == [("upgrade", True)]
    assert req.status.failures == FailureCounts()  # Upgrade.success: ClearFailures under RetryOnFailure
    assert [c[0] for c in helm.calls] == ["install", "upgrade", "upgrade"]  # (the state after: the cluster test)


@pytest.mark.parametrize(("install", "after"), [
    (InstallSpec(retries=1), FailureCounts(install=1, total=1)),  # RemediateOnFailure: kept (MustResetFailures' job)
    (RETRY, FailureCounts()),  # RetryOnFailure: internal/reconcile/install.go success, ClearFailures
])
async def test_a_successful_install_clears_the_failures_only_under_retry(install: InstallSpec,
                                                                         after: FailureCounts) -> None:
    ctx, _, _ = offline_context()
    req = fake_request(install=install)
    req.status = dataclasses.replace(req.status, failures=FailureCounts(install=1, total=1))
    assert (await Install(ctx).reconcile(req)).ok
    assert req.status.failures == after


async def test_an_action_that_stored_nothing_is_retried_after_the_interval_not_backed_off() -> None:
    ctx, helm, _ = offline_context()
    helm.write, helm.fail = None, HelmError("chart not found")
    result = await AtomicRelease(ctx).reconcile(fake_request(install=RETRY))
    assert (result.next, result.retry_after) == ("retry", 300.0) and "chart not found" in result.message
    remediating = await AtomicRelease(ctx).reconcile(fake_request())
    assert remediating.next == "error"  # RemediateOnFailure: backoff, as before


# -- on the local cluster, with real helm ------------------------------------------------------------------


def quota_refuses_deployments(api: client.ApiClient, namespace: str) -> bool:
    """Whether the API server's quota admission already refuses a Deployment in ``namespace`` (a server dry run):
    it reads quotas from its own cache, and a namespace it looked up before the quota was made stays without one
    there for up to 30 s, so a quota just created can let a Deployment through under load."""
    deployment = client.V1Deployment(
        metadata=client.V1ObjectMeta(name="quota-probe"),
        spec=client.V1DeploymentSpec(
            selector=client.V1LabelSelector(match_labels={"app": "quota-probe"}),
            template=client.V1PodTemplateSpec(
                metadata=client.V1ObjectMeta(labels={"app": "quota-probe"}),
                spec=client.V1PodSpec(containers=[client.V1Container(name="c", image="probe")]))))
    try:
        client.AppsV1Api(api).create_namespaced_deployment(namespace, deployment, dry_run="All")
    except client.ApiException as exc:
        return bool(exc.status == 403)
    return False


@pytest.mark.cluster
async def test_install_retry_on_failure_keeps_the_failed_release_and_upgrades_it(
    passes: Passes, core_api: client.CoreV1Api,
) -> None:
    """Flux's ``actionForState`` (ReleaseStatusFailed, GetActiveRetry != nil) and ``Reconcile``
    (ErrRetryAfterInterval): a failed install is neither uninstalled nor stalled; each pass upgrades it, and once
    the cause is gone (a ResourceQuota that forbade the chart's Deployment) the same spec's upgrade succeeds and
    clears the failures (internal/reconcile/upgrade.go ``success``: ClearFailures)."""
    core_api.create_namespaced_resource_quota(passes.namespace, client.V1ResourceQuota(
        metadata=client.V1ObjectMeta(name="no-deployments"),
        spec=client.V1ResourceQuotaSpec(hard={"count/deployments.apps": "0"})))
    await until(lambda: quota_refuses_deployments(core_api.api_client, passes.namespace), 30)
    both = ("  install:\n    strategy: {name: RetryOnFailure, retryInterval: 1h}\n"
            "  upgrade:\n    strategy: {name: RetryOnFailure, retryInterval: 1h}\n")
    passes.write("{}", both, timeout="60s")
    first = await passes.run()
    assert [(o.action, o.ok) for o in first.outcomes] == [("install", False)], first
    assert (first.state, first.next, first.retry_after) == (st.FAILED, "retry", 3600.0)
    assert passes.revisions() == [(1, "failed")]  # kept, not uninstalled
    reconciling = passes.condition(cond.RECONCILING)
    assert reconciling is not None and reconciling.message == "retrying after 1h0m0s"
    assert passes.condition(cond.STALLED) is None
    second = await passes.run()
    assert [(o.action, o.ok) for o in second.outcomes] == [("upgrade", False)], second
    assert second.next == "retry" and passes.revisions() == [(1, "failed"), (2, "failed")]
    status = passes.engine.status(passes.key)
    assert status is not None and (status.failures.install, status.failures.upgrade) == (1, 1)

    core_api.delete_namespaced_resource_quota("no-deployments", passes.namespace)
    fixed = await passes.run()
    assert [(o.action, o.ok) for o in fixed.outcomes] == [("upgrade", True)], fixed
    assert (fixed.state, fixed.next) == (st.IN_SYNC, "interval")
    status = passes.engine.status(passes.key)
    assert status is not None and status.failures == FailureCounts()
    assert passes.condition(cond.RECONCILING) is None
    ready = passes.condition(cond.READY)
    assert ready is not None and ready.status == "True"


@pytest.mark.cluster
async def test_upgrade_retry_on_failure_does_not_roll_back(passes: Passes) -> None:
    """Flux's ``actionForState``: under RetryOnFailure ``remediation`` (here 3 rollbacks) is not used; the failed
    upgrade is upgraded again, and once the spec is fixed the failures are cleared (``success``'s
    ClearFailures) although the generation changed anyway."""
    strategy = ("  upgrade:\n    strategy: {name: RetryOnFailure, retryInterval: 2m}\n"
                "    remediation: {retries: 3}\n")
    passes.write("{message: a}", strategy, timeout="60s")
    installed = await passes.run()
    assert installed.state == st.IN_SYNC, installed
    passes.write("{fail: true}", strategy, timeout="60s")
    failed = await passes.run()
    assert [(o.action, o.ok) for o in failed.outcomes] == [("upgrade", False)], failed
    assert (failed.next, failed.retry_after) == ("retry", 120.0)
    again = await passes.run()
    assert [(o.action, o.ok) for o in again.outcomes] == [("upgrade", False)], again
    assert passes.revisions() == [(1, "deployed"), (2, "failed"), (3, "failed")]  # no rollback revision
    status = passes.engine.status(passes.key)
    assert status is not None and status.failures.upgrade == 2


@pytest.mark.cluster
async def test_the_next_attempt_waits_for_the_retry_interval(
    kube_target: KubeTarget, helm: Helm, namespace: str, flux_folder: Path,
) -> None:
    """internal/controller/helmrelease_controller.go ``reconcileRelease``: ErrRetryAfterInterval requeues after
    ``GetActiveRetry(...).GetRetryInterval()``: a running engine attempts again after the interval (4s here, ±10%
    jitter), not at once and not at the HelmRelease's interval (10m)."""
    write(flux_folder, "app.yaml", helm_release(
        namespace, "  install:\n    strategy: {name: RetryOnFailure, retryInterval: 4s}\n"
                   "  upgrade:\n    strategy: {name: RetryOnFailure, retryInterval: 4s}\n",
        "{fail: true}", chart="flaky", name="app", timeout="20s"))
    engine = build_engine(kube_target, helm, flux_folder, namespaces=[namespace])
    await engine.start()
    try:
        key = (namespace, "app")

        def attempts() -> int:
            return len(engine.history(key))

        await until(lambda: attempts() == 1, 60)
        gaps = [await until(lambda: attempts() == 2, 60), await until(lambda: attempts() == 3, 60)]
        assert all(gap > 3.0 for gap in gaps), gaps  # at least the interval less its jitter and the check's lag

        def statuses() -> dict[int, str]:
            return {o.version: o.status for o in engine.history(key)}

        # The third attempt is counted once its revision is stored (pending-upgrade): its end is waited for.
        await until(lambda: not statuses()[3].startswith("pending"), 60)
        assert [statuses()[v] for v in (1, 2, 3)] == ["failed"] * 3
    finally:
        await engine.stop()


@pytest.mark.cluster
async def test_an_operators_upgrade_that_fails_is_retried_after_the_interval(passes: Passes) -> None:
    """A forced reconcile (the app's ``u``; Flux's ``forceAt`` request) runs outside the work queue; when it ends
    to retry, the next attempt is queued after the retry interval, as a pass of the queue's own would be
    (internal/controller/helmrelease_controller.go ``reconcileRelease`` requeues any reconcile so)."""
    strategy = "  upgrade:\n    strategy: {name: RetryOnFailure, retryInterval: 1h}\n"
    passes.write("{message: a}", strategy, timeout="60s")
    installed = await passes.run()
    assert installed.state == st.IN_SYNC, installed
    queue = passes.engine.controller.queue
    queue.forget(passes.key)
    passes.write("{fail: true}", strategy, timeout="60s")
    outcome = await passes.engine.reconcile(passes.key, force=True)
    assert isinstance(outcome, ActionOutcome) and (outcome.action, outcome.ok) == ("upgrade", False), outcome
    due = queue.queued()[passes.key] - time.monotonic()
    assert 3500 < due <= 3600, due
