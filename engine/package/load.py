"""The package loader: the one reader of package files (a Package, and the HelmRepository / OCIRepository
documents beside it), validated field by field into :class:`engine.package.model.PackageSpec`.

Every problem raises :class:`engine.base.fields.PackageError` naming the file, the field (a dotted path),
the line where known, and how to fix it; :func:`load_packages` collects them so one bad file never stops
the others.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from engine.base.fields import Fields, PackageError, lines_by_path, parse_duration, type_name
from engine.base.labels import API_VERSION
from engine.package.crds import parse_crds
from engine.package.depends import parse_depends_on
from engine.package.documents import link, package_document, read_sources, remote_chart
from engine.package.drift import parse_drift_detection
from engine.package.identity import default_release_name, parse_identity
from engine.package.model import (
    DRIFT_MODES,
    KIND,
    MAINTENANCE_STATES,
    MAX_RELEASE_NAME,
    NO_RESOURCE_RECONCILIATION,
    PACKAGE_SUFFIXES,
    STRATEGIES,
    ActionSpec,
    InstallSpec,
    PackageSpec,
    RollbackSpec,
    TestFilter,
    TestSpec,
    UninstallSpec,
    UpgradeSpec,
    shorten_release_name,
)
from engine.package.order import check_dependencies
from engine.package.postrender import SPEC_FIELDS, parse_rendering
from engine.package.values_from import parse_values_from
from engine.sources.chart import is_chart
from engine.sources.current import current_path

_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_RELEASE_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


class _Doc(Fields):
    """A package file's fields (see :class:`engine.base.fields.Fields`)."""

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


def load_package(file: Path) -> PackageSpec:
    """Read and validate one package file. Raises PackageError."""
    file = file.resolve()
    parsed = package_document(file)  # the file may also hold its HelmRepository / OCIRepository
    node, data = parsed.node, parsed.data
    doc = _Doc(file, lines_by_path(node) if node is not None else {})
    if isinstance(data, dict) and "apiVersion" not in data and "kind" not in data and "spec" not in data:
        raise doc.error("", f"not a {KIND} (no apiVersion, kind or spec)",
                        "values files must live outside the packages folder: every YAML file there is a package")
    top = doc.mapping(data, "", ("apiVersion", "kind", "metadata", "spec"))
    if not top:
        raise doc.error("", "file is empty", f"write a {KIND} (apiVersion {API_VERSION})")
    if top.get("apiVersion") != API_VERSION:
        raise doc.error("apiVersion", f"must be {API_VERSION}, not {top.get('apiVersion')!r}")
    if top.get("kind") != KIND:
        raise doc.error("kind", f"must be {KIND}, not {top.get('kind')!r}")
    meta = doc.mapping(top.get("metadata"), "metadata", ("name", "namespace"))
    name = doc.string(meta.get("name"), "metadata.name", required=True, fix="name the package")
    if not _DNS_LABEL.match(name) or len(name) > 63:
        raise doc.error("metadata.name", f"{name!r} is not a valid Kubernetes name",
                        "use at most 63 lower-case letters, digits and '-'")
    namespace = doc.string(meta.get("namespace"), "metadata.namespace") or "default"
    if not _DNS_LABEL.match(namespace) or len(namespace) > 63:
        raise doc.error("metadata.namespace", f"{namespace!r} is not a valid namespace name",
                        "use at most 63 lower-case letters, digits and '-'")
    spec = doc.mapping(top.get("spec"), "spec", _SPEC_FIELDS)
    remote = remote_chart(spec, file=file, lines=doc.lines, namespace=namespace)
    chart_rel = "" if remote else doc.string(spec.get("chart"), "spec.chart", required=True,
                                             fix="give the chart directory or .tgz, relative to this file")
    chart_path = current_path(file, namespace, name) if remote else (file.parent / chart_rel).resolve()
    if not remote and not is_chart(chart_path):
        raise doc.error("spec.chart", f"no Chart.yaml in {chart_path}",
                        "point spec.chart at a chart directory or a packaged .tgz")
    release_name = doc.string(spec.get("releaseName"), "spec.releaseName")
    identity = parse_identity(doc, spec, namespace)
    if release_name:
        if len(release_name) > MAX_RELEASE_NAME:
            raise doc.error("spec.releaseName", f"is {len(release_name)} characters long",
                            f"use at most {MAX_RELEASE_NAME} characters")
    else:
        release_name = shorten_release_name(default_release_name(name, identity["target_namespace"]))
    if not _RELEASE_NAME.match(release_name):
        raise doc.error("spec.releaseName", f"{release_name!r} is not a valid release name",
                        "use lower-case letters, digits, '-' and '.'")
    values = spec.get("values")
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise doc.error("spec.values", f"must be a mapping, not {type_name(values)}")
    files_raw = spec.get("valuesFiles") or []
    if not isinstance(files_raw, list):
        raise doc.error("spec.valuesFiles", f"must be a list, not {type_name(files_raw)}")
    values_files = []
    for i, item in enumerate(files_raw):
        rel = doc.string(item, f"spec.valuesFiles[{i}]", required=True)
        path = (file.parent / rel).resolve()
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
        "rollback": RollbackSpec(**doc.flags(
            doc.mapping(spec.get("rollback"), "spec.rollback", _ROLLBACK_FLAGS), "spec.rollback", _ROLLBACK_FLAGS)),
        "uninstall": UninstallSpec(**doc.flags(
            doc.mapping(spec.get("uninstall"), "spec.uninstall", _UNINSTALL_FLAGS), "spec.uninstall",
            _UNINSTALL_FLAGS)),
        "drift_detection": drift.mode, "drift_ignore": drift.ignore,
        "rendering": parse_rendering(spec, doc),
        "suspend": bool(doc.boolean(spec.get("suspend"), "spec.suspend")),
        "depends_on": parse_depends_on(spec.get("dependsOn"), file=file, lines=doc.lines, namespace=namespace,
                                       name=name),
        "values_from": parse_values_from(spec.get("valuesFrom"), file=file, lines=doc.lines),
        "crds": parse_crds(doc, spec), **identity,
    }
    extra.update({k: v for k, v in (("timeout", timeout), ("interval", interval), ("max_history", max_history))
                  if v is not None})
    try:
        values_json = json.dumps(values, sort_keys=True)
    except (TypeError, ValueError) as exc:
        raise doc.error("spec.values", f"cannot be represented as JSON ({exc})", "use plain YAML values") from None
    return PackageSpec(
        file=file, name=name, namespace=namespace, chart_path=chart_path, release_name=release_name,
        values_json=values_json, values_files=tuple(values_files), maintenance=maintenance, chart_source=remote,
        **extra,
    )


