"""What the main and detail screens share: the door to the engine, its signals and the app's clock."""

from __future__ import annotations

from collections.abc import Callable

from textual.screen import Screen

from tui.engine_client import EngineClient
from tui.messages import EngineSignals


class EngineScreen(Screen[None]):
    """A screen over the engine: reads through ``client``, follows ``signals``, tells time by ``clock``."""

    def __init__(self, client: EngineClient, signals: EngineSignals, clock: Callable[[], float]):
        super().__init__()
        self._client = client
        self._signals = signals
        self._clock = clock
