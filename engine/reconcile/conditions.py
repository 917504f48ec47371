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

ConditionStatus = Literal["True", "False", "Unknown"]


@dataclass(frozen=True)
class Condition:
    """A Kubernetes-style condition; ``last_transition`` in Unix seconds."""

    type: str
    status: ConditionStatus
    reason: str
    message: str = ""
    last_transition: float = 0.0


READY = "Ready"
RELEASED = "Released"
TEST_SUCCESS = "TestSuccess"
REMEDIATED = "Remediated"
RECONCILING = "Reconciling"
STALLED = "Stalled"

# Reasons (Flux's names).
INSTALL_SUCCEEDED = "InstallSucceeded"
INSTALL_FAILED = "InstallFailed"
UPGRADE_SUCCEEDED = "UpgradeSucceeded"
UPGRADE_FAILED = "UpgradeFailed"
TEST_SUCCEEDED = "TestSucceeded"
TEST_FAILED = "TestFailed"
ROLLBACK_SUCCEEDED = "RollbackSucceeded"
ROLLBACK_FAILED = "RollbackFailed"
UNINSTALL_SUCCEEDED = "UninstallSucceeded"
UNINSTALL_FAILED = "UninstallFailed"
RETRIES_EXCEEDED = "RetriesExceeded"
MISSING_ROLLBACK_TARGET = "MissingRollbackTarget"
PENDING_RELEASE = "PendingRelease"
DRIFT_DETECTED = "DriftDetected"
DRIFT_CORRECTED = "DriftCorrected"
PROGRESSING = "Progressing"
IN_MAINTENANCE = "InMaintenance"
INVALID_PACKAGE = "InvalidPackage"
DEPENDENCY_NOT_READY = "DependencyNotReady"  # Flux's reason: a dependsOn package is not Ready
RECONCILE_ERROR = "ReconcileError"
UNLOCKED = "Unlocked"
# Ready's reasons when a pass stops before any action because the package cannot be resolved (the
# controller's resolution failure; Flux's ValuesError, and source-controller's ArtifactFailed/SourceNotReady/
# VerificationError).
UNRESOLVED_REASONS = frozenset({"ValuesError", INVALID_PACKAGE, "ArtifactFailed", "SourceNotReady",
                                "VerificationError"})


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
