"""How the app's parts talk: engine events as Textual signals, and the messages screens send up."""

from __future__ import annotations

from typing import Any

from textual.dom import DOMNode
from textual.message import Message
from textual.signal import Signal

from engine.runtime.state import (
    AccessProblems,
    ControllerChanged,
    EngineSignal,
    EntryLogged,
    LeaseChanged,
    PackageProblems,
    ReleaseKey,
    ReleaseRemoved,
    ReleasesListed,
    ReleaseUpdated,
)


class EngineMessage(Message):
    """Engine events are waiting in the app's queue (engine callbacks run outside Textual's queue).

    One message carries a whole burst: dispatching a Textual message costs about a millisecond,
    so 1,000 releases listed at start-up would otherwise queue a second of dispatching.
    """


class EngineSignals:
    """One Textual signal per kind of engine event; screens subscribe to the ones they show.

    Subscribers are called at once (``immediate``) when the app publishes, in
    its message loop; a screen that is gone is dropped by Textual.
    """

    def __init__(self, owner: DOMNode):
        self.updated: Signal[ReleaseUpdated] = Signal(owner, "release-updated")
        self.listed: Signal[ReleasesListed] = Signal(owner, "releases-listed")
        self.removed: Signal[ReleaseRemoved] = Signal(owner, "release-removed")
        self.logged: Signal[EntryLogged] = Signal(owner, "event-logged")
        self.lease: Signal[LeaseChanged] = Signal(owner, "lease-changed")
        self.problems: Signal[PackageProblems] = Signal(owner, "package-problems")
        self.access: Signal[AccessProblems] = Signal(owner, "access-problems")
        self.controller: Signal[ControllerChanged] = Signal(owner, "controller-changed")
        self._by_type: dict[type, Signal[Any]] = {
            ReleaseUpdated: self.updated, ReleasesListed: self.listed, ReleaseRemoved: self.removed,
            EntryLogged: self.logged, LeaseChanged: self.lease, PackageProblems: self.problems,
            AccessProblems: self.access, ControllerChanged: self.controller,
        }

    def publish(self, event: EngineSignal) -> None:
        signal = self._by_type.get(type(event))
        if signal is not None:
            signal.publish(event)


class OpenDetail(Message):
    """The operator asked for the detail screen of ``key``."""

    def __init__(self, key: ReleaseKey):
        super().__init__()
        self.key = key
