"""Snapshots and history: what the engine remembers of the releases it made.

After Flux helm-controller's ``Snapshot``/``Snapshots``: a snapshot is a small
summary of one observed revision, identified by the observation's digest; a
history is the package's snapshots, newest first. Both are immutable; every
"change" returns a new value. Both serialise to plain JSON (the engine
persists the history in the cluster), see docs/storage.md.
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any, overload

from engine.storage.helmtime import metav1_time
from engine.storage.observation import ROLLBACK_TARGETS, Observation

HISTORY_FORMAT = 1
# Flux's v2.CurrentSnapshotAPIVersion (api/v2 snapshot_types.go): a snapshot whose digest is Flux's.
SNAPSHOT_API_VERSION = "v2"
# Flux's api/v2 ReleaseAction values (helmrelease_types.go), what a snapshot's ``action`` may say.
RELEASE_ACTIONS = frozenset({"install", "upgrade", "rollback", "uninstall", "uninstall-remediation"})
# Flux's defaultMaxHistory (api/v2 helmrelease_types.go): the snapshots Truncate keeps when none is a rollback
# target, and TruncateIgnoringPreviousSnapshots always.
DEFAULT_MAX_HISTORY = 5


class HistoryFormatError(ValueError):
    """Serialised history or snapshot data has the wrong shape; the message names the field."""


@dataclass(frozen=True)
class TestHookRun:
    """The last run of one ``helm test`` hook: phase ``""`` when it never ran; times as ``metav1.Time`` writes them
    (:func:`engine.storage.helmtime.metav1_time`), ``""`` unset."""

    __test__ = False  # not a pytest test class despite the name

    name: str
    phase: str = ""
    started_at: str = ""
    completed_at: str = ""


@dataclass(frozen=True)
class Snapshot:
    """One observed release revision, as the engine's history keeps it: helm-controller v1.6.3's api/v2 ``Snapshot``.

    ``digest`` is Flux's digest of the revision with ``oci_digest`` as its Observation's ``ociDigest``
    (:meth:`Observation.digest_with`; it ignores test hooks); ``config_digest`` is :attr:`Observation.config_digest`.
    Times are as ``metav1.Time`` writes them (RFC 3339, UTC, whole seconds, ``Z``) or ``""``, as Flux's
    ``ObservedToSnapshot`` makes them. ``action``: the Flux ``ReleaseAction`` that recorded it
    (:data:`RELEASE_ACTIONS`), ``""`` for none (:meth:`History.record` says when). ``oci_digest``: the digest of
    the OCI artifact its chart came from (an OCIRepository's), ``""`` for any other chart. ``api_version`` is
    :data:`SNAPSHOT_API_VERSION` for a snapshot made now, ``""`` for one persisted before helmdeck's digest was
    Flux's (its digest is not compared: :meth:`verifies`).
    """

    digest: str
    name: str
    namespace: str
    version: int
    status: str
    chart_name: str
    chart_version: str
    app_version: str
    config_digest: str
    first_deployed: str = ""
    last_deployed: str = ""
    deleted: str = ""
    test_hooks: tuple[TestHookRun, ...] = ()
    api_version: str = ""
    action: str = ""
    oci_digest: str = ""

    @classmethod
    def from_observation(cls, obs: Observation, action: str = "", oci_digest: str = "") -> Snapshot:
        """The snapshot of ``obs`` recorded by ``action`` from a chart of OCI digest ``oci_digest``, test hooks with
        their last run (helm-controller's internal/release/observation.go ``ObservedToSnapshot``)."""
        return cls(
            api_version=SNAPSHOT_API_VERSION, digest=obs.digest_with(oci_digest), name=obs.name,
            namespace=obs.namespace, version=obs.version,
            status=obs.status, chart_name=obs.chart_name, chart_version=obs.chart_version,
            app_version=obs.app_version, config_digest=obs.config_digest,
            first_deployed=metav1_time(obs.first_deployed), last_deployed=metav1_time(obs.last_deployed),
            deleted=metav1_time(obs.deleted), action=action, oci_digest=oci_digest,
            test_hooks=tuple(TestHookRun(h.name, h.phase, metav1_time(h.started_at), metav1_time(h.completed_at))
                             for h in obs.test_hooks),
        )

    def verifies(self, obs: Observation) -> bool:
        """Is ``obs`` the stored revision this snapshot recorded, unchanged: the same name, namespace and version
        and the same digest (with this snapshot's ``oci_digest``), as Flux's internal/action/verify.go
        ``VerifySnapshot``/``VerifyReleaseObject`` decide. A snapshot of an older ``api_version`` is not compared by
        digest (Flux's migration rule): the revision's name, namespace and version decide alone, until an action
        records it again."""
        return (obs.name, obs.namespace, obs.version) == (self.name, self.namespace, self.version) and (
            self.api_version != SNAPSHOT_API_VERSION or obs.digest_with(self.oci_digest) == self.digest)

    def has_been_tested(self, selects: Callable[[str], bool] = lambda _name: True) -> bool:
        """Have the tests of this revision run, as api/v2 ``Snapshot.HasBeenTested`` decides: one of the test
        hooks ``selects`` keeps failed, or every one succeeded. A revision with no such hook counts as tested
        (nothing to run; Flux records an empty result after running ``helm test`` on it)."""
        hooks = [h for h in self.test_hooks if selects(h.name)]
        return any(h.phase == "Failed" for h in hooks) or all(h.phase == "Succeeded" for h in hooks)

    def has_test_in_phase(self, phase: str, selects: Callable[[str], bool] = lambda _name: True) -> bool:
        """True when a test hook ``selects`` keeps last ended in ``phase`` (e.g. ``Failed``)."""
        return any(h.phase == phase for h in self.test_hooks if selects(h.name))

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able dict (field names as attributes; test hooks as objects)."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["test_hooks"] = [
            {"name": h.name, "phase": h.phase, "started_at": h.started_at, "completed_at": h.completed_at}
            for h in self.test_hooks
        ]
        return out

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Snapshot:
        """Inverse of :meth:`to_dict`; raises :class:`HistoryFormatError` on a wrong shape.

        Unknown keys are ignored so a newer writer's extra fields do not break
        an older reader.
        """
        if not isinstance(data, Mapping):
            raise HistoryFormatError(f"snapshot is {type(data).__name__}, not an object")
        values: dict[str, Any] = {}
        for name, expected, default in _SNAPSHOT_FIELDS:
            value = data.get(name, default)
            if not isinstance(value, expected) or isinstance(value, bool):
                raise HistoryFormatError(f"snapshot field {name!r} is {value!r}, not {expected.__name__}")
            values[name] = value
        for name in ("first_deployed", "last_deployed", "deleted"):  # one persisted with helm's times: Flux's form
            values[name] = metav1_time(values[name])
        hooks = data.get("test_hooks")
        hooks = [] if hooks is None else hooks
        if not isinstance(hooks, list):
            raise HistoryFormatError("snapshot field 'test_hooks' is not a list")
        runs = []
        for hook in hooks:
            if not isinstance(hook, Mapping) or not all(
                isinstance(hook.get(k, ""), str) for k in ("name", "phase", "started_at", "completed_at")
            ):
                raise HistoryFormatError(f"snapshot test hook {hook!r} is not an object of strings")
            runs.append(TestHookRun(
                str(hook.get("name", "")), str(hook.get("phase", "")),
                metav1_time(str(hook.get("started_at", ""))), metav1_time(str(hook.get("completed_at", ""))),
            ))
        return cls(**values, test_hooks=tuple(runs))


# What Snapshot.from_dict reads, with each field's type and its value when absent (once: a start reads one
# status per release).
_SNAPSHOT_FIELDS: tuple[tuple[str, type, str | None], ...] = tuple(
    (f.name, int if f.name == "version" else str,
     "" if f.name in ("first_deployed", "last_deployed", "deleted", "api_version", "action", "oci_digest") else None)
    for f in fields(Snapshot) if f.name != "test_hooks")


@dataclass(frozen=True)
class History(Sequence[Snapshot]):
    """Snapshots of one package's release, newest (highest version) first.

    The constructor sorts by version, newest first (stable for equal
    versions). Methods never modify a history; they return a new one.
    """

    snapshots: tuple[Snapshot, ...] = ()

    def __post_init__(self) -> None:
        ordered = tuple(sorted(self.snapshots, key=lambda s: s.version, reverse=True))
        if ordered != self.snapshots:
            object.__setattr__(self, "snapshots", ordered)

    def __len__(self) -> int:
        return len(self.snapshots)

    def __iter__(self) -> Iterator[Snapshot]:
        return iter(self.snapshots)

    @overload
    def __getitem__(self, index: int) -> Snapshot: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[Snapshot]: ...
    def __getitem__(self, index: int | slice) -> Snapshot | Sequence[Snapshot]:
        return self.snapshots[index]

    def latest(self) -> Snapshot | None:
        """The newest snapshot, or None when empty (Flux's Latest)."""
        return self.snapshots[0] if self.snapshots else None

    def previous(self, ignore_test_failures: bool = False) -> Snapshot | None:
        """The first snapshot older than the latest that is deployed or superseded (Flux's Previous).

        One whose tests failed is skipped unless ``ignore_test_failures``.
        None when there is none: rollback has no target.
        """
        for snap in self.snapshots[1:]:
            if snap.status in ROLLBACK_TARGETS and (
                ignore_test_failures or not snap.has_test_in_phase("Failed")
            ):
                return snap
        return None

    def updated(self, obs: Observation) -> History:
        """The history with the snapshot of ``obs``'s revision made anew from ``obs`` (a revision it holds changed
        status, e.g. unlocked), its action and OCI digest kept (as helm-controller's internal/reconcile/unlock.go
        ``observeUnlock``); unchanged when it holds no snapshot of that revision."""
        if all(s.version != obs.version for s in self.snapshots):
            return self
        return History(tuple(Snapshot.from_observation(obs, s.action, s.oci_digest) if s.version == obs.version
                             else s for s in self.snapshots))

    def record(self, observed: Mapping[int, Observation], action: str = "", oci_digest: str = "") -> History:
        """The history once the action ``action`` (an engine action's name) left ``observed`` (the release's
        revisions read after it, by version), as helm-controller v1.6.3's action reconcilers record what they
        observe (internal/reconcile):

        - after an install or upgrade, the newest revision becomes a snapshot with the action's name and
          ``oci_digest`` (release.go ``recordOnObject`` with ``mutateOCIDigest`` and ``mutateAction``); a revision
          between it and the newest snapshot (made by someone else's helm, Unmanaged) is left out, as Flux
          records only the newest it observed;
        - after any other action, a revision newer than the newest snapshot becomes a snapshot; a rollback's
          records ``rollback`` and no OCI digest (rollback_remediation.go ``observeRollback``: made without
          either, then recorded again by the rollback's later write); any other none;
        - a snapshot whose revision changed (its digest with its own OCI digest differs) is made anew with its
          OCI digest and the action ``rollback``, ``uninstall`` or ``uninstall-remediation`` that changed it
          (``observeRollback``, uninstall.go ``observeUninstall``), none after an install or upgrade
          (``recordOnObject`` records the older revision's Observation, which carries no action), else its own
          (unlock.go ``observeUnlock``, test.go);
        - any other snapshot keeps its action and OCI digest, its test hooks' last runs read anew.
        """
        history = self
        release = action in ("install", "upgrade")
        for version in sorted(observed):
            obs = observed[version]
            newest = history.latest()
            if newest is None or version > newest.version:
                last = version == max(observed)
                if release and not last:
                    continue  # recordOnObject prepends only the newest: a revision made beside us is not ours
                history = History((Snapshot.from_observation(
                    obs, action if action in RELEASE_ACTIONS else "", oci_digest if release else ""), *history))
                continue
            old = next((s for s in history.snapshots if s.version == version), None)
            if old is None:
                continue
            made = Snapshot.from_observation(obs, old.action, old.oci_digest)
            if made.digest != old.digest and (release or action in RELEASE_ACTIONS):
                made = dataclasses.replace(made, action="" if release else action)
            if made != old:
                history = History(tuple(made if s.version == version else s for s in history.snapshots))
        return history

    def truncate(self, ignore_tests: bool = False) -> History:
        """The snapshots down to the first older one that is deployed or superseded and whose tests did not fail
        (unless ``ignore_tests``), the rollback target (:meth:`previous`); without one, the
        :data:`DEFAULT_MAX_HISTORY` newest. As Flux's api/v2 snapshot_types.go ``Snapshots.Truncate``, which
        helm-controller runs on a release in sync and before remediating a failed one
        (internal/reconcile/atomic_release.go ``actionForState``)."""
        if len(self.snapshots) < 2:
            return self
        target = self.previous(ignore_tests)
        if target is not None:
            return History(self.snapshots[:self.snapshots.index(target) + 1])
        return History(self.snapshots[:DEFAULT_MAX_HISTORY])

    def truncate_ignoring_previous(self) -> History:
        """The :data:`DEFAULT_MAX_HISTORY` newest snapshots, rollback target or not: Flux's api/v2
        ``Snapshots.TruncateIgnoringPreviousSnapshots``, run instead of :meth:`truncate` under the RetryOnFailure
        strategy (nothing is rolled back to)."""
        return History(self.snapshots[:DEFAULT_MAX_HISTORY])

    def clear(self) -> History:
        """An empty history (Flux clears it when the release is no longer ours)."""
        return History()

    def to_list(self) -> list[dict[str, Any]]:
        """The snapshots as plain dicts, newest first."""
        return [s.to_dict() for s in self.snapshots]

    @classmethod
    def from_list(cls, items: Sequence[Mapping[str, Any]]) -> History:
        """Inverse of :meth:`to_list`; raises :class:`HistoryFormatError` on a wrong shape."""
        if not isinstance(items, Sequence) or isinstance(items, str | bytes):
            raise HistoryFormatError(f"history is {type(items).__name__}, not a list")
        return cls(tuple(Snapshot.from_dict(item) for item in items))

    def to_json(self) -> str:
        """``{"format": 1, "snapshots": [...]}`` as compact JSON with sorted keys."""
        return json.dumps({"format": HISTORY_FORMAT, "snapshots": self.to_list()},
                          sort_keys=True, separators=(",", ":"))

    @classmethod
    def from_json(cls, text: str | bytes) -> History:
        """Inverse of :meth:`to_json`; raises :class:`HistoryFormatError` for bad JSON or shape."""
        try:
            doc = json.loads(text)
        except (ValueError, RecursionError) as exc:
            raise HistoryFormatError(f"history is not valid JSON ({exc})") from None
        if not isinstance(doc, dict) or doc.get("format") != HISTORY_FORMAT:
            raise HistoryFormatError(f"history document is not format {HISTORY_FORMAT}")
        return cls.from_list(doc.get("snapshots") or [])
