"""Rollback (the operator's), built directly over a fake helm and an offline observer."""

from __future__ import annotations

from engine.helm import HelmError
from engine.reconcile.rollback import Rollback
from tests.fake_helm import offline_context, request


async def test_rollback_to_a_revision_records_the_new_revision_as_ours() -> None:
    ctx, helm, events = offline_context()
    first = helm.store(1, "superseded")
    second = helm.store(2, "deployed")
    req = request(history=(second, first))
    out = await Rollback(ctx, 1).reconcile(req)
    assert out.ok and out.revision == 3
    assert out.message == "rolled back demo/web to revision 1: revision 3"
    assert helm.calls == [("rollback", 1)]
    assert [s.version for s in req.status.history.snapshots] == [3, 2, 1]
    assert [(e[1], e[2]) for e in events] == [("started", "rolling back to revision 1"),
                                              ("succeeded", out.message)]


async def test_rollback_to_the_previous_revision_by_default() -> None:
    ctx, helm, events = offline_context()
    helm.store(1, "superseded")
    helm.store(2, "deployed")
    out = await Rollback(ctx).reconcile(request())
    assert out.ok and helm.calls == [("rollback", 0)]
    assert events[0][2] == "rolling back to revision previous"


async def test_a_failed_rollback_is_a_failed_outcome_with_helms_tail() -> None:
    ctx, helm, events = offline_context()
    helm.store(1, "deployed")
    helm.write, helm.fail = None, HelmError("release has no 7 version", tail=("Error: no 7",))
    out = await Rollback(ctx, 7).reconcile(request())
    assert not out.ok and out.message == "rollback failed: release has no 7 version"
    assert out.tail == ("Error: no 7",)
    assert events[-1][1] == "failed"


async def test_a_rollback_that_stores_nothing_new_failed() -> None:
    ctx, helm, _ = offline_context()
    helm.store(1, "deployed")
    helm.write = None
    out = await Rollback(ctx, 1).reconcile(request())
    assert not out.ok and out.message == "rollback failed: no new revision stored"
