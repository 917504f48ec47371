"""A package's engine status (after Flux's HelmRelease status) and its JSON form.

The status is what lets a restarted engine carry on without a needless
upgrade and lets a second viewer see the same state: snapshot history,
failure counters, what was last attempted, conditions, the last action's
outcome, and the app's overrides (suspend after a hand rollback, maintenance
toggled from the app). It is persisted per package by
:mod:`engine.reconcile.store`.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from typing import Any

import orjson

from engine.base import wire
from engine.reconcile.conditions import Condition
from engine.storage.snapshot import History

SCHEMA = wire.STATUS_SCHEMA


@dataclass(frozen=True)
class FailureCounts:
    """Flux's failure counters; reset when the package's generation, the chart version or the spec digest
    changes (engine.reconcile.atomic)."""

    install: int = 0
    upgrade: int = 0
    total: int = 0


@dataclass(frozen=True)
class ActionOutcome:
    """Result of one action on a release, judged from what storage holds afterwards.

    ``revision`` is the revision storage held when the action ended (None if
    none); ``tail`` holds helm's last output lines when the action failed;
    ``at`` is a Unix time in seconds.
    """

    action: str
    ok: bool
    message: str
    revision: int | None = None
    tail: tuple[str, ...] = ()
    at: float = 0.0


@dataclass(frozen=True)
class EngineStatus:
    """Everything the engine remembers about one package between passes and restarts.

    ``last_attempted_release_action`` is "install" or "upgrade" (it selects
    the active remediation); ``maintenance`` is None when the package file
    decides, else the mode set from the app. ``adopted_spec_digest`` is the
    spec digest that revision ``adopted_revision`` stands for although its
    release label says otherwise: a changed spec that rendered the same
    manifest (Deckhouse's smart upgrade) is recorded here instead of making a revision.
    ``package`` (``namespace/name``) and ``depends_on`` (its ``dependsOn``, the same form) are the
    package's as last persisted: they order a cleanup after its file is gone (engine.package.order).
    ``storage_namespace`` is where the release of the history was stored when a pass last ran (Flux's
    ``status.storageNamespace``, set by internal/controller/helmrelease_controller.go ``reconcileRelease``;
    ``""`` unknown): a change of it is a release target change (engine.reconcile.state.release_target_changed).
    ``last_attempted_revision_digest``: the OCI digest of the chart of the last pass (Flux's
    ``status.lastAttemptedRevisionDigest``, ``""`` but for a chart from an OCIRepository).
    """

    history: History = field(default_factory=History)
    failures: FailureCounts = field(default_factory=FailureCounts)
    last_attempted_release_action: str = ""
    last_attempted_spec_digest: str = ""
    last_attempted_chart_version: str = ""
    last_attempted_generation: str = ""
    last_attempted_revision_digest: str = ""
    conditions: tuple[Condition, ...] = ()
    last: ActionOutcome | None = None
    suspended: bool = False
    maintenance: str | None = None
    adopted_spec_digest: str = ""
    adopted_revision: int = 0
    package: str = ""
    depends_on: tuple[str, ...] = ()
    storage_namespace: str = ""

    def to_json(self) -> str:
        """Serialise (stable key order) for the persisted status object."""
        doc: dict[str, Any] = {
            "schema": SCHEMA,
            "history": self.history.to_list(),
            "failures": dataclasses.asdict(self.failures),
            "lastAttemptedReleaseAction": self.last_attempted_release_action,
            "lastAttemptedSpecDigest": self.last_attempted_spec_digest,
            "lastAttemptedChartVersion": self.last_attempted_chart_version,
            "lastAttemptedGeneration": self.last_attempted_generation,
            "lastAttemptedRevisionDigest": self.last_attempted_revision_digest,
            "conditions": [dataclasses.asdict(c) for c in self.conditions],
            "last": dataclasses.asdict(self.last) if self.last else None,
            "suspended": self.suspended,
            "maintenance": self.maintenance,
            "adoptedSpecDigest": self.adopted_spec_digest,
            "adoptedRevision": self.adopted_revision,
            "package": self.package,
            "dependsOn": list(self.depends_on),
            "storageNamespace": self.storage_namespace,
        }
        return json.dumps(doc, sort_keys=True, indent=1)

    @classmethod
    def from_json(cls, text: str) -> EngineStatus:
        """Parse :meth:`to_json` output; raises ValueError on anything else."""
        try:
            try:  # a compiled decoder: a start reads one status per release
                doc = orjson.loads(text)
            except orjson.JSONDecodeError:
                doc = json.loads(text)  # what it cannot read (integers past 64 bits) as before
            if not isinstance(doc, dict) or doc.get("schema") != SCHEMA:
                raise ValueError(f"not a {SCHEMA} document")
            last = doc.get("last")
            return cls(
                history=History.from_list(doc.get("history") or []),
                failures=FailureCounts(**(doc.get("failures") or {})),
                last_attempted_release_action=str(doc.get("lastAttemptedReleaseAction", "")),
                last_attempted_spec_digest=str(doc.get("lastAttemptedSpecDigest", "")),
                last_attempted_chart_version=str(doc.get("lastAttemptedChartVersion", "")),
                last_attempted_generation=str(doc.get("lastAttemptedGeneration", "")),
                last_attempted_revision_digest=str(doc.get("lastAttemptedRevisionDigest", "")),
                conditions=tuple(Condition(**c) for c in doc.get("conditions") or []),
                last=ActionOutcome(**{**last, "tail": tuple(last.get("tail", ()))}) if last else None,
                suspended=bool(doc.get("suspended", False)),
                maintenance=doc.get("maintenance"),
                adopted_spec_digest=str(doc.get("adoptedSpecDigest", "")),
                adopted_revision=int(doc.get("adoptedRevision", 0)),
                package=str(doc.get("package", "")),
                depends_on=tuple(str(d) for d in doc.get("dependsOn") or ()),
                storage_namespace=str(doc.get("storageNamespace", "")),
            )
        except (TypeError, KeyError, AttributeError) as exc:
            raise ValueError(f"malformed engine status: {exc}") from exc
