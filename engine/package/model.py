"""The Package types: what an operator declares for one Helm release (read by :mod:`engine.package.load`).

A package file is YAML, field names after Flux's HelmRelease where the
concept exists::

    apiVersion: <wire.API_VERSION>
    kind: Package
    metadata: {name: web, namespace: demo}
    spec:
      chart: ../charts/web          # chart directory or packaged .tgz, relative to this file
      releaseName: web              # optional; default metadata.name
      values: {replicas: 2}         # merged over valuesFiles
      valuesFiles: [web-prod.yaml]  # relative to this file, merged in order
      maintenance: ""               # or NoResourceReconciliation
      timeout: 5m                   # Go duration, as Flux's spec.timeout
      interval: 10m                 # periodic reconcile
      maxHistory: 5                 # revisions helm keeps (0 = unlimited)
      suspend: false
      storageNamespace: ""          # only "" or the release namespace: helm's CLI stores a release there
      targetNamespace: ""; serviceAccountName: ""  # release namespace; act as this ServiceAccount (engine.package)
      install: {timeout, crds, createNamespace, disableHooks, disableWait, disableWaitForJobs, replace,
                disableTakeOwnership, serverSideApply, strategy: {name: RemediateOnFailure|RetryOnFailure,
                retryInterval}, remediation: {retries}}
      upgrade: {timeout, crds, force, cleanupOnFail, preserveValues, disableHooks, disableWait, disableWaitForJobs,
                disableTakeOwnership, serverSideApply, strategy: {name, retryInterval},
                remediation: {retries, strategy: rollback|uninstall, remediateLastFailure}}
      test: {enable, ignoreFailures, timeout, filters: [{name, exclude}]}
      rollback: {timeout, force, recreate, cleanupOnFail, disableHooks, disableWait, disableWaitForJobs}
      uninstall: {timeout, keepHistory, disableHooks, disableWait}
      driftDetection: {mode: disabled|warn|enabled, ignore: [{paths, target}]}  # engine.package.drift
      postRenderers: [{kustomize: {patches, images}}]  # and commonMetadata: engine.package.postrender
      dependsOn: [{name, namespace}] # packages Ready first (engine.package.order)
      valuesFrom: [{kind, name, valuesKey, targetPath, optional}]  # ConfigMaps/Secrets (engine.package.values_from)

Defaults are Flux's (helm waits for Jobs unless ``disableWaitForJobs``). Files are parsed by
the bounded loader (:mod:`engine.base.loader`): size, nesting and alias-expansion limits.
Every problem raises :class:`PackageError` naming the file, the field (a dotted path), the
line where known, and how to fix it.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.package.crds import CrdPolicy
from engine.package.depends import Dependency
from engine.package.drift import IgnoreRule
from engine.package.flux import HELM_RELEASE
from engine.package.identity import storage_apart_reason
from engine.package.postrender import Rendering
from engine.package.schema import DRIFT_MODES as DRIFT_MODES  # the model's names, declared with the fields
from engine.package.schema import MAINTENANCE_STATES as MAINTENANCE_STATES
from engine.package.schema import MANAGED as MANAGED
from engine.package.schema import NO_RESOURCE_RECONCILIATION as NO_RESOURCE_RECONCILIATION
from engine.package.schema import REMEDIATE_ON_FAILURE, RETRY_ON_FAILURE
from engine.package.schema import STRATEGIES as STRATEGIES
from engine.package.values_from import ValuesReference
from engine.sources.repository import ChartRequest, ChartTemplate, HelmChartSpec, SourceRef

KIND = "Package"
PACKAGE_SUFFIXES = (".yaml", ".yml")
MAX_RELEASE_NAME = 53  # Helm's limit (release names end up in label values)
DEFAULT_TIMEOUT = 300.0
DEFAULT_INTERVAL = 600.0
DEFAULT_MAX_HISTORY = 5
DEFAULT_RETRY_INTERVAL = 300.0  # RetryOnFailure's retryInterval when unset (Flux's 5m)



@dataclass(frozen=True)
class Remediation:
    """Flux's ``remediation`` block: ``retries`` (negative = unlimited) and ``remediateLastFailure``."""

    retries: int = 0
    remediate_last_failure: bool | None = None

    @property
    def remediate_last(self) -> bool:
        """Whether the last failure is remediated once no retries remain: ``remediateLastFailure``, else
        Flux's default for an upgrade, ``retries > 0`` (helm-controller api/v2 helmrelease_types.go
        ``UpgradeRemediation.MustRemediateLastFailure``: unlimited retries, -1, do not count)."""
        return self.remediate_last_failure if self.remediate_last_failure is not None else self.retries > 0


