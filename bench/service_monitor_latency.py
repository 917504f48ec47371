"""Monitor detection latency: a release's resource deleted by hand, 100 times.

One release with one ConfigMap. Each round deletes the ConfigMap through the
API and measures until the service's status callback shows it absent (the
latency the screen sees), then recreates it by hand and waits until the
monitor shows it present again. Prints p50/p99 of the detection latency.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence

from kubernetes import client

from bench.service_common import Bench, describe, run
from engine.monitor.status import MonitorStatus
from engine.service import ReleaseService

ROUNDS = 100


async def main_async(bench: Bench) -> None:
    changed = asyncio.Event()
    last: list[MonitorStatus] = [MonitorStatus()]

    def on_status(namespace: str, name: str, status: MonitorStatus) -> None:
        last[0] = status
        changed.set()

    async def until(check: str, timeout: float = 10.0) -> float:
        deadline = time.monotonic() + timeout
        while True:
            absent = bool(last[0].absent)
            if (check == "absent") == absent:
                return time.perf_counter()
            changed.clear()
            await asyncio.wait_for(changed.wait(), deadline - time.monotonic())

    service = ReleaseService(bench.helm, bench.api, on_status=on_status)
    spec = bench.package("latency", bench.chart())
    await service.upgrade(bench.namespace, spec)
    body = client.V1ConfigMap(metadata=client.V1ObjectMeta(name="latency"), data={"value": "latency"})
    samples = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        await asyncio.to_thread(bench.core.delete_namespaced_config_map, "latency", bench.namespace)
        samples.append(await until("absent") - start)
        await asyncio.to_thread(bench.core.create_namespaced_config_map, bench.namespace, body)
        await until("present")
    service.stop_monitors()
    print(f"deleted resource reported after ({ROUNDS} deletions): {describe(samples)}")


def main(argv: Sequence[str] | None = None) -> None:
    run(__doc__ or "", main_async, argv)


if __name__ == "__main__":
    main()
