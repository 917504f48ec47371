"""Helm actions through the helm CLI (3.13+ and 4), with typed errors."""

from engine.helm.cli import (
    BEFORE_SPAWN,
    Helm,
    HelmVersion,
    InstallOptions,
    PostRenderer,
    RollbackOptions,
    UninstallOptions,
    UpgradeOptions,
)
from engine.helm.errors import (
    ClusterUnreachable,
    Forbidden,
    HelmError,
    HelmMissing,
    HelmTimeout,
    HelmTooOld,
    OperationInProgress,
    ReleaseNotFound,
    RenderError,
)

__all__ = [
    "BEFORE_SPAWN",
    "ClusterUnreachable",
    "Forbidden",
    "Helm",
    "HelmError",
    "HelmMissing",
    "HelmTimeout",
    "HelmTooOld",
    "HelmVersion",
    "InstallOptions",
    "OperationInProgress",
    "PostRenderer",
    "ReleaseNotFound",
    "RenderError",
    "RollbackOptions",
    "UninstallOptions",
    "UpgradeOptions",
]
