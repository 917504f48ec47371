"""Fixed engine state for snapshot tests and the app bench, built through the real code paths.

Storage records are encoded with the real codec and fed to an offline
observer, exactly as the watch would feed them. Engine state (release
states, conditions, monitor status, failure counters, running actions) is
set in one place, :func:`set_engine_status`, through the paths the running
engine fills it: its persisted status, its last pass, the release service's
monitor callback.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import time
from pathlib import Path
from typing import Any

from engine.monitor.status import MonitorStatus, ResourceStatus
from engine.package.model import NO_RESOURCE_RECONCILIATION
from engine.reconcile import conditions as cond
from engine.reconcile.status import EngineStatus
from engine.runtime import Engine
from engine.runtime.assemble import offline_engine
from engine.runtime.state import (
    ActionOutcome,
    Condition,
    FailureCounts,
    LogEntry,
    ReleaseKey,
    RunningAction,
)
from engine.storage.codec import encode_payload, record_name
from engine.storage.observer import Observer

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"
FIXED_NOW = dt.datetime(2026, 11, 30, 10, 0, tzinfo=dt.UTC).timestamp()
"""The clock of every fixed-state screen: 2026-11-30 10:00:00 UTC."""


def fixed_clock() -> float:
    """Always :data:`FIXED_NOW`, so ages and progress in snapshots never change."""
    return FIXED_NOW


def storage_secret(
    name: str, namespace: str, version: int, status: str, chart: str, chart_version: str, app_version: str,
    config: dict[str, Any], deployed: str, description: str = "", labels: dict[str, str] | None = None,
    manifest: str | None = None, chart_values: dict[str, Any] | None = None, notes: str = "",
) -> dict[str, Any]:
    """A Helm storage Secret as the API returns it."""
    release = {
        "name": name, "namespace": namespace, "version": version,
        "info": {"status": status, "first_deployed": "2026-11-30T09:00:00Z", "last_deployed": deployed,
                 "deleted": "", "description": description or f"{status} revision {version}",
                 **({"notes": notes} if notes else {})},
        "chart": {"metadata": {"name": chart, "version": chart_version, "appVersion": app_version},
                  "values": chart_values or {}},
        "config": config, "manifest": manifest if manifest is not None else f"# {name} v{version}\n",
    }
    payload = encode_payload(release)
    return {
        "metadata": {
            "name": record_name(name, version), "namespace": namespace, "resourceVersion": f"{name}-{version}",
            "labels": {"name": name, "owner": "helm", "status": status, "version": str(version), **(labels or {})},
        },
        "type": "helm.sh/release.v1",
        "data": {"release": base64.b64encode(payload.encode()).decode()},
    }


def configmap_manifest(name: str, namespace: str, data: dict[str, str]) -> str:
    lines = "".join(f"  {k}: {v}\n" for k, v in data.items())
    return (f"---\n# Source: {name}/templates/configmap.yaml\napiVersion: v1\nkind: ConfigMap\n"
            f"metadata:\n  name: {name}\n  namespace: {namespace}\ndata:\n{lines}")


def web_manifest(replicas: int, tag: str, password: str) -> str:
    return (
        "---\n# Source: web/templates/secret.yaml\napiVersion: v1\nkind: Secret\nmetadata:\n  name: web-auth\n"
        f"type: Opaque\ndata:\n  password: {base64.b64encode(password.encode()).decode()}\n"
        "---\n# Source: web/templates/service.yaml\napiVersion: v1\nkind: Service\nmetadata:\n  name: web\n"
        "spec:\n  ports:\n    - port: 80\n      targetPort: 80\n"
        "---\n# Source: web/templates/deployment.yaml\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n"
        f"  name: web\nspec:\n  replicas: {replicas}\n  template:\n    spec:\n      containers:\n"
        f"        - name: web\n          image: \"nginx:{tag}\"\n"
    )


def web_notes(password: str) -> str:
    """NOTES as a chart renders them: an address with credentials and a password from the values."""
    return ("1. The web service listens on port 80:\n"
            "     kubectl -n helmdeck-demo port-forward svc/web 8080:80\n"
            f"2. Log in as admin with the password {password}\n"
            f"3. Or: curl http://admin:{password}@localhost:8080/\n")


WEB_CHART_VALUES = {"image": {"repository": "nginx", "tag": "1.27"}, "replicas": 1, "service": {"port": 80}}

FIXED_RECORDS = [
    storage_secret("settings", "helmdeck-demo", 1, "superseded", "settings", "0.1.0", "1.0",
                   {"settings": {"logLevel": "info"}}, "2026-11-30T09:00:00Z",
                   manifest=configmap_manifest("settings", "helmdeck-demo", {"logLevel": "info"})),
    storage_secret("settings", "helmdeck-demo", 2, "deployed", "settings", "0.1.0", "1.0",
                   {"settings": {"logLevel": "debug"}}, "2026-11-30T09:30:00.123456789Z",
                   manifest=configmap_manifest("settings", "helmdeck-demo", {"logLevel": "debug"})),
    storage_secret("web", "helmdeck-demo", 1, "superseded", "web", "0.2.0", "1.27",
                   {"replicas": 2, "auth": {"adminPassword": "hunter2"}, "secrets": {"apiToken": "t0k3n"}},
                   "2026-11-30T09:01:00Z", "Install complete",
                   manifest=web_manifest(2, "1.27", "hunter2"), chart_values=WEB_CHART_VALUES),
    storage_secret("web", "helmdeck-demo", 2, "superseded", "web", "0.2.1", "1.27.3",
                   {"replicas": 3, "image": {"tag": "1.27.3"}, "auth": {"adminPassword": "correct-horse"},
                    "secrets": {"apiToken": "t0k3n"}},
                   "2026-11-30T09:20:00Z", "Upgrade complete",
                   manifest=web_manifest(3, "1.27.3", "correct-horse"), chart_values=WEB_CHART_VALUES),
    storage_secret("web", "helmdeck-demo", 3, "deployed", "web", "0.2.0", "1.27",
                   {"replicas": 2, "auth": {"adminPassword": "hunter2"}, "secrets": {"apiToken": "t0k3n"}},
                   "2026-11-30T09:45:00Z", "Rollback to 1",
                   manifest=web_manifest(2, "1.27", "hunter2"), chart_values=WEB_CHART_VALUES,
                   notes=web_notes("hunter2")),
    storage_secret("flaky", "helmdeck-demo", 1, "deployed", "flaky", "0.1.0", "0.1",
                   {"fail": False}, "2026-11-30T09:02:00Z",
                   manifest=configmap_manifest("flaky", "helmdeck-demo", {"message": "ok"})),
    storage_secret("flaky", "helmdeck-demo", 2, "failed", "flaky", "0.1.0", "0.1",
                   {"fail": True}, "2026-11-30T09:40:00Z",
                   "Upgrade \"flaky\" failed: execution error at (flaky/templates/configmap.yaml:1:4): fail is true",
                   manifest=configmap_manifest("flaky", "helmdeck-demo", {"message": "failing"})),
    storage_secret("legacy-api", "legacy", 7, "pending-upgrade", "api", "3.4.1", "",
                   {}, "2026-11-29T18:12:44+01:00",
                   manifest="---\napiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: legacy-api\n"),
]

SETTINGS: ReleaseKey = ("helmdeck-demo", "settings")
WEB: ReleaseKey = ("helmdeck-demo", "web")
FLAKY: ReleaseKey = ("helmdeck-demo", "flaky")
LEGACY: ReleaseKey = ("legacy", "legacy-api")


_UNSET: Any = object()


def set_engine_status(
    engine: Engine,
    key: ReleaseKey,
    *,
    state: str | None = None,
    ready: bool | None = _UNSET,
    conditions: tuple[Condition, ...] | None = None,
    failures: FailureCounts | None = None,
    last: ActionOutcome | None = None,
    monitor: MonitorStatus | None = None,
    running: RunningAction | None = _UNSET,
) -> None:
    """Give one release fixed engine state through the paths the running engine uses.

    Conditions, failure counters and the last outcome go into the package's
    engine status, as the persisted-status store loads it; ``state`` is the
    last pass's release state; ``monitor`` arrives as the release service's
    status callback; ``ready`` sets the Ready condition; ``running`` is the
    action in progress. The app then sees ordinary ReleaseUpdated events.
    """
    book = engine.book
    status = book.status(key) or EngineStatus()
    changes: dict[str, Any] = {}
    if conditions is not None:
        changes["conditions"] = conditions
    if ready is not _UNSET:
        changes["conditions"] = cond.set_condition(changes.get("conditions", status.conditions), cond.READY, ready,
                                                   "Fixed", "set by the fixture")
    if failures is not None:
        changes["failures"] = failures
    if last is not None:
        changes["last"] = last
    book.set_status(key, dataclasses.replace(status, **changes))
    if state is not None:
        book.set_state(key, state)
    if monitor is not None:
        book.set_monitor(key, monitor)
    if running is not _UNSET:
        book.refresh(key, running=running)


def add_fixed_events(engine: Engine, events: list[LogEntry]) -> None:
    """Put events with fixed times into packages' event logs (the engine stamps real times)."""
    for event in events:
        engine.book.add_event(event)


