"""What a stored manifest declares: the objects an uninstall removes, shown before it runs."""

from __future__ import annotations

from engine.monitor.manifest import ManifestObject, manifest_objects, place

# Kinds without a namespace (a manifest may still, wrongly, give them one).
CLUSTER_SCOPED = frozenset({
    "Namespace", "Node", "PersistentVolume", "StorageClass", "PriorityClass", "RuntimeClass", "IngressClass",
    "ClusterRole", "ClusterRoleBinding", "CustomResourceDefinition", "APIService",
    "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration", "CSIDriver", "VolumeSnapshotClass",
})


def objects(manifest: str, release_namespace: str) -> list[ManifestObject]:
    """The objects of a multi-document manifest, in order, placed as helm applies them.

    Raises yaml.YAMLError when the manifest is not YAML.
    """
    return [place(o, release_namespace, o.kind not in CLUSTER_SCOPED) for o in manifest_objects(manifest)]
