"""The status store writes only what changed (a no-op pass costs no API call)."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client

from engine.reconcile.status import EngineStatus
from engine.reconcile.store import StatusStore


class RecordingStore(StatusStore):
    """The store with its one API write recorded instead of sent (no cluster needed)."""

    def __init__(self) -> None:
        super().__init__(client.ApiClient())
        self.writes: list[str] = []

    def _write(self, api: client.ApiClient, body: dict[str, Any]) -> None:
        self.writes.append(f"{body['metadata']['namespace']}/{body['metadata']['name']}")


def test_an_unchanged_status_is_not_written_again() -> None:
    store = RecordingStore()
    status = EngineStatus(suspended=True)
    store.save("ns", "app", "app", status)
    store.save("ns", "app", "app", EngineStatus(suspended=True))
    assert store.writes == ["ns/helmdeck.status.app"]
    store.save("ns", "app", "app", EngineStatus(suspended=False))
    store.save("ns", "app", "renamed", EngineStatus(suspended=False))  # the package label changed
    assert len(store.writes) == 3


def test_a_status_keeps_its_storage_namespace_and_one_persisted_without_it_is_where_it_was_stored() -> None:
    """The storage namespace a status records (Flux's ``status.storageNamespace``) is read back; a status persisted
    before it was recorded was written beside its release's storage, so that namespace is taken."""
    store = RecordingStore()
    recorded = {"data": {"status.json": EngineStatus(storage_namespace="flux").to_json()}}
    assert (store._parse(recorded, "ns", "app") or EngineStatus()).storage_namespace == "flux"
    doc = json.loads(EngineStatus().to_json())
    del doc["storageNamespace"]
    before = {"data": {"status.json": json.dumps(doc)}}
    assert (store._parse(before, "ns", "app") or EngineStatus()).storage_namespace == "ns"
