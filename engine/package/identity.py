"""Where a package's release lives and whom helm acts as: Flux's ``spec.targetNamespace``,
``spec.storageNamespace`` and ``spec.serviceAccountName``.

``targetNamespace`` puts the release in another namespace than the package. Its storage (and
helmdeck's status object) is where Flux keeps it for a HelmRelease: ``storageNamespace``, else the
HelmRelease's own namespace even with a ``targetNamespace`` (helm-controller api/v2
``HelmRelease.GetStorageNamespace``). helm's CLI, which helmdeck runs, stores a release in its own
``--namespace``: helmdeck reads a release stored apart but cannot act on it (:func:`storage_apart_reason`).
A Package's storage is its release namespace (``storageNamespace`` may only repeat it), so a Package
with a ``targetNamespace`` stays actionable: a deliberate difference from Flux. The default release
name becomes ``<targetNamespace>-<name>``, as Flux's ``HelmRelease.GetReleaseName``.
``serviceAccountName`` names a ServiceAccount in the package's namespace: helm runs with
``--kube-as-user system:serviceaccount:<ns>:<name>`` and helmdeck's own reads and writes for the package
impersonate the same user (as Flux's ``spec.serviceAccountName`` impersonation).
"""

from __future__ import annotations

import re
from typing import Any

from engine.base.fields import Fields

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


def parse_identity(doc: Fields, spec: dict[str, Any], namespace: str, *, flux: bool = False) -> dict[str, str]:
    """``target_namespace``, ``storage_namespace`` and ``service_account_name`` of the spec of a package
    in ``namespace`` (``""`` when absent); ``flux``: the spec is a HelmRelease's.

    Raises PackageError naming the field: a target or storage namespace must be a DNS label (63
    characters at most), a ServiceAccount name a DNS subdomain (253 at most), and a Package's
    ``storageNamespace`` can only be the release's namespace.
    """
    target = doc.string(spec.get("targetNamespace"), "spec.targetNamespace")
    if target and (not _DNS_LABEL.match(target) or len(target) > 63):
        raise doc.error("spec.targetNamespace", f"{target!r} is not a valid namespace name",
                        "use at most 63 lower-case letters, digits and '-'")
    release_ns = target or namespace
    storage_ns = doc.string(spec.get("storageNamespace"), "spec.storageNamespace")
    if storage_ns and (not _DNS_LABEL.match(storage_ns) or len(storage_ns) > 63):
        raise doc.error("spec.storageNamespace", f"{storage_ns!r} is not a valid namespace name",
                        "use at most 63 lower-case letters, digits and '-'")
    if storage_ns and storage_ns != release_ns and not flux:
        # Flux sets it through the Helm SDK; helm's CLI (which helmdeck runs) has no such option: its
        # --namespace (or HELM_NAMESPACE) is both the release's and its storage's namespace.
        raise doc.error("spec.storageNamespace", f"{storage_ns!r} differs from the release namespace {release_ns!r}: "
                        "helm's CLI stores a release in its own namespace, so the field cannot be honoured",
                        "remove spec.storageNamespace (helm stores the release in its own namespace)")
    account = doc.string(spec.get("serviceAccountName"), "spec.serviceAccountName")
    if account and not valid_service_account_name(account):
        raise doc.error("spec.serviceAccountName", f"{account!r} is not a valid ServiceAccount name",
                        "use lower-case letters, digits, '-' and '.'")
    return {"target_namespace": target, "storage_namespace": storage_ns, "service_account_name": account}


def storage_apart_reason(action: str, key: tuple[str, str], storage_ns: str) -> str | None:
    """Why helmdeck cannot run helm ``action`` on release ``key`` (``(namespace, name)``) stored in
    ``storage_ns``, None when it can (the storage is the release's namespace).

    helm's CLI has one ``--namespace`` for the release and its storage, where Flux's helm-controller sets
    the storage's apart through the Helm SDK (api/v2 ``GetStorageNamespace``): acting anyway would write
    a second release beside Flux's.
    """
    ns, name = key
    if storage_ns == ns:
        return None
    return (f"{action} refused: release {ns}/{name} is stored in namespace {storage_ns} (as Flux stores a "
            f"HelmRelease's: spec.storageNamespace, else the HelmRelease's namespace), apart from its namespace "
            f"{ns}; helm's CLI keeps a release in its --namespace, so helmdeck cannot act on it there. Let Flux's "
            f"helm-controller act (flux reconcile helmrelease), or set spec.storageNamespace: {ns} for helmdeck "
            f"(a release stored in {storage_ns} stays there: uninstall it first)")


def valid_service_account_name(name: str) -> bool:
    """Is ``name`` a valid ServiceAccount name (a DNS subdomain: at most 253 characters, as Kubernetes)?"""
    return bool(_DNS_SUBDOMAIN.match(name)) and len(name) <= 253


def default_release_name(name: str, target_namespace: str) -> str:
    """Flux's default release name: ``<targetNamespace>-<name>``, or ``name`` without a target namespace."""
    return f"{target_namespace}-{name}" if target_namespace else name


def service_account_user(namespace: str, account: str) -> str:
    """The Kubernetes user name of ServiceAccount ``namespace/account`` (what ``--kube-as-user`` takes)."""
    return f"system:serviceaccount:{namespace}:{account}"
