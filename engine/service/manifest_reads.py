"""Manifests of stored revisions for the monitors, read together: the reads asked for in one turn of
the event loop (a fresh engine starts a monitor per package at once) share one list per namespace
(:meth:`engine.service.records.ReleaseStore.manifests`) instead of one API call each.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

from kubernetes.client.exceptions import ApiException

from engine.storage.codec import StorageDecodeError, record_name

Revision = tuple[str, int]  # (release name, version)
Reader = Callable[[str, list[Revision]], tuple[dict[Revision, str], dict[Revision, StorageDecodeError]]]


class ManifestReads:
    """``await reads.manifest(namespace, name, version)``: the stored manifest of one revision. Raises
    KeyError (not stored), StorageDecodeError, ApiException, as a read of that record alone would.

    ``reader(namespace, revisions)`` is the blocking batch read (run in a worker thread)."""

    def __init__(self, reader: Reader):
        self._reader = reader
        self._pending: dict[str, dict[Revision, list[asyncio.Future[str]]]] = {}
        self._reads: set[asyncio.Task[None]] = set()  # kept until done (the loop holds tasks weakly)

    async def manifest(self, namespace: str, name: str, version: int) -> str:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[str] = loop.create_future()
        if not self._pending:
            loop.call_soon(self._flush)  # after the other tasks ready in this turn have asked too
        self._pending.setdefault(namespace, {}).setdefault((name, version), []).append(future)
        return await future

    def _flush(self) -> None:
        pending, self._pending = self._pending, {}
        for namespace, waiting in pending.items():
            task = asyncio.ensure_future(self._read(namespace, waiting))
            self._reads.add(task)
            task.add_done_callback(self._reads.discard)

    async def _read(self, namespace: str, waiting: dict[Revision, list[asyncio.Future[str]]]) -> None:
        try:
            found, errors = await asyncio.to_thread(self._reader, namespace, list(waiting))
        except (ApiException, OSError) as exc:
            for futures in waiting.values():
                for future in futures:
                    if not future.done():
                        future.set_exception(exc)
            return
        for revision, futures in waiting.items():
            for future in futures:
                if future.done():
                    continue
                if revision in found:
                    future.set_result(found[revision])
                elif revision in errors:
                    future.set_exception(errors[revision])
                else:
                    future.set_exception(KeyError(f"{namespace}/{record_name(*revision)} is not stored"))
