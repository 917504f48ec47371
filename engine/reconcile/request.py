"""What one reconcile of a package works on (after Flux's ``reconcile.Request``)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.base import wire
from engine.helm import PostRenderer
from engine.package.model import InstallSpec, PackageSpec, UpgradeSpec
from engine.reconcile.status import EngineStatus
from engine.resolve.release import ResolvedRelease
from engine.sources.chart import Chart


@dataclass
class Request:
    """The package spec, its resolved chart and values, and the package's engine status.

    ``status`` is the working copy: action reconcilers replace it as they go
    and the caller persists it afterwards. ``spec_digest`` (32 hex) identifies
    chart content, values and post-render settings (the resolution's); it is
    stored as a release label. ``force`` asks for an upgrade even when in sync.
    ``package_set`` labels the release with its package set (cleanup's scope).
    ``manifest_checksum`` is the checksum of the render, None until something
    rendered (the decision renders only when the spec changed; an install or upgrade labels its
    revision from what helm wrote, :meth:`engine.reconcile.action.ReleaseReconciler.label_checksum`).
    ``absent`` lists the release's resources its monitor finds missing
    (``Kind/namespace/name``). ``oci_digest``: the OCI artifact's digest (``sha256:<hex>``) of a chart from an
    OCIRepository, ``""`` for any other (Flux's ``status.lastAttemptedRevisionDigest``, set at each pass).
    """

    spec: PackageSpec
    chart: Chart
    values: Any  # Mapping[str, Any], shared with the resolution cache: never mutated
    spec_digest: str
    status: EngineStatus = field(default_factory=EngineStatus)
    force: bool = False
    package_set: str | None = None
    post_renderer: PostRenderer | None = None
    absent: tuple[str, ...] = ()
    manifest_checksum: str | None = None
    oci_digest: str = ""

    @classmethod
    def from_resolved(cls, resolved: ResolvedRelease, status: EngineStatus, **kwargs: Any) -> Request:
        return cls(resolved.spec, resolved.chart, resolved.values, resolved.spec_digest, status, **kwargs)

    @property
    def key(self) -> tuple[str, str]:
        return self.spec.key

    @property
    def release_labels(self) -> dict[str, str]:
        """helm ``--labels`` for this request's install or upgrade (:func:`engine.base.wire.release_labels`);
        not the manifest checksum, set on the revision once helm wrote it."""
        return wire.release_labels(package=self.spec.name, spec_digest=self.spec_digest,
                                     maintenance=bool(self.spec.maintenance), package_set=self.package_set,
                                     post_render_digest=self.spec.rendering.digest)

    def active_remediation(self) -> InstallSpec | UpgradeSpec | None:
        """The remediation of the last attempted release action (Flux's GetActiveRemediation)."""
        action = self.status.last_attempted_release_action
        if action == "install":
            return self.spec.install
        if action == "upgrade":
            return self.spec.upgrade
        return None

    def active_retry(self) -> float | None:
        """The retry interval in seconds of the last attempted release action when its strategy is RetryOnFailure,
        None when it remediates or nothing was attempted (Flux's ``GetActiveRetry``, helm-controller api/v2
        helmrelease_types.go, with the DefaultToRetryOnFailure gate off:
        :attr:`~engine.package.model.OnFailure.retry`)."""
        section = self.active_remediation()
        return section.retry if section is not None else None

    def failure_count(self, remediation: InstallSpec | UpgradeSpec) -> int:
        f = self.status.failures
        return f.install if isinstance(remediation, InstallSpec) else f.upgrade

    def retries_exhausted(self, remediation: InstallSpec | UpgradeSpec) -> bool:
        """Negative retries never run out; otherwise failures beyond ``retries`` exhaust them."""
        return remediation.retries >= 0 and self.failure_count(remediation) > remediation.retries
