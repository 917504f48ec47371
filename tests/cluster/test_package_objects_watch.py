"""The controller's input at scale, on the local cluster: a burst of object changes loads only the objects it
changed, and reports only the release keys whose spec changed (engine.runtime.cluster.objects)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from engine.base.wire import SHARD_KEY
from engine.kube.client import KubeTarget, api_client
from engine.runtime.cluster.objects import PackageObjects
from engine.runtime.drive.ports import InputUpdate
from testkit.controller import GROUP, VERSION, create, package
from tests.controller_fixtures import Apis

pytestmark = pytest.mark.cluster


def _source(namespace: str, name: str, tag: str) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/{VERSION}", "kind": "OCIRepository",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"url": f"oci://registry.example.com/charts/{name}", "ref": {"tag": tag}}}


async def _next(updates: AsyncIterator[InputUpdate], timeout: float = 30) -> InputUpdate:
    return await asyncio.wait_for(anext(updates), timeout)


def test_a_burst_loads_what_it_changed_and_reports_only_changed_keys(
    apis: Apis, namespace: str, kube_target: KubeTarget, package_loads: list[str],
) -> None:
    objects, _, _ = apis
    create(objects, _source(namespace, "web", "1.0.0"))
    create(objects, _source(namespace, "db", "1.0.0"))
    for i in range(40):
        create(objects, package(namespace, f"web{i}"))
    for i in range(3):
        create(objects, package(namespace, f"db{i}", chartRef={"kind": "OCIRepository", "name": "db"}))
    watched = PackageObjects(api_client(kube_target), [namespace], debounce=0.3)
    first = watched.load()
    assert len(first.specs) == 43 and not first.errors and len(package_loads) == 43

    bursts: list[frozenset[Path]] = []
    watched.on_burst(bursts.append)

    async def scenario() -> None:
        updates = watched.watch().__aiter__()
        pending = asyncio.ensure_future(_next(updates))
        await asyncio.sleep(2)  # the watches list (nothing changed since load: no update) and start watching
        assert not pending.done()
        package_loads.clear()
        await asyncio.to_thread(objects.patch_namespaced_custom_object, GROUP, VERSION, namespace, "packages",
                                "web7", {"spec": {"values": {"replicas": 2}}})
        update = await pending
        assert update.changed == {(namespace, "web7")} and not update.removed, update.changed
        assert update.specs[(namespace, "web7")].values == {"replicas": 2}
        assert package_loads == ["web7"]

        # A status write or an annotation changes no spec: nothing loaded, no update; the burst names them alone
        # (what the finalizers and the request annotations look at).
        bursts.clear()
        await asyncio.to_thread(objects.patch_namespaced_custom_object_status, GROUP, VERSION, namespace,
                                "packages", "web8", {"status": {"observedGeneration": 1}})
        await asyncio.to_thread(objects.patch_namespaced_custom_object, GROUP, VERSION, namespace, "packages",
                                "web9", {"metadata": {"annotations": {"a": "b"}}})
        pending = asyncio.ensure_future(_next(updates))
        await asyncio.sleep(2)
        assert not pending.done() and package_loads == ["web7"]
        # (web7's burst is announced when the next update is asked for: after the clear)
        assert {o.name for burst in bursts for o in burst} == {"web7", "web8", "web9"}, bursts

        # A source change refreshes exactly the packages that use it, loading none of them again.
        await asyncio.to_thread(objects.patch_namespaced_custom_object, GROUP, VERSION, namespace,
                                "ocirepositories", "db", {"spec": {"ref": {"tag": "2.0.0"}}})
        update = await pending
        assert update.changed == {(namespace, f"db{i}") for i in range(3)}, update.changed
        assert package_loads == ["web7"]
        request = update.specs[(namespace, "db0")].chart_request
        assert request is not None and "2.0.0" in str(request.source)

        # Deleting one removes its key alone.
        await asyncio.to_thread(objects.delete_namespaced_custom_object, GROUP, VERSION, namespace, "packages", "web3")
        update = await _next(updates)
        assert update.removed == {(namespace, "web3")} and not update.changed and len(update.specs) == 42
        watched.stop()

    asyncio.run(scenario())


def test_listing_again_loads_nothing_that_did_not_change(apis: Apis, namespace: str, kube_target: KubeTarget,
                                                    package_loads: list[str]) -> None:
    objects, _, _ = apis
    create(objects, _source(namespace, "web", "1.0.0"))
    for i in range(5):
        create(objects, package(namespace, f"web{i}"))
    watched = PackageObjects(api_client(kube_target), [namespace])
    watched.load()
    package_loads.clear()
    again = watched.load()  # every object listed again (as the engine's start does after its construction)
    assert package_loads == [] and len(again.specs) == 5
    client.CustomObjectsApi(api_client(kube_target)).delete_namespaced_custom_object(
        GROUP, VERSION, namespace, "packages", "web0")
    after = watched.load()
    assert after.removed == {(namespace, "web0")} and package_loads == []


def test_a_shard_reads_its_packages_and_only_the_sources_they_name(
    apis: Apis, namespace: str, kube_target: KubeTarget,
) -> None:
    objects, core, _ = apis
    other = f"{namespace}-src"
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=other)))
    watched = PackageObjects(api_client(kube_target), [namespace, other], debounce=0.3,
                             label_selector=f"{SHARD_KEY}=shard1")
    try:
        create(objects, _source(namespace, "web", "1.0.0"))
        create(objects, _source(other, "db", "1.0.0"))  # no Package of the shard names it yet: not read
        one = package(namespace, "one")
        one["metadata"]["labels"] = {SHARD_KEY: "shard1"}
        create(objects, one)
        create(objects, package(namespace, "rest"))  # not labelled: another shard's
        first = watched.load()
        assert set(first.specs) == {(namespace, "one")} and not first.errors, first
        assert {o.parts[-3] for o in watched.objects("ocirepositories")} == {namespace}

        async def scenario() -> None:
            updates = watched.watch().__aiter__()
            # A new Package of the shard naming a source in a namespace not read yet: that namespace is read
            # before the Package is checked, so it is never refused for a missing source.
            two = package(namespace, "two", chartRef={"kind": "OCIRepository", "name": "db", "namespace": other})
            two["metadata"]["labels"] = {SHARD_KEY: "shard1"}
            await asyncio.to_thread(create, objects, two)
            update = await _next(updates)
            assert update.changed == {(namespace, "two")} and not update.errors, update
            assert {o.parts[-3] for o in watched.objects("ocirepositories")} == {namespace, other}
            # Relabelled for another shard: it leaves this one (the watch says so), and the source only it
            # named is no longer read.
            await asyncio.to_thread(objects.patch_namespaced_custom_object, GROUP, VERSION, namespace, "packages",
                                    "one", {"metadata": {"labels": {SHARD_KEY: "shard2"}}})
            update = await _next(updates)
            assert update.removed == {(namespace, "one")} and set(update.specs) == {(namespace, "two")}, update
            for _ in range(50):
                if {o.parts[-3] for o in watched.objects("ocirepositories")} == {other}:
                    break
                await asyncio.sleep(0.1)
            assert {o.parts[-3] for o in watched.objects("ocirepositories")} == {other}
            assert (namespace, "rest") not in watched.specs()
            watched.stop()

        asyncio.run(scenario())
    finally:
        watched.stop()
        core.delete_namespace(other)
