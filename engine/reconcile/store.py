"""Persist each package's engine status in the cluster, next to its release storage.

One ConfigMap per package, in the release's storage namespace, named
``helmdeck.status.<release>``, labelled ``app.kubernetes.io/managed-by=helmdeck``,
``wire.STATUS_LABEL=v1`` and ``wire.PACKAGE=<package>``; the status
JSON is under ``status.json``. A restarted engine (or a second, read-only
viewer) reads it back, so nothing is lost and no needless upgrade runs.
A status identical to the one last read or written is not written again, so
a pass that changed nothing costs no API call.

A release whose storage namespace does not exist yet (an install with
``install.createNamespace`` whose render failed: helm created nothing) still has
a status to keep: the failure. It is written to the engine's home namespace (the
Lease's, ``default`` unless ``--lease-namespace``), as
``helmdeck.status.<namespace>.<release>`` labelled with the release's namespace
and name, read back with the others, and removed once the status can be written
beside the release. Creating the namespace just for the status would create what
the package asked helm to create.

The status is removed with its release (prune, ``cleanup``): a leftover would
claim a history the next install does not have.
"""

from __future__ import annotations

import dataclasses
import logging
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.base import wire
from engine.base.wire import RELEASE_LABEL, RELEASE_NS_LABEL, STATUS_LABEL
from engine.kube import rest
from engine.kube.client import impersonating
from engine.reconcile.status import EngineStatus

log = logging.getLogger(__name__)

STATUS_VERSION = "v1"
DATA_KEY = "status.json"
SELECTOR = f"{wire.OWNED_BY}={wire.MANAGER},{STATUS_LABEL}={STATUS_VERSION}"


def object_name(release: str) -> str:
    """``helmdeck.status.<release>`` (release names are at most 53 characters: it fits)."""
    return f"helmdeck.status.{release}"


def home_name(namespace: str, release: str) -> str:
    """``helmdeck.status.<namespace>.<release>``: a status kept in the home namespace (at most 134 characters)."""
    return f"helmdeck.status.{namespace}.{release}"


@dataclass(frozen=True)
class StoredStatus:
    """A status read back: where it lives, which package wrote it, and the status."""

    namespace: str
    release: str
    package: str
    status: EngineStatus


