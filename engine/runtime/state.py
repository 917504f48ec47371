"""Release state as the engine reports it, and the events announcing changes.

Everything here is an immutable value: subscribers get snapshots and can
keep them without locking.
"""

from __future__ import annotations

from dataclasses import dataclass

from engine.package import PackageError, PackageSpec
from engine.storage.observation import Observation

ReleaseKey = tuple[str, str]  # (namespace, release name)


@dataclass(frozen=True)
class ActionOutcome:
    """Result of one action on a release, judged from what storage holds afterwards.

    ``revision`` is the revision storage held when the action ended (None if
    none); ``tail`` holds helm's last output lines when the action failed.
    ``at`` is a Unix time in seconds.
    """

    action: str
    ok: bool
    message: str
    revision: int | None = None
    tail: tuple[str, ...] = ()
    at: float = 0.0


@dataclass(frozen=True)
class ReleaseState:
    """One release: its latest stored revision, the package declaring it, and activity.

    ``observation`` is None while a package's release is not installed yet.
    ``running`` names the action in progress, if any; ``suspended`` is set
    after a hand rollback so the engine does not undo it.
    """

    namespace: str
    name: str
    observation: Observation | None = None
    package: PackageSpec | None = None
    running: str | None = None
    last: ActionOutcome | None = None
    suspended: bool = False
    unreadable: str | None = None

    @property
    def key(self) -> ReleaseKey:
        return (self.namespace, self.name)


@dataclass(frozen=True)
class ReleaseUpdated:
    """Something about one release changed; ``state`` is its new snapshot."""

    state: ReleaseState


@dataclass(frozen=True)
class ReleaseRemoved:
    """A release left the view (its last revision was deleted and no package declares it)."""

    key: ReleaseKey


@dataclass(frozen=True)
class PackageProblems:
    """The package folder was (re)loaded; ``errors`` lists the bad files (empty when all good)."""

    errors: tuple[PackageError, ...]


EngineEvent = ReleaseUpdated | ReleaseRemoved | PackageProblems
