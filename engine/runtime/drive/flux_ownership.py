"""Whether Flux owns the release of a HelmRelease document: a HelmRelease of its name exists in the cluster
(Flux serving its API). Such a release is Flux's: helmdeck plans, diffs and shows it and acts only through Flux's
requests (engine.runtime.ledger.owners.FLUX_REQUESTS); the finding is kept in the book (the gate makes the
operator's keys Flux's requests or refuses them, the view says
``flux_owned``) and said in the Ready condition with Flux's ``FluxOwned`` reason."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import time
from collections.abc import Awaitable, Callable, Iterable

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.base.fields import PackageError
from engine.package.flux import HELM_RELEASE
from engine.package.model import PackageSpec
from engine.reconcile import conditions as cond
from engine.reconcile.atomic import PassResult
from engine.reconcile.status import EngineStatus
from engine.resolve.release import resolve
from engine.resolve.values import ValuesFrom
from engine.runtime.ledger.book import ReleaseBook
from engine.runtime.ledger.owners import FLUX_OWNED, FluxClient
from engine.runtime.state import ReleaseKey
from engine.service.types import PackageNotHelm
from engine.sources import SourceError

# How long the answer "does the cluster serve Flux's HelmRelease API" holds: one discovery request per round of
# passes (reconcile --once, a plan, the start), not one per HelmRelease document.
FLUX_DISCOVERY_TTL = 30.0


class FluxOwnership:
    """Flux's ownership of the ``book``'s HelmRelease documents, asked of ``api`` (None: no cluster, never
    owned). ``locate(spec)`` pulls the chart and reads the valuesFrom objects (a release Flux owns is judged
    against the document on a fresh resolution), ``values_from`` composes them."""

    def __init__(self, book: ReleaseBook, api: client.ApiClient | None,
                 locate: Callable[[PackageSpec], Awaitable[object]], values_from: ValuesFrom | None):
        self._book = book
        self._api = api
        self._locate = locate
        self._values_from = values_from
        self._said: dict[ReleaseKey, str] = {}
        self._served: tuple[float, bool] | None = None  # (when asked, answer)

    async def held(self, key: ReleaseKey, spec: PackageSpec) -> PassResult | None:
        """A HelmRelease document whose HelmRelease exists in the cluster (Flux serving its API) is Flux's:
        helmdeck plans, diffs and shows its release and acts only through Flux's requests. None: helmdeck
        acts. When the cluster cannot say, helmdeck does not act either. The finding is kept in the book, and
        the release's standing against the document judged on a fresh resolution."""
        owned, message = await self.owns(spec)
        await self._note(key, spec, owned, message)
        if owned is False:
            self._said.pop(key, None)
            return None
        await self._book.persist(key)
        return self._say(key, PassResult(FLUX_OWNED, "interval" if owned else "error", message))

    async def observe(self, keys: Iterable[ReleaseKey] | None = None) -> None:
        """Find whether Flux owns the release of each HelmRelease document of ``keys`` (default: every package)
        and keep it in the book (the gate and the app read it there), one discovery for them all."""
        for key in list(self._book.packages) if keys is None else list(keys):
            spec = self._book.packages.get(key)
            if spec is not None and spec.kind == HELM_RELEASE:
                await self._note(key, spec, *await self.owns(spec))

    async def _note(self, key: ReleaseKey, spec: PackageSpec, owned: bool | None, message: str) -> None:
        """Keep whether Flux owns ``key``'s release, and say it in the Ready condition: Unknown with Flux's
        ``FluxOwned`` reason (helmdeck does not judge a release it leaves to Flux); dropped when Flux lets go.
        A release Flux owns is judged against the document on a fresh resolution (its chart pulled when the
        repository's interval asks, its valuesFrom read): :func:`engine.reconcile.state.flux_state`."""
        book = self._book
        if owned:
            with contextlib.suppress(PackageError, SourceError, PackageNotHelm):  # then the state stays unknown
                await self._locate(spec)
                await asyncio.to_thread(functools.partial(resolve, spec, values_from=self._values_from))
            book.set_state(key, None)
        status = book.status(key) or EngineStatus()
        ready = cond.get(status.conditions, cond.READY)
        if owned:
            if ready is None or (ready.reason, ready.message) != (FLUX_OWNED, message):
                conds = cond.set_condition(status.conditions, cond.READY, None, FLUX_OWNED, message)
                book.set_status(key, dataclasses.replace(status, conditions=conds))
        elif owned is False and ready is not None and ready.reason == FLUX_OWNED:
            book.set_status(key, dataclasses.replace(
                status, conditions=tuple(c for c in status.conditions if c.type != cond.READY)))
        if owned is not None:
            book.set_flux_owned(key, owned)

    async def owns(self, spec: PackageSpec) -> tuple[bool | None, str]:
        """Whether Flux owns ``spec``'s release (see :meth:`FluxClient.owns`; always False for a Package or
        without a cluster), and the sentence saying so; None when the cluster cannot say (a refused read). The
        discovery of Flux's API is asked once per :data:`FLUX_DISCOVERY_TTL`."""
        api = self._api
        if api is None or spec.kind != HELM_RELEASE:
            return False, ""
        ref = f"HelmRelease {spec.namespace}/{spec.name}"
        flux = FluxClient(api)
        try:
            now = time.monotonic()
            if self._served is None or now - self._served[0] >= FLUX_DISCOVERY_TTL:
                self._served = (now, await flux.present())
            owned = await flux.owns(spec.namespace, spec.name, served=self._served[1])
        except ApiException as exc:
            return None, f"cannot tell whether Flux owns it ({ref}: {exc.status} {exc.reason}): helmdeck does not act"
        return owned, (f"Flux owns it: {ref} exists in the cluster; helmdeck plans and shows it and acts only "
                       "through Flux's requests (u, l, s)" if owned else "")

    def _say(self, key: ReleaseKey, result: PassResult) -> PassResult:
        if self._said.get(key) != result.message:  # said once per change, not at every pass
            self._said[key] = result.message
            self._book.log(key, "reconcile", "info", result.message)
        return result
