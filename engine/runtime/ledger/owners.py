"""Who owns a release: a helmdeck package, a Flux HelmRelease, or nobody; and the one decision of what the
operator's keys do on a release Flux owns.

Flux's helm-controller labels every object it renders with
``helm.toolkit.fluxcd.io/name`` and ``helm.toolkit.fluxcd.io/namespace``
(its post-renderer, so the labels are in the manifest Helm stores; the
observer notes them as ``Observation.flux_owner`` when it decodes a record). A
release whose manifest carries them, whose HelmRelease the app sees in the cluster
(:mod:`engine.runtime.cockpit.flux`), or whose HelmRelease document is in the folder and in the cluster, is
owned by that HelmRelease. An upgrade, rollback, uninstall or maintenance done here would be undone by Flux's
next reconcile, so on such a release the operator's keys are Flux's own requests (:data:`FLUX_REQUESTS`, as
the flux CLI makes them: :meth:`FluxClient.request`) or refused saying what Flux offers instead
(:func:`flux_refusal`).
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from engine.base.wire import FLUX_FORCE_REQUEST, FLUX_RECONCILE_REQUEST, FLUX_RESET_REQUEST, PACKAGE_SET
from engine.kube import rest
from engine.runtime.state import ReleaseView

FLUX_GROUP = "helm.toolkit.fluxcd.io"
FLUX_VERSION = "v2"
FLUX_PLURAL = "helmreleases"
FLUX_OWNED = "FluxOwned"  # a pass's state when a HelmRelease document's release is Flux's: helmdeck does not act

# The operator's actions on a release Flux owns that are Flux's own requests, by the app's action name:
# upgrade (u) as ``flux reconcile helmrelease --force``, unlock (l) as ``--reset`` (Flux's failure counters
# reset), suspend (s) as ``flux suspend|resume helmrelease``. The one place this is decided: the gate asks it,
# the engine's doors make the request (FluxClient.request).
FLUX_REQUESTS = {"upgrade": "force", "unlock": "reset", "suspend": "suspend"}
_ANNOTATION = {"force": FLUX_FORCE_REQUEST, "reset": FLUX_RESET_REQUEST}


def flux_refusal(action: str, ref: str) -> str | None:
    """Why the operator's ``action`` is not done on a release HelmRelease ``ref`` (``namespace/name``) owns, as
    what Flux offers instead; None when it is done (a Flux request, :data:`FLUX_REQUESTS`, or what Flux does
    not undo: test (helm-controller's release digest leaves test hooks out: internal/release/observation.go
    ``IgnoreHookTestEvents``), helmdeck's own monitor and cancel, diff, render, versions, the queue's own pass)."""
    if action == "rollback":
        return (f"Flux rolls back only as upgrade remediation (HelmRelease {ref}: spec.upgrade.remediation, "
                "strategy rollback); a hand rollback would be upgraded back on its next reconcile. To go back, "
                "change the chart version or values in Git; u requests a forced upgrade, l a reset of its "
                "failure counters")
    if action == "uninstall":
        return (f"Flux installs it again on its next reconcile: delete HelmRelease {ref} to uninstall (from Git, "
                "or flux delete helmrelease); s suspends it")
    if action == "maintenance":
        return (f"maintenance is helmdeck's; Flux's HelmRelease {ref} would undo it: suspend it (s) to have Flux "
                "leave the release alone")
    return None


def flux_unserved_reason(ref: str) -> str:
    """Why Flux's request on HelmRelease ``ref`` (``namespace/name``) cannot be written: the cluster does not
    serve the HelmRelease API (no Flux CRDs), though the release carries helm-controller's labels."""
    return (f"this cluster does not serve the HelmRelease API ({FLUX_GROUP}/{FLUX_VERSION}), so Flux's requests "
            f"on HelmRelease {ref} cannot be written: the release carries helm-controller's labels, but Flux is not "
            "installed here (flux check tells; is this the cluster Flux runs in?). Install Flux (flux install), "
            "or act on the release with helm itself")


def flux_missing_reason(ref: str) -> str:
    """Why Flux's request on HelmRelease ``ref`` cannot be written: the API is served, the object is not there."""
    return (f"HelmRelease {ref} is not in the cluster (deleted?), so Flux's requests on it cannot be written: the "
            "release carries helm-controller's labels from when Flux managed it. Apply the HelmRelease again "
            "(from Git, flux reconcile kustomization), or act on the release with helm itself")


def flux_suspended_reason(ref: str) -> str:
    """Why a reconcile is not requested of the suspended HelmRelease ``ref`` (``namespace/name``): the flux CLI
    refuses it too (fluxcd/flux2 cmd/flux/reconcile.go ``reconcileCommand.run``: "resource is suspended")."""
    return f"HelmRelease {ref} is suspended: Flux's reconcile refuses it (as flux reconcile does); resume it (s)"


