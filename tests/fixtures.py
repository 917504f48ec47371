"""Fixed engine state for snapshot tests, built through the real code paths.

Storage records are encoded with the real codec and fed to an offline
observer, exactly as the watch would feed them.
"""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

from engine.helm import Helm
from engine.kube import KubeTarget
from engine.runtime import Engine
from engine.storage.codec import encode_payload, record_name
from engine.storage.observer import Observer

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def storage_secret(
    name: str, namespace: str, version: int, status: str, chart: str, chart_version: str, app_version: str,
    config: dict[str, Any], deployed: str, description: str = "", labels: dict[str, str] | None = None,
) -> dict[str, Any]:
    """A Helm storage Secret as the API returns it."""
    release = {
        "name": name, "namespace": namespace, "version": version,
        "info": {"status": status, "first_deployed": "2026-11-30T09:00:00Z", "last_deployed": deployed,
                 "deleted": "", "description": description or f"{status} revision {version}"},
        "chart": {"metadata": {"name": chart, "version": chart_version, "appVersion": app_version}},
        "config": config, "manifest": f"# {name} v{version}\n",
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


FIXED_RECORDS = [
    storage_secret("settings", "helmdeck-demo", 1, "superseded", "settings", "0.1.0", "1.0",
                   {"settings": {"logLevel": "info"}}, "2026-11-30T09:00:00Z"),
    storage_secret("settings", "helmdeck-demo", 2, "deployed", "settings", "0.1.0", "1.0",
                   {"settings": {"logLevel": "debug"}}, "2026-11-30T09:30:00.123456789Z"),
    storage_secret("web", "helmdeck-demo", 1, "deployed", "web", "0.2.0", "1.27",
                   {"replicas": 2}, "2026-11-30T09:01:00Z"),
    storage_secret("flaky", "helmdeck-demo", 1, "deployed", "flaky", "0.1.0", "0.1",
                   {"fail": False}, "2026-11-30T09:02:00Z"),
    storage_secret("flaky", "helmdeck-demo", 2, "failed", "flaky", "0.1.0", "0.1",
                   {"fail": True}, "2026-11-30T09:40:00Z"),
    storage_secret("legacy-api", "legacy", 7, "pending-upgrade", "api", "3.4.1", "",
                   {}, "2026-11-29T18:12:44+01:00"),
]


def fixed_engine() -> Engine:
    """An engine that is never started, holding the fixed records and the example packages."""
    observer = Observer(None)
    engine = Engine(KubeTarget(), Helm("helm"), EXAMPLES / "packages", observer=observer)
    for record in FIXED_RECORDS:
        observer.apply_object(record)
    engine.load_packages()
    return engine
