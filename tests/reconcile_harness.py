"""A small harness for reconcile scenarios against the real cluster: one package, one engine."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import yaml

from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.reconcile.atomic import PassResult
from engine.runtime import Engine
from engine.runtime.assemble import build_engine
from engine.storage.observation import Observation
from testkit.packages import write_package

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


class Scenario:
    """Writes one package file (chart ``flaky`` by default) and runs engine passes on it."""

    def __init__(self, helm: Helm, target: KubeTarget, namespace: str, folder: Path, name: str = "app",
                 chart: str = "flaky"):
        self.helm = helm
        self.target = target
        self.namespace = namespace
        self.folder = folder
        self.name = name
        self.chart = chart
        self.key = (namespace, name)
        self.engine: Engine | None = None

    def write(self, values: str = "{}", spec: str = "", timeout: str = "20s") -> None:
        """(Re)write the package file; ``spec`` holds extra spec lines (indented two spaces)."""
        write_package(self.folder, self.name, self.namespace, chart=EXAMPLES / "charts" / self.chart, timeout=timeout,
                      values=yaml.safe_load(values), **(yaml.safe_load(spec) or {}))
        if self.engine is not None:
            self.engine.load_packages()

    async def start(self) -> Engine:
        self.engine = build_engine(self.target, self.helm, self.folder, namespaces=[self.namespace],
                             watch_packages=False)
        await self.engine.start(reconcile=False)
        return self.engine

    async def restart(self) -> Engine:
        """A new engine instance (as after a process restart)."""
        await self.stop()
        return await self.start()

    async def stop(self) -> None:
        if self.engine is not None:
            await self.engine.stop()
            self.engine = None

    async def run(self, force: bool = False) -> PassResult:
        assert self.engine is not None
        return await self.engine.controller.run_pass(self.key, force=force)

    async def converge(self, limit: int = 8) -> list[PassResult]:
        """Run passes while a pass asks for an immediate requeue (as the work queue would)."""
        results = [await self.run()]
        while results[-1].next == "now" and len(results) < limit:
            results.append(await self.run())
        return results

    def latest(self) -> Observation | None:
        assert self.engine is not None and self.engine.observer is not None
        return self.engine.observer.latest(*self.key)

    def revisions(self) -> list[tuple[int, str]]:
        assert self.engine is not None
        return [(o.version, o.status) for o in self.engine.history(self.key)]

    def helm_cli(self, *args: str) -> str:
        proc = subprocess.run([self.helm.binary, *args, "-n", self.namespace, *self.target.helm_args()],
                              capture_output=True, text=True, env={**os.environ, **self.helm.env}, timeout=120,
                              check=False)
        if proc.returncode != 0:
            raise AssertionError(f"helm {' '.join(args)}: {proc.stderr}")
        return proc.stdout
