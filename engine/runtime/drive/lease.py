"""One acting engine per cluster and package set: a coordination.k8s.io Lease.

Leader election as client-go's: the holder renews ``renewTime`` every
``retry`` seconds; another candidate takes over when it has seen the same
record unchanged for longer than ``duration`` seconds (measured on its own
monotonic clock, so clock skew between machines does not matter). Writes use
the read resourceVersion, so two candidates never both win. On a clean stop
the holder gives the lease up at once.

Every holder labels the Lease with what it is (``wire.ROLE``: ``app``, ``reconcile``, ``controller``), so one
kept waiting can say who holds it and what to do (:func:`holder_said`, :func:`held_fix`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
import logging
import os
import re
import secrets
import socket
import time
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException
from urllib3.exceptions import HTTPError

from engine.base import wire
from engine.kube import rest

log = logging.getLogger(__name__)

OnChange = Callable[[str, bool], None]  # (holder identity, this instance leads)
WRITES_KEPT = 256  # the Lease writes remembered for lapsed(since=...): minutes of them at any renew interval



@dataclass(frozen=True)
class LeaseConfig:
    """Where the engine lease lives; ``duration`` and ``retry`` in seconds."""

    name: str
    namespace: str = "default"
    duration: float = 15.0
    retry: float = 2.0
    identity: str | None = None
    labels: tuple[tuple[str, str], ...] = ()  # besides the managed-by label (a controller's: wire.ROLE)
    annotations: tuple[tuple[str, str], ...] = ()


# What each helmdeck process that takes the engine lease labels it with (wire.ROLE), and how it is named.
APP, RECONCILE = "app", "reconcile"
_ROLE_WORDS = {APP: "helmdeck's app", RECONCILE: "helmdeck reconcile", wire.CONTROLLER: "a helmdeck controller"}


def holder_said(identity: str, role: str) -> str:
    """The holder of the engine lease in words: what it is, from its Lease's ``wire.ROLE`` label (an older
    helmdeck wrote none: "another helmdeck instance"), and its identity (``<host>-<pid>-<hex>``, a pod's name)."""
    what = _ROLE_WORDS.get(role, "another helmdeck instance")
    return f"{what} ({identity})" if identity else what


def held_fix(role: str) -> str:
    """What to do when the engine lease is held by a ``role`` that renews it: stop the holder, or act beside it
    with ``--no-lease`` (then both may act on the same releases)."""
    stop = {APP: "quit the app (q), or let it reconcile", RECONCILE: "stop that reconcile (ctrl+c)",
            wire.CONTROLLER: "the controller reconciles these packages: stop it (scale it to 0)"}.get(
                role, "stop it")
    return f"{stop}, or pass --no-lease to act beside it (both may then act on the same releases)"


def default_identity() -> str:
    """``<host>-<pid>-<4 hex>``: unique per process, readable in the app's header."""
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(2)}"


def lease_name_for(packages_dir: str) -> str:
    """A Lease name for a package set: ``helmdeck-<folder name>`` made a valid object name."""
    stem = re.sub(r"[^a-z0-9-]+", "-", packages_dir.rstrip("/").rsplit("/", 1)[-1].lower()).strip("-")
    return f"helmdeck-{stem or 'packages'}"[:63].rstrip("-")


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def age(when: dt.datetime | str | None) -> float:
    """Seconds since ``when`` (an RFC 3339 time as the API gives it, or a datetime; 0 when unknown)."""
    if when is None:
        return 0.0
    if isinstance(when, str):
        try:
            when = dt.datetime.fromisoformat(when.replace("Z", "+00:00"))
        except ValueError:
            return 0.0
    if when.tzinfo is None:
        when = when.replace(tzinfo=dt.UTC)
    return (_now() - when).total_seconds()


def silent_longer(writes: Sequence[float], since: float, now: float, limit: float) -> bool:
    """Was there a stretch longer than ``limit`` seconds without a write between ``since`` and ``now``? ``writes``:
    the times of the writes kept, oldest first (one clock, the caller's). Counted from the last write at or
    before ``since``; True when none is kept from then (nothing proves the Lease was held)."""
    last = next((w for w in reversed(writes) if w <= since), None)
    if last is None:
        return True
    for when in (*(w for w in writes if w > since), now):
        if when - last > limit:
            return True
        last = max(last, when)
    return False


