"""Upgrade, built directly over a fake helm and an offline observer (as Flux's upgrade_test.go)."""

from __future__ import annotations

from engine.helm import HelmError
from engine.reconcile import conditions as cond
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
    assert opts.max_history == 3 and opts.labels == req.release_labels
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
