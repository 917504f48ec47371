"""Live resource monitors: absence and readiness of a release's resources, from shared watches."""

from engine.monitor.monitor import ExpectedObject, ReleaseMonitor, expected_objects
from engine.monitor.readiness import Readiness, assess
from engine.monitor.status import MonitorStatus, ResourceStatus
from engine.monitor.watch import SharedWatch, WatchHub, WatchKey

__all__ = [
    "ExpectedObject",
    "MonitorStatus",
    "Readiness",
    "ReleaseMonitor",
    "ResourceStatus",
    "SharedWatch",
    "WatchHub",
    "WatchKey",
    "assess",
    "expected_objects",
]