@dataclass(frozen=True)
class OnFailure:
    """Flux's ``strategy`` of an install or upgrade: ``on_failure`` its ``name`` (RemediateOnFailure, the default,
    or RetryOnFailure) and ``retry_interval`` its ``retryInterval`` in seconds (None: not written; only with
    RetryOnFailure, as Flux's CRD validates)."""

    on_failure: str = REMEDIATE_ON_FAILURE
    retry_interval: float | None = None

    @property
    def retry(self) -> float | None:
        """RetryOnFailure's interval in seconds (``retryInterval``, else 300), None under RemediateOnFailure: Flux's
        ``GetRetry(false)`` and ``GetRetryInterval`` (helm-controller api/v2 helmrelease_types.go, Install/Upgrade
        ``GetRetry``, Install/UpgradeStrategy ``GetRetryInterval``; the DefaultToRetryOnFailure feature gate is
        off by default, as here)."""
        if self.on_failure != RETRY_ON_FAILURE:
            return None
        return self.retry_interval if self.retry_interval is not None else DEFAULT_RETRY_INTERVAL


@dataclass(frozen=True)
class ActionSpec:
    """What every action section has: Flux's ``disableHooks`` and ``disableWait``, and ``timeout`` (seconds;
    None: ``spec.timeout``, :meth:`PackageSpec.action_timeout`).

    A section's boolean fields are its flags (camelCase in the file, :func:`_flag_names`).
    """

    disable_hooks: bool = False
    disable_wait: bool = False
    timeout: float | None = None


@dataclass(frozen=True)
class JobsSpec(ActionSpec):
    """An action section that also waits for Jobs: Flux's ``disableWaitForJobs``."""

    disable_wait_for_jobs: bool = False


@dataclass(frozen=True)
class InstallSpec(JobsSpec, Remediation, OnFailure):
    """Flux's ``spec.install``; install remediation always uninstalls."""

    create_namespace: bool = False
    replace: bool = False
    disable_take_ownership: bool = False  # helm's --take-ownership is passed unless set (engine.reconcile.options)
    server_side_apply: bool | None = None  # None: helm 4's default, true (engine.reconcile.options.server_side)

    @property
    def remediate_last(self) -> bool:
        """``remediateLastFailure``, else false whatever the retries (helm-controller api/v2
        helmrelease_types.go ``InstallRemediation.MustRemediateLastFailure``): a failed last install is kept
        for inspection."""
        return bool(self.remediate_last_failure)


@dataclass(frozen=True)
class UpgradeSpec(JobsSpec, Remediation, OnFailure):
    """Flux's ``spec.upgrade``; remediation strategy rollback or uninstall; ``chart_name_change`` is
    ``chartNameChangeStrategy``: ``Reinstall`` (Flux's default, api/v2 ``Upgrade.GetChartNameChangeStrategy``) or
    ``InPlaceUpdate``."""

    force: bool = False
    cleanup_on_fail: bool = False
    preserve_values: bool = False
    disable_take_ownership: bool = False
    strategy: str = "rollback"
    server_side_apply: str = "auto"  # enabled, disabled, auto (engine.reconcile.options.server_side)
    chart_name_change: str = "Reinstall"


@dataclass(frozen=True)
class TestFilter:
    """Select (or, with ``exclude``, skip) the test hook named ``name``."""

    __test__ = False  # not a pytest test class

    name: str
    exclude: bool = False


@dataclass(frozen=True)
class TestSpec:
    """Flux's ``spec.test``; ``timeout`` in seconds, None = the package timeout."""

    __test__ = False  # not a pytest test class

    enable: bool = False
    ignore_failures: bool = False
    timeout: float | None = None
    filters: tuple[TestFilter, ...] = ()

    def selects(self, hook: str) -> bool:
        """Does ``helm test`` with these filters run the test hook named ``hook``? Not when a filter excludes it;
        with filters that name hooks, only those (helm's ``action.ReleaseTesting`` filters)."""
        if any(f.exclude and f.name == hook for f in self.filters):
            return False
        named = [f.name for f in self.filters if not f.exclude]
        return not named or hook in named

    def helm_filters(self) -> list[str]:
        """``helm test --filter`` terms: ``name=x`` and ``!name=x``."""
        return [f"{'!' if f.exclude else ''}name={f.name}" for f in self.filters]


@dataclass(frozen=True)
class RollbackSpec(JobsSpec):
    """Flux's ``spec.rollback``."""

    force: bool = False
    recreate: bool = False
    cleanup_on_fail: bool = False
    server_side_apply: str = "auto"  # enabled, disabled, auto (engine.reconcile.options.server_side)


