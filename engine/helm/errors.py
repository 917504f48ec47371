"""Typed errors for helm CLI runs, classified from helm's own messages.

Every error keeps the last lines of helm's output (``tail``) for the UI.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

TAIL_LINES = 12
MESSAGE_LINES = 40  # a chart's `fail` message may run over many lines: kept whole up to these bounds
MESSAGE_CHARS = 4000
# helm's hints after its error, which say nothing about this failure.
_HINTS = re.compile(r"^(Use --debug flag to render out invalid YAML|helm.go:\d+: .*)$")


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


def error_message(output: str) -> str:
    """helm's error in ``output``: from its last ``Error:`` line to the end, so a chart's multi-line ``fail``
    message (``execution error at (...): \nREASON: ...``) is kept whole; helm's hints dropped, runs of blank
    lines made one, at most :data:`MESSAGE_LINES` lines and :data:`MESSAGE_CHARS` characters (the rest
    counted). Without an ``Error:`` line, the last non-blank line; ``"helm failed"`` for no output."""
    lines = output.splitlines()
    starts = [i for i, ln in enumerate(lines) if ln.startswith("Error:")]
    if not starts:
        rest = [ln for ln in lines if ln.strip()]
        return rest[-1].strip() if rest else "helm failed"
    kept: list[str] = []
    for line in [lines[starts[-1]].removeprefix("Error:").strip(), *lines[starts[-1] + 1:]]:
        line = line.rstrip()
        if _HINTS.match(line) or (not line and (not kept or not kept[-1])):
            continue
        kept.append(line)
    while kept and not kept[-1]:
        kept.pop()
    text = "\n".join(kept[:MESSAGE_LINES])
    more = len(kept) - MESSAGE_LINES
    if len(text) > MESSAGE_CHARS:
        lines_left = f", {more} more lines" if more > 0 else ""
        return f"{text[:MESSAGE_CHARS].rstrip()}\n… (cut at {MESSAGE_CHARS} characters{lines_left})"
    return f"{text}\n… ({more} more lines)" if more > 0 else text


def classify(action: str, output: str, returncode: int, *, stderr: str | None = None) -> HelmError:
    """Turn a failed helm run's combined output into the matching typed error; its message is
    :func:`error_message` of ``stderr`` (where helm writes it) when given, else of ``output``."""
    lines = [ln for ln in output.splitlines() if ln.strip()]
    tail = lines[-TAIL_LINES:]
    message = error_message(stderr if stderr is not None and "Error:" in stderr else output)
    for cls, pattern in _PATTERNS:
        if pattern.search(output):
            return cls(message, action=action, tail=tail, returncode=returncode)
    return HelmError(message, action=action, tail=tail, returncode=returncode)
