"""Readiness of one live object, by kind, with a short reason for the screen.

Rules (kstatus-like, kept small):

- Deployment: the controller saw the latest generation and every desired
  replica is updated and available; a ``ProgressDeadlineExceeded`` is reported.
- StatefulSet: latest generation seen and ready replicas = desired.
- DaemonSet: latest generation seen, every desired pod scheduled, updated and ready.
- Job: ``Complete`` condition → ready; ``Failed`` → not ready with its reason;
  otherwise running (not ready).
- Pod: ``Ready`` condition true, or phase ``Succeeded`` (a finished pod).
- PersistentVolumeClaim: phase ``Bound``.
- CustomResourceDefinition: ``Established`` condition true.
- Any other kind: present means ready.

Only the kinds in :data:`FULL_OBJECT_KINDS` need whole objects; for every
other kind a metadata-only watch is enough.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Readiness:
    """Whether a present object is ready, and why in a few words ("2/3 available")."""

    ready: bool
    reason: str


PRESENT = Readiness(True, "present")
_NOT_OBSERVED = Readiness(False, "rollout not observed yet")  # the controller has not seen the new spec


def needs_full_object(group: str, kind: str) -> bool:
    """True when readiness of ``group``/``kind`` is read from the object's status."""
    return (group, kind) in FULL_OBJECT_KINDS


def assess(group: str, kind: str, obj: Mapping[str, Any]) -> Readiness:
    """Readiness of ``obj`` (a whole object as the API returns it) of kind ``group``/``kind``."""
    rule = _RULES.get((group, kind))
    return rule(obj) if rule is not None else PRESENT


def _section(obj: Mapping[str, Any], name: str) -> Mapping[str, Any]:
    value = obj.get(name)
    return value if isinstance(value, Mapping) else {}


def _int(value: Any, default: int = 0) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else default


def _condition(status: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    for cond in status.get("conditions") or ():
        if isinstance(cond, Mapping) and cond.get("type") == kind:
            return cond
    return None


def _true(status: Mapping[str, Any], kind: str) -> bool:
    cond = _condition(status, kind)
    return cond is not None and cond.get("status") == "True"


def _stale(obj: Mapping[str, Any]) -> bool:
    """The controller has not yet observed the latest spec."""
    generation = _int(_section(obj, "metadata").get("generation"))
    observed = _int(_section(obj, "status").get("observedGeneration"), -1)
    return observed < generation


def _deployment(obj: Mapping[str, Any]) -> Readiness:
    status = _section(obj, "status")
    progressing = _condition(status, "Progressing")
    if progressing is not None and progressing.get("reason") == "ProgressDeadlineExceeded":
        return Readiness(False, "progress deadline exceeded")
    if _stale(obj):
        return _NOT_OBSERVED
    want = _int(_section(obj, "spec").get("replicas"), 1)
    available = _int(status.get("availableReplicas"))
    return (_short(want, updated=_int(status.get("updatedReplicas")), available=available)
            or Readiness(True, f"{available}/{want} available"))


def _short(want: int, **counts: int) -> Readiness | None:
    """Not ready, naming the first count below ``want`` (``1/3 updated``); None when none is."""
    for what, count in counts.items():
        if count < want:
            return Readiness(False, f"{count}/{want} {what}")
    return None


def _statefulset(obj: Mapping[str, Any]) -> Readiness:
    if _stale(obj):
        return _NOT_OBSERVED
    want = _int(_section(obj, "spec").get("replicas"), 1)
    ready = _int(_section(obj, "status").get("readyReplicas"))
    return Readiness(ready >= want, f"{ready}/{want} ready")


def _daemonset(obj: Mapping[str, Any]) -> Readiness:
    if _stale(obj):
        return _NOT_OBSERVED
    status = _section(obj, "status")
    want = _int(status.get("desiredNumberScheduled"))
    ready = _int(status.get("numberReady"))
    return (_short(want, scheduled=_int(status.get("currentNumberScheduled")),
                   updated=_int(status.get("updatedNumberScheduled")))
            or Readiness(ready >= want, f"{ready}/{want} ready"))


def _job(obj: Mapping[str, Any]) -> Readiness:
    status = _section(obj, "status")
    if _true(status, "Complete"):
        return Readiness(True, "complete")
    if _true(status, "Failed"):
        cond = _condition(status, "Failed") or {}
        return Readiness(False, f"Job failed: {cond.get('reason') or 'unknown reason'}")
    return Readiness(False, f"running ({_int(status.get('active'))} active)")


def _pod(obj: Mapping[str, Any]) -> Readiness:
    status = _section(obj, "status")
    phase = str(status.get("phase") or "Pending")
    if phase == "Succeeded":
        return Readiness(True, "succeeded")
    if _true(status, "Ready"):
        return Readiness(True, "ready")
    return Readiness(False, phase if phase != "Running" else "running, not ready")


def _pvc(obj: Mapping[str, Any]) -> Readiness:
    phase = str(_section(obj, "status").get("phase") or "Pending")
    return Readiness(phase == "Bound", phase.lower())


def _crd(obj: Mapping[str, Any]) -> Readiness:
    if _true(_section(obj, "status"), "Established"):
        return Readiness(True, "established")
    return Readiness(False, "not established")


_RULES: dict[tuple[str, str], Callable[[Mapping[str, Any]], Readiness]] = {
    ("apps", "Deployment"): _deployment,
    ("apps", "StatefulSet"): _statefulset,
    ("apps", "DaemonSet"): _daemonset,
    ("batch", "Job"): _job,
    ("", "Pod"): _pod,
    ("", "PersistentVolumeClaim"): _pvc,
    ("apiextensions.k8s.io", "CustomResourceDefinition"): _crd,
}
# (API group, kind) whose readiness is read from status; "" is the core group.
FULL_OBJECT_KINDS = frozenset(_RULES)