_SPEC_FIELDS = (
    "chart", "chartRef", "releaseName", "values", "valuesFiles", "maintenance", "timeout", "interval", "maxHistory",
    "suspend", "storageNamespace", "install", "upgrade", "test", "rollback", "uninstall", "driftDetection",
    "dependsOn", "valuesFrom", "targetNamespace", "serviceAccountName", *SPEC_FIELDS,
)


def _flag_names(section: type[ActionSpec]) -> tuple[str, ...]:
    """The flags of an action section: its boolean fields, camelCase as in the file."""
    return tuple(re.sub(r"_([a-z])", lambda m: m[1].upper(), f.name)
                 for f in dataclasses.fields(section) if f.type == "bool")


_INSTALL_FLAGS = _flag_names(InstallSpec)
_UPGRADE_FLAGS = _flag_names(UpgradeSpec)
_ROLLBACK_FLAGS = _flag_names(RollbackSpec)
_UNINSTALL_FLAGS = _flag_names(UninstallSpec)


def _retries(doc: _Doc, remediation: dict[str, Any], path: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    retries = doc.integer(remediation.get("retries"), f"{path}.retries")
    if retries is not None:
        out["retries"] = retries
    last = doc.boolean(remediation.get("remediateLastFailure"), f"{path}.remediateLastFailure")
    if last is not None:
        out["remediate_last_failure"] = last
    return out


def _install(doc: _Doc, raw: Any) -> InstallSpec:
    section = doc.mapping(raw, "spec.install", (*_INSTALL_FLAGS, "remediation", "crds"))
    remediation = doc.mapping(section.get("remediation"), "spec.install.remediation",
                              ("retries", "remediateLastFailure"))
    return InstallSpec(**doc.flags(section, "spec.install", _INSTALL_FLAGS),
                       **_retries(doc, remediation, "spec.install.remediation"))


def _upgrade(doc: _Doc, raw: Any) -> UpgradeSpec:
    section = doc.mapping(raw, "spec.upgrade", (*_UPGRADE_FLAGS, "remediation", "crds"))
    remediation = doc.mapping(section.get("remediation"), "spec.upgrade.remediation",
                              ("retries", "strategy", "remediateLastFailure"))
    strategy = doc.choice(remediation.get("strategy"), "spec.upgrade.remediation.strategy", STRATEGIES, "rollback")
    return UpgradeSpec(**doc.flags(section, "spec.upgrade", _UPGRADE_FLAGS), strategy=strategy,
                       **_retries(doc, remediation, "spec.upgrade.remediation"))


def _test(doc: _Doc, raw: Any) -> TestSpec:
    section = doc.mapping(raw, "spec.test", ("enable", "ignoreFailures", "timeout", "filters"))
    filters_raw = section.get("filters") or []
    if not isinstance(filters_raw, list):
        raise doc.error("spec.test.filters", f"must be a list, not {type_name(filters_raw)}")
    filters = []
    for i, item in enumerate(filters_raw):
        path = f"spec.test.filters[{i}]"
        entry = doc.mapping(item, path, ("name", "exclude"))
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
    """Package files in ``directory`` (not recursive), sorted by name."""
    return sorted(p for p in directory.iterdir() if p.suffix in PACKAGE_SUFFIXES and p.is_file())


def load_packages(
    directory: Path, loader: Callable[[Path], PackageSpec] = load_package
) -> tuple[list[PackageSpec], list[PackageError]]:
    """Load every package file in ``directory``.

    Returns the valid packages and the errors; a bad file never stops the
    others. Two files driving the same release are both reported; so are
    ``dependsOn`` entries naming no package here, and cycles (engine.package.order).
    """
    specs: list[PackageSpec] = []
    errors: list[PackageError] = []
    try:
        files = package_files(directory)
    except OSError as exc:
        return [], [PackageError(directory, "", f"cannot list packages ({exc.strerror})")]
    sources = []
    for path in files:
        try:
            found, package = read_sources(path)  # HelmRepository / OCIRepository documents (engine.sources)
            sources += found
            if package:
                specs.append(loader(path))
        except PackageError as exc:
            errors.append(exc)
    specs, link_errors = link(specs, sources)
    errors += link_errors
    by_release: dict[tuple[str, str], list[PackageSpec]] = {}
    for spec in specs:
        by_release.setdefault(spec.key, []).append(spec)
    for key, group in by_release.items():
        if len(group) > 1:
            names = ", ".join(s.file.name for s in group)
            for spec in group:
                errors.append(PackageError(spec.file, "spec.releaseName",
                                           f"release {key[0]}/{key[1]} is also declared by {names}",
                                           "give each package its own release name or namespace"))
            specs = [s for s in specs if s.key != key]
    specs, order_errors = check_dependencies(specs)
    return specs, errors + order_errors
