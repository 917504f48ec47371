"""Test (helm test), built directly over a fake helm and an offline observer (as Flux's test_test.go)."""

from __future__ import annotations

from engine.package.model import TestSpec
from engine.reconcile import conditions as cond
from engine.reconcile.status import EngineStatus
from engine.reconcile.test import Test
from tests.fake_helm import offline_context, request


async def test_passing_tests_set_test_success() -> None:
    ctx, helm, _ = offline_context()
    helm.store(1, "deployed")
    req = request()
    out = await Test(ctx).reconcile(req)
    assert out.ok and "1 test(s)" in out.message
    assert cond.is_true(req.status.conditions, cond.TEST_SUCCESS)


async def test_a_failed_test_hook_fails_and_counts_unless_ignored() -> None:
    ctx, helm, _ = offline_context()
    helm.store(1, "deployed")
    helm.test_phase = "Failed"
    req = request()
    req.status = EngineStatus(last_attempted_release_action="upgrade")
    out = await Test(ctx).reconcile(req)
    assert not out.ok and "web-test" in out.message
    assert req.status.failures.upgrade == 1
    ignoring = request(test=TestSpec(enable=True, ignore_failures=True))
    out = await Test(ctx).reconcile(ignoring)
    assert not out.ok and ignoring.status.failures.total == 0
