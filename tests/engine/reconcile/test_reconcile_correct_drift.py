"""CorrectClusterDrift, built directly with a fake drift detector (Flux's correct_cluster_drift_test.go)."""

from __future__ import annotations

from collections.abc import Sequence

from engine.package.drift import IgnoreRule
from engine.package.selector import Selector
from engine.reconcile import conditions as cond
from engine.reconcile.correct_drift import HELM_FIELD_MANAGER, CorrectClusterDrift
from engine.reconcile.drift import DriftItem
from tests.fake_helm import offline_context, request


class FakeDetector:
    """Reports the drift it is given and records what it was asked to correct."""

    def __init__(self, items: list[DriftItem]):
        self.items = items
        self.corrected: list[tuple[str, str]] = []
        self.ignore: tuple[IgnoreRule, ...] = ()

    def detect(self, manifest: str, namespace: str, ignore: Sequence[IgnoreRule] = ()) -> list[DriftItem]:
        self.ignore = tuple(ignore)
        return list(self.items)

    def correct(self, manifest: str, namespace: str, items: list[DriftItem], manager: str,
                ignore: Sequence[IgnoreRule] = ()) -> list[str]:
        self.corrected.append((namespace, manager))
        self.ignore = tuple(ignore)
        return [i.describe() for i in items]


def _item() -> DriftItem:
    return DriftItem("v1", "ConfigMap", "demo", "web", absent=True)


async def test_drifted_objects_are_reapplied_as_helm() -> None:
    ctx, helm, _ = offline_context()
    helm.store(1, "deployed")
    detector = FakeDetector([_item()])
    req = request()
    out = await CorrectClusterDrift(ctx, detector).reconcile(req)  # type: ignore[arg-type]
    assert out.ok and detector.corrected == [("demo", HELM_FIELD_MANAGER)]
    assert cond.is_true(req.status.conditions, cond.READY)


async def test_no_drift_left_is_success_without_changes() -> None:
    ctx, helm, _ = offline_context()
    helm.store(1, "deployed")
    detector = FakeDetector([])
    out = await CorrectClusterDrift(ctx, detector).reconcile(request())  # type: ignore[arg-type]
    assert out.ok and out.message == "no drift left to correct" and detector.corrected == []


async def test_the_package_ignore_rules_reach_detection_and_correction() -> None:
    ctx, helm, _ = offline_context()
    helm.store(1, "deployed")
    detector = FakeDetector([_item()])
    rules = (IgnoreRule(("/spec/replicas",), Selector(kind="Deployment")),)
    out = await CorrectClusterDrift(ctx, detector).reconcile(request(drift_ignore=rules))  # type: ignore[arg-type]
    assert out.ok and detector.ignore == rules
