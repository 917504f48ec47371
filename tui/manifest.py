"""What a stored manifest declares: the objects an uninstall removes, shown before it runs."""

from __future__ import annotations

from dataclasses import dataclass

import yaml

# Kinds without a namespace (a manifest may still, wrongly, give them one).
CLUSTER_SCOPED = frozenset({
    "Namespace", "Node", "PersistentVolume", "StorageClass", "PriorityClass", "RuntimeClass", "IngressClass",
    "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "APIService",
    "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "CSIDriver", "VolumeSnapshotClass",
})


@dataclass(frozen=True)
class ManifestObject:
    """One object of a manifest; ``namespace`` is "" for cluster-scoped kinds."""

    kind: str
    namespace: str
    name: str

    @property
    def ref(self) -> str:
        """``Kind/namespace/name`` (``Kind/name`` when cluster-scoped), as the monitor names resources."""
        return f"{self.kind}/{self.namespace}/{self.name}" if self.namespace else f"{self.kind}/{self.name}"


def objects(manifest: str, release_namespace: str) -> list[ManifestObject]:
    """The objects of a multi-document manifest, in order; ``*List`` kinds expanded.

    Namespaced objects without a namespace get ``release_namespace`` (as helm
    applies them). Raises yaml.YAMLError when the manifest is not YAML.
    """
    found: list[ManifestObject] = []
    for doc in yaml.safe_load_all(manifest):
        if isinstance(doc, dict):
            found.extend(_expand(doc, release_namespace))
    return found


def _expand(doc: dict[str, object], release_namespace: str) -> list[ManifestObject]:
    kind = doc.get("kind")
    if not isinstance(kind, str):
        return []
    items = doc.get("items")
    if kind.endswith("List") and isinstance(items, list):
        return [o for item in items if isinstance(item, dict) for o in _expand(item, release_namespace)]
    meta = doc.get("metadata")
    meta = meta if isinstance(meta, dict) else {}
    name = meta.get("name")
    if not isinstance(name, str):
        return []
    ns = meta.get("namespace")
    namespace = "" if kind in CLUSTER_SCOPED else (ns if isinstance(ns, str) and ns else release_namespace)
    return [ManifestObject(kind, namespace, name)]
