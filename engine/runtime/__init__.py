"""The running engine: the facade over what drives passes (drive/) and the state it keeps (ledger/)."""

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
