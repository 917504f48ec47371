"""Conditions on a package's engine status, and the Ready summary (after Flux's ``summarize``).

Ready is derived, never set by an action: Stalled or Remediated=True make it
False; otherwise the first False of TestSuccess (when tests count) and
Released decides; otherwise it follows Released.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Literal

from engine.base.wire import (
    ARTIFACT_FAILED,
    DEPENDENCY_NOT_READY,
    DRIFT_CORRECTED,
    DRIFT_DETECTED,
    DRIFTED,
    IN_MAINTENANCE,
    INSTALL_FAILED,
    INSTALL_SUCCEEDED,
    INVALID_PACKAGE,
    MISSING_ROLLBACK_TARGET,
    NO_DRIFT_DETECTED,
    PENDING_RELEASE,
    PROGRESSING,
    PROGRESSING_WITH_RETRY,
    READY,
    RECONCILE_ERROR,
    RECONCILING,
    RELEASED,
    REMEDIATED,
    RETRIES_EXCEEDED,
    ROLLBACK_FAILED,
    ROLLBACK_SUCCEEDED,
    SOURCE_NOT_READY,
    STALLED,
    STORAGE_APART,
    TEST_FAILED,
    TEST_SUCCEEDED,
    TEST_SUCCESS,
    UNINSTALL_FAILED,
    UNINSTALL_SUCCEEDED,
    UNLOCKED,
    UPGRADE_FAILED,
    UPGRADE_SUCCEEDED,
    VALUES_ERROR,
    VERIFICATION_ERROR,
)

# The condition types and reasons are engine.base.wire's; the reconcilers name them here (cond.READY).
__all__ = [
    "DEPENDENCY_NOT_READY",
    "DRIFTED",
    "DRIFT_CORRECTED",
    "DRIFT_DETECTED",
    "INSTALL_FAILED",
    "INSTALL_SUCCEEDED",
    "INVALID_PACKAGE",
    "IN_MAINTENANCE",
    "MISSING_ROLLBACK_TARGET",
    "NO_DRIFT_DETECTED",
    "PENDING_RELEASE",
    "PROGRESSING",
    "PROGRESSING_WITH_RETRY",
    "READY",
    "RECONCILE_ERROR",
    "RECONCILING",
    "RELEASED",
    "REMEDIATED",
    "RETRIES_EXCEEDED",
    "ROLLBACK_FAILED",
    "ROLLBACK_SUCCEEDED",
    "STALLED",
    "STORAGE_APART",
    "TEST_FAILED",
    "TEST_SUCCEEDED",
    "TEST_SUCCESS",
    "UNINSTALL_FAILED",
    "UNINSTALL_SUCCEEDED",
    "UNLOCKED",
    "UNRESOLVED_REASONS",
    "UPGRADE_FAILED",
    "UPGRADE_SUCCEEDED",
    "Condition",
    "ConditionStatus",
    "delete_condition",
    "get",
    "is_true",
    "set_condition",
    "summarize",
]

ConditionStatus = Literal["True", "False", "Unknown"]


@dataclass(frozen=True)
class Condition:
    """A Kubernetes-style condition; ``last_transition`` in Unix seconds."""

    type: str
    status: ConditionStatus
    reason: str
    message: str = ""
    last_transition: float = 0.0


# Ready's reasons when a pass stops before any action because the package cannot be resolved (the
# controller's resolution failure; Flux's ValuesError, and source-controller's ArtifactFailed/SourceNotReady/
# VerificationError).
UNRESOLVED_REASONS = frozenset({VALUES_ERROR, INVALID_PACKAGE, ARTIFACT_FAILED, SOURCE_NOT_READY, VERIFICATION_ERROR})


def set_condition(
    conditions: Iterable[Condition], type_: str, status: bool | None, reason: str, message: str = "",
) -> tuple[Condition, ...]:
    """Return ``conditions`` with ``type_`` set; the transition time changes only with the status."""
    value: ConditionStatus = "Unknown" if status is None else ("True" if status else "False")
    out = []
    found = False
    for cond in conditions:
        if cond.type == type_:
            found = True
            when = cond.last_transition if cond.status == value else time.time()
            out.append(Condition(type_, value, reason, message, when))
        else:
            out.append(cond)
    if not found:
        out.append(Condition(type_, value, reason, message, time.time()))
    return tuple(out)


def delete_condition(conditions: Iterable[Condition], type_: str) -> tuple[Condition, ...]:
    return tuple(c for c in conditions if c.type != type_)


def get(conditions: Iterable[Condition], type_: str) -> Condition | None:
    return next((c for c in conditions if c.type == type_), None)


def is_true(conditions: Iterable[Condition], type_: str) -> bool:
    cond = get(conditions, type_)
    return cond is not None and cond.status == "True"


def summarize(conditions: Iterable[Condition], *, tests_count: bool) -> tuple[Condition, ...]:
    """Recompute Ready from the other conditions (see module docstring)."""
    conds = tuple(conditions)
    stalled = get(conds, STALLED)
    remediated = get(conds, REMEDIATED)
    released = get(conds, RELEASED)
    test = get(conds, TEST_SUCCESS) if tests_count else None
    if stalled is not None and stalled.status == "True":
        return set_condition(conds, READY, False, stalled.reason, stalled.message)
    if remediated is not None and remediated.status == "True":
        return set_condition(conds, READY, False, remediated.reason, remediated.message)
    for cond in (test, released):
        if cond is not None and cond.status == "False":
            return set_condition(conds, READY, False, cond.reason, cond.message)
    if released is None:
        return set_condition(conds, READY, None, PROGRESSING, "no release yet")
    newest = max((c for c in (test, released) if c is not None), key=lambda c: c.last_transition)
    return set_condition(conds, READY, newest.status == "True", newest.reason, newest.message)
