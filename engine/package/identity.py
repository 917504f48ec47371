"""Where a package's release lives and whom helm acts as: Flux's ``spec.targetNamespace``,
``spec.storageNamespace`` (only the release's own: helm's CLI stores there) and ``spec.serviceAccountName``.

``targetNamespace`` puts the release (and, since helm's CLI stores a release in its own
``--namespace``, its storage and helmdeck's status object) in another namespace than the
package; the default release name becomes ``<targetNamespace>-<name>``, as Flux's
``HelmRelease.GetReleaseName``. ``serviceAccountName`` names a ServiceAccount in the
package's namespace: helm runs with ``--kube-as-user system:serviceaccount:<ns>:<name>`` and
helmdeck's own reads and writes for the package impersonate the same user (as Flux's
``spec.serviceAccountName`` impersonation).
"""

from __future__ import annotations

import re
from typing import Any

from engine.base.fields import Fields

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?\Z")
_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\Z")


def parse_identity(doc: Fields, spec: dict[str, Any], namespace: str) -> dict[str, str]:
    """``target_namespace``, ``storage_namespace`` and ``service_account_name`` of the spec of a package
    in ``namespace`` (``""`` when absent).

    Raises PackageError naming the field: a target namespace must be a DNS label (63
    characters at most), a ServiceAccount name a DNS subdomain (253 at most), and
    ``storageNamespace`` can only be the release's namespace.
    """
    target = doc.string(spec.get("targetNamespace"), "spec.targetNamespace")
    if target and (not _DNS_LABEL.match(target) or len(target) > 63):
        raise doc.error("spec.targetNamespace", f"{target!r} is not a valid namespace name",
                        "use at most 63 lower-case letters, digits and '-'")
    release_ns = target or namespace
    storage_ns = doc.string(spec.get("storageNamespace"), "spec.storageNamespace")
    if storage_ns and storage_ns != release_ns:
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


def valid_service_account_name(name: str) -> bool:
    """Is ``name`` a valid ServiceAccount name (a DNS subdomain: at most 253 characters, as Kubernetes)?"""
    return bool(_DNS_SUBDOMAIN.match(name)) and len(name) <= 253


def default_release_name(name: str, target_namespace: str) -> str:
    """Flux's default release name: ``<targetNamespace>-<name>``, or ``name`` without a target namespace."""
    return f"{target_namespace}-{name}" if target_namespace else name


def service_account_user(namespace: str, account: str) -> str:
    """The Kubernetes user name of ServiceAccount ``namespace/account`` (what ``--kube-as-user`` takes)."""
    return f"system:serviceaccount:{namespace}:{account}"
