"""``helmdeck controller --shards auto`` on the local cluster: membership Leases, and replicas as processes each
reconciling the Packages placed on it, the claim cleared after each action, a killed replica's share taken over."""

from __future__ import annotations

import asyncio
import re
import signal
import time
from collections.abc import Callable
from typing import Any

import pytest

from engine.kube.client import KubeTarget, api_client
from engine.runtime.drive.lease import LeaseElector
from engine.runtime.drive.members import AUTO, SHARD, Membership, member_lease, member_lease_name
from engine.runtime.ledger.placement import owner, package_name
from tests.controller_fixtures import (
    GROUP,
    VERSION,
    Controller,
    ControllerEnv,
    create,
    eventually,
    get_package,
    package,
    releases,
)

pytestmark = pytest.mark.cluster
LEASE = 10  # seconds: --lease-duration of the replicas (this 2-core machine runs at a load of 30: shorter ones lapse)


async def wait_until(check: Callable[[], bool], timeout: float) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + timeout
    while not check():
        if loop.time() > end:
            raise AssertionError("timed out")
        await asyncio.sleep(0.05)


def _member(kube_target: KubeTarget, namespace: str, identity: str) -> tuple[LeaseElector, Membership]:
    config = member_lease(identity, namespace, 2.0)
    api = api_client(kube_target)
    elector = LeaseElector(api, config.name, namespace, identity=identity, duration=config.duration, retry=0.3,
                           labels=dict(config.labels))
    return elector, Membership(api, namespace, identity, duration=config.duration, retry=0.3)


async def test_members_see_each_other_and_a_silent_one_is_gone_after_the_lease_duration(
    kube_target: KubeTarget, namespace: str,
) -> None:
    (ea, ma), (eb, mb), (ec, mc) = (_member(kube_target, namespace, i) for i in ("a", "b", "c"))
    for e in (ea, eb, ec):
        e.start()
    tasks = [asyncio.create_task(m.run()) for m in (ma, mb, mc)]
    try:
        await wait_until(lambda: all(m.live() == {"a", "b", "c"} for m in (ma, mb, mc)), 10)
        assert ea.name == member_lease_name("a") and ea.labels[SHARD] == AUTO

        loop = asyncio.get_running_loop()
        died = loop.time()
        await ec.stop(release=False)  # c dies: its Lease stays, unrenewed
        await wait_until(lambda: ma.live() == {"a", "b"}, 6)
        took = loop.time() - died
        assert 2.0 <= took < 4.0, took  # the Lease duration, by a's own clock, within a couple of lists
        assert not ma.members().is_live("c") and ma.members().silence("c") >= 2.0

        await eb.stop(release=True)  # b stops cleanly: gone at the next list, not after a Lease duration
        gave_up = loop.time()
        await wait_until(lambda: ma.live() == {"a"}, 3)
        assert loop.time() - gave_up < 1.5
    finally:
        for t in tasks:
            t.cancel()
        for e in (ea, eb, ec):
            await e.stop()


def _identities(env: ControllerEnv) -> dict[str, str]:
    """Replica identity -> membership Lease name, of the live membership Leases of the test's namespace."""
    items: Any = env.coordination.list_namespaced_lease(env.namespace, label_selector=f"{SHARD}={AUTO}").items
    return {str(x.spec.holder_identity): x.metadata.name for x in items if x.spec.holder_identity}


def _identity(ctl: Controller, identities: dict[str, str]) -> str:
    [found] = [i for i in identities if f"-{ctl.pid}-" in i]
    return found


def _acted(ctl: Controller, namespace: str, name: str, action: str) -> bool:
    return f"{namespace}/{name}: {action} succeeded" in ctl.text()


def _sees(ctl: Controller, n: int) -> bool:
    lines = re.findall(r"live members: (.*)", ctl.text())
    return bool(lines) and len(lines[-1].split(", ")) == n


def test_replicas_reconcile_what_placement_gives_them_and_take_over_a_killed_ones_share(
    controller_env: ControllerEnv,
) -> None:
    env = controller_env
    objects, core, namespace = env.objects, env.core, env.namespace
    env.web_source()
    ctls = [env.start("--shards", "auto", "--lease-duration", str(LEASE), name=n) for n in ("a", "b", "c")]

    def logs() -> str:
        return "\n".join(c.text()[-6000:] for c in ctls)

    try:
        eventually(lambda: all(_sees(c, 3) for c in ctls), 60, "every replica sees three members", logs=logs)
        identities = _identities(env)
        ids = {c.pid: _identity(c, identities) for c in ctls}
        names = [f"p{i}" for i in range(6)]
        for name in names:
            create(objects, package(namespace, name, values={"replicas": 1}))
        eventually(lambda: all(releases(core, namespace, n) == [(1, "deployed")] for n in names), 180,
                   "every Package installed", logs=logs)

        placed = {n: owner(package_name(namespace, n), list(ids.values())) for n in names}

        def acted(name: str, action: str) -> list[str]:
            return [ids[c.pid] for c in ctls if _acted(c, namespace, name, action)]

        eventually(lambda: all(acted(n, "install") for n in names), 60, "each install logged", logs=logs)
        for name in names:  # installed once, by the replica placement names
            assert acted(name, "install") == [placed[name]], (name, placed)

        def claims() -> list[Any]:
            return [(get_package(objects, namespace, n) or {}).get("status", {}).get("claim") for n in names]

        eventually(lambda: claims() == [None] * len(names), 15, "every claim cleared", logs=logs)

        # SIGKILL the replica with the largest share; edit every Package: the killed one's are upgraded by the
        # replica placement gives them among the two left, within the Lease duration and a pass or two.
        victim = max(ctls, key=lambda c: sum(1 for n in names if placed[n] == ids[c.pid]))
        left = [c for c in ctls if c is not victim]
        victim.stop(signal.SIGKILL)
        killed = time.monotonic()
        for name in names:
            objects.patch_namespaced_custom_object(GROUP, VERSION, namespace, "packages", name,
                                                   {"spec": {"values": {"replicas": 2}}})
        eventually(lambda: all(releases(core, namespace, n)[-1] == (2, "deployed") for n in names), 120,
                   "every Package upgraded once", logs=logs)
        took = time.monotonic() - killed
        survivors = [ids[c.pid] for c in left]
        eventually(lambda: all(acted(n, "upgrade") for n in names), 60, "each upgrade logged", logs=logs)
        for name in names:
            assert acted(name, "upgrade") == [owner(package_name(namespace, name), survivors)], name
        assert took < 60, took
        eventually(lambda: claims() == [None] * len(names), 15, "every claim cleared", logs=logs)
    finally:
        codes = [c.stop() for c in ctls if c.proc.poll() is None]
    assert codes == [0, 0], logs()
    assert set(_identities(env)) == {ids[victim.pid]}  # the survivors gave their membership Leases up
