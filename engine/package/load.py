"""The package loader: the one reader of package files (any number of Packages, HelmRepository /
OCIRepository documents and skipped objects of other kinds per file, sorted by
:func:`engine.package.documents.read_file`), validated field by field into
:class:`engine.package.model.PackageSpec`.

Every problem raises :class:`engine.base.fields.PackageError` naming the file, the field (a dotted path),
the line where known, and how to fix it; :func:`load_folder` collects them so one bad file or object never
stops the others.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.base.fields import Fields, PackageError, lines_by_path, parse_duration, type_name
from engine.base.loader import Parsed
from engine.base.paths import resolved
from engine.base.schema import allowed, at, booleans
from engine.base.wire import API_VERSION
from engine.package.crds import parse_crds
from engine.package.depends import parse_depends_on
from engine.package.documents import link, read_file, remote_chart, skipped_line
from engine.package.drift import parse_drift_detection
from engine.package.flux import (
    HELM_API_VERSIONS,
    HELM_RELEASE,
    UNFETCHABLE,
    LeftOut,
    as_package,
    chart_kind,
    tolerant,
    unsupported_error,
)
from engine.package.identity import default_release_name, parse_identity
from engine.package.model import (
    DRIFT_MODES,
    KIND,
    MAINTENANCE_STATES,
    MAX_RELEASE_NAME,
    NO_RESOURCE_RECONCILIATION,
    PACKAGE_SUFFIXES,
    STRATEGIES,
    InstallSpec,
    Origin,
    PackageSpec,
    RollbackSpec,
    TestFilter,
    TestSpec,
    UninstallSpec,
    UpgradeSpec,
    in_repository,
    shorten_release_name,
    spec_generation,
)
from engine.package.order import check_dependencies
from engine.package.postrender import parse_rendering
from engine.package.schema import (
    CHART_NAME_CHANGE_STRATEGIES,
    ON_FAILURE,
    PACKAGE_DOCUMENT,
    PACKAGE_SPEC,
    PROPAGATIONS,
    REMEDIATE_ON_FAILURE,
    SSA_MODES,
    WAIT_STRATEGIES,
)
from engine.package.values_from import parse_values_from
from engine.sources.chart import is_chart
from engine.sources.current import current_path
from engine.sources.repository import HelmChartSpec, SourceSpec, parse_source

# Matched whole (fullmatch): "$" would let a trailing newline through.
_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
_RELEASE_NAME = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


class _Doc(Fields):
    """A package file's fields (see :class:`engine.base.fields.Fields`); ``in_cluster``: a Package object of
    the API server, whose chart and values cannot be files on an operator's disk."""

    def __init__(self, file: Path, lines: Mapping[str, int], *, in_cluster: bool = False,
                 origin: Origin | None = None):
        super().__init__(file, lines)
        self.in_cluster = in_cluster
        self.origin = origin  # where the document was declared, when ``file`` is a copy (--kustomize)
        # Paths in a document resolve against the folder of the file that declared it.
        self.folder = origin.file.parent if origin is not None else file.parent

    def integer(self, value: Any, path: str) -> int | None:
        if value is None:
            return None
        if not isinstance(value, int) or isinstance(value, bool):
            raise self.error(path, f"must be an integer, not {type_name(value)}")
        return value

    def duration(self, value: Any, path: str) -> float | None:
        if value is None:
            return None
        raw = self.string(value, path, fix="write a duration such as 5m or 90s")
        try:
            return parse_duration(raw)
        except ValueError:
            raise self.error(path, f"{raw!r} is not a duration", "write e.g. 5m, 90s or 1m30s") from None


def _is_file(path: Path) -> bool:
    try:
        return path.is_file()
    except OSError:  # a name too long to look up is no file either
        return False


def load_package(file: Path, *, allow_unsupported: bool = False) -> PackageSpec:
    """The one Package or HelmRelease of ``file``. Raises PackageError: a bad file or document, none, or
    several (then :func:`load_file` reads them all)."""
    file = resolved(file)
    read = read_file(file, allow_unsupported=allow_unsupported)
    if read.errors:
        raise read.errors[0]
    if len(read.packages) != 1:
        raise PackageError(file, "", f"holds {len(read.packages)} {KIND}s, not one",
                           f"write a {KIND} (apiVersion {API_VERSION})" if not read.packages
                           else "name the package (with --packages DIR) rather than its file")
    index, parsed = read.packages[0]
    spec, _ = read_document(file, parsed, index, allow_unsupported=allow_unsupported)
    if spec is None:
        raise PackageError(file, "", f"its {HELM_RELEASE} names a chart helmdeck cannot fetch")
    return spec


