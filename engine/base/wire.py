"""Every key helmdeck writes or reads on the wire, in one place (as Flux's ``fluxcd/pkg/apis/meta`` holds its
annotations and reasons): the API version of its kinds, the labels on releases (Helm storage records) and on
rendered resources, the labels of the objects it owns (persisted status, Leases), the annotations of a
controller's Lease and of the requests on a Package object, its finalizer, the shard key, the drift
detection key; Flux's keys helmdeck reads beside its own. Only the keys: what they mean is said where each
is used (the module named beside it).

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

# The engine status kept per release (engine.reconcile.store: a ConfigMap labelled with these; its JSON's
# schema, engine.reconcile.status).
STATUS_LABEL = "helmdeck.dev/status"
RELEASE_NS_LABEL = "helmdeck.dev/release-namespace"  # on a status kept in the home namespace
RELEASE_LABEL = "helmdeck.dev/release"
STATUS_SCHEMA = "helmdeck.dev/status/v1"

# What ``helmdeck controller`` writes on its Lease, so the app finds it and attaches (engine.runtime.cockpit.attach)
# and static shards see each other (engine.runtime.cluster.shard_selector):
ROLE = "helmdeck.dev/role"  # label: "controller" on a controller's Lease
CONTROLLER = "controller"
WATCH_NAMESPACES = "helmdeck.dev/watch-namespaces"  # annotation: its --watch-namespace list, "," joined ("" all)
METRICS = "helmdeck.dev/metrics"  # annotation: http://host:port of its metrics endpoint, as bound
SHARD = "helmdeck.dev/shard"  # label: the shard's name (engine.runtime.cluster.shard_selector), absent when not sharded
SELECTOR = "helmdeck.dev/watch-label-selector"  # annotation: the shard's whole label selector, normalised

# On a Package object: the label its static shard is chosen by (Flux: sharding.fluxcd.io/key), the finalizer
# that uninstalls its release (engine.runtime.cluster.finalizer).
SHARD_KEY = "sharding.helmdeck.dev/key"
FINALIZER = "helmdeck.dev/finalizer"

# Requests on a Package object (engine.runtime.cluster.annotation_requests): annotations whose value is a token,
# handled once.
RECONCILE_REQUEST = "reconcile.helmdeck.dev/requestedAt"
FORCE_REQUEST = "reconcile.helmdeck.dev/forceAt"
RESET_REQUEST = "reconcile.helmdeck.dev/resetAt"
CANCEL_REQUEST = "cancel.helmdeck.dev/requestedAt"
UNLOCK_REQUEST = "unlock.helmdeck.dev/requestedAt"
ROLLBACK_REQUEST = "rollback.helmdeck.dev/requestedAt"
ROLLBACK_REVISION = "rollback.helmdeck.dev/revision"  # the revision a rollback request goes to
PAUSE_REQUEST = "monitor.helmdeck.dev/pauseAt"
RESUME_REQUEST = "monitor.helmdeck.dev/resumeAt"
# ... Flux's, read too (meta.ReconcileRequestAnnotation, ForceRequestAnnotation, ResetRequestAnnotation)
FLUX_RECONCILE_REQUEST = "reconcile.fluxcd.io/requestedAt"
FLUX_FORCE_REQUEST = "reconcile.fluxcd.io/forceAt"
FLUX_RESET_REQUEST = "reconcile.fluxcd.io/resetAt"

# Drift detection off for one object (engine.package.drift): Flux's v2.DriftDetectionMetadataKey, and helmdeck's.
FLUX_DRIFT_DETECTION = "helm.toolkit.fluxcd.io/driftDetection"
DRIFT_DETECTION = "helmdeck.dev/driftDetection"

# Status condition types on a package's engine status and a Package object (engine.reconcile.conditions), and
# the reasons of conditions and Events (engine.runtime.cluster.object_status: an action's Event is
# <Action>Started, <Action>Succeeded, <Action>Failed or <Action>Cancelled)
READY = "Ready"
RELEASED = "Released"
TEST_SUCCESS = "TestSuccess"
REMEDIATED = "Remediated"
RECONCILING = "Reconciling"
STALLED = "Stalled"
DRIFTED = "Drifted"  # with drift detection on (enabled or warn), as Flux's helm-controller sets it

# ... reasons (Flux's names: helm-controller's api/v2 and fluxcd/pkg/apis/meta)
INSTALL_SUCCEEDED = "InstallSucceeded"
INSTALL_FAILED = "InstallFailed"
UPGRADE_SUCCEEDED = "UpgradeSucceeded"
UPGRADE_FAILED = "UpgradeFailed"
TEST_SUCCEEDED = "TestSucceeded"
TEST_FAILED = "TestFailed"
ROLLBACK_SUCCEEDED = "RollbackSucceeded"
ROLLBACK_FAILED = "RollbackFailed"
UNINSTALL_SUCCEEDED = "UninstallSucceeded"
UNINSTALL_FAILED = "UninstallFailed"
RETRIES_EXCEEDED = "RetriesExceeded"
MISSING_ROLLBACK_TARGET = "MissingRollbackTarget"
# A HelmRelease stored apart from its objects' namespace: helm's CLI cannot act on it (engine.package.identity).
STORAGE_APART = "StorageNamespaceApart"
PENDING_RELEASE = "PendingRelease"
DRIFT_DETECTED = "DriftDetected"
DRIFT_CORRECTED = "DriftCorrected"
NO_DRIFT_DETECTED = "NoDriftDetected"
PROGRESSING = "Progressing"
PROGRESSING_WITH_RETRY = "ProgressingWithRetry"  # RetryOnFailure waits its interval (fluxcd/pkg meta)
IN_MAINTENANCE = "InMaintenance"
INVALID_PACKAGE = "InvalidPackage"
DEPENDENCY_NOT_READY = "DependencyNotReady"  # Flux's reason: a dependsOn package is not Ready
RECONCILE_ERROR = "ReconcileError"
UNLOCKED = "Unlocked"
VALUES_ERROR = "ValuesError"  # the values cannot be composed (engine.resolve.values)
REQUEST_FAILED = "RequestFailed"  # a request annotation that could not be carried out
SHARD_OVERLAP = "ShardOverlap"  # Warning: a Package two live static shards take (engine.runtime.cluster.static_shards)
STARTED = "Started"  # the suffix of an action's start Event (InstallStarted, UpgradeStarted)
# ... source-controller's (engine.sources.errors, engine.sources.verify): an artifact not had, a source not
# ready, and the SourceVerified condition
ARTIFACT_FAILED = "ArtifactFailed"
SOURCE_NOT_READY = "SourceNotReady"
SOURCE_VERIFIED = "SourceVerified"
SUCCEEDED = "Succeeded"
VERIFICATION_ERROR = "VerificationError"


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
