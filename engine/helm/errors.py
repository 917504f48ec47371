"""Typed errors for helm CLI runs, classified from helm's own messages.

Every error keeps the last lines of helm's output (``tail``) for the UI.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

TAIL_LINES = 12


class HelmError(RuntimeError):
    """A helm command failed. ``tail`` holds helm's last output lines."""

    def __init__(self, message: str, *, action: str = "", tail: Sequence[str] = (), returncode: int | None = None):
        super().__init__(message)
        self.message = message
        self.action = action
        self.tail = tuple(tail)
        self.returncode = returncode


class HelmMissing(HelmError):
    """The helm binary was not found or is not executable."""


class HelmTooOld(HelmError):
    """helm is older than 3.13 (``--labels`` and the JSON outputs we rely on)."""


class ReleaseNotFound(HelmError):
    """The release (or the requested revision) does not exist."""


class OperationInProgress(HelmError):
    """Another operation holds the release (a pending-* revision is the lock)."""


class RenderError(HelmError):
    """The chart failed to render (template, values or YAML error)."""


class HelmTimeout(HelmError):
    """helm gave up waiting for resources or hooks within the timeout."""


class ClusterUnreachable(HelmError):
    """helm could not reach the Kubernetes API server."""


class Forbidden(HelmError):
    """The Kubernetes API refused the request (RBAC)."""


# First match wins; patterns are helm's own error phrasings (3.x and 4.x).
_PATTERNS: tuple[tuple[type[HelmError], re.Pattern[str]], ...] = (
    (OperationInProgress, re.compile(r"another operation \(install/upgrade/rollback\) is in progress", re.I)),
    (ClusterUnreachable, re.compile(r"kubernetes cluster unreachable|connection refused|no such host|"
                                    r"i/o timeout|dial tcp", re.I)),
    (Forbidden, re.compile(r"\bforbidden\b", re.I)),
    (HelmTimeout, re.compile(r"timed out waiting|context deadline exceeded", re.I)),
    (RenderError, re.compile(r"parse error|template: |yaml: |error converting YAML|"
                             r"unable to build kubernetes objects from (release|new release) manifest|"
                             r"values don't meet the specifications|execution error at|"
                             r"chart requires kubeVersion|validation: chart\.metadata|"
                             r"error while running post render", re.I)),
    (ReleaseNotFound, re.compile(r"release: not found|has no deployed releases|release .* not found|"
                                 r"no revision for release|release has no \d+ version", re.I)),
)


def classify(action: str, output: str, returncode: int) -> HelmError:
    """Turn a failed helm run's combined output into the matching typed error."""
    lines = [ln for ln in output.splitlines() if ln.strip()]
    tail = lines[-TAIL_LINES:]
    errors = [ln for ln in lines if ln.startswith("Error:")]
    message = errors[-1].removeprefix("Error:").strip() if errors else (tail[-1] if tail else "helm failed")
    for cls, pattern in _PATTERNS:
        if pattern.search(output):
            return cls(message, action=action, tail=tail, returncode=returncode)
    return HelmError(message, action=action, tail=tail, returncode=returncode)
