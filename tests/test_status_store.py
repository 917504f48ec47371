"""The status store writes only what changed (a no-op pass costs no API call)."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from engine.reconcile.status import EngineStatus
from engine.reconcile.store import StatusStore


class RecordingCore:
    """Stands in for CoreV1Api's two write calls and records them (no cluster needed)."""

    def __init__(self) -> None:
        self.writes: list[str] = []

    def replace_namespaced_config_map(self, name: str, namespace: str, body: dict[str, Any]) -> None:
        self.writes.append(f"{namespace}/{name}")


def test_an_unchanged_status_is_not_written_again() -> None:
    store = StatusStore(client.ApiClient())
    core = RecordingCore()
    store._core = core
    status = EngineStatus(suspended=True)
    store.save("ns", "app", "app", status)
    store.save("ns", "app", "app", EngineStatus(suspended=True))
    assert core.writes == ["ns/helmdeck.status.app"]
    store.save("ns", "app", "app", EngineStatus(suspended=False))
    store.save("ns", "app", "renamed", EngineStatus(suspended=False))  # the package label changed
    assert len(core.writes) == 3
