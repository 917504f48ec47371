"""The writes helmdeck makes to Helm release storage: unlocking a stale release, and relabelling one.

A release whose latest revision stays ``pending-install``/``-upgrade``/
``-rollback`` (the helm process died mid-operation) blocks every later helm
action ("another operation is in progress"). Like Flux helm-controller's
unlock, :func:`unlock_release` marks that revision ``failed`` with a
description saying so; helm then proceeds normally.

The record is rewritten the way Helm's storage drivers update one: payload
re-encoded (only ``info.status`` and ``info.description`` change; every
other field, including those helmdeck does not know, is kept in order),
labels ``status`` and ``modifiedAt`` updated, all other labels kept. The
update carries the resourceVersion that was read (optimistic concurrency),
so a record changed in between is never overwritten.

:func:`relabel_release` changes one custom release label on every record of
a release (helmdeck's package-set label, when an older helmdeck wrote another
value). Helm's drivers read a release's custom labels from the object's labels
(helm 3.13+), so the payload is left as it is. :func:`label_revision` sets custom labels on one
record the same way (the manifest checksum of the revision an install or upgrade just wrote).
"""

from __future__ import annotations

import base64
import time
from collections.abc import Mapping

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.kube import rest
from engine.storage.access import RESOURCE
from engine.storage.codec import (
    OWNER_SELECTOR,
    Driver,
    MissingPayloadError,
    StorageKey,
    decode_payload,
    driver_from_env,
    encode_payload,
    object_payload,
    record_name,
)
from engine.storage.observation import PENDING_STATUSES, Observation
from engine.storage.observer import decode_record

UNLOCKED_STATUS = "failed"


class StorageWriteError(RuntimeError):
    """A storage record was not written; the message says why."""


class RecordNotFoundError(StorageWriteError):
    """The revision's record does not exist (any more)."""


class ReleaseNotPendingError(StorageWriteError):
    """The revision is not ``pending-*`` (any more): there is nothing to unlock."""

    def __init__(self, key: StorageKey, status: str):
        super().__init__(f"{key} is {status}, not pending: nothing to unlock")
        self.status = status


class StorageConflictError(StorageWriteError):
    """The record changed between read and write (HTTP 409); read again and decide again."""


def unlock_description(status: str, detail: str = "") -> str:
    """The description helmdeck writes when it unlocks a revision stuck in ``status``."""
    text = f"Release unlocked by helmdeck from stale '{status}' state"
    return f"{text}: {detail}" if detail else text


def unlock_release(
    api: client.ApiClient,
    storage_namespace: str,
    name: str,
    revision: int,
    *,
    driver: Driver | None = None,
    detail: str = "",
    now: float | None = None,
    resource_version: str | None = None,
) -> Observation:
    """Mark revision ``revision`` of release ``name`` failed if it is pending; return the new observation.

    ``driver`` None takes ``HELM_DRIVER`` as Helm does; ``detail`` is
    appended to the description (e.g. how long it was pending); ``now``
    (Unix seconds, default the current time) stamps ``modifiedAt``.
    ``resource_version``, when given, is the version of the record the
    caller judged stale (``Observation.resource_version``): if the record
    has changed since, nothing is written.
    Raises :class:`RecordNotFoundError`, :class:`ReleaseNotPendingError`,
    :class:`StorageConflictError`, ``StorageDecodeError`` when the record is
    unreadable, and ``ApiException`` for other API errors (e.g. 403: the
    caller needs ``get`` and ``update`` on the driver's resource).
    """
    driver = driver or driver_from_env()
    key = StorageKey(storage_namespace, record_name(name, revision))
    path = rest.path("v1", RESOURCE[driver], key.namespace, key.name)
    try:
        obj = rest.get_json(api, path)
    except ApiException as exc:
        if exc.status == 404:
            raise RecordNotFoundError(f"{key} does not exist") from None
        raise
    if resource_version is not None and obj["metadata"].get("resourceVersion") != resource_version:
        raise StorageConflictError(f"{key} changed since it was judged stale")
    current = decode_record(obj, driver)
    if current.status not in PENDING_STATUSES:
        raise ReleaseNotPendingError(key, current.status)
    payload = object_payload(obj, driver)
    if payload is None:  # decode_record has checked; this keeps the type checker informed
        raise MissingPayloadError(str(key), "record has no 'release' data")
    release = decode_payload(payload, str(key))
    info = release["info"]
    info["status"] = UNLOCKED_STATUS
    info["description"] = unlock_description(current.status, detail)
    encoded = encode_payload(release)
    obj["data"] = {
        **(obj.get("data") or {}),
        "release": base64.b64encode(encoded.encode()).decode() if driver == "secret" else encoded,
    }
    meta = obj["metadata"]
    meta["labels"] = {
        **(meta.get("labels") or {}),
        "status": UNLOCKED_STATUS,
        "modifiedAt": str(int(time.time() if now is None else now)),
    }
    try:
        written = rest.send(api, "PUT", path, obj)
    except ApiException as exc:
        if exc.status == 409:
            raise StorageConflictError(f"{key} changed while it was being unlocked") from None
        if exc.status == 404:
            raise RecordNotFoundError(f"{key} was deleted while it was being unlocked") from None
        raise
    return decode_record(written, driver)