def flux_token(now_ns: int | None = None) -> str:
    """A request's token as the flux CLI writes it: ``time.Now().Format(time.RFC3339Nano)`` (fluxcd/flux2
    cmd/flux/reconcile.go ``requestReconciliation``), in UTC: nanoseconds, trailing zeros dropped (no
    fraction when it is zero), ``Z``. ``now_ns``: Unix nanoseconds (default now)."""
    ns = time.time_ns() if now_ns is None else now_ns
    seconds, fraction = divmod(ns, 1_000_000_000)
    text = datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    digits = f"{fraction:09d}".rstrip("0")
    return f"{text}.{digits}Z" if digits else f"{text}Z"


class FluxRefused(Exception):
    """A Flux request the flux CLI would refuse too (a suspended HelmRelease asked to reconcile), or one that
    cannot be written (the HelmRelease API not served, the object not there)."""


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
            # True for another folder's set and for this folder's release whose package file was removed alike.
            return f"helmdeck package set {self.package_set} (no package loaded here declares it)"
        what = "helmdeck package" if self.kind == "helmdeck" else "Flux HelmRelease"
        return f"{what} {self.namespace}/{self.name}"


NONE = Owner("none")


def has_key(owner: Owner, action: str) -> bool:
    """Does the row of a release ``owner`` owns have the operator's ``action`` key (the app's footer shows it, as
    k9s's footer shows the keys of the view at hand): a Flux row lacks what Flux would undo (:func:`flux_refusal`:
    rollback, uninstall, maintenance); every other key stays, refused or not for reasons of the moment
    (pending, busy, no package: the gate's), which help and the palette word."""
    return owner.kind != "flux" or flux_refusal(action, f"{owner.namespace}/{owner.name}") is None


def owner_of(view: ReleaseView) -> Owner:
    """``view``'s owner: a live controller's when its package is a Package object that controller reconciles, the
    HelmRelease the app sees owning it in the cluster (``view.flux``), the Flux HelmRelease of its document when
    the cluster holds it (``flux_owned``), else its helmdeck package, else the Flux HelmRelease its latest
    manifest names (``Observation.flux_owner``), else the helmdeck package set its storage label names (another
    folder's, or the packages were not given), else :data:`NONE`."""
    if view.attached is not None:
        return Owner("controller", *view.attached.ref, view.attached.replica, view.attached.shard)
    if view.flux is not None:
        return Owner("flux", *view.flux.ref)
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

    async def request(self, namespace: str, name: str, request: str, *, suspend: bool = True) -> str:
        """Flux's own ``request`` on HelmRelease ``namespace/name``, written as the flux CLI writes it; returns
        what was written in one sentence.

        - ``force`` / ``reset``: ``reconcile.fluxcd.io/requestedAt`` and ``forceAt`` (``resetAt``) with one
          token, as ``flux reconcile helmrelease --force`` (``--reset``): helm-controller acts on them only
          when equal to ``requestedAt`` (api/v2 annotations.go ``ShouldHandleForceRequest``,
          ``ShouldHandleResetRequest``: fluxcd/pkg/apis/meta ``HandleAnnotationRequest``); fluxcd/flux2
          cmd/flux/reconcile.go
          ``requestReconciliation`` (the token :func:`flux_token`), which refuses a suspended object first
          (``reconcileCommand.run``: "resource is suspended");
        - ``suspend``: ``spec.suspend: true`` (``suspend`` True), or resumed (the field removed, as the CLI's
          merge patch of ``Suspend = false`` with ``omitempty``), as ``flux suspend|resume helmrelease``.

        Raises :class:`FluxRefused` (a suspended object asked to reconcile; the API's 404 worded: the cluster
        does not serve the HelmRelease API, :func:`flux_unserved_reason`, or no such HelmRelease,
        :func:`flux_missing_reason`), ValueError for another request, ApiException (403: the caller needs
        ``get`` and ``patch`` on ``helmreleases.helm.toolkit.fluxcd.io``)."""
        if request not in _ANNOTATION and request != "suspend":
            raise ValueError(f"unknown Flux request {request!r}")
        try:
            return await self._request(namespace, name, request, suspend)
        except ApiException as exc:
            if exc.status != 404:
                raise
            ref = f"{namespace}/{name}"
            # The same 404 for both: discovery tells an API not served from an object not there
            raise FluxRefused(flux_missing_reason(ref) if await self.present() else flux_unserved_reason(ref)) \
                from None

    async def _request(self, namespace: str, name: str, request: str, suspend: bool) -> str:
        if request == "suspend":
            await self._patch(namespace, name, {"spec": {"suspend": True if suspend else None}})
            return f"spec.suspend: {'true' if suspend else 'false'}"
        obj = await asyncio.to_thread(rest.get_json, self._api, self._path(namespace, name))
        if (obj.get("spec") or {}).get("suspend") is True:
            raise FluxRefused(flux_suspended_reason(f"{namespace}/{name}"))
        token = flux_token()
        notes = {FLUX_RECONCILE_REQUEST: token, _ANNOTATION[request]: token}
        await self._patch(namespace, name, {"metadata": {"annotations": notes}})
        return ", ".join(f"{k}={v}" for k, v in notes.items())

    async def _patch(self, namespace: str, name: str, body: dict[str, Any]) -> None:
        await asyncio.to_thread(rest.send, self._api, "PATCH", self._path(namespace, name), body,
                                content_type=rest.MERGE_PATCH)
