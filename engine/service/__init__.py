"""The release service (after Deckhouse's nelm ``Service``): smart upgrade, render, delete,
cleanup, maintenance, and live resource monitors with pause counters."""

from engine.service.service import ReleaseService
from engine.service.types import CleanupReport, MaintenanceState, PackageNotHelm, UpgradeResult

__all__ = ["CleanupReport", "MaintenanceState", "PackageNotHelm", "ReleaseService", "UpgradeResult"]