class LeaseElector:
    """Competes for the Lease ``namespace/name``; reports holder changes through ``on_change``."""

    def __init__(
        self,
        api: client.ApiClient,
        name: str,
        namespace: str = "default",
        *,
        identity: str | None = None,
        duration: float = 15.0,
        retry: float = 2.0,
        on_change: OnChange | None = None,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
    ):
        # Dict bodies are accepted by the client; typed as Any to pass them.
        self._api = api
        self.name = name
        self.namespace = namespace
        self.identity = identity or default_identity()
        self.duration = duration
        self.retry = retry
        self._on_change = on_change
        self.labels = {wire.OWNED_BY: wire.MANAGER, **(labels or {})}
        self.annotations = dict(annotations or {})  # written with the next renewal
        self.holder = ""
        self.holder_role = ""  # the holder's wire.ROLE label ("" when it wrote none)
        self.leader = False
        # Set once another holder is seen renewing the Lease (its renewTime moved): it is alive, and will not let
        # the Lease run out by itself (engine.runtime.engine.Engine.wait_for_lease stops waiting then).
        self.holder_renews = asyncio.Event()
        self._renewing = ""  # the other holder last seen renewing (written in the Lease's thread)
        self._seen: tuple[str, str] | None = None  # (holder, renewTime) last seen
        self._seen_at = 0.0
        self._renewed = (0.0, 0.0)  # (monotonic, wall) time of this instance's last write of the Lease
        self._writes: deque[tuple[float, float]] = deque(maxlen=WRITES_KEPT)  # its recent writes, oldest first
        self._round = asyncio.Lock()  # one election round at a time (the loop's, confirm's)
        # Its own thread: a renewal never waits behind the engine's other blocking calls in the shared pool.
        self._thread = ThreadPoolExecutor(1, thread_name_prefix=f"lease-{name}")
        self._task: asyncio.Task[None] | None = None
        self.last_error: str | None = None
        self.decided = asyncio.Event()  # set after the first round: holder and leader are known


    def advertise(self, annotations: Mapping[str, str]) -> None:
        """Annotations the Lease carries from its next renewal (e.g. where the controller's metrics are served)."""
        self.annotations.update(annotations)

    def start(self) -> None:
        self._task = asyncio.create_task(self._loop(), name=f"lease-{self.name}")

    async def stop(self, *, release: bool = True) -> None:
        """Stop competing; with ``release`` a leader gives the lease up so another takes over at once."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        if release and self.leader:
            with contextlib.suppress(ApiException, OSError, HTTPError):
                await asyncio.to_thread(self._release)
            self._set(holder="", leader=False)
        self._thread.shutdown(wait=False)

    async def _loop(self) -> None:
        while True:
            await self._one_round()
            self.decided.set()
            await asyncio.sleep(self.retry)

    async def _one_round(self) -> None:
        async with self._round:
            try:
                outcome = await asyncio.get_running_loop().run_in_executor(self._thread, self._try_once)
                if outcome is not None:
                    self._set(*outcome)  # on the loop: callbacks may touch loop-bound state
                if not self.leader and self.holder and self._renewing == self.holder:
                    self.holder_renews.set()
                self.last_error = None
            except (ApiException, OSError, HTTPError) as exc:  # HTTPError: urllib3's, the API server unreachable
                what = f"API error {exc.status} {exc.reason}" if isinstance(exc, ApiException) else str(exc)
                self.last_error = f"lease {self.namespace}/{self.name}: {what}"
                log.warning("%s", self.last_error)
                if self.leader and time.monotonic() - self._seen_at > self.duration:
                    self._set(self.holder, False)  # could not renew in time: stop acting

    def lapsed(self, limit: float, since: tuple[float, float] | None = None) -> bool:
        """More than ``limit`` seconds since this instance last wrote the Lease, by the monotonic clock or the
        wall clock, whichever says more: the process was stopped (SIGSTOP), paused (a long GC, a machine so loaded
        it is not scheduled) or cut off (a partition), or its machine suspended (the monotonic clock stands still
        then, the wall clock does not). With ``since`` (a ``(time.monotonic(), time.time())`` pair): more than
        ``limit`` seconds without a write at any moment from then to now, so a renewal made after the silence
        (the Lease's own thread may run first when the process wakes) does not hide it."""
        now = (time.monotonic(), time.time())
        if since is None:
            return max(now[0] - self._renewed[0], now[1] - self._renewed[1]) > limit
        writes = list(self._writes)  # a copy: the Lease's thread appends meanwhile
        return any(silent_longer([w[clock] for w in writes], since[clock], now[clock], limit) for clock in (0, 1))

    async def confirm(self) -> bool:
        """Run one election round now (renew, or learn the Lease is lost); True when this instance holds it."""
        await self._one_round()
        return self.leader

    def _set(self, holder: str, leader: bool) -> None:
        changed = (holder, leader) != (self.holder, self.leader)
        self.holder, self.leader = holder, leader
        if changed:
            log.info("lease %s/%s held by %s (leader: %s)", self.namespace, self.name, holder or "nobody", leader)
            if self._on_change is not None:
                self._on_change(holder, leader)

    def _path(self, name: str | None = None) -> str:
        return rest.path("coordination.k8s.io/v1", "leases", self.namespace, name)

    def _read(self) -> dict[str, Any]:
        return rest.get_json(self._api, self._path(self.name))

    def _body(self, rv: str | None, transitions: int, acquire: str | None) -> dict[str, Any]:
        now = _now()
        meta: dict[str, Any] = {"name": self.name, "namespace": self.namespace, "labels": dict(self.labels)}
        if self.annotations:
            meta["annotations"] = dict(self.annotations)
        if rv:
            meta["resourceVersion"] = rv
        return {
            "apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta,
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": max(1, round(self.duration)),
                "acquireTime": acquire or now.isoformat(timespec="microseconds").replace("+00:00", "Z"),
                "renewTime": now.isoformat(timespec="microseconds").replace("+00:00", "Z"),
                "leaseTransitions": transitions,
            },
        }

    def _try_once(self) -> tuple[str, bool] | None:
        """One election round (blocking API calls); returns (holder, leader), None when undecided."""
        try:
            lease = self._read()
        except ApiException as exc:
            if exc.status != 404:
                raise
            try:
                rest.send(self._api, "POST", self._path(), self._body(None, 0, None))
            except ApiException as create_exc:
                if create_exc.status == 409:
                    return None  # someone else created it first; next round reads it
                raise
            self._seen, self._seen_at = (self.identity, ""), time.monotonic()
            self._wrote(self._seen_at)
            return (self.identity, True)
        spec = lease.get("spec") or {}
        holder = str(spec.get("holderIdentity") or "")
        renew = str(spec.get("renewTime") or "")
        labels = (lease.get("metadata") or {}).get("labels") or {}
        self.holder_role = str(labels.get(wire.ROLE) or "")
        if (holder, renew) != self._seen:
            if self._seen is not None and holder and holder == self._seen[0] and holder != self.identity:
                self._renewing = holder  # the same holder wrote it again since the last round: alive
            self._seen, self._seen_at = (holder, renew), time.monotonic()
        expired = (not holder or time.monotonic() - self._seen_at > self.duration
                   # Renewed long ago by our own clock too (far beyond any clock skew): a dead holder,
                   # so a restart after a crash need not wait a whole lease duration.
                   or age(spec.get("renewTime")) > 4 * self.duration + 30)
        if holder != self.identity and not expired:
            return (holder, False)
        transitions = int(spec.get("leaseTransitions") or 0) + (0 if holder == self.identity else 1)
        acquire = str(spec.get("acquireTime") or "") or None if holder == self.identity else None
        rv = str((lease.get("metadata") or {}).get("resourceVersion") or "") or None
        try:
            rest.send(self._api, "PUT", self._path(self.name), self._body(rv, transitions, acquire))
        except ApiException as exc:
            if exc.status == 409:  # another candidate won this round
                return None
            raise
        self._seen_at = time.monotonic()
        self._wrote(self._seen_at)
        return (self.identity, True)

    def _wrote(self, mono: float) -> None:
        self._renewed = (mono, time.time())
        self._writes.append(self._renewed)

    def _release(self) -> None:
        lease = self._read()
        spec = lease.setdefault("spec", {})
        if spec.get("holderIdentity") != self.identity:
            return
        for field in ("holderIdentity", "renewTime", "acquireTime"):
            spec.pop(field, None)
        rest.send(self._api, "PUT", self._path(self.name), lease)
