"""What the controller writes on a Package object's status (engine/runtime/cluster/object_status.py), over the real
API server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

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


async def test_a_pass_end_is_written_without_waiting_out_the_burst(
    apis: Apis, namespace: str, kube_target: KubeTarget,
) -> None:
    """A pass's end (observedGeneration, Ready) reaches the Package at once: readers wait on it (the takeover after
    a SIGKILL is timed to it). The burst delay is an hour here: only a write that skips it is seen."""
    objects, _, _ = apis
    create(objects, {"apiVersion": f"{GROUP}/{VERSION}", "kind": "OCIRepository",
                     "metadata": {"name": "web", "namespace": namespace},
                     "spec": {"url": "oci://registry.example.com/charts/web", "ref": {"tag": "1.0.0"}}})
    create(objects, package(namespace, "web"))
    watched = PackageObjects(api_client(kube_target), [namespace])
    await asyncio.to_thread(watched.load)
    book = ReleaseBook(Observer(None))
    book.set_packages(watched.specs())
    spec = next(iter(book.packages.values()))
    writer = StatusWriter(api_client(kube_target), book, watched, acting=lambda: True, spawn=asyncio.ensure_future,
                          problems=list, delay=3600.0)

    def observed() -> Any:
        return ((get_package(objects, namespace, "web") or {}).get("status") or {}).get("observedGeneration")

    writer.on_signal(PassFinished(spec.key, spec, "success", 0.1))
    await wait_until(lambda: bool(writer._written), 30)
    assert await asyncio.to_thread(observed) == 1
