"""Who owns a release: a helmdeck package, a Flux HelmRelease, or nobody; and Flux's own actions.

Flux's helm-controller labels every object it renders with
``helm.toolkit.fluxcd.io/name`` and ``helm.toolkit.fluxcd.io/namespace``
(its post-renderer, so the labels are in the manifest Helm stores; the
observer notes them as ``Observation.flux_owner`` when it decodes a record). A
release whose manifest carries them is owned by that HelmRelease: an
upgrade, rollback, uninstall or maintenance done here is undone by Flux's
next reconcile, so the app warns and offers Flux's own actions instead:
request a reconcile (the ``reconcile.fluxcd.io/requestedAt`` annotation,
as ``flux reconcile helmrelease``) and suspend/resume (``spec.suspend``, as
``flux suspend|resume helmrelease``), when the HelmRelease CRD is served.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.base.wire import FLUX_RECONCILE_REQUEST, PACKAGE_SET
from engine.kube import rest
from engine.runtime.state import ReleaseView

FLUX_GROUP = "helm.toolkit.fluxcd.io"
FLUX_VERSION = "v2"
FLUX_PLURAL = "helmreleases"
FLUX_OWNED = "FluxOwned"  # a pass's state when a HelmRelease document's release is Flux's: helmdeck does not act


@dataclass(frozen=True)
class Owner:
    """A release's owner: ``kind`` "helmdeck" (a package), "controller" (a Package object a live ``helmdeck
    controller`` reconciles), "flux" (a HelmRelease) or "none"; for "controller", ``replica`` and ``shard``
    as the object's ``status.controller`` says ("" not said, or not sharded). ``package_set``: for "helmdeck"
    without a package here (no name), the package set its storage label names."""

    kind: Literal["helmdeck", "controller", "flux", "none"]
    namespace: str = ""
    name: str = ""
    replica: str = ""
    shard: str = ""
    package_set: str = ""

    @property
    def text(self) -> str:
        """"helmdeck package ns/name", "helmdeck controller, Package ns/name" (then ", replica R, shard S" as
        known), "Flux HelmRelease ns/name" or "none"."""
        if self.kind == "none":
            return "none"
        if self.kind == "controller":
            said = "".join(f", {what} {value}" for what, value in (("replica", self.replica), ("shard", self.shard))
                           if value)
            return f"helmdeck controller, Package {self.namespace}/{self.name}{said}"
        if self.kind == "helmdeck" and not self.name:
            return f"helmdeck package set {self.package_set} (its packages are not loaded here)"
        what = "helmdeck package" if self.kind == "helmdeck" else "Flux HelmRelease"
        return f"{what} {self.namespace}/{self.name}"


NONE = Owner("none")


def owner_of(view: ReleaseView) -> Owner:
    """``view``'s owner: a live controller's when its package is a Package object that controller reconciles, the
    Flux HelmRelease of its document when the cluster holds it (``flux_owned``), else its helmdeck package, else
    the Flux HelmRelease its latest manifest names (``Observation.flux_owner``), else the helmdeck package set
    its storage label names (another folder's, or the packages were not given), else :data:`NONE`."""
    if view.attached is not None:
        return Owner("controller", *view.attached.ref, view.attached.replica, view.attached.shard)
    if view.package is not None and view.flux_owned:
        return Owner("flux", view.package.namespace, view.package.name)
    if view.package is not None:
        return Owner("helmdeck", view.package.namespace, view.package.name)
    flux = view.observation.flux_owner if view.observation is not None else ""
    if flux:
        namespace, _, name = flux.partition("/")
        return Owner("flux", namespace, name)
    labels = view.observation.labels if view.observation is not None else ()
    package_set = next((value for key, value in labels if key == PACKAGE_SET), "")
    if package_set:
        return Owner("helmdeck", package_set=package_set)
    return NONE


class FluxClient:
    """Flux's actions on a HelmRelease through the Kubernetes API (no flux CLI needed).

    Raises ``ApiException`` for API errors (403: the caller needs ``patch``
    on ``helmreleases.helm.toolkit.fluxcd.io``).
    """

    def __init__(self, api: client.ApiClient):
        self._api = api

    def _path(self, namespace: str, name: str) -> str:
        return rest.path(f"{FLUX_GROUP}/{FLUX_VERSION}", FLUX_PLURAL, namespace, name)

    async def present(self) -> bool:
        """True when the cluster serves the HelmRelease API (``helm.toolkit.fluxcd.io/v2``)."""
        def read() -> bool:
            try:
                found = rest.get_json(self._api, f"/apis/{FLUX_GROUP}/{FLUX_VERSION}")
            except ApiException as exc:
                if exc.status == 404:
                    return False
                raise
            return any(isinstance(r, dict) and r.get("kind") == "HelmRelease" for r in found.get("resources") or [])
        return await asyncio.to_thread(read)

    async def owns(self, namespace: str, name: str, *, served: bool | None = None) -> bool:
        """Does Flux own the release of the document ``namespace/name``: the cluster serves the HelmRelease API
        (``served``, when the caller asked :meth:`present` already) and a HelmRelease of that name exists there
        (decided from the cluster, never from the origin labels in a manifest, which helmdeck writes too).
        Raises ApiException for errors other than NotFound (403: the caller needs ``get`` on
        ``helmreleases.helm.toolkit.fluxcd.io``)."""
        if not (await self.present() if served is None else served):
            return False

        def read() -> bool:
            try:
                rest.get_json(self._api, self._path(namespace, name))
            except ApiException as exc:
                if exc.status == 404:
                    return False
                raise
            return True
        return await asyncio.to_thread(read)

    async def act(self, owner: Owner, action: str) -> str:
        """Flux's own ``action`` on ``owner``'s HelmRelease: "reconcile" (request one), "suspend" or
        "resume"; returns what was done in one sentence. Raises LookupError when the cluster does not
        serve the HelmRelease API, ValueError for another action, ApiException for API errors."""
        if action not in ("reconcile", "suspend", "resume"):
            raise ValueError(f"unknown Flux action {action!r}")
        if not await self.present():
            raise LookupError(f"the cluster does not serve Flux's HelmRelease API ({FLUX_GROUP}/{FLUX_VERSION})")
        if action == "reconcile":
            return f"reconcile of {owner.text} requested at {await self.request_reconcile(owner.namespace, owner.name)}"
        await self.set_suspended(owner.namespace, owner.name, action == "suspend")
        return f"{owner.text} {action}d"

    async def request_reconcile(self, namespace: str, name: str, now: datetime | None = None) -> str:
        """Annotate the HelmRelease so Flux reconciles it now; returns the annotation's value (RFC 3339)."""
        value = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
        await self._patch(namespace, name, {"metadata": {"annotations": {FLUX_RECONCILE_REQUEST: value}}})
        return value

    async def set_suspended(self, namespace: str, name: str, suspended: bool) -> None:
        """Suspend (``spec.suspend: true``) or resume the HelmRelease, as ``flux suspend|resume``."""
        await self._patch(namespace, name, {"spec": {"suspend": suspended}})

    async def suspended(self, namespace: str, name: str) -> bool:
        """The HelmRelease's ``spec.suspend``."""
        obj = await asyncio.to_thread(rest.get_json, self._api, self._path(namespace, name))
        return bool((obj.get("spec") or {}).get("suspend"))

    async def _patch(self, namespace: str, name: str, body: dict[str, Any]) -> None:
        await asyncio.to_thread(rest.send, self._api, "PATCH", self._path(namespace, name), body,
                                content_type=rest.MERGE_PATCH)
