"""Package-set adoption: before a pass acts on a release, the release must be this package set's. One labelled by
another set is refused; one labelled with this folder's old identity (an older helmdeck's ``helmdeck-<base
name>``) is relabelled, every record, without a new revision (:mod:`engine.runtime.package_set`)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.base import wire
from engine.reconcile.action import ActionContext, ObservedReleases, record
from engine.reconcile.request import Request
from engine.runtime.ledger.book import ReleaseBook
from engine.runtime.package_set import OtherPackageSet, PackageSet
from engine.storage.codec import Driver
from engine.storage.observation import Observation
from engine.storage.writer import StorageWriteError, relabel_release

# Relabels a release's records from one package-set label value to another; each record before and after.
Relabel = Callable[[Observation, str, str], Awaitable[list[tuple[Observation, Observation]]]]


def storage_relabeler(api: client.ApiClient, driver: Driver) -> Relabel:
    """The adoption's ``relabel``: set the package-set label of every record of ``obs``'s release from ``old`` to
    ``new`` (engine.storage.writer.relabel_release, off the event loop)."""
    async def relabel(obs: Observation, old: str, new: str) -> list[tuple[Observation, Observation]]:
        storage_ns = obs.storage_key.namespace if obs.storage_key else obs.namespace
        return await asyncio.to_thread(relabel_release, api, storage_ns, obs.name, wire.PACKAGE_SET, old, new,
                                       driver=driver)
    return relabel


class Adoption:
    """The releases of ``package_set`` (None: no set, every release may be acted on); ``relabel`` (None:
    none is relabelled) writes storage under ``ctx``; the book logs what was done."""

    def __init__(self, book: ReleaseBook, ctx: ActionContext, package_set: PackageSet | None,
                 relabel: Relabel | None):
        self._book = book
        self._ctx = ctx
        self._package_set = package_set
        self._relabel = relabel

    async def adopt(self, req: Request, latest: Observation | None) -> None:
        """Make sure the release is this package set's before a pass acts on it.

        A release labelled by another package set is refused (PackageError naming the set and the
        fix): two folders never act on one release. One labelled with this folder's old identity
        (an older helmdeck's ``helmdeck-<base name>``) is relabelled now, every record, without a
        new revision; the history's snapshots of those records follow when they were ours (a
        release changed outside helmdeck stays Unmanaged).
        """
        pset = self._package_set
        label = latest.label_map.get(wire.PACKAGE_SET) if latest is not None else None
        if pset is None or latest is None or not label or label == pset.identity:
            return
        ns, name = req.key
        if not pset.adopts(label):
            raise OtherPackageSet(
                req.spec.file, "metadata.name",
                f"release {ns}/{name} belongs to package set {label!r}, not to this folder's ({pset.identity!r})",
                f"declare each release in one package set; if this folder is that set moved, "
                f"run with --package-set {label}")
        if self._relabel is None:
            return
        try:
            async with ObservedReleases(self._ctx, req) as seen:
                changed = await self._relabel(latest, label, pset.identity)
        except (StorageWriteError, ApiException) as exc:  # retried on the next pass
            self._book.log(req.key, "reconcile", "failed", f"relabelling the release for its package set: {exc}")
            return
        after = {new.version: seen.observed.get(new.version, new) for old, new in changed
                 if any(snap.verifies(old) for snap in req.status.history)}
        record(req, after, "adopt")  # labels only: each snapshot keeps its action and OCI digest
        self._book.log(req.key, "reconcile", "info",
                       f"adopted: {len(changed)} storage record(s) relabelled from package set {label!r} "
                       f"(an older helmdeck's name for this folder) to {pset.identity!r}")