def relabel_release(
    api: client.ApiClient,
    storage_namespace: str,
    name: str,
    label: str,
    old: str,
    new: str,
    *,
    driver: Driver | None = None,
) -> list[tuple[Observation, Observation]]:
    """Set custom label ``label`` from ``old`` to ``new`` on every record of release ``name``; return each
    relabelled record's observation before and after, oldest revision first.

    Only records carrying ``label=old`` are touched (server-side selector); each update carries the
    resourceVersion it read. Raises :class:`StorageConflictError` when a record changed in between
    (the records before it stay relabelled: calling again finishes the job), ``StorageDecodeError``
    for an unreadable record and ``ApiException`` for other API errors (the caller needs ``list`` and
    ``update`` on the driver's resource).
    """
    driver = driver or driver_from_env()
    selector = f"{OWNER_SELECTOR},name={name},{label}={old}"
    items = rest.get_json(api, rest.path("v1", RESOURCE[driver], storage_namespace),
                          [("labelSelector", selector)]).get("items") or []
    done: list[tuple[Observation, Observation]] = []
    for obj in sorted(items, key=lambda o: int(o["metadata"].get("labels", {}).get("version", "0") or 0)):
        before = decode_record(obj, driver)
        obj["metadata"]["labels"][label] = new
        try:
            path = rest.path("v1", RESOURCE[driver], storage_namespace, obj["metadata"]["name"])
            written = rest.send(api, "PUT", path, obj)
        except ApiException as exc:
            if exc.status in (404, 409):
                raise StorageConflictError(f"{storage_namespace}/{obj['metadata']['name']} changed while it "
                                           "was being relabelled") from None
            raise
        done.append((before, decode_record(written, driver)))
    return done


def label_revision(
    api: client.ApiClient,
    storage_namespace: str,
    name: str,
    revision: int,
    labels: Mapping[str, str],
    *,
    driver: Driver | None = None,
) -> Observation:
    """Set custom ``labels`` on revision ``revision`` of release ``name``'s record; return its observation.

    One merge patch of the object's labels (helm 3.13+ reads a release's custom labels from there; the
    payload is left as it is), so a label computed from what helm wrote (the manifest checksum) costs no
    second helm run. Raises :class:`RecordNotFoundError` when the record does not exist,
    ``StorageDecodeError`` when the answer is unreadable and ``ApiException`` for other API errors (the
    caller needs ``patch`` on the driver's resource).
    """
    driver = driver or driver_from_env()
    key = StorageKey(storage_namespace, record_name(name, revision))
    path = rest.path("v1", RESOURCE[driver], key.namespace, key.name)
    try:
        written = rest.send(api, "PATCH", path, {"metadata": {"labels": dict(labels)}},
                            content_type=rest.MERGE_PATCH)
    except ApiException as exc:
        if exc.status == 404:
            raise RecordNotFoundError(f"{key} does not exist") from None
        raise
    return decode_record(written, driver)
