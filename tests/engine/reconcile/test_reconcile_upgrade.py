"""Upgrade, built directly over a fake helm and an offline observer (as Flux's upgrade_test.go)."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from engine.base import wire
from engine.helm import HelmError
from engine.reconcile import conditions as cond
from engine.reconcile.request import Request
from engine.reconcile.upgrade import Upgrade
from tests.fake_helm import offline_context, request


async def test_upgrade_writes_the_next_revision_with_the_packages_options() -> None:
    ctx, helm, events = offline_context()
    first = helm.store(1, "deployed")
    req = request(history=(first,), max_history=3)
    req.spec_digest = "d" * 32
    out = await Upgrade(ctx).reconcile(req)
    assert out.ok and out.revision == 2
    opts = helm.calls[0][1]
    # The previous revision's manifest checksum is dropped (helm carries labels over); the new one is set after.
    assert opts.max_history == 3 and opts.labels == {**req.release_labels, wire.MANIFEST_CHECKSUM: wire.DROPPED}
    assert opts.labels["helmdeck.dev/spec-digest"] == "d" * 32 and opts.wait_for_jobs  # Flux's default
    assert [s.version for s in req.status.history.snapshots] == [2, 1]
    assert ctx.observer.latest("demo", "web").status == "deployed"  # type: ignore[union-attr]
    assert events[-1][1] == "succeeded"


async def test_failed_upgrade_counts_against_the_upgrade_remediation() -> None:
    ctx, helm, events = offline_context()
    first = helm.store(1, "deployed")
    helm.write, helm.fail = "failed", HelmError("UPGRADE FAILED: boom", tail=("Error: boom",))
    req = request(history=(first,))
    out = await Upgrade(ctx).reconcile(req)
    assert not out.ok and out.tail == ("Error: boom",)
    assert req.status.failures.upgrade == 1 and req.status.failures.install == 0
    assert not cond.is_true(req.status.conditions, cond.RELEASED)
    assert events[-1][1] == "failed" and "boom" in events[-1][2]


async def _cancelled_upgrade(store: bool) -> tuple[Request, list[tuple[str, str, str]]]:
    """An upgrade whose helm hangs (after storing its pending revision when ``store``), cancelled by the
    operator: the request it leaves and the events it told."""
    ctx, helm, events = offline_context()
    first = helm.store(1, "deployed")
    started = asyncio.Event()

    async def hang(*_args: Any) -> None:
        if store:
            helm.store(2, "pending-upgrade")
        started.set()
        await asyncio.Event().wait()  # as helm waiting on --wait

    helm.upgrade = hang  # type: ignore[method-assign,assignment]
    req = request(history=(first,))
    task = asyncio.create_task(Upgrade(ctx).reconcile(req))
    await started.wait()
    task.cancel("by the operator")
    with pytest.raises(asyncio.CancelledError):
        await task
    return req, events


async def test_a_cancelled_upgrade_is_recorded_as_the_engines_failed_upgrade() -> None:
    req, events = await _cancelled_upgrade(store=True)
    assert [(s.version, s.status) for s in req.status.history] == [(2, "pending-upgrade"), (1, "deployed")]
    assert req.status.failures.upgrade == 1 and req.status.last_attempted_release_action == "upgrade"
    released = cond.get(req.status.conditions, cond.RELEASED)
    assert released is not None and (released.status, released.reason) == ("False", cond.UPGRADE_FAILED)
    assert released.message == ("Helm upgrade cancelled by the operator for release demo/web.v2: revision 2 is "
                                "pending-upgrade")
    assert req.status.last is not None and not req.status.last.ok and req.status.last.revision == 2
    assert events[-1] == ("upgrade", "failed", released.message)


async def test_an_upgrade_cancelled_before_storing_counts_no_failure() -> None:
    req, _ = await _cancelled_upgrade(store=False)
    assert [s.version for s in req.status.history] == [1] and req.status.failures.upgrade == 0
    assert req.status.last is not None and req.status.last.message.endswith("nothing was stored")
