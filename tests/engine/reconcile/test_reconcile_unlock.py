"""Unlock, built directly over an offline observer whose storage writer is a fake (Flux's unlock_test.go)."""

from __future__ import annotations

import pytest

from engine.reconcile.errors import ActionFailed
from engine.reconcile.unlock import Unlock
from engine.storage.observation import Observation
from tests.fake_helm import offline_context, request


async def test_a_pending_release_is_marked_failed() -> None:
    ctx, helm, events = offline_context()
    helm.store(1, "pending-upgrade")

    async def unlock(obs: Observation, detail: str) -> Observation:
        return helm.store(obs.version, "failed")

    ctx.unlock = unlock
    out = await Unlock(ctx).reconcile(request())
    assert out.ok and "was pending-upgrade, now failed" in out.message
    assert events[0][1] == "started"


async def test_a_release_that_is_not_pending_is_left_alone() -> None:
    ctx, helm, _ = offline_context()
    helm.store(1, "deployed")
    with pytest.raises(ActionFailed, match="not pending"):
        await Unlock(ctx).reconcile(request())
