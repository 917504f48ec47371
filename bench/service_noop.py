"""No-op reconcile of 200 unchanged packages: helmdeck's smart upgrade vs ``helm upgrade --install``.

All 200 packages are installed first (not timed). Then, one package after
another, measured in the same run:

- helmdeck, render cache warm: ``ReleaseService.upgrade`` of each (no render, no helm run);
- helmdeck, render cache cold: the same after clearing the cache (one ``helm template`` each);
- helmdeck, new service: a fresh ``ReleaseService`` (cold cache, monitors built from storage);
- helm: ``helm upgrade --install`` of each with the same chart and values (a new revision each).

Prints the totals, per-package means and helm's time over helmdeck's (the speed-up).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Sequence

from bench.service_common import Bench, run
from engine.helm import UpgradeOptions
from engine.resolve.release import resolve
from engine.service import ReleaseService

PACKAGES = 200


async def timed(label: str, count: int, run: Callable[[], Awaitable[None]]) -> float:
    start = time.perf_counter()
    await run()
    total = time.perf_counter() - start
    print(f"{label:<38} {total:8.2f} s total, {total / count * 1000:8.1f} ms per package")
    return total


async def main_async(bench: Bench) -> None:
    chart = bench.chart()
    packages = [bench.package(f"pkg-{i:03d}", chart) for i in range(PACKAGES)]
    service = ReleaseService(bench.helm, bench.api)
    print(f"installing {PACKAGES} packages in {bench.namespace} ...")
    sem = asyncio.Semaphore(4)

    async def install(spec_index: int) -> None:
        async with sem:
            await service.upgrade(bench.namespace, packages[spec_index])

    await asyncio.gather(*(install(i) for i in range(PACKAGES)))

    async def noop(svc: ReleaseService) -> None:
        for spec in packages:
            result = await svc.upgrade(bench.namespace, spec)
            if result.action != "none":
                raise RuntimeError(f"{spec.name}: expected no-op, got {result}")

    warm = await timed("helmdeck no-op, render cache warm", PACKAGES, lambda: noop(service))
    service.render_cache.clear()
    cold = await timed("helmdeck no-op, render cache cold", PACKAGES, lambda: noop(service))
    fresh = ReleaseService(bench.helm, bench.api)
    new = await timed("helmdeck no-op, new service", PACKAGES, lambda: noop(fresh))
    service.stop_monitors()
    fresh.stop_monitors()

    async def helm_all() -> None:
        opts = UpgradeOptions(install=True, timeout=60)
        for spec in packages:
            await bench.helm.upgrade(spec.release_name, bench.namespace, chart, dict(resolve(spec).values), opts)

    helm = await timed("helm upgrade --install", PACKAGES, helm_all)
    print(f"speed-up over helm: warm cache {helm / warm:.0f}x, cold cache {helm / cold:.1f}x, "
          f"new service {helm / new:.1f}x")


def main(argv: Sequence[str] | None = None) -> None:
    run(__doc__ or "", main_async, argv)


if __name__ == "__main__":
    main()
