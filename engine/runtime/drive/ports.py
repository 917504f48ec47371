"""What a trigger may do to the controller, and nothing more: queue a package, ask whether passes run on
their own and whether this engine acts, start a background task.

The triggers (the valuesFrom objects' watches, the repositories' refresh) get this port instead of the
controller, so none of them reads the controller's fields or imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from engine.runtime.state import ReleaseKey


@dataclass(frozen=True)
class Triggers:
    """``enqueue(key)`` queues a pass of ``key``; ``reconciling()`` is whether passes run on their own (not
    ``reconcile --once``); ``acting()`` whether this engine may act now (the Lease, read-only);
    ``spawn(coroutine)`` runs a task the engine cancels when it stops."""

    enqueue: Callable[[ReleaseKey], None]
    reconciling: Callable[[], bool]
    acting: Callable[[], bool]
    spawn: Callable[[Coroutine[Any, Any, None]], object]

    def acts_on_its_own(self) -> bool:
        """Will a queued package get a pass: the engine both acts and reconciles on its own."""
        return self.acting() and self.reconciling()
