"""RollbackRemediation, built directly over a fake helm and an offline observer (as Flux's tests)."""

from __future__ import annotations

import pytest

from engine.reconcile import conditions as cond
from engine.reconcile.errors import MissingRollbackTarget
from engine.reconcile.rollback_remediation import RollbackRemediation
from tests.fake_helm import offline_context, request


async def test_rolls_back_to_the_previous_good_snapshot() -> None:
    ctx, helm, _ = offline_context()
    good = helm.store(1, "superseded")
    bad = helm.store(2, "failed")
    req = request(history=(bad, good))
    out = await RollbackRemediation(ctx).reconcile(req)
    assert out.ok and out.revision == 3
    assert helm.calls == [("rollback", 1)]
    assert cond.is_true(req.status.conditions, cond.REMEDIATED)


async def test_without_a_previous_snapshot_there_is_no_target() -> None:
    ctx, helm, _ = offline_context()
    bad = helm.store(1, "failed")
    with pytest.raises(MissingRollbackTarget):
        await RollbackRemediation(ctx).reconcile(request(history=(bad,)))
    assert helm.calls == []
