"""Decoding the pages of a storage list in worker processes, beside the observer's list thread.

A record takes ~0.1 ms to decode (base64, gunzip, JSON, the observation): 1 s for 10,000. In the
observer's thread that second is spent holding the GIL the app's UI thread needs, and the two slow
each other down several times over (docs/ARCHITECTURE.md, issue 24's profile). Here each page of a
list (after the first) is decoded in a worker process while the list thread fetches the next page; the
list thread keeps only the fetching, the bookkeeping and the callbacks.

Workers are forked, not spawned: they only run :func:`decode_page` (pure functions: base64, zlib, json,
the observation), so they need none of the parent's threads, and a spawned worker would import the
program's main module (the whole app) first. A pool lives for one list and is shut down after it.
"""

from __future__ import annotations

import multiprocessing
import os
from collections.abc import Iterable, Mapping
from concurrent.futures import Executor, ProcessPoolExecutor
from dataclasses import dataclass
from typing import Any

from engine.storage.codec import Driver, StorageKey
from engine.storage.observation import Observation
from engine.storage.records import UnreadableRecord, decode_entry, key_of


@dataclass(frozen=True)
class DecodedRecord:
    """One record of a list page, decoded: exactly one of ``observation`` and ``unreadable`` is set."""

    key: StorageKey
    resource_version: str
    uid: str
    observation: Observation | None
    unreadable: UnreadableRecord | None

    def decoded(self) -> tuple[Observation | None, UnreadableRecord | None]:
        """``(observation, unreadable)``, as :func:`~engine.storage.records.decode_entry` returns them."""
        return self.observation, self.unreadable


def slim(obj: Mapping[str, Any]) -> dict[str, Any]:
    """What decoding a storage object reads of it (its name, namespace, labels, versions, type and the
    ``release`` datum): a smaller message to a worker than the whole object with its managedFields."""
    meta = obj.get("metadata") or {}
    data = obj.get("data") or {}
    return {
        "metadata": {k: meta[k] for k in ("name", "namespace", "labels", "resourceVersion", "uid") if k in meta},
        "type": obj.get("type"),
        "data": {"release": data["release"]} if "release" in data else {},
    }


def decode_page(objects: Iterable[Mapping[str, Any]], driver: Driver) -> list[DecodedRecord]:
    """Decode every storage object of a page (as :func:`slim` makes them); never raises for bad records."""
    out = []
    for obj in objects:
        meta = obj.get("metadata") or {}
        observation, unreadable = decode_entry(obj, driver)
        out.append(DecodedRecord(key_of(obj), str(meta.get("resourceVersion", "")), str(meta.get("uid", "")),
                                 observation, unreadable))
    return out


def page_pool() -> Executor | None:
    """A pool of forked workers, one fewer than the cores (at most 4), or None where processes cannot be
    forked or there is one core: the caller then decodes in its own thread."""
    workers = min(4, (os.cpu_count() or 1) - 1)
    if workers < 1 or "fork" not in multiprocessing.get_all_start_methods():
        return None
    return ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"))
