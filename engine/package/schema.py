"""The Package's field table: every field of a package file's ``spec``, declared once.

The loader (:mod:`engine.package.load` and the field-group modules beside it) takes the fields it allows
at each path from :data:`PACKAGE_SPEC`, and :mod:`engine.package.crd` generates the Package CRD's schema
from it, so a field cannot be read from files and missing from the cluster's objects, or the reverse.
Names and defaults are Flux's HelmRelease (helm.toolkit.fluxcd.io/v2).
"""

from __future__ import annotations

from engine.base.schema import CONDITION, Field
from engine.helm.crds import POLICIES
from engine.sources.schema import CHART_REF, CHART_TEMPLATE

MANAGED = ""
NO_RESOURCE_RECONCILIATION = "NoResourceReconciliation"
MAINTENANCE_STATES = (MANAGED, NO_RESOURCE_RECONCILIATION)
STRATEGIES = ("rollback", "uninstall")
# Flux's spec.install.strategy.name / spec.upgrade.strategy.name: what a failed install or upgrade leads to.
REMEDIATE_ON_FAILURE, RETRY_ON_FAILURE = "RemediateOnFailure", "RetryOnFailure"
ON_FAILURE = (REMEDIATE_ON_FAILURE, RETRY_ON_FAILURE)
WAIT_STRATEGIES = ("poller", "legacy")  # Flux's spec.waitStrategy.name
# helm uninstall --cascade's values: Flux's spec.uninstall.deletionPropagation (default background).
PROPAGATIONS = ("background", "foreground", "orphan")
# Flux's spec.upgrade.chartNameChangeStrategy (api/v2 ChartNameChangeStrategy; default Reinstall).
CHART_NAME_CHANGE_STRATEGIES = ("Reinstall", "InPlaceUpdate")
DRIFT_MODES = ("disabled", "warn", "enabled")
# Flux's spec.postRenderStrategy: which of helm 4's rendered manifests reach the post-renderers ("": helm's default)
POST_RENDER_STRATEGIES = ("combined", "separate", "nohooks")
SSA_MODES = ("enabled", "disabled", "auto")  # Flux's upgrade and rollback serverSideApply (helm 4's --server-side)
VALUES_KINDS = ("ConfigMap", "Secret")


def _flags(*names: str) -> tuple[Field, ...]:
    return tuple(Field(name, "boolean") for name in names)


_JOBS = _flags("disableHooks", "disableWait", "disableWaitForJobs")
_CRDS = Field("crds", "string", "CRD policy for the chart's crds/", enum=POLICIES)
_RETRIES = Field("retries", "integer", "remediation attempts (negative: unlimited)")
_LAST = Field("remediateLastFailure", "boolean", "remediate the last failure too")
_STRATEGY = Field("strategy", "object", "after a failure: remediate (the default) or retry", fields=(
    Field("name", "string", "RemediateOnFailure or RetryOnFailure", required=True, enum=ON_FAILURE),
    Field("retryInterval", "duration", "RetryOnFailure's wait before the next attempt (default 5m)")))
_TIMEOUT = Field("timeout", "duration", "helm's timeout for this action (default: spec.timeout)")
_SSA = Field("serverSideApply", "string", "helm 4's server-side apply: enabled, disabled or auto (default: as the "
             "revision the action starts from)", enum=SSA_MODES)
TARGET = (  # a post-renderer patch's and a drift ignore rule's target (engine.package.selector)
    *(Field(name, "string", "a regular expression matched against the whole value")
      for name in ("group", "version", "kind", "name", "namespace")),
    Field("labelSelector", "string", "a Kubernetes label selector"),
    Field("annotationSelector", "string", "a Kubernetes selector on annotations"),
)

