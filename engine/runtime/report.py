"""Plain data for headless output: ``helmdeck status -o json`` rows and event JSON lines.

The status row shape is documented in docs/commands.md (its section on ``status -o json``).
"""

from __future__ import annotations

from typing import Any

from engine.runtime.ledger.owners import owner_of
from engine.runtime.state import LogEntry, ReleaseView
from engine.storage.observer import UnreadableRecord

# The state of a release whose newest stored record cannot be decoded (the app shows "! unreadable").
UNREADABLE = "Unreadable"


def unreadable_reason(code: str) -> str:
    """A decode error's code as a condition reason: ``bad-gzip`` -> ``BadGzip`` (Kubernetes' CamelCase)."""
    return "".join(part.capitalize() for part in code.split("-"))


def status_row(view: ReleaseView, unreadable: UnreadableRecord | None = None) -> dict[str, Any]:
    """One element of ``helmdeck status -o json``.

    ``unreadable`` is the release's newest stored record when it cannot be decoded
    (``Observer.unreadable_releases``): the row's state is then ``Unreadable`` and a ``Readable=False``
    condition carries the typed reason (``BadBase64``, ``BadGzip``, ``BadJson``, ...) and the message.
    """
    obs = view.observation
    monitor = view.monitor
    conditions = [{"type": c.type, "status": c.status, "reason": c.reason, "message": c.message}
                  for c in view.conditions]
    state = view.state
    if unreadable is not None:
        state = UNREADABLE
        conditions.insert(0, {"type": "Readable", "status": "False", "reason": unreadable_reason(unreadable.code),
                              "message": f"revision {unreadable.revision or '?'}: {unreadable.reason}"})
    owner = owner_of(view)
    return {
        "namespace": view.namespace,
        "name": view.name,
        "package": view.package.name if view.package else None,
        "owner": {"kind": owner.kind, "namespace": owner.namespace or None, "name": owner.name or None,
                  "replica": owner.replica or None, "shard": owner.shard or None,
                  "packageSet": owner.package_set or None},
        "revision": obs.version if obs else None,
        "status": obs.status if obs else None,
        "chart": f"{obs.chart_name}-{obs.chart_version}" if obs else None,
        "appVersion": obs.app_version if obs else None,
        "updated": obs.last_deployed if obs else None,
        "state": state,
        "ready": view.ready,
        "conditions": conditions,
        "monitor": {"state": monitor.state, "paused": monitor.paused, "absent": list(monitor.absent),
                    "problem": monitor.problem or None},
        "maintenance": view.maintenance,
        "suspended": view.suspended,
        "failures": {"install": view.failures.install, "upgrade": view.failures.upgrade,
                     "total": view.failures.total},
        "lastAction": ({"action": view.last.action, "ok": view.last.ok, "message": view.last.message}
                       if view.last else None),
        "droppedStatus": ({"object": view.status_dropped[0], "reason": view.status_dropped[1]}
                          if view.status_dropped else None),
    }


def event_line(event: LogEntry) -> dict[str, Any]:
    """One JSON line of ``helmdeck reconcile --json``."""
    return {
        "type": "event",
        "time": round(event.at, 3),
        "namespace": event.key[0],
        "release": event.key[1],
        "package": event.package or None,
        "action": event.action,
        "outcome": event.outcome,
        "message": event.message,
        "helmOutput": list(event.tail),
    }


def table(rows: list[dict[str, Any]]) -> str:
    """``helmdeck status -o table``: aligned columns, like ``helm list``."""
    head = ["NAMESPACE", "NAME", "PACKAGE", "REVISION", "STATUS", "STATE", "READY", "MONITOR", "MAINTENANCE",
            "SUSPENDED"]
    lines = [head]
    for r in rows:
        mon = r["monitor"]
        monitor = mon["state"] if mon["state"] != "paused" else f"paused x{mon['paused']}"
        if mon["absent"]:
            monitor = f"{len(mon['absent'])} absent"
        if mon.get("problem"):
            monitor = "cannot watch"
        lines.append([
            r["namespace"], r["name"], r["package"] or "-", str(r["revision"] or "-"), r["status"] or "-",
            r["state"] or "-", {True: "True", False: "False", None: "Unknown"}[r["ready"]], monitor,
            r["maintenance"] or "-", "yes" if r["suspended"] else "no",
        ])
    widths = [max(len(row[i]) for row in lines) for i in range(len(head))]
    return "\n".join("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
                     for row in lines)
