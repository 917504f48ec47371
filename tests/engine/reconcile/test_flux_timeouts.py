"""Per-action timeouts of a HelmRelease (issue 34 behaviour 3): each helm action gets its section's
``timeout``, else ``spec.timeout``, as helm-controller v1.6.3 sets them (internal/action/install.go
``newInstall``, upgrade.go ``newUpgrade``, rollback.go ``newRollback``, uninstall.go ``newUninstall``:
``obj.Get<Action>().GetTimeout(obj.GetTimeout())``; api/v2 helmrelease_types.go ``Install.GetTimeout``...)."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.runtime.assemble import build_engine
from testkit.chart_sources import ChartRepoServer, helm_run, publish_http, write
from testkit.release_audit import helm_wrapper
from tests.engine.reconcile.test_flux_rules import helm_release, repository
from tests.reconcile_harness import EXAMPLES

pytestmark = pytest.mark.cluster

SECTIONS = """  install: {timeout: 61s}
  upgrade: {timeout: 3s, remediation: {retries: 1}}
  rollback: {timeout: 62s}
  uninstall: {timeout: 63s}
"""


def _timeouts(log: Path) -> dict[str, list[str]]:
    """The ``--timeout`` of each helm command the wrapper logged, by command."""
    out: dict[str, list[str]] = {}
    for line in log.read_text().splitlines():
        parts = line.split()
        if parts[0] == "start" and "--timeout" in parts:
            out.setdefault(parts[4], []).append(parts[parts.index("--timeout") + 1])
    return out


async def test_each_action_takes_its_own_timeout(
    helm: Helm, kube_target: KubeTarget, namespace: str, tmp_path: Path, repo: ChartRepoServer,
) -> None:
    """An upgrade that hangs fails after its 3s upgrade.timeout (spec.timeout is 5m), its rollback runs with
    rollback.timeout, the install before with install.timeout, the uninstall with uninstall.timeout."""
    helm_run(helm.binary, "package", str(EXAMPLES / "charts" / "flaky"), "-d", str(tmp_path / "packaged"))
    publish_http(helm.binary, tmp_path / "packaged" / "flaky-0.1.0.tgz", repo)
    folder = tmp_path / "flux"
    write(folder, "repository.yaml", repository(namespace, repo.url))
    wrapper, log = helm_wrapper(tmp_path, helm.binary)
    engine = build_engine(kube_target, Helm(wrapper, kube_target, helm.env), folder, namespaces=[namespace],
                          watch_packages=False)
    await engine.start(reconcile=False)
    key = (namespace, "app")
    try:
        write(folder, "app.yaml", helm_release(namespace, SECTIONS, "{}", chart="flaky", name="app", timeout="5m"))
        engine.load_packages()
        assert not engine.package_errors, engine.package_errors
        installed = await engine.controller.run_pass(key)
        assert [(o.action, o.ok) for o in installed.outcomes] == [("install", True)], installed
        write(folder, "app.yaml", helm_release(namespace, SECTIONS, "{hang: true}", chart="flaky", name="app",
                                               timeout="5m"))
        engine.load_packages()
        started = time.monotonic()
        failed = await engine.controller.run_pass(key)
        took = time.monotonic() - started
        assert [(o.action, o.ok) for o in failed.outcomes] == [("upgrade", False), ("rollback", True)], failed
        assert took < 60, f"the hanging upgrade took {took:.0f}s: not its 3s upgrade.timeout"
        assert (await engine.uninstall(key)).ok
    finally:
        await engine.stop()
    assert _timeouts(log) == {"install": ["1m1s"], "upgrade": ["3s"], "rollback": ["1m2s"],
                              "uninstall": ["1m3s"]}
