"""Label keys helmdeck puts on releases (Helm storage records) and on rendered resources, and the API
version of its own kinds (Package, HelmRepository, OCIRepository: files and objects alike).

Release labels go through helm's ``--labels`` and end up on the storage
objects, where a server-side label selector finds them (cleanup). Label
values are at most 63 characters, so digests are 32 hex characters.
"""

from __future__ import annotations

import hashlib

# apiVersion of every helmdeck kind; its group is the one these label keys live in.
API_VERSION = "helmdeck.dev/v1alpha1"

# On release storage records (helm --labels).
MANAGED_BY = "helmdeck.dev/managed-by"
MANAGER = "helmdeck"
PACKAGE = "helmdeck.dev/package"
SPEC_DIGEST = "helmdeck.dev/spec-digest"
PACKAGE_SET = "helmdeck.dev/package-set"  # which package set (folder) manages it: cleanup's scope
MANIFEST_CHECKSUM = "helmdeck.dev/manifest-checksum"
MAINTENANCE = "helmdeck.dev/maintenance"  # "true" / "false"
POST_RENDER_DIGEST = "helmdeck.dev/post-render-digest"  # the package's own post-rendering, when it has any
# A ``helm upgrade --labels`` value that drops a label the previous revision carried (helm's action/upgrade.go
# mergeCustomLabels): the manifest checksum is each revision's own, set once helm has written it.
DROPPED = "null"

# On every rendered resource (stamped by the post-renderer).
ORIGIN_NAME = "helmdeck.dev/package-name"
ORIGIN_NAMESPACE = "helmdeck.dev/package-namespace"
RESOURCE_MAINTENANCE = "helmdeck.dev/maintenance"
# ... for a Flux HelmRelease document, Flux's helm-controller's origin labels instead (its post-renderer's)
FLUX_ORIGIN_NAME = "helm.toolkit.fluxcd.io/name"
FLUX_ORIGIN_NAMESPACE = "helm.toolkit.fluxcd.io/namespace"

# On objects helmdeck itself owns (persisted engine status, leases).
OWNED_BY = "app.kubernetes.io/managed-by"


def label_digest(data: bytes) -> str:
    """32 hex characters of sha256(data): fits a label value (63 characters at most)."""
    return hashlib.sha256(data).hexdigest()[:32]


def release_labels(
    *, package: str, spec_digest: str, maintenance: bool, package_set: str | None = None,
    manifest_checksum: str | None = None, extra: dict[str, str] | None = None, post_render_digest: str = "",
) -> dict[str, str]:
    """The release labels (helm ``--labels``) of a package's install or upgrade: the one place they
    are built. ``extra`` labels come first; helmdeck's own keys win over them."""
    out = dict(extra or {})
    out.update({MANAGED_BY: MANAGER, PACKAGE: package, SPEC_DIGEST: spec_digest,
                MAINTENANCE: "true" if maintenance else "false"})
    if package_set:
        out[PACKAGE_SET] = package_set
    if manifest_checksum:
        out[MANIFEST_CHECKSUM] = manifest_checksum
    if post_render_digest:  # as Flux's observedPostRenderersDigest: plan names a post-rendering change
        out[POST_RENDER_DIGEST] = post_render_digest
    return out