def read_document(file: Path, parsed: Parsed, index: int = 0, *, allow_unsupported: bool = False,
                  origin: Origin | None = None) -> tuple[PackageSpec | None, list[LeftOut]]:
    """A Package, or a Flux HelmRelease read as the Package with the same spec (:mod:`engine.package.flux`),
    and the Flux fields left out. None for a HelmRelease whose chart helmdeck cannot fetch, with
    ``allow_unsupported`` (a warning says so). ``origin``: where the document was declared when ``file`` is
    a copy of it. Raises PackageError."""
    data = parsed.data
    if not isinstance(data, dict) or data.get("kind") != HELM_RELEASE:
        return read_package(file, parsed, index, origin), []
    node = parsed.node
    doc = _Doc(file, lines_by_path(node) if node is not None else {})
    if data.get("apiVersion") not in HELM_API_VERSIONS:
        raise doc.error("apiVersion", f"must be one of {', '.join(HELM_API_VERSIONS)}, not {data.get('apiVersion')!r}")
    path, kind = chart_kind(data)
    if kind in UNFETCHABLE:
        if not allow_unsupported:
            raise unsupported_error(file, path, UNFETCHABLE[kind], doc.error(path, "").line)
        return None, [LeftOut(file, path, f"{HELM_RELEASE} left out: {UNFETCHABLE[kind]}", doc.error(path, "").line)]
    spec = data.get("spec")
    if isinstance(spec, dict) and isinstance(spec.get("chart"), str):
        raise doc.error("spec.chart", f"a {HELM_RELEASE} names its chart in spec.chart.spec or spec.chartRef",
                        f"write spec.chart.spec: {{chart, version, sourceRef}}, or use a {KIND} for a local chart")
    for name in _HELMDECK_ONLY:  # Flux's API server would refuse them: never read what Flux cannot apply
        if isinstance(spec, dict) and name in spec:
            raise doc.error(f"spec.{name}", f"a helmdeck field Flux's {HELM_RELEASE} does not have "
                            f"({at(PACKAGE_SPEC, name).helmdeck_only})",
                            f"remove it, or write a {KIND} (apiVersion {API_VERSION}, kind: {KIND}) to use it")
    found, left_out = tolerant(lambda d: read_package(file, Parsed(as_package(d), node), index, origin,
                                                      kind=HELM_RELEASE), data,
                               file=file,
                               lines=doc.lines, allow_unsupported=allow_unsupported)
    return dataclasses.replace(found, kind=HELM_RELEASE), left_out


def read_package(file: Path, parsed: Parsed, index: int = 0, origin: Origin | None = None, *,
                 kind: str = KIND) -> PackageSpec:
    """Validate one Package document (the ``index``-th document of ``file``; ``origin``: where it was
    declared when ``file`` is a copy; ``kind``: the document's, HelmRelease for one read as a Package, whose
    storage namespace is Flux's). Raises PackageError."""
    node, data = parsed.node, parsed.data
    doc = _Doc(file, lines_by_path(node) if node is not None else {}, origin=origin)
    return _package(doc, data, index, kind)


def object_origin(plural: str, namespace: str, name: str) -> Path:
    """What stands for the file of an API object in specs and errors: its API path
    (``/apis/<API_VERSION>/namespaces/<ns>/packages/<name>``), which names it exactly."""
    return Path(f"/apis/{API_VERSION}/namespaces/{namespace}/{plural}/{name}")


def object_document(obj: Mapping[str, Any]) -> tuple[Path, dict[str, Any]]:
    """An API object's origin and the fields the loader reads (Kubernetes' own metadata left out)."""
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    name, namespace = str(meta.get("name") or ""), str(meta.get("namespace") or "default")
    kind = str(obj.get("kind") or KIND)
    plural = f"{kind.lower()[:-1]}ies" if kind.endswith("y") else f"{kind.lower()}s"
    data = {"apiVersion": obj.get("apiVersion"), "kind": kind, "metadata": {"name": name, "namespace": namespace},
            "spec": obj.get("spec")}
    return object_origin(plural, namespace, name), data