def log_event(engine: Engine, event: LogEntry) -> None:
    """Log ``event`` as the engine does while an action runs (subscribers get EntryLogged)."""
    engine.book.add_event(event)


def announce_lease(engine: Engine, holder: str, leader: bool) -> None:
    """Announce who holds the engine lease, as the engine's lease elector does."""
    engine.controller.on_lease(holder, leader)


def _minutes_before_now(minutes: float) -> float:
    return FIXED_NOW - minutes * 60


def fixed_engine(*, readonly: bool = False) -> Engine:
    """An engine that is never started, holding the fixed records, the example packages and engine status.

    ``settings`` is in maintenance with an upgrade running; ``web`` was rolled
    back by hand (suspended) and its Service is absent; ``flaky``'s last
    upgrade failed and its monitor is paused twice; ``legacy-api`` has no
    package and is stuck pending.
    """
    observer = Observer(None)
    engine = offline_engine(EXAMPLES / "packages", observer=observer, readonly=readonly)
    for record in FIXED_RECORDS:
        observer.apply_object(record)
    # A package file declaring maintenance, as an operator would write it.
    engine.book.set_packages({**engine.packages, SETTINGS: dataclasses.replace(
        engine.packages[SETTINGS], maintenance=NO_RESOURCE_RECONCILIATION)})
    engine.book.update_status(WEB, suspended=True)  # as after a hand rollback (its event is in the log below)

    ready = Condition("Ready", "True", "UpgradeSucceeded", "Helm upgrade succeeded for revision 2",
                      _minutes_before_now(30))
    set_engine_status(
        engine, SETTINGS, state="InSync",
        conditions=(ready, Condition("Released", "True", "UpgradeSucceeded", "revision 2 deployed",
                                     _minutes_before_now(30))),
        running=RunningAction("upgrade", FIXED_NOW - 12, 300.0),
        last=ActionOutcome("upgrade", True, "upgrade succeeded: revision 2 deployed", 2, at=_minutes_before_now(30)),
    )
    set_engine_status(
        engine, WEB, state="Drifted",
        conditions=(Condition("Ready", "False", "DriftDetected", "Service/helmdeck-demo/web is absent",
                              _minutes_before_now(5)),
                    Condition("Released", "True", "RollbackSucceeded", "rolled back to revision 1",
                              _minutes_before_now(15))),
        monitor=MonitorStatus("active", 0, (
            ResourceStatus("v1", "Secret", "helmdeck-demo", "web-auth", True, True, "present"),
            ResourceStatus("v1", "Service", "helmdeck-demo", "web", False, False, "absent"),
            ResourceStatus("apps/v1", "Deployment", "helmdeck-demo", "web", True, True, "2/2 replicas available"),
        )),
        last=ActionOutcome("rollback", True, "rollback succeeded: revision 3 deployed", 3, at=_minutes_before_now(15)),
    )
    set_engine_status(
        engine, FLAKY, state="Failed",
        conditions=(Condition("Ready", "False", "UpgradeFailed", "upgrade of revision 2 failed",
                              _minutes_before_now(20)),
                    Condition("Released", "False", "UpgradeFailed", "execution error: fail is true",
                              _minutes_before_now(20)),
                    Condition("Remediated", "False", "RetriesExceeded", "no upgrade retries configured",
                              _minutes_before_now(20))),
        monitor=MonitorStatus("paused", 2, (
            ResourceStatus("v1", "ConfigMap", "helmdeck-demo", "flaky", True, True, "present"),)),
        failures=FailureCounts(install=0, upgrade=1, total=1),
        last=ActionOutcome("upgrade", False, "upgrade failed: execution error: fail is true", 2,
                           ("Error: UPGRADE FAILED: execution error at (flaky/templates/configmap.yaml:1:4):",
                            "fail is true"), _minutes_before_now(20)),
    )
    add_fixed_events(engine, [
        LogEntry(_minutes_before_now(21), FLAKY, "flaky", "upgrade", "started", "upgrade started (timeout 60s)"),
        LogEntry(_minutes_before_now(20), FLAKY, "flaky", "upgrade", "failed",
                       "upgrade failed: execution error: fail is true",
                       ("Error: UPGRADE FAILED: execution error at (flaky/templates/configmap.yaml:1:4):",
                        "fail is true")),
        LogEntry(_minutes_before_now(16), WEB, "web", "rollback", "started", "rollback started (timeout 120s)"),
        LogEntry(_minutes_before_now(15), WEB, "web", "rollback", "succeeded",
                       "rollback succeeded: revision 3 deployed"),
        LogEntry(_minutes_before_now(15), WEB, "web", "suspend", "info", "reconciliation suspended"),
    ])
    for event in WEB_KUBE_EVENTS:
        engine.kube_events.feed(event)
    return engine


