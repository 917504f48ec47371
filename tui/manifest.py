"""What a stored manifest declares: the objects an uninstall removes, shown before it runs.

Whether a kind is namespaced is the API server's answer (its discovery, which
the engine reads off the event loop and caches per group version:
:meth:`engine.monitor.inspect.Inspector.scopes`). Where discovery cannot be read
(offline, the cluster unreachable) or does not serve the kind, the built-in
list of cluster-scoped kinds below decides.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from engine.monitor.manifest import ManifestObject, place

# Kinds without a namespace (a manifest may still, wrongly, give them one): the fall-back when discovery
# has no answer.
CLUSTER_SCOPED = frozenset({
    "Namespace", "Node", "PersistentVolume", "StorageClass", "PriorityClass", "RuntimeClass", "IngressClass",
    "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "APIService",
    "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "CSIDriver", "VolumeSnapshotClass",
})

Scopes = Mapping[tuple[str, str], bool | None]
"""Per ``(apiVersion, kind)``: namespaced (True), cluster-scoped (False), not served (None), from discovery."""


def kinds(found: Iterable[ManifestObject]) -> set[tuple[str, str]]:
    """The ``(apiVersion, kind)`` pairs to ask discovery about."""
    return {(o.api_version, o.kind) for o in found if o.api_version and o.kind}


def namespaced(obj: ManifestObject, scopes: Scopes) -> bool:
    """Whether ``obj``'s kind is namespaced: discovery's answer, else not in :data:`CLUSTER_SCOPED`."""
    served = scopes.get((obj.api_version, obj.kind))
    return obj.kind not in CLUSTER_SCOPED if served is None else served


def placed(found: Iterable[ManifestObject], release_namespace: str, scopes: Scopes) -> list[ManifestObject]:
    """``found`` in order, each placed as helm applies it: a namespaced object without a namespace in the
    release namespace, a cluster-scoped one in none (:func:`engine.monitor.manifest.place`)."""
    return [place(o, release_namespace, namespaced(o, scopes)) for o in found]
