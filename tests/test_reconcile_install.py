"""Install, built directly over a fake helm and an offline observer (as Flux's install_test.go)."""

from __future__ import annotations

import pytest

from engine.helm import HelmError
from engine.reconcile import conditions as cond
from engine.reconcile.errors import ActionFailed
from engine.reconcile.install import Install
from tests.fake_helm import offline_context, request


async def test_install_stores_a_deployed_release_and_says_so() -> None:
    ctx, helm, events = offline_context()
    req = request()
    out = await Install(ctx).reconcile(req)
    assert out.ok and out.revision == 1
    assert helm.calls[0][0] == "install"
    assert req.status.history.latest() is not None and req.status.history.latest().version == 1  # type: ignore[union-attr]
    assert cond.is_true(req.status.conditions, cond.RELEASED)
    assert req.status.last_attempted_release_action == "install"
    assert [e[1] for e in events] == ["started", "succeeded"]


async def test_install_that_stored_a_failed_release_counts_a_failure() -> None:
    ctx, helm, _ = offline_context()
    helm.write, helm.fail = "failed", HelmError("timed out waiting for the condition")
    req = request()
    out = await Install(ctx).reconcile(req)
    assert not out.ok and out.revision == 1
    assert req.status.failures.install == 1 and req.status.failures.total == 1
    released = cond.get(req.status.conditions, cond.RELEASED)
    assert released is not None and released.reason == cond.INSTALL_FAILED


async def test_install_that_stored_nothing_raises_for_a_retry() -> None:
    ctx, helm, _ = offline_context()
    helm.write, helm.fail = None, HelmError("chart not found")
    req = request()
    with pytest.raises(ActionFailed, match="chart not found"):
        await Install(ctx).reconcile(req)
    assert req.status.failures.total == 0  # nothing to remediate
