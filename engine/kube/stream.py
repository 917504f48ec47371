"""A list+watch in a daemon thread: its lifecycle, its retry backoff and the reading of its event stream.

What the shared resource watches (:mod:`engine.monitor.watch`) and the
Kubernetes Events watches (:mod:`engine.monitor.events`) share. The official client
is synchronous, so each watch runs in its own thread; :meth:`WatchThread.stop`
interrupts an open watch by shutting its response down.
"""

from __future__ import annotations

import contextlib
import json
import logging
import threading
from collections.abc import Callable
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.kube import rest
from engine.kube.client import watch_lines

log = logging.getLogger(__name__)

_FIRST_BACKOFF = 0.2
_MAX_BACKOFF = 5.0
LIST_PAGE = 500  # objects per list page (``limit``), as client-go's reflector pages


def describe(exc: Exception) -> str:
    """One line for a watch's failure: an API error as the server words it (a Status ``message``, which
    names the user and the verb when refused) and its code, anything else as its type and text."""
    if isinstance(exc, ApiException):
        try:
            message = json.loads(exc.body or "").get("message")
        except (ValueError, AttributeError, TypeError):
            message = None
        return f"{message or exc.reason or 'error'} ({exc.status})"
    return f"{type(exc).__name__}: {exc}"


class Gone(Exception):
    """The resourceVersion is too old (HTTP 410): relist."""


def list_all(api: client.ApiClient, path: str, each: Callable[[dict[str, Any]], None], *,
             label_selector: str = "", accept: str = rest.JSON) -> str:
    """Give each item of the collection ``path`` whose labels match ``label_selector`` ("" all) to
    ``each``, a page of :data:`LIST_PAGE` at a time (followed by ``continue``, so no more than a page is
    held here); returns the list's resourceVersion, to watch from. ``accept``:
    :data:`engine.kube.rest.METADATA_LIST` for metadata only. Raises ApiException."""
    token = ""
    selector = [("labelSelector", label_selector)] if label_selector else []
    while True:
        query = [*selector, ("limit", str(LIST_PAGE))] + ([("continue", token)] if token else [])
        body = rest.get_json(api, path, query, accept=accept)
        for item in body.get("items") or ():
            each(item)
        meta = body.get("metadata") or {}
        token = str(meta.get("continue") or "")
        if not token:
            return str(meta.get("resourceVersion", ""))


def open_watch(api: client.ApiClient, path: str, rv: str, *, label_selector: str = "", timeout: int = 300,
               accept: str = rest.JSON) -> Any:
    """Open a watch of the collection ``path`` from resourceVersion ``rv`` (bookmarks allowed; the server
    ends it after ``timeout`` seconds) over the objects ``label_selector`` matches; returns the response for
    :meth:`WatchThread._stream`. ``accept``: :data:`engine.kube.rest.METADATA` for metadata only. Raises
    Gone when ``rv`` is too old (HTTP 410: list again), ApiException otherwise."""
    query = [("watch", "true"), ("resourceVersion", rv), ("allowWatchBookmarks", "true"),
             ("timeoutSeconds", str(timeout))] + ([("labelSelector", label_selector)] if label_selector else [])
    try:
        return rest.get(api, path, query, accept=accept, timeout=(10, timeout + 30))
    except ApiException as exc:
        if exc.status == 410:
            raise Gone() from None
        raise


class WatchThread:
    """The thread of one list+watch; subclasses give :meth:`_relist` and :meth:`_watch` (or their own
    :meth:`_run` loop) and ``what`` (for the log)."""

    def __init__(self, name: str, what: str):
        self.last_error: str | None = None
        self.refused = False  # the last failure was the API server refusing the credentials (401/403)
        self._what = what
        self._stop = threading.Event()
        self._response: Any = None
        self._backoff = _FIRST_BACKOFF
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Ask the thread to end and interrupt its open watch (returns at once)."""
        self._stop.set()
        resp = self._response
        if resp is not None:
            with contextlib.suppress(Exception):
                resp.shutdown()

    def join(self, timeout: float | None = None) -> bool:
        """Wait for the thread; True when it has ended."""
        if self._thread.ident is not None:
            self._thread.join(timeout)
        return not self._thread.is_alive()

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def _run(self) -> None:
        """List, then watch from the list's resourceVersion until stopped; 410 Gone lists again, any other
        failure waits the backoff and watches again from the last resourceVersion seen."""
        rv: str | None = None
        while not self._stop.is_set():
            try:
                if rv is None:
                    rv = self._relist()
                    self._listed()
                rv = self._watch(rv)
                self._healthy()
            except Gone:
                rv = None
            except Exception as exc:  # keep watching (from rv) whatever the transport threw
                if not self._retry(exc):
                    break

    def _relist(self) -> str:
        """List the objects (replacing what is known); returns the list's resourceVersion."""
        raise NotImplementedError

    def _watch(self, rv: str) -> str:
        """One watch request from ``rv``; returns the last resourceVersion seen."""
        raise NotImplementedError

    def _listed(self) -> None:
        """After each list (the first one makes the state meaningful)."""

    def _failed(self) -> None:
        """After a failure unlike the one before (:attr:`last_error` says it), in the watch thread."""

    def _healthy(self) -> None:
        """A watch ended well: the next failure waits the first backoff again."""
        self._backoff = _FIRST_BACKOFF
        self.last_error = None
        self.refused = False

    def _retry(self, exc: Exception) -> bool:
        """After a failure: record it, wait the backoff (doubling, up to 5 s); False when stopping instead."""
        if self._stop.is_set():
            return False
        before = self.last_error
        self.last_error = describe(exc)
        self.refused = isinstance(exc, ApiException) and exc.status in (401, 403)
        log.warning("%s failed: %s; retrying in %.1fs", self._what, self.last_error, self._backoff)
        if self.last_error != before:
            self._failed()
        self._stop.wait(self._backoff)
        self._backoff = min(self._backoff * 2, _MAX_BACKOFF)
        return True

    def _stream(self, resp: Any, rv: str, apply: Callable[[str, dict[str, Any]], None]) -> str:
        """Give each ADDED/MODIFIED/DELETED object of a watch response to ``apply(type, object)``.

        Returns the last resourceVersion seen (``rv`` when none). Raises Gone
        on an ERROR event with code 410, RuntimeError on another ERROR event.
        """
        self._response = resp
        try:
            if self._stop.is_set():
                return rv
            for line in watch_lines(resp):
                if self._stop.is_set():
                    break
                event = json.loads(line)
                etype, obj = event.get("type"), event.get("object") or {}
                if etype == "ERROR":
                    if obj.get("code") == 410:
                        raise Gone()
                    raise RuntimeError(f"watch error: {obj.get('message', obj)}")
                if etype in ("ADDED", "MODIFIED", "DELETED"):
                    apply(etype, obj)
                rv = str((obj.get("metadata") or {}).get("resourceVersion") or rv)
        finally:
            self._response = None
            with contextlib.suppress(Exception):
                resp.release_conn()
        return rv
