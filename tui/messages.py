"""Messages the screens send up to the app."""

from __future__ import annotations

from textual.message import Message

from engine.runtime.state import EngineEvent, ReleaseKey


class EngineMessage(Message):
    """An engine event, carried into Textual's message queue (engine callbacks run outside it)."""

    def __init__(self, event: EngineEvent):
        super().__init__()
        self.event = event


class OpenDetail(Message):
    """The operator asked for the detail screen of ``key``."""

    def __init__(self, key: ReleaseKey):
        super().__init__()
        self.key = key
