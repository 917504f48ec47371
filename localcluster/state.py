"""What a local cluster records (ports) and reports (status)."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

# Start order; stop runs in reverse.
ORDER = ("registry", "etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


@dataclass
class Ports:
    etcd_client: int = 0
    etcd_peer: int = 0
    apiserver: int = 0
    controller_manager: int = 0
    scheduler: int = 0
    kwok: int = 0
    registry: int = 0

    def all(self) -> list[int]:
        return [p for p in asdict(self).values() if p]


@dataclass
class ClusterStatus:
    """What ``helmdeck cluster status`` prints."""

    state_dir: Path
    kubeconfig: Path
    server: str | None
    running: dict[str, bool]
    logs: dict[str, Path]
    ready: bool = False
    versions: dict[str, str] = field(default_factory=dict)
    registry: str | None = None  # host:port of the local OCI registry (plain HTTP, no auth)
    chartrepo: str | None = None  # URL of the HTTP chart repository a running demo serves


    def lines(self) -> list[str]:
        out = [
            f"state:      {'ready' if self.ready else 'not ready'}",
            f"directory:  {self.state_dir}",
            f"kubeconfig: {self.kubeconfig}",
            f"server:     {self.server or '-'}",
            f"registry:   {self.registry or '-'}",
            f"chartrepo:  {self.chartrepo or '-'}",
        ]
        for comp in ORDER:
            mark = "running" if self.running.get(comp) else "stopped"
            version = self.versions.get(comp, "")
            out.append(f"  {comp:<24} {mark:<8} {version:<9} log: {self.logs[comp]}")
        return out

    def to_json(self) -> dict[str, Any]:
        """What ``helmdeck cluster status -o json`` prints: ``kubeconfig``, ``server``, ``registry``
        (``host:port``), ``chartrepo`` (the demo's HTTP chart repository URL while the demo runs, else null),
        ``ready``, ``directory``, and per component ``running`` and ``logs``."""
        return {
            "ready": self.ready,
            "directory": str(self.state_dir),
            "kubeconfig": str(self.kubeconfig),
            "server": self.server,
            "registry": self.registry,
            "chartrepo": self.chartrepo,
            "running": dict(self.running),
            "versions": dict(self.versions),
            "logs": {c: str(p) for c, p in self.logs.items()},
        }
