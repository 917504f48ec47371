"""The engine against the real cluster: install, upgrade on change, rollback, failure."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest
import yaml

from engine.base import wire
from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.reconcile import conditions as cond
from engine.reconcile import state as st
from engine.runtime.assemble import build_engine
from engine.runtime.state import ActionOutcome
from testkit import packages
from tests.conftest import EXAMPLES
from tests.engine.resolve.test_values_from import until

pytestmark = pytest.mark.cluster


def write_package(folder: Path, namespace: str, name: str, chart: str, values: str, timeout: str = "1m") -> Path:
    """Package ``name`` of the example chart ``chart``; ``values`` its values as YAML text indented under
    ``spec.values`` (4 spaces), which may go on with more spec fields at 2 spaces (e.g. ``  upgrade:``)."""
    fields = yaml.safe_load("  values:\n" + values)
    return packages.write_package(folder, name, namespace, chart=EXAMPLES / "charts" / chart, timeout=timeout,
                                  **fields)


async def test_install_upgrade_rollback(
    any_helm: Helm, namespace: str, kube_target: KubeTarget, tmp_path: Path
) -> None:
    write_package(tmp_path, namespace, "cfg", "settings", "    settings:\n      color: blue\n")
    engine = build_engine(kube_target, any_helm, tmp_path, namespaces=[namespace])
    await engine.start(reconcile=False)
    try:
        key = (namespace, "cfg")
        first = await engine.reconcile(key)
        assert isinstance(first, ActionOutcome) and first.ok, first
        obs = engine.observer.latest(*key) if engine.observer else None
        assert obs is not None and (obs.version, obs.status) == (1, "deployed")
        assert obs.label_map[wire.MANAGED_BY] == "helmdeck"
        assert len(obs.label_map[wire.SPEC_DIGEST]) == 32

        assert await engine.reconcile(key) is None  # unchanged: no action, no revision

        write_package(tmp_path, namespace, "cfg", "settings", "    settings:\n      color: green\n")
        engine.load_packages()
        second = await engine.reconcile(key)
        assert isinstance(second, ActionOutcome) and second.ok and second.revision == 2
        assert engine.observer is not None
        history = engine.observer.history(*key)
        assert [(o.version, o.status) for o in history] == [(2, "deployed"), (1, "superseded")]

        back = await engine.rollback(key, 1)
        assert isinstance(back, ActionOutcome) and back.ok and back.revision == 3, back
        latest = engine.observer.latest(*key)
        assert latest is not None and latest.status == "deployed"
        assert latest.config == history[1].config == {"settings": {"color": "blue"}}
        state = engine.release(key)
        assert state is not None and state.suspended
        assert await engine.reconcile(key) is None  # suspended: the rollback stays
    finally:
        await engine.stop()


async def test_failed_upgrade_is_judged_from_storage(
    helm: Helm, namespace: str, kube_target: KubeTarget, tmp_path: Path
) -> None:
    write_package(tmp_path, namespace, "flaky", "flaky", "    fail: false\n")
    engine = build_engine(kube_target, helm, tmp_path, namespaces=[namespace])
    await engine.start(reconcile=False)
    try:
        key = (namespace, "flaky")
        ok = await engine.reconcile(key)
        assert isinstance(ok, ActionOutcome) and ok.ok
        write_package(tmp_path, namespace, "flaky", "flaky", "    fail: true\n", timeout="20s")
        engine.load_packages()
        failed = await engine.reconcile(key)
        assert isinstance(failed, ActionOutcome) and not failed.ok
        assert isinstance(failed, ActionOutcome) and failed.revision == 2 and "failed" in failed.message
        assert isinstance(failed, ActionOutcome) and failed.tail, "helm's last output lines are kept"
        latest = engine.observer.latest(*key) if engine.observer else None
        assert latest is not None and latest.status == "failed"
        # A pass that decided before the observer saw the failed record ends "now", requeued (as Flux requeues):
        # that pass finds the release failed with no retries left, and acts no more.
        await until(lambda: (v := engine.release(key)) is not None and v.running is None, 60)
        state = engine.release(key)
        assert state is not None and state.last == failed
        assert await engine.reconcile(key) is None  # no retries left: stalled
        state = engine.release(key)
        assert state is not None and state.state == st.STALLED, state
        # The operator rolls back by hand: the suspension holds the release now, not the stall (the row said
        # Stalled over a healthy rolled-back release).
        back = await engine.rollback(key, 1)
        assert isinstance(back, ActionOutcome) and back.ok and back.revision == 3, back
        state = engine.release(key)
        assert state is not None and state.suspended and state.state != st.STALLED, state
        assert not cond.is_true(state.conditions, cond.STALLED)
    finally:
        await engine.stop()


async def test_release_written_by_plain_helm_appears_live(
    helm: Helm, namespace: str, kube_target: KubeTarget
) -> None:
    engine = build_engine(kube_target, helm, None, namespaces=[namespace])
    seen = asyncio.Event()
    engine.subscribe(lambda ev: seen.set() if engine.release((namespace, "outside")) else None)
    await engine.start()
    try:
        proc = await asyncio.create_subprocess_exec(
            helm.binary, "install", "outside", str(EXAMPLES / "charts" / "settings"), "-n", namespace,
            *helm.target.helm_args(), env={**os.environ, **helm.env},
        )
        assert await proc.wait() == 0
        await asyncio.wait_for(seen.wait(), 10)
        state = engine.release((namespace, "outside"))
        assert state is not None and state.observation is not None and state.package is None
    finally:
        await engine.stop()
