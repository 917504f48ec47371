"""Leader election on the real local cluster: one acts, the other takes over when it dies."""

from __future__ import annotations

import asyncio
from collections.abc import Callable

import pytest

from engine.kube.client import KubeTarget, api_client
from engine.runtime.drive.lease import LeaseElector

pytestmark = pytest.mark.cluster


async def wait_until(check: Callable[[], bool], timeout: float) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not check():
        if loop.time() > end:
            raise AssertionError("timed out")
        await asyncio.sleep(0.05)


async def test_one_leader_and_takeover_within_the_lease_duration(kube_target: KubeTarget, namespace: str) -> None:
    seen: list[tuple[str, str, bool]] = []
    a = LeaseElector(api_client(kube_target), "helmdeck-test", namespace, identity="a", duration=2, retry=0.3,
                     on_change=lambda h, lead: seen.append(("a", h, lead)))
    b = LeaseElector(api_client(kube_target), "helmdeck-test", namespace, identity="b", duration=2, retry=0.3,
                     on_change=lambda h, lead: seen.append(("b", h, lead)))
    a.start()
    await wait_until(lambda: a.leader, 5)
    b.start()
    await wait_until(lambda: b.holder == "a", 5)
    await asyncio.sleep(2.5)  # longer than the duration: a keeps renewing, b stays follower
    assert a.leader and not b.leader

    loop = asyncio.get_running_loop()
    died = loop.time()
    await a.stop(release=False)  # a dies without giving the lease up
    await wait_until(lambda: b.leader, 6)
    took = loop.time() - died
    assert 2.0 <= took < 4.0, took  # after the duration, within a couple of retries
    assert ("b", "b", True) in seen
    await b.stop()


async def test_clean_stop_hands_over_at_once(kube_target: KubeTarget, namespace: str) -> None:
    a = LeaseElector(api_client(kube_target), "helmdeck-x", namespace, identity="a", duration=10, retry=0.3)
    b = LeaseElector(api_client(kube_target), "helmdeck-x", namespace, identity="b", duration=10, retry=0.3)
    a.start()
    await wait_until(lambda: a.leader, 5)
    b.start()
    await wait_until(lambda: b.holder == "a", 5)
    await a.stop()  # releases
    await wait_until(lambda: b.leader, 3)  # well before the 10 s duration
    await b.stop()
