"""Typed failures of chart sources. Messages name the repository (and the range where one
applies) and never hold a credential.

Flux reasons the engine reports them with: ``reason`` (``SourceNotReady`` when the
repository cannot be read, ``ArtifactFailed`` when it was read but gives no chart).
"""

from __future__ import annotations

from engine.base.wire import ARTIFACT_FAILED, SOURCE_NOT_READY


class SourceError(RuntimeError):
    """A chart could not be located or fetched. ``repository`` names it; ``reason`` is Flux's."""

    reason = ARTIFACT_FAILED

    def __init__(self, message: str, *, repository: str = ""):
        super().__init__(message)
        self.message = message
        self.repository = repository


class SourceUnreachable(SourceError):
    """The repository did not answer (connection refused, DNS, timeout, TLS, 5xx)."""

    reason = SOURCE_NOT_READY


class SourceAuthFailed(SourceError):
    """The repository refused the credentials, or asked for some (HTTP 401/403)."""

    reason = SOURCE_NOT_READY


class SourceInvalid(SourceError):
    """The repository answered something unusable (no index, malformed or oversized response)."""

    reason = SOURCE_NOT_READY


class CredentialsError(SourceError):
    """A ``secretRef`` / ``certSecretRef`` Secret is missing or lacks the keys it needs."""

    reason = SOURCE_NOT_READY


class NoMatchingVersion(SourceError):
    """The repository has no such chart, or no version inside the range."""


class PullFailed(SourceError):
    """``helm pull`` failed or delivered something other than the resolved chart."""