class StatusStore:
    """Reads and writes status ConfigMaps (synchronous; run it in a thread); ``home`` is the namespace for the
    statuses of releases whose namespace does not exist yet."""

    def __init__(self, api: client.ApiClient, home: str = "default"):
        self._api = api
        self.home = home
        self._known: dict[tuple[str, str], tuple[str, str]] = {}  # (ns, release) -> (package, status JSON)
        self._homed: set[tuple[str, str]] = set()  # (ns, release) whose status was last seen in the home namespace

    def _parse(self, obj: dict[str, Any], namespace: str, release: str) -> EngineStatus | None:
        text = (obj.get("data") or {}).get(DATA_KEY)
        if not isinstance(text, str):
            return None
        package = str(((obj.get("metadata") or {}).get("labels") or {}).get(wire.PACKAGE, ""))
        self._known[(namespace, release)] = (package, text)
        try:
            status = EngineStatus.from_json(text)
        except ValueError as exc:
            log.warning("ignoring unreadable engine status %s/%s: %s", namespace, object_name(release), exc)
            return None
        # One persisted before statuses recorded their storage namespace was written beside its release's storage.
        return status if status.storage_namespace else dataclasses.replace(status, storage_namespace=namespace)

    def save(self, namespace: str, release: str, package: str, status: EngineStatus, *, as_user: str = "") -> None:
        """Create or replace the status object (skipped when it holds this status already), as ``as_user``
        when given (the package's ServiceAccount, impersonated). Raises ApiException on API errors."""
        text = status.to_json()
        if self._known.get((namespace, release)) == (package, text):
            return
        key = (namespace, release)
        self._known.pop(key, None)  # unknown until the write succeeded
        api = impersonating(self._api, as_user) if as_user else self._api
        try:
            self._write(api, _body(namespace, object_name(release), package, text, {}))
        except ApiException as exc:
            if exc.status != 404 or namespace == self.home:
                raise
            # The namespace does not exist (yet): keep the status at home, where `status` and the app find it.
            self._write(api, _body(self.home, home_name(namespace, release), package, text,
                                   {RELEASE_NS_LABEL: namespace, RELEASE_LABEL: release}))
            self._homed.add(key)
        else:
            if key in self._homed:  # written beside its release now: the copy at home is stale
                self._delete(self.home, home_name(namespace, release))
                self._homed.discard(key)
        self._known[key] = (package, text)

    def where(self, namespace: str, release: str) -> str:
        """``namespace/name`` of the status object of ``release`` in ``namespace`` as last read or written (the
        home namespace's copy while its release's namespace did not exist)."""
        if (namespace, release) in self._homed:
            return f"{self.home}/{home_name(namespace, release)}"
        return f"{namespace}/{object_name(release)}"

    def delete(self, namespace: str, release: str) -> None:
        """Remove the status object (and a copy in the home namespace); a missing one is fine."""
        self._known.pop((namespace, release), None)
        self._homed.discard((namespace, release))
        self._delete(namespace, object_name(release))
        if namespace != self.home:
            self._delete(self.home, home_name(namespace, release))

    def _delete(self, namespace: str, name: str) -> None:
        try:
            rest.send(self._api, "DELETE", rest.path("v1", "configmaps", namespace, name))
        except ApiException as exc:
            if exc.status != 404:
                raise

    def load(self, namespace: str, release: str) -> EngineStatus | None:
        """The status of one release as stored now (beside its release, else at home), None when none is
        stored. Lists by name (the controller's role may list status objects, not get them). Raises
        ApiException."""
        where = [(namespace, object_name(release))]
        if namespace != self.home:
            where.append((self.home, home_name(namespace, release)))
        for ns, name in where:
            try:
                body = rest.get_json(self._api, rest.path("v1", "configmaps", ns),
                                     [("labelSelector", SELECTOR), ("fieldSelector", f"metadata.name={name}")])
            except ApiException as exc:
                if exc.status in (403, 404) and ns == self.home != namespace:
                    continue  # the home namespace is only a fall-back
                raise
            for obj in body.get("items") or ():
                status = self._parse(obj, namespace, release)
                if status is not None:
                    return status
        return None

    def list(self, namespaces: list[str] | None = None) -> list[StoredStatus]:
        """Every stored status (all namespaces, or the given ones)."""
        found: list[dict[str, Any]] = []
        if namespaces:
            for ns in sorted({*namespaces, self.home}):
                try:
                    body = rest.get_json(self._api, rest.path("v1", "configmaps", ns), [("labelSelector", SELECTOR)])
                except ApiException as exc:
                    if ns in namespaces or exc.status not in (403, 404):
                        raise
                    continue  # the home namespace is only a fall-back
                found.extend(body.get("items") or [])
        else:
            body = rest.get_json(self._api, rest.path("v1", "configmaps"), [("labelSelector", SELECTOR)])
            found.extend(body.get("items") or [])
        beside: dict[tuple[str, str], StoredStatus] = {}
        homed: dict[tuple[str, str], StoredStatus] = {}
        for obj in found:
            meta = obj.get("metadata") or {}
            tags = meta.get("labels") or {}
            if RELEASE_NS_LABEL in tags:  # kept at home: its release's namespace did not exist
                ns, release, into = str(tags[RELEASE_NS_LABEL]), str(tags.get(RELEASE_LABEL, "")), homed
                if namespaces and ns not in namespaces:
                    continue
            else:
                ns = str(meta.get("namespace", ""))
                release, into = str(meta.get("name", "")).removeprefix("helmdeck.status."), beside
            status = self._parse(obj, ns, release)
            if status is not None:
                into[(ns, release)] = StoredStatus(ns, release, str(tags.get(wire.PACKAGE, "")), status)
        self._homed = {key for key in homed if key not in beside}
        for key in homed.keys() - beside.keys():
            self._known.pop(key, None)  # rewritten beside the release as soon as its namespace exists
        return [*beside.values(), *(v for k, v in homed.items() if k not in beside)]

    def _write(self, api: client.ApiClient, body: dict[str, Any]) -> None:
        """Replace or create the status ConfigMap ``body``. Raises ApiException (404 when the namespace does
        not exist)."""
        meta = body["metadata"]
        try:
            rest.send(api, "PUT", rest.path("v1", "configmaps", meta["namespace"], meta["name"]), body)
        except ApiException as exc:
            if exc.status != 404:
                raise
            rest.send(api, "POST", rest.path("v1", "configmaps", meta["namespace"]), body)


def _body(namespace: str, name: str, package: str, text: str, extra: dict[str, str]) -> dict[str, Any]:
    """One status ConfigMap."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {wire.OWNED_BY: wire.MANAGER, STATUS_LABEL: STATUS_VERSION, wire.PACKAGE: package,
                       **extra},
        },
        "data": {DATA_KEY: text},
    }
