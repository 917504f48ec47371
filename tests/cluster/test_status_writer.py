"""What the controller writes on a Package object's status (engine/runtime/cluster/object_status.py), over the real
API server."""

from __future__ import annotations

import asyncio
import contextlib
import threading
from typing import Any

import pytest
from kubernetes import client

from engine.kube.client import KubeTarget, api_client
from engine.runtime.cluster.object_status import StatusWriter
from engine.runtime.cluster.objects import PackageObjects
from engine.runtime.ledger.book import ReleaseBook
from engine.runtime.state import PassFinished
from engine.storage.observer import Observer
from testkit.controller import GROUP, VERSION, create, get_package, package
from tests.cluster.test_lease import wait_until
from tests.controller_fixtures import Apis

pytestmark = pytest.mark.cluster


async def _one_package(
    objects: client.CustomObjectsApi, namespace: str, kube_target: KubeTarget,
) -> tuple[PackageObjects, ReleaseBook]:
    """The Package ``web`` (of an OCIRepository) created in ``namespace``, loaded as the controller loads it, and a
    book holding its spec."""
    create(objects, {"apiVersion": f"{GROUP}/{VERSION}", "kind": "OCIRepository",
                     "metadata": {"name": "web", "namespace": namespace},
                     "spec": {"url": "oci://registry.example.com/charts/web", "ref": {"tag": "1.0.0"}}})
    create(objects, package(namespace, "web"))
    watched = PackageObjects(api_client(kube_target), [namespace])
    await asyncio.to_thread(watched.load)
    book = ReleaseBook(Observer(None))
    book.set_packages(watched.specs())
    return watched, book


async def test_a_pass_end_is_written_without_waiting_out_the_burst(
    apis: Apis, namespace: str, kube_target: KubeTarget,
) -> None:
    """A pass's end (observedGeneration, Ready) reaches the Package at once: readers wait on it (the takeover after
    a SIGKILL is timed to it). The burst delay is an hour here: only a write that skips it is seen."""
    objects, _, _ = apis
    watched, book = await _one_package(objects, namespace, kube_target)
    spec = next(iter(book.packages.values()))
    writer = StatusWriter(api_client(kube_target), book, watched, acting=lambda: True, spawn=asyncio.ensure_future,
                          problems=list, delay=3600.0)

    def observed() -> Any:
        return ((get_package(objects, namespace, "web") or {}).get("status") or {}).get("observedGeneration")

    writer.on_signal(PassFinished(spec.key, spec, "success", 0.1))
    await wait_until(lambda: bool(writer._written), 30)
    assert await asyncio.to_thread(observed) == 1


class HeldClient(client.ApiClient):
    """A real API client whose first status PATCH waits, before it is sent, until the test lets it go; every
    status PATCH's ``observedGeneration`` is recorded when it is sent and when its answer came (it landed)."""

    def __init__(self, configuration: client.Configuration) -> None:
        super().__init__(configuration=configuration)
        self.held = threading.Event()  # the first write is waiting
        self.release = threading.Event()
        self.sent: list[int] = []
        self.landed: list[int] = []
        self._lock = threading.Lock()

    def call_api(self, method: str, url: str, header_params: Any = None, body: Any = None, *args: Any,
                 **kwargs: Any) -> Any:
        if method != "PATCH" or not url.endswith("/status"):
            return super().call_api(method, url, header_params, body, *args, **kwargs)
        generation = int(body["status"]["observedGeneration"])
        with self._lock:
            first = not self.sent
            self.sent.append(generation)
        if first:
            self.held.set()
            assert self.release.wait(60)
        out = super().call_api(method, url, header_params, body, *args, **kwargs)
        with self._lock:
            self.landed.append(generation)
        return out


async def test_a_second_write_waits_for_the_first_to_land(
    apis: Apis, namespace: str, kube_target: KubeTarget,
) -> None:
    """Two writes of one Package's status: the first (generation 1's pass) is held on its way; the second (the
    pass of generation 2, ended meanwhile) is made and sent only once the first landed, so the object ends with
    observedGeneration 2. Two writes in flight at once landed in either order: the churn test saw generation 5
    observed 4."""
    objects, _, _ = apis
    watched, book = await _one_package(objects, namespace, kube_target)
    first = next(iter(book.packages.values()))
    held = HeldClient(api_client(kube_target).configuration)
    writer = StatusWriter(held, book, watched, acting=lambda: True, spawn=asyncio.ensure_future, problems=list,
                          delay=3600.0)

    try:
        writer.on_signal(PassFinished(first.key, first, "success", 0.1))
        assert await asyncio.to_thread(held.held.wait, 30)
        await asyncio.to_thread(objects.patch_namespaced_custom_object, GROUP, VERSION, namespace, "packages",
                                "web", {"spec": {"timeout": "2m"}})
        await asyncio.to_thread(watched.load)
        book.set_packages(watched.specs())
        second = next(iter(book.packages.values()))
        assert watched.generation(second) == 2
        writer.on_signal(PassFinished(second.key, second, "success", 0.1))
        # A second write sent beside the held one is sent within this time (nothing holds it); one that waits its
        # turn is not sent at all meanwhile.
        with contextlib.suppress(AssertionError):
            await wait_until(lambda: len(held.sent) > 1, 3)
        sent_while_held = list(held.sent)
    finally:
        held.release.set()
    await wait_until(lambda: len(held.landed) == 2, 30)
    status = (await asyncio.to_thread(get_package, objects, namespace, "web") or {}).get("status") or {}
    assert (sent_while_held, held.landed, status.get("observedGeneration")) == ([1], [1, 2], 2)