def package_object(obj: Mapping[str, Any], default_service_account: str = "") -> PackageSpec:
    """Validate a Package object read from the API server, with the same checks and wording as a package file
    (no line numbers; the error's "file" is the object's API path, :func:`object_origin`). A chart folder or
    values files on disk cannot move into the cluster: they are refused naming the field. Raises PackageError.

    ``default_service_account`` is the ServiceAccount (in the Package's namespace) a Package without
    ``spec.serviceAccountName`` acts as: Flux's ``--default-service-account``, the multi-tenancy lockdown
    (``helmdeck controller --default-service-account``); "" acts as the controller itself."""
    origin, data = object_document(obj)
    spec = _package(_Doc(origin, {}, in_cluster=True), data)
    if default_service_account and not spec.service_account_name:
        return dataclasses.replace(spec, service_account_name=default_service_account)
    return spec


def _package(doc: _Doc, data: Any, index: int = 0, kind: str = KIND) -> PackageSpec:
    file = doc.file
    doc.known(data, PACKAGE_DOCUMENT)  # every unknown field named at once, before any other problem
    top = doc.mapping(data, "", allowed(PACKAGE_DOCUMENT))
    if not top:
        raise doc.error("", "file is empty", f"write a {KIND} (apiVersion {API_VERSION})")
    if top.get("apiVersion") != API_VERSION:
        raise doc.error("apiVersion", f"must be {API_VERSION}, not {top.get('apiVersion')!r}")
    if top.get("kind") != KIND:
        raise doc.error("kind", f"must be {KIND}, not {top.get('kind')!r}")
    meta = doc.mapping(top.get("metadata"), "metadata", allowed(PACKAGE_DOCUMENT, "metadata"))
    name = doc.string(meta.get("name"), "metadata.name", required=True, fix="name the package")
    if not _DNS_LABEL.fullmatch(name) or len(name) > 63:
        raise doc.error("metadata.name", f"{name!r} is not a valid Kubernetes name",
                        "use at most 63 lower-case letters, digits and '-'")
    namespace = doc.string(meta.get("namespace"), "metadata.namespace") or "default"
    if not _DNS_LABEL.fullmatch(namespace) or len(namespace) > 63:
        raise doc.error("metadata.namespace", f"{namespace!r} is not a valid namespace name",
                        "use at most 63 lower-case letters, digits and '-'")
    spec = doc.mapping(top.get("spec"), "spec", _SPEC_FIELDS)
    remote = remote_chart(spec, file=file, lines=doc.lines, namespace=namespace)
    if doc.in_cluster and not remote:
        raise doc.error("spec.chart", "a chart folder on disk cannot move into the cluster",
                        "publish the chart and name it with spec.chart.spec (a HelmRepository) or spec.chartRef "
                        "(an OCIRepository)")
    if doc.in_cluster and spec.get("valuesFiles"):
        raise doc.error("spec.valuesFiles", "values files on disk cannot move into the cluster",
                        "put the values in spec.values, or in a ConfigMap or Secret named by spec.valuesFrom")
    chart_rel = "" if remote else doc.string(spec.get("chart"), "spec.chart", required=True,
                                             fix="give the chart directory or .tgz, relative to this file")
    chart_path = current_path(file, namespace, name) if remote else resolved(doc.folder / chart_rel)
    if not remote and not is_chart(chart_path):
        raise doc.error("spec.chart", f"no Chart.yaml in {chart_path}",
                        "point spec.chart at a chart directory or a packaged .tgz")
    release_name = doc.string(spec.get("releaseName"), "spec.releaseName")
    identity = parse_identity(doc, spec, namespace, flux=kind == HELM_RELEASE)
    if release_name:
        if len(release_name) > MAX_RELEASE_NAME:
            raise doc.error("spec.releaseName", f"is {len(release_name)} characters long",
                            f"use at most {MAX_RELEASE_NAME} characters")
    else:
        release_name = shorten_release_name(default_release_name(name, identity["target_namespace"]))
    if not _RELEASE_NAME.fullmatch(release_name):
        raise doc.error("spec.releaseName", f"{release_name!r} is not a valid release name",
                        "use lower-case letters, digits, '-' and '.'")
    values = spec.get("values")
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise doc.error("spec.values", f"must be a mapping, not {type_name(values)}")
    files_raw = doc.sequence(spec.get("valuesFiles"), "spec.valuesFiles")
    values_files = []
    for i, item in enumerate(files_raw):
        rel = doc.string(item, f"spec.valuesFiles[{i}]", required=True)
        path = resolved(doc.folder / rel)
        if not _is_file(path):
            raise doc.error(f"spec.valuesFiles[{i}]", f"{path} does not exist", "fix the path (relative to this file)")
        values_files.append(path)
    maintenance = doc.string(spec.get("maintenance"), "spec.maintenance")
    if maintenance not in MAINTENANCE_STATES:
        raise doc.error("spec.maintenance", f"unknown mode {maintenance!r}",
                        f'use "" or {NO_RESOURCE_RECONCILIATION}')
    timeout = doc.duration(spec.get("timeout"), "spec.timeout")
    interval = doc.duration(spec.get("interval"), "spec.interval")
    if interval is not None and interval <= 0:
        raise doc.error("spec.interval", "must be longer than zero", "write e.g. 10m")
    max_history = doc.integer(spec.get("maxHistory"), "spec.maxHistory")
    if max_history is not None and max_history < 0:
        raise doc.error("spec.maxHistory", "must not be negative", "use 0 for unlimited")
    drift = parse_drift_detection(spec.get("driftDetection"), doc, DRIFT_MODES)
    extra: dict[str, Any] = {
        "install": _install(doc, spec.get("install")),
        "upgrade": _upgrade(doc, spec.get("upgrade")),
        "test": _test(doc, spec.get("test")),
        "rollback": _rollback(doc, spec.get("rollback")),
        "uninstall": _uninstall(doc, spec.get("uninstall")),
        "drift_detection": drift.mode, "drift_ignore": drift.ignore,
        "rendering": parse_rendering(spec, doc),
        "suspend": bool(doc.boolean(spec.get("suspend"), "spec.suspend")),
        "wait_strategy": _wait_strategy(doc, spec.get("waitStrategy")),
        "depends_on": parse_depends_on(spec.get("dependsOn"), file=file, lines=doc.lines, namespace=namespace,
                                       name=name),
        "values_from": parse_values_from(spec.get("valuesFrom"), file=file, lines=doc.lines),
        "crds": parse_crds(doc, spec), "kind": kind, **identity,
    }
    extra.update({k: v for k, v in (("timeout", timeout), ("interval", interval), ("max_history", max_history))
                  if v is not None})
    try:
        values_json = json.dumps(values, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise doc.error("spec.values", f"cannot be represented as JSON ({exc})", "use plain YAML values") from None
    return PackageSpec(
        file=file, document=index, name=name, namespace=namespace, chart_path=chart_path, release_name=release_name,
        values_json=values_json, values_files=tuple(values_files), maintenance=maintenance, chart_source=remote,
        origin=doc.origin, generation=spec_generation(spec), **extra,
    )


_SPEC_FIELDS = allowed(PACKAGE_SPEC)
_HELMDECK_ONLY = tuple(f.name for f in PACKAGE_SPEC if f.helmdeck_only)  # refused in a HelmRelease
_INSTALL_FLAGS = booleans(PACKAGE_SPEC, "install")  # each a boolean field of its section's dataclass
_UPGRADE_FLAGS = booleans(PACKAGE_SPEC, "upgrade")
_ROLLBACK_FLAGS = booleans(PACKAGE_SPEC, "rollback")
_UNINSTALL_FLAGS = booleans(PACKAGE_SPEC, "uninstall")


def _retries(doc: _Doc, remediation: dict[str, Any], path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    retries = doc.integer(remediation.get("retries"), f"{path}.retries")
    if retries is not None:
        out["retries"] = retries
    last = doc.boolean(remediation.get("remediateLastFailure"), f"{path}.remediateLastFailure")
    if last is not None:
        out["remediate_last_failure"] = last
    return out


def _on_failure(doc: _Doc, section: dict[str, Any], action: str) -> tuple[str, float | None]:
    """``spec.<action>.strategy`` as :class:`~engine.package.model.OnFailure`'s fields (its name, its retry interval
    in seconds or None; RemediateOnFailure when the section has none). ``name`` is required and a
    ``retryInterval`` is refused beside RemediateOnFailure, as Flux's CRD validates both (helm-controller api/v2
    helmrelease_types.go, InstallStrategy and UpgradeStrategy: ``+required``, the XValidation rule)."""
    path = f"spec.{action}.strategy"
    raw = section.get("strategy")
    if raw is None:
        return REMEDIATE_ON_FAILURE, None
    strategy = doc.mapping(raw, path, allowed(PACKAGE_SPEC, f"{action}.strategy"))
    doc.string(strategy.get("name"), f"{path}.name", required=True, fix=f"use one of: {', '.join(ON_FAILURE)}")
    name = doc.choice(strategy.get("name"), f"{path}.name", ON_FAILURE, REMEDIATE_ON_FAILURE)
    interval = doc.duration(strategy.get("retryInterval"), f"{path}.retryInterval")
    if interval is not None and name == REMEDIATE_ON_FAILURE:
        raise doc.error(f"{path}.retryInterval", f"cannot be set when {path}.name is {REMEDIATE_ON_FAILURE}",
                        "remove it, or set name: RetryOnFailure")
    return name, interval


def _install(doc: _Doc, raw: Any) -> InstallSpec:
    section = doc.mapping(raw, "spec.install", allowed(PACKAGE_SPEC, "install"))
    remediation = doc.mapping(section.get("remediation"), "spec.install.remediation",
                              allowed(PACKAGE_SPEC, "install.remediation"))
    on_failure, retry_interval = _on_failure(doc, section, "install")
    return InstallSpec(**doc.flags(section, "spec.install", _INSTALL_FLAGS), on_failure=on_failure,
                       retry_interval=retry_interval,
                       timeout=doc.duration(section.get("timeout"), "spec.install.timeout"),
                       **_retries(doc, remediation, "spec.install.remediation"))


def _upgrade(doc: _Doc, raw: Any) -> UpgradeSpec:
    section = doc.mapping(raw, "spec.upgrade", allowed(PACKAGE_SPEC, "upgrade"))
    remediation = doc.mapping(section.get("remediation"), "spec.upgrade.remediation",
                              allowed(PACKAGE_SPEC, "upgrade.remediation"))
    strategy = doc.choice(remediation.get("strategy"), "spec.upgrade.remediation.strategy", STRATEGIES, "rollback")
    on_failure, retry_interval = _on_failure(doc, section, "upgrade")
    renamed = doc.choice(section.get("chartNameChangeStrategy"), "spec.upgrade.chartNameChangeStrategy",
                         CHART_NAME_CHANGE_STRATEGIES, "Reinstall")
    return UpgradeSpec(**doc.flags(section, "spec.upgrade", _UPGRADE_FLAGS), strategy=strategy,
                       on_failure=on_failure, retry_interval=retry_interval,
                       timeout=doc.duration(section.get("timeout"), "spec.upgrade.timeout"),
                       server_side_apply=doc.choice(section.get("serverSideApply"), "spec.upgrade.serverSideApply",
                                                    SSA_MODES, "auto"),
                       chart_name_change=renamed,
                       **_retries(doc, remediation, "spec.upgrade.remediation"))


def _rollback(doc: _Doc, raw: Any) -> RollbackSpec:
    section = doc.mapping(raw, "spec.rollback", allowed(PACKAGE_SPEC, "rollback"))
    return RollbackSpec(**doc.flags(section, "spec.rollback", _ROLLBACK_FLAGS),
                        timeout=doc.duration(section.get("timeout"), "spec.rollback.timeout"),
                        server_side_apply=doc.choice(section.get("serverSideApply"), "spec.rollback.serverSideApply",
                                                     SSA_MODES, "auto"))


def _wait_strategy(doc: _Doc, raw: Any) -> str:
    if raw is None:
        return ""
    section = doc.mapping(raw, "spec.waitStrategy", allowed(PACKAGE_SPEC, "waitStrategy"))
    return doc.choice(section.get("name"), "spec.waitStrategy.name", WAIT_STRATEGIES, "poller")


def _uninstall(doc: _Doc, raw: Any) -> UninstallSpec:
    section = doc.mapping(raw, "spec.uninstall", allowed(PACKAGE_SPEC, "uninstall"))
    propagation = doc.choice(section.get("deletionPropagation"), "spec.uninstall.deletionPropagation", PROPAGATIONS,
                             "background")
    return UninstallSpec(**doc.flags(section, "spec.uninstall", _UNINSTALL_FLAGS), deletion_propagation=propagation,
                         timeout=doc.duration(section.get("timeout"), "spec.uninstall.timeout"))


def _test(doc: _Doc, raw: Any) -> TestSpec:
    section = doc.mapping(raw, "spec.test", allowed(PACKAGE_SPEC, "test"))
    filters_raw = doc.sequence(section.get("filters"), "spec.test.filters")
    filters = []
    for i, item in enumerate(filters_raw):
        path = f"spec.test.filters[{i}]"
        entry = doc.mapping(item, path, allowed(PACKAGE_SPEC, "test.filters"))
        filters.append(TestFilter(doc.string(entry.get("name"), f"{path}.name", required=True,
                                             fix="name the test hook"),
                                  bool(doc.boolean(entry.get("exclude"), f"{path}.exclude"))))
    return TestSpec(
        enable=bool(doc.boolean(section.get("enable"), "spec.test.enable")),
        ignore_failures=bool(doc.boolean(section.get("ignoreFailures"), "spec.test.ignoreFailures")),
        timeout=doc.duration(section.get("timeout"), "spec.test.timeout"),
        filters=tuple(filters),
    )


def package_files(directory: Path) -> list[Path]:
    """Package files in ``directory`` (not recursive), sorted by name; with them a symlink that leads to no file
    (dangling, a loop), so that reading it reports it rather than the folder passing over it."""
    return sorted(p for p in directory.iterdir()
                  if p.suffix in PACKAGE_SUFFIXES and (p.is_file() or (p.is_symlink() and not p.is_dir())))


@dataclass(frozen=True)
class Loaded:
    """A packages folder read: the valid packages, every problem, and the kinds of the objects skipped
    (one entry per object, :func:`engine.package.documents.skipped_line` says them in one line)."""

    specs: list[PackageSpec]
    errors: list[PackageError]
    skipped: tuple[str, ...] = ()
    left_out: tuple[LeftOut, ...] = ()  # Flux fields left out with --allow-unsupported: warnings

    def skipped_line(self) -> str:
        return skipped_line(self.skipped)


@dataclass(frozen=True)
class FileRead:
    """One file read by :func:`load_file` (sources not linked yet)."""

    specs: list[PackageSpec]
    sources: list[SourceSpec]
    skipped: tuple[str, ...]
    errors: list[PackageError]
    left_out: list[LeftOut]
    charts: tuple[HelmChartSpec, ...] = ()  # Flux's HelmCharts, for the chartRefs naming them


def load_file(file: Path, *, allow_unsupported: bool = False, origin: Origin | None = None) -> FileRead:
    """Every document of ``file``: its valid Packages and HelmReleases, its sources, the kinds skipped, the
    problems (a bad document never hides the others) and the Flux fields left out. ``origin``: where its
    one object was declared when ``file`` is a copy of it (paths resolve against that file's folder)."""
    try:
        read = read_file(file, allow_unsupported=allow_unsupported)
    except PackageError as exc:
        return FileRead([], [], (), [exc], [])
    specs: list[PackageSpec] = []
    errors = list(read.errors)
    left_out = list(read.left_out)
    for index, parsed in read.packages:
        try:
            spec, dropped = read_document(file, parsed, index, allow_unsupported=allow_unsupported, origin=origin)
        except PackageError as exc:
            errors += exc.each
            continue
        left_out += dropped
        if spec is not None:
            specs.append(spec)
    return FileRead(specs, list(read.sources), read.skipped, errors, left_out, read.charts)


def load_folder(directory: Path, *, allow_unsupported: bool = False,
                origins: Callable[[Path], Origin | None] | None = None) -> Loaded:
    """Load every file of ``directory``: any number of Packages, HelmReleases, sources and other objects
    per file; Flux fields helmdeck does not implement are errors, or with ``allow_unsupported`` warnings.
    ``origins``: where the object of a file was declared, when the files are copies (``--kustomize``).

    A bad file or document never stops the others. Two documents driving the same release are both
    reported; so are ``dependsOn`` entries naming no package here, and cycles (engine.package.order).
    """
    try:
        files = package_files(directory)
    except OSError as exc:
        return Loaded([], [PackageError(directory, "", f"cannot list packages ({exc.strerror})")])
    specs: list[PackageSpec] = []
    sources: list[SourceSpec] = []
    skipped: list[str] = []
    errors: list[PackageError] = []
    left_out: list[LeftOut] = []
    charts: list[HelmChartSpec] = []
    for path in files:
        target = resolved(path)
        # A link that leads to no file is reported by its own name, not its target's.
        read = load_file(target if target.is_file() else path, allow_unsupported=allow_unsupported,
                         origin=origins(target) if origins is not None else None)
        specs += read.specs
        sources += read.sources
        skipped += read.skipped
        errors += read.errors
        left_out += read.left_out
        charts += read.charts
    specs, set_errors = package_set(specs, sources, functools.partial(link, charts=charts))
    return Loaded(specs, errors + set_errors, tuple(skipped), tuple(left_out))


def as_declared(problem: PackageError, origin: Origin) -> PackageError:
    """``problem`` of a copy said of where its object was declared: the repository file and the object, no
    line (the copy's lines are kustomize's), repository paths in its words (:func:`in_repository`)."""
    return PackageError(Path(origin.shown), problem.field, in_repository(problem.problem, origin.root),
                        in_repository(problem.fix, origin.root), obj=origin.ref)


def said_of(exc: BaseException, *specs: PackageSpec | None) -> str:
    """``exc`` in words; a problem of a package's file said of where the package was declared, when that file
    is a copy (``--kustomize``: :func:`as_declared`)."""
    if isinstance(exc, PackageError):
        for spec in specs:
            if spec is not None and spec.origin is not None and exc.file == spec.file:
                return str(as_declared(exc, spec.origin))
    return str(exc)


def left_out_as_declared(item: LeftOut, origin: Origin) -> LeftOut:
    """A left-out field of a copy said of where its object was declared (as :func:`as_declared`)."""
    return LeftOut(Path(origin.shown), item.field, in_repository(item.problem, origin.root), obj=origin.ref)


def load_packages(directory: Path, *, allow_unsupported: bool = False,
                  ) -> tuple[list[PackageSpec], list[PackageError]]:
    """The valid packages of ``directory`` and every problem (:func:`load_folder` without the skipped kinds)."""
    loaded = load_folder(directory, allow_unsupported=allow_unsupported)
    return loaded.specs, loaded.errors


def load_objects(packages: Iterable[Mapping[str, Any]], sources: Iterable[Mapping[str, Any]],
                 default_service_account: str = "") -> tuple[list[PackageSpec], list[PackageError]]:
    """Validate Package, HelmRepository and OCIRepository objects read from the API server, as
    :func:`load_packages` validates a folder: each object alone, then the set (sources linked, one package per
    release, dependsOn names and cycles). Returns the valid packages and the errors; a bad object never stops
    the others. ``default_service_account``: see :func:`package_object`."""
    specs: list[PackageSpec] = []
    errors: list[PackageError] = []
    found: list[SourceSpec] = []
    for obj in sources:
        origin, data = object_document(obj)
        try:
            found.append(parse_source(data, file=origin, lines={}))
        except PackageError as exc:
            errors += exc.each
    for obj in packages:
        try:
            specs.append(package_object(obj, default_service_account))
        except PackageError as exc:
            errors += exc.each
    specs, set_errors = package_set(specs, found, functools.partial(link, files=False))
    return specs, errors + set_errors


def package_set(specs: list[PackageSpec], sources: list[SourceSpec],
                linker: Callable[[list[PackageSpec], list[SourceSpec]], tuple[list[PackageSpec], list[PackageError]]],
                ) -> tuple[list[PackageSpec], list[PackageError]]:
    """The checks across packages, whatever they were read from: sources linked (``linker``), two packages
    driving one release (both reported and left out), dependsOn names and cycles (engine.package.order)."""
    errors: list[PackageError] = []
    specs, link_errors = linker(specs, sources)
    by_release: dict[tuple[str, str], list[PackageSpec]] = {}
    for spec in specs:
        by_release.setdefault(spec.key, []).append(spec)
    for key, group in by_release.items():
        if len(group) > 1:  # named in file order, whatever order they were read in
            group.sort(key=lambda s: (str(s.file), s.document))
            names = ", ".join(f"{s.file.name} ({s.kind} {s.name})" for s in group)
            for spec in group:
                errors.append(PackageError(spec.file, "spec.releaseName",
                                           f"release {key[0]}/{key[1]} is also declared by {names}",
                                           "give each package its own release name or namespace"))
            specs = [s for s in specs if s.key != key]
    specs, order_errors = check_dependencies(specs)
    return specs, errors + link_errors + order_errors
