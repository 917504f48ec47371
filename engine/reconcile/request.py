"""What one reconcile of a package works on (after Flux's ``reconcile.Request``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.helm import PostRenderer
from engine.package import Chart, InstallSpec, PackageSpec, UpgradeSpec
from engine.reconcile.status import EngineStatus


@dataclass
class Request:
    """The package spec, its loaded chart and merged values, and the package's engine status.

    ``status`` is the working copy: action reconcilers replace it as they go
    and the caller persists it afterwards. ``spec_digest`` (32 hex) identifies
    chart content + values; it is stored as a release label. ``force`` asks
    for an upgrade even when in sync. ``release_labels`` go to helm's
    ``--labels`` on install and upgrade (the manifest checksum among them).
    ``absent`` lists the release's resources its monitor finds missing
    (``Kind/namespace/name``); ``force_conflicts`` lets an upgrade take over
    fields edited by hand (leaving maintenance).
    """

    spec: PackageSpec
    chart: Chart
    values: dict[str, Any]
    spec_digest: str
    status: EngineStatus = field(default_factory=EngineStatus)
    force: bool = False
    release_labels: dict[str, str] = field(default_factory=dict)
    post_renderer: PostRenderer | None = None
    absent: tuple[str, ...] = ()
    force_conflicts: bool = False

    @property
    def key(self) -> tuple[str, str]:
        return self.spec.key

    def active_remediation(self) -> InstallSpec | UpgradeSpec | None:
        """The remediation of the last attempted release action (Flux's GetActiveRemediation)."""
        action = self.status.last_attempted_release_action
        if action == "install":
            return self.spec.install
        if action == "upgrade":
            return self.spec.upgrade
        return None

    def failure_count(self, remediation: InstallSpec | UpgradeSpec) -> int:
        f = self.status.failures
        return f.install if isinstance(remediation, InstallSpec) else f.upgrade

    def retries_exhausted(self, remediation: InstallSpec | UpgradeSpec) -> bool:
        """Negative retries never run out; otherwise failures beyond ``retries`` exhaust them."""
        return remediation.retries >= 0 and self.failure_count(remediation) > remediation.retries
