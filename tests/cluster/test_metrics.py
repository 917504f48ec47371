"""``helmdeck_releases{state}``: a replica counts only the packages placed on it, so the replicas' sum is right."""

from __future__ import annotations

from typing import Any, cast

from engine.runtime.state import ReleaseKey, ReleaseView
from helmdeck.metrics import ControllerMetrics

SPEC = cast(Any, object())  # only whether a release has a package counts here


def releases(metrics: ControllerMetrics) -> dict[str, float]:
    return {s.labels["state"]: s.value for family in metrics.registry.collect() if family.name == "helmdeck_releases"
            for s in family.samples}


def test_each_replica_counts_only_the_packages_placed_on_it() -> None:
    views = [ReleaseView("ns", f"p{i}", package=SPEC, state="InSync" if i % 3 else "Failed") for i in range(9)]
    views.append(ReleaseView("ns", "stray", state=None))  # a release no package declares: never counted
    mine: dict[str, set[ReleaseKey]] = {"a": {("ns", "p0"), ("ns", "p1"), ("ns", "p2")},
                                        "b": {("ns", f"p{i}") for i in range(3, 9)}}
    counts = {r: releases(ControllerMetrics(lambda: views, lambda: 0, keys.__contains__)) for r, keys in mine.items()}
    assert counts == {"a": {"Failed": 1, "InSync": 2}, "b": {"Failed": 2, "InSync": 4}}
    assert releases(ControllerMetrics(lambda: views, lambda: 0)) == {"Failed": 3, "InSync": 6}  # no shards: all


def test_the_queue_depth_and_the_waiting_are_two_gauges() -> None:
    """helmdeck_queue_depth: packages due now (controller-runtime's workqueue_depth); helmdeck_queue_waiting: those
    queued for their interval or a backoff (an idle controller: depth 0, every package waiting)."""
    metrics = ControllerMetrics(lambda: [], lambda: 0, queue_waiting=lambda: 2)
    gauges = {s.name: s.value for family in metrics.registry.collect() for s in family.samples}
    assert (gauges["helmdeck_queue_depth"], gauges["helmdeck_queue_waiting"]) == (0, 2)