PACKAGE_SPEC: tuple[Field, ...] = (
    Field("chart", "object", "the chart: {spec: {chart, version, sourceRef}} from a HelmRepository",
          fields=CHART_TEMPLATE, file_only="a chart directory or packaged .tgz, relative to the package file"),
    Field("chartRef", "object", "the chart an OCIRepository selects", fields=CHART_REF),
    Field("releaseName", "string", "at most 53 characters; default metadata.name"),
    Field("values", "free", "values merged over valuesFiles and valuesFrom"),
    Field("valuesFiles", "list", "values files relative to the package file, merged in order", items="string",
          helmdeck_only="Flux composes values from spec.chart.spec.valuesFiles, valuesFrom and values"),
    Field("valuesFrom", "list", "ConfigMaps and Secrets of the package's namespace, merged in order",
          items="object", fields=(
              Field("kind", "string", "ConfigMap or Secret", enum=VALUES_KINDS, required=True),
              Field("name", "string", "the object's name", required=True),
              Field("valuesKey", "string", "the data key (default values.yaml)"),
              Field("targetPath", "string", "a helm --set path the content is set at"),
              Field("optional", "boolean", "a missing object or key is skipped"),
              Field("literal", "boolean", "with targetPath: the content set verbatim, one string (as --set-literal)"),
          )),
    Field("maintenance", "string", '"" or NoResourceReconciliation', enum=MAINTENANCE_STATES,
          helmdeck_only="maintenance mode is helmdeck's"),
    Field("timeout", "duration", "helm timeout (default 5m)"),
    Field("interval", "duration", "periodic reconcile (default 10m)"),
    Field("maxHistory", "integer", "revisions helm keeps (0: unlimited)"),
    Field("suspend", "boolean", "leave the release alone"),
    Field("waitStrategy", "object", "how helm 4 waits for readiness (helm 3 waits its own, legacy, way)", fields=(
        Field("name", "string", "poller (kstatus, the default) or legacy", required=True, enum=WAIT_STRATEGIES),)),
    Field("storageNamespace", "string", "empty or the release namespace"),
    Field("targetNamespace", "string", "the release's namespace (default: the package's)"),
    Field("serviceAccountName", "string", "helm and helmdeck act as this ServiceAccount"),
    Field("install", "object", "helm install", fields=(
        _TIMEOUT, _CRDS, *_flags("createNamespace"), *_JOBS, *_flags("replace", "disableTakeOwnership"),
        Field("serverSideApply", "boolean", "helm 4's server-side apply (default true)"), _STRATEGY,
        Field("remediation", "object", "after a failed install", fields=(_RETRIES, _LAST)),
    )),
    Field("upgrade", "object", "helm upgrade", fields=(
        _TIMEOUT, _CRDS, *_flags("force", "cleanupOnFail", "preserveValues", "disableTakeOwnership"), *_JOBS, _SSA,
        _STRATEGY,
        Field("remediation", "object", "after a failed upgrade", fields=(
            _RETRIES, Field("strategy", "string", "rollback or uninstall", enum=STRATEGIES), _LAST)),
        Field("chartNameChangeStrategy", "string", "a chart of another name: Reinstall (uninstall, then install; "
              "the default) or InPlaceUpdate (upgrade)", enum=CHART_NAME_CHANGE_STRATEGIES),
    )),
    Field("test", "object", "helm test after install and upgrade", fields=(
        Field("enable", "boolean"), Field("ignoreFailures", "boolean"),
        Field("timeout", "duration", "default: the package's timeout"),
        Field("filters", "list", "test hooks to run or (exclude) skip", items="object", fields=(
            Field("name", "string", "the test hook's name", required=True), Field("exclude", "boolean"))),
    )),
    Field("rollback", "object", "helm rollback (remediation)", fields=(
        _TIMEOUT, *_flags("force", "recreate", "cleanupOnFail"), *_JOBS, _SSA)),
    Field("uninstall", "object", "helm uninstall (remediation, deletion)", fields=(
        _TIMEOUT, *_flags("keepHistory"), *_flags("disableHooks", "disableWait"),
        Field("deletionPropagation", "string", "background, foreground or orphan (helm uninstall --cascade)",
              enum=PROPAGATIONS))),
    Field("driftDetection", "object", "compare live objects with the manifest", fields=(
        Field("mode", "string", "disabled, warn or enabled", enum=DRIFT_MODES),
        Field("ignore", "list", "JSON pointers drift detection leaves out", items="object", fields=(
            Field("paths", "list", "RFC 6901 JSON pointers", items="string", required=True),
            Field("target", "object", "the objects (default: all)", fields=TARGET),
        )),
    )),
    Field("postRenderers", "list", "kustomize steps run after helm renders", items="object", fields=(
        Field("kustomize", "object", "one kustomize build", required=True, fields=(
            Field("patches", "list", "strategic merge or JSON 6902 patches", items="object", fields=(
                Field("patch", "string", "the patch's text", required=True),
                Field("target", "object", "the objects it applies to", fields=TARGET),
            )),
            Field("images", "list", "image replacements", items="object", fields=(
                Field("name", "string", "the image to replace", required=True),
                Field("newName", "string"), Field("newTag", "string"), Field("digest", "string"),
            )),
        )),
    )),
    Field("postRenderStrategy", "string", "what helm 4 sends to the post-renderers: combined (hooks with the "
          "templates, the default), separate (hooks apart) or nohooks (hooks untouched; helm 3's only way)",
          enum=POST_RENDER_STRATEGIES),
    Field("commonMetadata", "object", "labels and annotations set on every object", fields=(
        Field("labels", "map"), Field("annotations", "map"))),
    Field("dependsOn", "list", "packages that must be Ready first", items="object", fields=(
        Field("name", "string", "the package's metadata.name", required=True),
        Field("namespace", "string", "default: this package's namespace"),
    )),
)

