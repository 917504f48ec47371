"""Helm release records built in memory for storage tests (the codec encodes them as Helm does)."""

from __future__ import annotations

import base64
import os
from typing import Any

from engine.storage.codec import MAX_PAYLOAD_BYTES, encode_payload, record_name


def release(version: int = 1, status: str = "deployed", name: str = "web", namespace: str = "demo",
            **extra: Any) -> dict[str, Any]:
    """A release dict shaped like the ones helm 3 writes, with a test hook and a pre-upgrade hook."""
    rel: dict[str, Any] = {
        "name": name,
        "namespace": namespace,
        "version": version,
        "info": {
            "status": status,
            "first_deployed": "2026-11-30T10:00:00.123456789Z",
            "last_deployed": "2026-11-30T10:05:00.5+01:00",
            "deleted": "",
            "description": "Upgrade complete",
            "notes": "Open http://web.demo/",
        },
        "chart": {
            "metadata": {"name": "web", "version": "0.2.0", "appVersion": "1.27",
                         "description": "A web server", "kubeVersion": ">=1.30.0-0"},
            "values": {"replicas": 1, "image": {"tag": "latest"}},
        },
        "config": {"replicas": 2, "image": {"tag": "1.27.3"}},
        "manifest": "---\nkind: ConfigMap\n",
        "hooks": [
            {"name": "web-test", "kind": "Job", "path": "web/templates/tests/t.yaml", "events": ["test"],
             "manifest": "kind: Job", "weight": 1, "delete_policies": ["before-hook-creation"],
             "last_run": {"phase": "Succeeded", "started_at": "2026-11-30T10:06:00Z",
                          "completed_at": "2026-11-30T10:06:05Z"}},
            {"name": "web-migrate", "kind": "Job", "path": "web/templates/m.yaml", "events": ["pre-upgrade"],
             "last_run": {"phase": "Succeeded"}},
        ],
    }
    rel.update(extra)
    return rel


def sized_release(target: int, **kwargs: Any) -> dict[str, Any]:
    """A release whose payload is between ``target`` - 4 KiB and ``target`` bytes (random manifest)."""
    rel = release(**kwargs)
    base = len(encode_payload(rel))
    noise = base64.b64encode(os.urandom(target)).decode()
    # base64 text gzips to about 3/4 and the payload's base64 grows it by 4/3: close to 1:1.
    size = target - base
    for _ in range(8):
        rel["manifest"] = noise[:size]
        got = len(encode_payload(rel))
        if target - 4096 < got <= target:
            return rel
        size += (target - 2048 - got) * 3 // 4
    raise AssertionError(f"could not size a payload to {target} bytes")


def secret(rel: dict[str, Any], labels: dict[str, str] | None = None, rv: str = "1",
           payload: str | None = None, uid: str = "") -> dict[str, Any]:
    """The Secret object helm would store for ``rel``, as the API returns it."""
    payload = encode_payload(rel) if payload is None else payload
    meta: dict[str, Any] = {
        "name": record_name(rel["name"], rel["version"]),
        "namespace": rel["namespace"],
        "resourceVersion": rv,
        "labels": {"name": rel["name"], "owner": "helm", "status": rel["info"]["status"],
                   "version": str(rel["version"]), **(labels or {})},
    }
    if uid:
        meta["uid"] = uid
    return {"metadata": meta, "type": "helm.sh/release.v1",
            "data": {"release": base64.b64encode(payload.encode()).decode()}}


__all__ = ["MAX_PAYLOAD_BYTES", "release", "secret", "sized_release"]
