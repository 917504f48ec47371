"""Helm release records built in memory for storage tests (the codec encodes them as Helm does)."""

from __future__ import annotations

import base64
import os
from pathlib import Path
from typing import Any

from kubernetes import client

from engine.storage.codec import encode_payload, record_name


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




def stored_in(storage: str, version: int, status: str, name: str = "web", namespace: str = "apps") -> dict[str, Any]:
    """The Secret of release ``namespace/name`` at ``version`` stored in the namespace ``storage`` (Flux's
    ``storageNamespace``), as the API returns it."""
    stored = secret(release(version, status, name=name, namespace=namespace), rv=f"{storage}-{version}")
    stored["metadata"]["namespace"] = storage
    return stored


def write_chart(directory: Path) -> Path:
    """A small chart for storage tests: a ConfigMap, NOTES, a ``helm test`` Job (completes on kwok)
    and, with ``stuck=true``, a PersistentVolumeClaim that never binds (so ``--wait`` hangs)."""
    chart = directory / "probe"
    (chart / "templates" / "tests").mkdir(parents=True, exist_ok=True)
    (chart / "Chart.yaml").write_text(
        "apiVersion: v2\nname: probe\nversion: 0.3.0\nappVersion: \"2.1\"\n"
        "description: Storage test chart\nkubeVersion: \">=1.20.0-0\"\n"
    )
    (chart / "values.yaml").write_text("greeting: hello\nstuck: false\nlist: [1, 2]\n")
    (chart / "templates" / "NOTES.txt").write_text("Release {{ .Release.Name }} says {{ .Values.greeting }}.\n")
    (chart / "templates" / "configmap.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-cfg\n"
        "data:\n  greeting: {{ .Values.greeting | quote }}\n"
    )
    (chart / "templates" / "pvc.yaml").write_text(
        "{{- if .Values.stuck }}\napiVersion: v1\nkind: PersistentVolumeClaim\nmetadata:\n"
        "  name: {{ .Release.Name }}-never\nspec:\n  accessModes: [ReadWriteOnce]\n"
        "  storageClassName: none\n  resources:\n    requests:\n      storage: 1Gi\n{{- end }}\n"
    )
    (chart / "templates" / "tests" / "job.yaml").write_text(
        "apiVersion: batch/v1\nkind: Job\nmetadata:\n  name: {{ .Release.Name }}-probe-test\n"
        "  annotations:\n    helm.sh/hook: test\n    helm.sh/hook-delete-policy: before-hook-creation\n"
        "spec:\n  backoffLimit: 0\n  template:\n    spec:\n      restartPolicy: Never\n"
        "      containers:\n        - name: t\n          image: busybox:1.36\n          command: [\"true\"]\n"
    )
    return chart


def new_secret(rel: dict[str, Any], payload: str | None = None) -> client.V1Secret:
    """The body to create the Secret helm would store for ``rel`` (no server-set fields)."""
    obj = secret(rel, payload=payload)
    meta = obj["metadata"]
    return client.V1Secret(metadata=client.V1ObjectMeta(name=meta["name"], labels=meta["labels"]),
                           type=obj["type"], data=obj["data"])
