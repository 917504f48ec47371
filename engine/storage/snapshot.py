"""Snapshots of observed releases and the engine's snapshot history (interim; storage work extends it)."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from engine.storage.observation import Observation


@dataclass(frozen=True)
class Snapshot:
    digest: str
    name: str
    namespace: str
    version: int
    status: str
    chart_name: str
    chart_version: str
    app_version: str
    config_digest: str
    first_deployed: str = ""
    last_deployed: str = ""
    deleted: str = ""
    test_hooks: tuple[tuple[str, str], ...] = ()  # (name, phase)

    @classmethod
    def from_observation(cls, obs: Observation) -> Snapshot:
        return cls(obs.digest, obs.name, obs.namespace, obs.version, obs.status, obs.chart_name,
                   obs.chart_version, obs.app_version, obs.config_digest, obs.first_deployed,
                   obs.last_deployed, obs.deleted, tuple((h.name, h.phase) for h in obs.hooks if h.is_test))

    def has_been_tested(self) -> bool:
        return any(phase for _, phase in self.test_hooks)

    def has_test_in_phase(self, phase: str) -> bool:
        return any(p == phase for _, p in self.test_hooks)

    def to_dict(self) -> dict[str, Any]:
        d = dataclasses.asdict(self)
        d["test_hooks"] = [list(t) for t in self.test_hooks]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Snapshot:
        return cls(**{**d, "test_hooks": tuple(tuple(t) for t in d.get("test_hooks", []))})


@dataclass(frozen=True)
class History:
    snapshots: tuple[Snapshot, ...] = ()

    def __len__(self) -> int:
        return len(self.snapshots)

    def latest(self) -> Snapshot | None:
        return self.snapshots[0] if self.snapshots else None

    def previous(self, ignore_test_failures: bool) -> Snapshot | None:
        for snap in self.snapshots[1:]:
            if snap.status in ("deployed", "superseded"):
                if snap.has_test_in_phase("Failed") and not ignore_test_failures:
                    continue
                return snap
        return None

    def truncate(self, n: int) -> History:
        return History(self.snapshots[:n])

    def clear(self) -> History:
        return History()

    def to_list(self) -> list[dict[str, Any]]:
        return [s.to_dict() for s in self.snapshots]

    @classmethod
    def from_list(cls, items: list[dict[str, Any]]) -> History:
        return cls(tuple(Snapshot.from_dict(d) for d in items))
