"""Values and errors of the release service (after Deckhouse's nelm ``Service``)."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal


class PackageNotHelm(ValueError):
    """The package's chart path holds no Helm chart (no ``Chart.yaml``), as nelm's ``ErrPackageNotHelm``."""


class MaintenanceState(StrEnum):
    """The reconciliation mode requested for a package (nelm's ``MaintenanceState``).

    ``Managed`` (the empty string, the default) reconciles normally.
    ``NoResourceReconciliation`` leaves the release as it is: the monitor is
    off (deleted resources are not restored), resources carry the maintenance
    label so they may be edited by hand, and the release carries
    ``wire.MAINTENANCE=true`` so this survives a restart.
    """

    Managed = ""
    NoResourceReconciliation = "NoResourceReconciliation"


UpgradeAction = Literal["none", "install", "upgrade", "maintenance"]


@dataclass(frozen=True)
class UpgradeResult:
    """What :meth:`ReleaseService.upgrade` did.

    ``action``: ``none`` (nothing changed), ``install``/``upgrade`` (helm
    ran), ``maintenance`` (skipped: the release is in maintenance).
    ``reason`` says why in a few words; ``checksum`` is the 32-hex manifest
    checksum ("" when nothing was rendered); ``revision`` is the release's
    latest stored revision afterwards (None when there is none).
    """

    namespace: str
    name: str
    action: UpgradeAction
    reason: str
    checksum: str = ""
    revision: int | None = None

    @property
    def upgraded(self) -> bool:
        """True when helm installed or upgraded the release."""
        return self.action in ("install", "upgrade")


@dataclass(frozen=True)
class CleanupReport:
    """What :meth:`ReleaseService.cleanup` did, each release as ``<namespace>/<release-name>``.

    ``removed``: uninstalled (with ``dry_run``: would be uninstalled; the same
    set). ``failed``: ``(release, message)`` pairs. ``skipped``:
    ``(release, why)`` pairs (kept, ignored namespace, already uninstalled).
    """

    removed: tuple[str, ...] = ()
    failed: tuple[tuple[str, str], ...] = ()
    skipped: tuple[tuple[str, str], ...] = ()
    dry_run: bool = False
