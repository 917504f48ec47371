"""Uninstall and UninstallRemediation, built directly over a fake helm and an offline observer."""

from __future__ import annotations

import pytest

from engine.helm import HelmError, ReleaseNotFound
from engine.reconcile import conditions as cond
from engine.reconcile.errors import ActionFailed
from engine.reconcile.uninstall import Uninstall
from engine.reconcile.uninstall_remediation import UninstallRemediation
from tests.fake_helm import offline_context, request


async def test_uninstall_clears_our_history() -> None:
    ctx, helm, _ = offline_context()
    first = helm.store(1, "deployed")
    req = request(history=(first,))
    out = await Uninstall(ctx).reconcile(req)
    assert out.ok and req.status.history.latest() is None
    assert ctx.observer.latest("demo", "web").status == "uninstalled"  # type: ignore[union-attr]


async def test_uninstall_of_a_missing_release_succeeds() -> None:
    ctx, helm, _ = offline_context()
    helm.fail = ReleaseNotFound("release: not found")
    assert (await Uninstall(ctx).reconcile(request())).ok


async def test_uninstall_remediation_reports_remediated_or_raises() -> None:
    ctx, helm, _ = offline_context()
    failed = helm.store(1, "failed")
    req = request(history=(failed,))
    out = await UninstallRemediation(ctx).reconcile(req)
    assert out.ok and cond.is_true(req.status.conditions, cond.REMEDIATED)
    ctx2, helm2, _ = offline_context()
    helm2.store(1, "failed")
    helm2.fail = HelmError("uninstall: timed out")
    with pytest.raises(ActionFailed, match="timed out"):
        await UninstallRemediation(ctx2).reconcile(request())
