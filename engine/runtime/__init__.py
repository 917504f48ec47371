"""The running engine: package source, release state, actions and events."""

from engine.runtime.engine import Engine
from engine.runtime.state import (
    ActionOutcome,
    EngineSignal,
    PackageProblems,
    ReleaseRemoved,
    ReleaseUpdated,
    ReleaseView,
)

__all__ = [
    "ActionOutcome",
    "Engine",
    "EngineSignal",
    "PackageProblems",
    "ReleaseRemoved",
    "ReleaseUpdated",
    "ReleaseView",
]
