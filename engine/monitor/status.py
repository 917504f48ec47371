"""What a release monitor reports: per-resource presence and readiness."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

MonitorState = Literal["active", "paused", "off"]


@dataclass(frozen=True)
class ResourceStatus:
    """One expected object of a release.

    ``ready`` is None while unknown (not observed yet); ``reason`` is a short
    human text ("2/2 replicas available", "absent", "Job failed: BackoffLimitExceeded").
    ``namespace`` is "" for cluster-scoped objects.
    """

    api_version: str
    kind: str
    namespace: str
    name: str
    present: bool
    ready: bool | None
    reason: str = ""

    @property
    def ref(self) -> str:
        """``Kind/namespace/name`` (``Kind/name`` when cluster-scoped), as status JSON shows it."""
        return f"{self.kind}/{self.namespace}/{self.name}" if self.namespace else f"{self.kind}/{self.name}"


@dataclass(frozen=True)
class MonitorStatus:
    """A release monitor's state: ``off`` (none), ``paused`` (counter > 0) or ``active``; ``problem`` says
    why an active one cannot see some objects (a watch refused by RBAC, say), "" when it can."""

    state: MonitorState = "off"
    paused: int = 0
    resources: tuple[ResourceStatus, ...] = ()
    problem: str = ""

    @property
    def absent(self) -> tuple[str, ...]:
        """Refs of expected objects that do not exist."""
        return tuple(r.ref for r in self.resources if not r.present)

    @property
    def ready(self) -> bool | None:
        """True when every resource is ready, False if one is not, None when unknown or off."""
        if self.state == "off" or not self.resources:
            return None
        if any(r.ready is False or not r.present for r in self.resources):
            return False
        if any(r.ready is None for r in self.resources):
            return None
        return True

    def summary(self) -> str:
        """``active``, ``paused ×2``, ``3 absent``, ``cannot watch``, ``off``."""
        if self.state == "off":
            return "off"
        if self.state == "paused":
            return f"paused ×{self.paused}"
        if self.problem:
            return "cannot watch"
        absent = len(self.absent)
        return f"{absent} absent" if absent else "active"