def kube_event(name: str, kind: str, obj: str, type_: str, reason: str, message: str, minutes: float,
               count: int = 1) -> dict[str, Any]:
    """A core/v1 Event in helmdeck-demo as the API returns it, last seen ``minutes`` before FIXED_NOW."""
    at = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(_minutes_before_now(minutes)))
    return {"metadata": {"name": name, "namespace": "helmdeck-demo", "uid": name, "creationTimestamp": at},
            "involvedObject": {"kind": kind, "name": obj, "namespace": "helmdeck-demo"},
            "type": type_, "reason": reason, "message": message, "count": count, "lastTimestamp": at}


WEB_KUBE_EVENTS = [
    kube_event("e1", "Deployment", "web", "Normal", "ScalingReplicaSet",
               "Scaled up replica set web-5d8f7c9b4 from 0 to 2", 15.5),
    kube_event("e2", "Pod", "web-5d8f7c9b4-x2x5q", "Warning", "FailedScheduling",
               "0/1 nodes are available: 1 node(s) didn't match Pod's node affinity/selector.", 14.5, count=3),
    kube_event("e3", "Pod", "other-abcde", "Warning", "BackOff", "not web's: never shown", 14.0),
]


def bulk_engine(releases: int, namespaces: int = 10) -> Engine:
    """An engine holding ``releases`` stored releases spread over ``namespaces`` namespaces (no packages).

    For the app bench: every release gets one stored revision and an engine
    state from the fixed cycle below, so every column has varied text.
    """
    observer = Observer(None)
    engine = offline_engine(observer=observer)
    states = ("InSync", "OutOfSync", "Drifted", "Failed", "InSync", "Untested", "InSync", "Stalled")
    for i in range(releases):
        ns = f"team-{i % namespaces:02d}"
        status = "failed" if states[i % len(states)] == "Failed" else "deployed"
        observer.apply_object(storage_secret(
            f"svc-{i:04d}", ns, 1 + i % 7, status, "svc", f"1.{i % 13}.0", f"2.{i % 5}", {"replicas": i % 4},
            f"2026-11-{1 + i % 28:02d}T{i % 24:02d}:00:00Z",
        ))
    for i, key in enumerate(sorted(observer.releases())):
        set_engine_status(engine, key, state=states[i % len(states)], ready=i % 3 != 0,
                          monitor=MonitorStatus("active", 0, (
                              ResourceStatus("apps/v1", "Deployment", key[0], key[1], True, i % 3 != 0),)))
    return engine
