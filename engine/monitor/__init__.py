"""Live resource monitors: absence and readiness of a release's resources."""

from engine.monitor.status import MonitorStatus, ResourceStatus

__all__ = ["MonitorStatus", "ResourceStatus"]