# A whole Package document (a HelmRelease read as one): what the loader checks every field of at once
# (engine.base.fields.Fields.known), so one run names every unknown field.
PACKAGE_DOCUMENT: tuple[Field, ...] = (
    Field("apiVersion", "string"), Field("kind", "string"),
    Field("metadata", "object", fields=(Field("name", "string"), Field("namespace", "string"))),
    Field("spec", "object", fields=PACKAGE_SPEC),
)

# A Package's status, in Flux's HelmRelease shape (helm.toolkit.fluxcd.io/v2), written by `helmdeck controller`.
SNAPSHOT = (  # one entry of status.history: a release revision (engine.storage.snapshot)
    Field("apiVersion", "string", "v2 when digest is Flux's (a snapshot helmdeck made before has none)"),
    Field("name", "string", "the release's name"),
    Field("namespace", "string", "the release's namespace"),
    Field("version", "integer", "the release revision"),
    Field("status", "string", "helm's status of the revision (deployed, failed, superseded, ...)"),
    Field("action", "string", "the Flux release action that recorded it (install, upgrade, rollback, ...)"),
    Field("chart", "string", "chart@version, as the app's CHART column"),
    Field("chartName", "string"), Field("chartVersion", "string"), Field("appVersion", "string"),
    Field("configDigest", "string", "digest of the values, as Flux's (chartutil DigestValues)"),
    Field("digest", "string", "digest of the release in storage, as Flux's (helm-controller's Observation)"),
    Field("firstDeployed", "string", "RFC 3339, UTC, seconds"),
    Field("lastDeployed", "string", "RFC 3339, UTC, seconds"),
    Field("deleted", "string", "RFC 3339, UTC, seconds"),
    Field("ociDigest", "string", "digest of the OCI artifact of an OCIRepository's chart"),
    Field("testHooks", "free", "once tests ran: each test hook's lastStarted, lastCompleted, phase, as Flux's"),
)
PACKAGE_STATUS: tuple[Field, ...] = (
    Field("observedGeneration", "integer", "the generation last handled"),
    Field("conditions", "list", "Ready, Released, TestSuccess, Remediated", items="object", fields=CONDITION),
    Field("lastAttemptedRevision", "string", "the chart version last attempted"),
    Field("lastAppliedRevision", "string", "the chart version last released successfully"),
    Field("lastAttemptedRevisionDigest", "string", "the OCI digest of the chart last attempted (OCIRepository)"),
    Field("lastAttemptedReleaseAction", "string", "install or upgrade"),
    Field("history", "list", "release snapshots, newest first, trimmed as Flux trims them", items="object",
          fields=SNAPSHOT),
    Field("failures", "integer", "failed reconciles since the last success"),
    Field("installFailures", "integer", "failed installs since the last success"),
    Field("upgradeFailures", "integer", "failed upgrades since the last success"),
    Field("lastHandledReconcileAt", "string", "the last reconcile request annotation handled"),
    Field("lastHandledForceAt", "string", "the last forceAt request handled"),
    Field("lastHandledResetAt", "string", "the last resetAt request handled"),
    Field("lastHandledRollbackAt", "string", "the last rollback request handled"),
    Field("lastHandledUnlockAt", "string", "the last unlock request handled"),
    Field("lastHandledCancelAt", "string", "the last cancel request handled"),
    Field("lastHandledPauseAt", "string", "the last monitor pause request handled"),
    Field("lastHandledResumeAt", "string", "the last monitor resume request handled"),
    Field("storageNamespace", "string", "where helm stores the release, as recorded when a pass last ran"),
    Field("controller", "object", "who reconciles it now: the controller replica and its shard", fields=(
        Field("replica", "string", "the replica's identity (its Lease holderIdentity: the pod's name)"),
        Field("shard", "string", "its shard (--watch-label-selector), \"\" when not sharded"),
    )),
    Field("claim", "object", "the actor claim (--shards auto): the controller replica running a helm action on "
                             "the release; cleared when it ends", fields=(
        Field("replica", "string", "the replica's identity"),
        Field("action", "string", "the helm action (install, upgrade, test, rollback, uninstall, unlock)"),
        Field("startedAt", "string", "when the action started (RFC 3339)"),
        Field("timeoutSeconds", "integer", "the action's helm timeout: its pending release is not unlocked by "
                                           "another replica before startedAt plus this"),
    )),
)
