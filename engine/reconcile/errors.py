"""Named errors of the reconcile loop (Flux's ErrExceededMaxRetries, ...)."""

from __future__ import annotations


class ReconcileError(RuntimeError):
    """Base of the errors the atomic loop ends with."""


class ExceededMaxRetries(ReconcileError):
    """The remediation retries are used up: the engine stops (Stalled) until the spec changes."""


class MissingRollbackTarget(ReconcileError):
    """Rollback remediation has no earlier deployed or superseded snapshot: Stalled."""


class ActionFailed(ReconcileError):
    """A helm action failed without writing a release (nothing to remediate): retry with backoff."""


class ReleaseLocked(ReconcileError):
    """A pending-* release is held by an operation that is not stale yet: wait.

    ``retry_after`` (seconds) says when the lock would turn stale, when known.
    """

    def __init__(self, message: str, retry_after: float | None = None):
        super().__init__(message)
        self.retry_after = retry_after
