"""Kubernetes Events as the engine shows them: per-namespace watches and each release's Warning count.

The watches themselves (one shared list+watch per namespace, bounded) are
:mod:`engine.monitor.events`; this collaborator ties them to the release book: which
objects a release counts Warnings for (its monitored resources, a few per
release update) and where the count goes (``ReleaseView.warnings``).
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

from kubernetes import client

from engine.monitor.events import EventHub, KubeEvent, WarningCounter
from engine.runtime.ledger.book import ReleaseBook
from engine.runtime.state import EngineSignal, ReleaseRemoved, ReleaseUpdated

OnLoop = Callable[..., None]


class ReleaseEvents:
    """Kubernetes Events of the releases in ``book``; callbacks run through ``on_loop`` (the engine's loop).

    ``api`` None: nothing is watched; :meth:`feed` adds events by hand (fixtures).
    """

    def __init__(self, api: client.ApiClient | None, book: ReleaseBook, on_loop: OnLoop):
        self._on_loop = on_loop
        self.hub = EventHub(api)
        self._warnings = WarningCounter(self.hub, lambda key, n: on_loop(book.set_warnings, key, n))
        book.subscribe(self._track)

    def watch(self, namespace: str, callback: Callable[[KubeEvent], None], *,
              replay: bool = False) -> Callable[[], None]:
        """Call ``callback`` on the engine's loop with each Event of ``namespace``; returns the unsubscribe.
        ``replay``: first with the Events already kept (see :meth:`EventHub.subscribe`).

        The callback runs in the context variables of the caller of ``watch`` (a copy per call), not the
        watch thread's: an app's screen subscribes and its callbacks need the app's context (Textual's
        timers made without it fail when the app shuts down)."""
        context = contextvars.copy_context()
        return self.hub.subscribe(
            namespace, lambda event, _gone: self._on_loop(context.copy().run, callback, event), replay=replay)

    def recent(self, namespace: str) -> list[KubeEvent]:
        """The recent Events of ``namespace`` kept (at most engine.monitor.events.KEEP), oldest first."""
        return self.hub.recent(namespace)

    def feed(self, obj: dict[str, Any]) -> None:
        """Add one core/v1 Event object by hand (an engine without a cluster)."""
        self.hub.feed(obj)

    def stop(self) -> None:
        """Stop counting and every watch (blocking: call in a thread)."""
        self._warnings.stop()
        self.hub.stop()

    def _track(self, event: EngineSignal) -> None:
        if isinstance(event, ReleaseUpdated) and (event.view.monitor.resources or event.view.warnings):
            self._warnings.track(event.view.key,
                                 [(r.kind, r.namespace, r.name) for r in event.view.monitor.resources])
        elif isinstance(event, ReleaseRemoved):
            self._warnings.forget(event.key)
