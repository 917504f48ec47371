"""Decoding one storage object as the observer does: an observation, or an unreadable record with a typed reason."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from engine.storage.codec import (
    Driver,
    MissingPayloadError,
    RecordMismatchError,
    StorageDecodeError,
    StorageKey,
    decode_payload,
    object_payload,
    parse_record_name,
    release_labels,
)
from engine.storage.observation import Observation, observation_from_release

ChangeType = Literal["ADDED", "MODIFIED", "DELETED"]

@dataclass(frozen=True)
class UnreadableRecord:
    """A storage record that failed to decode.

    ``release`` and ``revision`` come from the object's name (or its
    ``name`` label when the name is not Helm's), since the payload could not
    be trusted; ``code`` is the error class's ``code`` (e.g. ``bad-gzip``),
    ``reason`` the message.
    """

    key: StorageKey
    release: str
    revision: int | None
    code: str
    reason: str

    def __str__(self) -> str:
        return f"{self.key}: {self.reason}"


@dataclass(frozen=True)
class StorageChange:
    """One transition of a storage record.

    ``observation`` is None for deletions and for records that failed to
    decode; then ``unreadable`` says why and ``error`` is its reason.
    """

    type: ChangeType
    key: StorageKey
    observation: Observation | None
    error: str | None = None
    unreadable: UnreadableRecord | None = None



@dataclass(frozen=True)
class ListedRevision:
    """One stored revision as its object's labels say, before its record is decoded: what ``helm list``
    shows first. Helm's storage drivers label every record ``name``, ``owner=helm``, ``status``,
    ``version`` and ``modifiedAt`` (Unix seconds; 0 when absent). ``namespace`` is the storage namespace."""

    namespace: str
    name: str
    version: int
    status: str
    modified_at: int = 0


def listed_revision(obj: Mapping[str, Any]) -> ListedRevision | None:
    """The labels of one storage object (a full object or PartialObjectMetadata) as a
    :class:`ListedRevision`; None when they do not name a release revision."""
    meta = obj.get("metadata") or {}
    labels = meta.get("labels") or {}
    name, version = labels.get("name"), str(labels.get("version", ""))
    if not isinstance(name, str) or not name or not version.isdigit() or not 0 < len(version) < 10:
        return None
    modified = str(labels.get("modifiedAt", ""))
    return ListedRevision(str(meta.get("namespace", "")), name, int(version), str(labels.get("status", "")),
                          int(modified) if modified.isdigit() and len(modified) < 12 else 0)


def key_of(obj: Mapping[str, Any]) -> StorageKey:
    meta = obj.get("metadata") or {}
    return StorageKey(str(meta.get("namespace", "")), str(meta.get("name", "")))


def decode_record(obj: Mapping[str, Any], driver: Driver) -> Observation:
    """Decode one storage object (as the API returns it, a dict) to an observation.

    Raises a :class:`StorageDecodeError` subclass: :class:`MissingPayloadError`,
    the payload errors of ``decode_payload``, the field errors of
    ``observation_from_release``, or :class:`RecordMismatchError` when the
    object's name does not match the release name and revision inside.
    """
    meta = obj.get("metadata") or {}
    key = key_of(obj)
    payload = object_payload(obj, driver)
    if payload is None:
        raise MissingPayloadError(str(key), "record has no 'release' data")
    release = decode_payload(payload, str(key))
    obs = observation_from_release(release, labels=release_labels(meta.get("labels")), storage_key=key,
                                   resource_version=str(meta.get("resourceVersion", "")))
    named = parse_record_name(key.name)
    if named is not None and named != (obs.name, obs.version):
        raise RecordMismatchError(
            str(key), f"object name says {named[0]} v{named[1]}, payload holds {obs.name} v{obs.version}"
        )
    return obs


def unreadable_record(obj: Mapping[str, Any], exc: StorageDecodeError) -> UnreadableRecord:
    key = key_of(obj)
    named = parse_record_name(key.name)
    labels = (obj.get("metadata") or {}).get("labels") or {}
    release, revision = named if named is not None else (str(labels.get("name", key.name)), None)
    return UnreadableRecord(key, release, revision, exc.code, exc.reason)


def decode_object(obj: Mapping[str, Any], driver: Driver) -> tuple[StorageKey, Observation | None, str | None]:
    """Decode one storage object; ``(key, observation, error)``, exactly one of the last two None.

    Never raises for bad records (see :func:`decode_record` for the typed errors).
    """
    try:
        return key_of(obj), decode_record(obj, driver), None
    except StorageDecodeError as exc:
        return key_of(obj), None, exc.reason