@dataclass(frozen=True)
class UninstallSpec(ActionSpec):
    """Flux's ``spec.uninstall``; ``deletion_propagation`` is helm's ``--cascade`` (background, foreground or
    orphan), as helm-controller internal/action/uninstall.go ``newUninstall`` sets DeletionPropagation."""

    keep_history: bool = False
    deletion_propagation: str = "background"


def in_repository(text: str, root: Path) -> str:
    """``text`` with the repository folder ``root`` left out of the paths in it (``/.../repo/apps/chart``
    reads ``apps/chart``): how a repository names its files, the same on every machine."""
    return text.replace(f"{root}{os.sep}", "")


@dataclass(frozen=True)
class Origin:
    """Where the one object of a file the loader reads was declared, when that file is a copy of it (a
    ``--kustomize`` build writes each object to a file of its own): ``file``, the repository file (absolute:
    paths in the object resolve against its folder, as in a package file), ``root``, the repository's folder
    (messages name files from there: :attr:`shown`), and ``ref``, the object (``Kind namespace/name``)."""

    file: Path
    root: Path
    ref: str

    @property
    def shown(self) -> str:
        """The file as the repository names it (``apps/base/web.yaml``)."""
        return in_repository(str(self.file), self.root)

    def __str__(self) -> str:
        return f"{self.shown} ({self.ref})"


