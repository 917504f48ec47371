"""Install, built directly over a fake helm and an offline observer (as Flux's install_test.go)."""

from __future__ import annotations

import asyncio

import pytest

from engine.helm import HelmError
from engine.reconcile import conditions as cond
from engine.reconcile.action import Handover
from engine.reconcile.errors import ActionFailed, ExceededMaxRetries
from engine.reconcile.install import Install
from engine.reconcile.next_action import next_action
from engine.reconcile.state import flux_state
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
    # Nothing to remediate: not counted against the install remediation; counted in the total as Flux's
    # status.failures, and kept as the last outcome (the row's LAST ACTION said "-" while it failed on and on).
    assert (req.status.failures.install, req.status.failures.total) == (0, 1)
    last = req.status.last
    assert last is not None and (last.action, last.ok, last.revision) == ("install", False, None)
    assert "chart not found" in last.message


@pytest.mark.parametrize(("why", "counted"), [("by the operator", 1), (Handover("as the package moved"), 0)])
async def test_a_cancelled_install_counts_a_failure_unless_cancelled_by_handover(why: str, counted: int) -> None:
    ctx, helm, _ = offline_context()
    helm.write, helm.fail = "failed", asyncio.CancelledError(why)  # type: ignore[assignment]
    req = request()
    with pytest.raises(asyncio.CancelledError):
        await Install(ctx).reconcile(req)
    assert req.status.failures.install == counted and req.status.failures.total == counted
    released = cond.get(req.status.conditions, cond.RELEASED)
    assert released is not None and released.reason == cond.INSTALL_FAILED
    assert req.status.last is not None and f"cancelled {why}" in req.status.last.message  # told either way
    # The next decision (install retries 0): RetriesExceeded after a failure, an upgrade after a handover.
    latest = ctx.observer.latest(*req.key)
    if counted:
        with pytest.raises(ExceededMaxRetries):
            next_action(req, flux_state(req, latest), latest)
    else:
        assert next_action(req, flux_state(req, latest), latest) == "upgrade"


async def test_an_install_whose_claim_lapses_on_the_way_to_helm_is_refused_at_the_spawn() -> None:
    # The takeover bench at load 12: the recheck passed, then the process froze on its way to spawning helm.
    ctx, helm, events = offline_context()
    asked: list[tuple[str, str]] = []

    def lapses_after_the_first_ask(key: tuple[str, str]) -> None:
        asked.append(key)
        if len(asked) > 1:
            raise RuntimeError("the membership Lease lapsed since the claim")

    ctx.recheck = lapses_after_the_first_ask
    req = request()
    with pytest.raises(RuntimeError, match="lapsed"):
        await Install(ctx).reconcile(req)
    assert helm.calls == [] and len(asked) == 2
    assert [e[1] for e in events] == ["started", "cancelled"]


async def test_an_install_refused_right_before_helm_runs_ends_its_start_and_runs_nothing() -> None:
    ctx, helm, events = offline_context()

    def lapsed(_key: tuple[str, str]) -> None:
        raise RuntimeError("the membership Lease lapsed")

    ctx.recheck = lapsed
    req = request()
    with pytest.raises(RuntimeError, match="lapsed"):
        await Install(ctx).reconcile(req)
    assert helm.calls == []
    assert [e[1] for e in events] == ["started", "cancelled"]  # the audit sees the start end
    assert req.status.failures.total == 0 and req.status.history.latest() is None
