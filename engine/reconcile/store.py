"""Persist each package's engine status in the cluster, next to its release storage.

One ConfigMap per package, in the release's storage namespace, named
``helmdeck.status.<release>``, labelled ``app.kubernetes.io/managed-by=helmdeck``,
``helmdeck.dev/status=v1`` and ``helmdeck.dev/package=<package>``; the status
JSON is under ``status.json``. A restarted engine (or a second, read-only
viewer) reads it back, so nothing is lost and no needless upgrade runs.
A status identical to the one last read or written is not written again, so
a pass that changed nothing costs no API call.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.base import labels
from engine.kube.client import impersonating
from engine.reconcile.status import EngineStatus

log = logging.getLogger(__name__)

STATUS_LABEL = "helmdeck.dev/status"
STATUS_VERSION = "v1"
DATA_KEY = "status.json"
SELECTOR = f"{labels.OWNED_BY}={labels.MANAGER},{STATUS_LABEL}={STATUS_VERSION}"


def object_name(release: str) -> str:
    """``helmdeck.status.<release>`` (release names are at most 53 characters: it fits)."""
    return f"helmdeck.status.{release}"


@dataclass(frozen=True)
class StoredStatus:
    """A status read back: where it lives, which package wrote it, and the status."""

    namespace: str
    release: str
    package: str
    status: EngineStatus


class StatusStore:
    """Reads and writes status ConfigMaps (synchronous; run it in a thread)."""

    def __init__(self, api: client.ApiClient):
        self._core: Any = client.CoreV1Api(api)
        self._known: dict[tuple[str, str], tuple[str, str]] = {}  # (ns, release) -> (package, status JSON)

    def load(self, namespace: str, release: str) -> EngineStatus | None:
        """The stored status, or None when there is none or it cannot be parsed (logged)."""
        try:
            cm = self._core.read_namespaced_config_map(object_name(release), namespace, _preload_content=False)
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise
        return self._parse(json.loads(cm.data), namespace, release)

    def _parse(self, obj: dict[str, Any], namespace: str, release: str) -> EngineStatus | None:
        text = (obj.get("data") or {}).get(DATA_KEY)
        if not isinstance(text, str):
            return None
        package = str(((obj.get("metadata") or {}).get("labels") or {}).get(labels.PACKAGE, ""))
        self._known[(namespace, release)] = (package, text)
        try:
            return EngineStatus.from_json(text)
        except ValueError as exc:
            log.warning("ignoring unreadable engine status %s/%s: %s", namespace, object_name(release), exc)
            return None

    def save(self, namespace: str, release: str, package: str, status: EngineStatus, *, as_user: str = "") -> None:
        """Create or replace the status object (skipped when it holds this status already), as ``as_user``
        when given (the package's ServiceAccount, impersonated). Raises ApiException on API errors."""
        text = status.to_json()
        if self._known.get((namespace, release)) == (package, text):
            return
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": object_name(release),
                "namespace": namespace,
                "labels": {labels.OWNED_BY: labels.MANAGER, STATUS_LABEL: STATUS_VERSION,
                           labels.PACKAGE: package},
            },
            "data": {DATA_KEY: text},
        }
        self._known.pop((namespace, release), None)  # unknown until the write succeeded
        core: Any = client.CoreV1Api(impersonating(self._core.api_client, as_user)) if as_user else self._core
        try:
            core.replace_namespaced_config_map(object_name(release), namespace, body)
        except ApiException as exc:
            if exc.status != 404:
                raise
            core.create_namespaced_config_map(namespace, body)
        self._known[(namespace, release)] = (package, text)

    def delete(self, namespace: str, release: str) -> None:
        """Remove the status object; a missing one is fine."""
        self._known.pop((namespace, release), None)
        try:
            self._core.delete_namespaced_config_map(object_name(release), namespace)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def list(self, namespaces: list[str] | None = None) -> list[StoredStatus]:
        """Every stored status (all namespaces, or the given ones)."""
        found: list[dict[str, Any]] = []
        if namespaces:
            for ns in namespaces:
                resp = self._core.list_namespaced_config_map(ns, label_selector=SELECTOR, _preload_content=False)
                found.extend(json.loads(resp.data).get("items") or [])
        else:
            resp = self._core.list_config_map_for_all_namespaces(label_selector=SELECTOR, _preload_content=False)
            found.extend(json.loads(resp.data).get("items") or [])
        out = []
        for obj in found:
            meta = obj.get("metadata") or {}
            name = str(meta.get("name", ""))
            release = name.removeprefix("helmdeck.status.")
            ns = str(meta.get("namespace", ""))
            status = self._parse(obj, ns, release)
            if status is not None:
                out.append(StoredStatus(ns, release, str((meta.get("labels") or {}).get(labels.PACKAGE, "")), status))
        return out