@dataclass(frozen=True)
class PackageSpec:
    """One validated package file. ``values_json`` is the inline values as JSON.

    Durations (``timeout``, ``interval``) are in seconds. ``generation``: see :func:`spec_generation`.
    ``origin``: where it was declared when ``file`` is a copy (:class:`Origin`, ``--kustomize``).
    """

    file: Path
    name: str
    namespace: str
    chart_path: Path
    release_name: str
    document: int = 0  # its index among the documents of ``file`` (a file may hold several)
    kind: str = KIND  # the document's kind: Package, or Flux's HelmRelease read as one (engine.package.flux)
    values_json: str = "{}"
    values_files: tuple[Path, ...] = ()
    maintenance: str = MANAGED
    timeout: float = DEFAULT_TIMEOUT
    interval: float = DEFAULT_INTERVAL
    max_history: int = DEFAULT_MAX_HISTORY
    suspend: bool = False
    wait_strategy: str = ""  # Flux's spec.waitStrategy.name: poller (the default, "") or legacy
    storage_namespace: str = ""
    install: InstallSpec = InstallSpec()
    upgrade: UpgradeSpec = UpgradeSpec()
    test: TestSpec = TestSpec()
    rollback: RollbackSpec = RollbackSpec()
    uninstall: UninstallSpec = UninstallSpec()
    drift_detection: str = "disabled"
    drift_ignore: tuple[IgnoreRule, ...] = ()  # spec.driftDetection.ignore (engine.package.drift)
    rendering: Rendering = dataclasses.field(default_factory=Rendering)  # postRenderers, commonMetadata
    depends_on: tuple[Dependency, ...] = ()
    values_from: tuple[ValuesReference, ...] = ()  # merged after valuesFiles, before values
    target_namespace: str = ""  # engine.package.identity
    service_account_name: str = ""
    crds: CrdPolicy = dataclasses.field(default_factory=CrdPolicy)  # engine.package.crds
    # A chart from a repository (engine.sources): the parsed form, then the request linked to its source;
    # chart_path is then where the resolved archive is found (engine.sources.current).
    chart_source: ChartTemplate | SourceRef | None = None
    chart_request: ChartRequest | None = None
    chart_object: HelmChartSpec | None = None  # the Flux HelmChart a chartRef named (its fields are chart_source)
    origin: Origin | None = None
    # What the API server's metadata.generation counts: a digest (16 hex) of the document's spec as declared
    # (any change of it is a new generation). "" for a spec not read from a document.
    generation: str = dataclasses.field(default="", compare=False)

    @property
    def declared_file(self) -> Path:
        """The file the operator declared it in (absolute): the origin's file, else ``file``; paths in it
        resolve against its folder."""
        return self.origin.file if self.origin is not None else self.file

    @property
    def declared_in(self) -> str:
        """That file, for messages: as its repository names it (``apps/base/web.yaml``), else its name."""
        return self.origin.shown if self.origin is not None else self.file.name

    @property
    def smart_upgrade(self) -> bool:
        """May a changed spec that renders the released manifest be recorded with no new revision (Deckhouse's
        smart upgrade)? Only for helmdeck's own kind: a HelmRelease upgrades on any change of its chart or
        values, as Flux's helm-controller compares the config digest (internal/reconcile/state.go
        ``DetermineReleaseState``, through internal/action/verify.go ``VerifyRelease``), so ``helm get values``
        says what the document says."""
        return self.kind == KIND

    @property
    def restores_absent(self) -> bool:
        """Does a resource of the release found absent by the monitors make an upgrade that restores it? Only for
        helmdeck's own kind: for a HelmRelease only ``driftDetection`` decides (disabled by default: nothing is
        restored; ``enabled``: corrected with no new revision; ``warn``: reported), as Flux's helm-controller
        (internal/reconcile/state.go ``DetermineReleaseState``, drift looked at only with drift detection on)."""
        return self.kind == KIND

    @property
    def kept_when_removed(self) -> str | None:
        """Why the release of a package that is gone (its file removed, its object deleted) stays installed, None
        when it is uninstalled: a package suspended by its ``spec.suspend`` keeps its release, as Flux's
        helm-controller (internal/controller/helmrelease_controller.go, ``reconcileDelete``) uninstalls only
        a HelmRelease that is not suspended."""
        if self.suspend:
            return "the release is kept: the package was suspended (spec.suspend: true)"
        return None

    @property
    def creates_namespace(self) -> bool:
        """Does an install create the release's namespace (helm ``--create-namespace``)? With
        ``install.createNamespace``; for a HelmRelease only with a ``targetNamespace``, as Flux's helm-controller
        (internal/action/install.go ``Install``; its own namespace holds the object, so it exists); a Package
        may create its own namespace (a package file needs none to exist)."""
        return self.install.create_namespace and (bool(self.target_namespace) or self.kind == KIND)

    @property
    def release_namespace(self) -> str:
        """Namespace of the release and its resources: ``targetNamespace``, else the package's."""
        return self.target_namespace or self.namespace

    @property
    def storage_ns(self) -> str:
        """Namespace of the release's storage records (and helmdeck's status object): ``storageNamespace``,
        else a HelmRelease's own namespace even with a ``targetNamespace`` (as helm-controller api/v2
        ``HelmRelease.GetStorageNamespace``), a Package's release namespace (engine.package.identity)."""
        if self.storage_namespace:
            return self.storage_namespace
        return self.namespace if self.kind == HELM_RELEASE else self.release_namespace

    def helm_refusal(self, action: str) -> str | None:
        """Why helm's CLI cannot run ``action`` on this package's release (stored apart from its namespace),
        None when it can (:func:`engine.package.identity.storage_apart_reason`)."""
        return storage_apart_reason(action, self.key, self.storage_ns)

    def action_timeout(self, action: str) -> float:
        """Seconds helm is given for ``action`` (``install``, ``upgrade``, ``rollback``, ``uninstall``, ``test``;
        a ``pending-`` status names its action): that section's ``timeout``, else ``spec.timeout``, as
        helm-controller api/v2 helmrelease_types.go ``Install.GetTimeout`` (and Upgrade's, Rollback's,
        Uninstall's, Test's) with ``HelmRelease.GetTimeout``. Any other action (a whole pass, an unlock, a drift
        correction) may run any of them: the longest."""
        sections: dict[str, float | None] = {
            "install": self.install.timeout, "upgrade": self.upgrade.timeout, "rollback": self.rollback.timeout,
            "uninstall": self.uninstall.timeout, "test": self.test.timeout}
        name = action.removeprefix("pending-")
        if name not in sections:
            return max(self.action_timeout(each) for each in sections)
        own = sections[name]
        return own if own is not None else self.timeout

    @property
    def key(self) -> tuple[str, str]:
        """``(release namespace, release name)``: the release this package drives."""
        return (self.release_namespace, self.release_name)

    @property
    def values(self) -> dict[str, Any]:
        data = json.loads(self.values_json)
        return data if isinstance(data, dict) else {}


def shorten_release_name(name: str) -> str:
    """Flux's rule for names over 53 characters: first 40, ``-``, 12 hex of sha256(name)."""
    if len(name) <= MAX_RELEASE_NAME:
        return name
    return f"{name[:40]}-{hashlib.sha256(name.encode()).hexdigest()[:12]}"


def spec_generation(spec: Any) -> str:
    """A document's generation: 16 hex of the sha256 of its ``spec`` mapping (keys sorted, as JSON; values
    JSON cannot hold as their text). Any change of the spec, and only that, gives another, as the API server's
    ``metadata.generation`` counts changes of a custom object's spec; a package file has no such counter."""
    text = json.dumps(spec, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]
