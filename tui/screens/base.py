"""What the main and detail screens share: the door to the engine, its signals and the app's clock."""

from __future__ import annotations

from collections.abc import Callable

from textual.screen import Screen

from engine.runtime.ledger.owners import Owner
from engine.runtime.state import ReleaseKey
from tui.engine_client import EngineClient
from tui.messages import EngineSignals


class EngineScreen(Screen[None]):
    """A screen over the engine: reads through ``client``, follows ``signals``, tells time by ``clock``."""

    def __init__(self, client: EngineClient, signals: EngineSignals, clock: Callable[[], float]):
        super().__init__()
        self._client = client
        self._signals = signals
        self._clock = clock
        self._keys_for: tuple[ReleaseKey | None, Owner | None] | None = None  # the release the footer's keys are for

    def keys_follow(self, key: ReleaseKey | None) -> None:
        """The footer shows the keys of release ``key`` (the one the actions act on; None: none): its bindings are
        asked again (the app's ``check_action``) when that release or its owner changed."""
        owner = self._client.owner(key) if key is not None else None
        if (key, owner) != self._keys_for:
            self._keys_for = (key, owner)
            self.refresh_bindings()
