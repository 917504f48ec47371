"""Flux's own documents, read as they are: HelmRelease (``helm.toolkit.fluxcd.io/v2``, ``v2beta2``) means
what a helmdeck Package with the same ``spec`` means, and Flux's HelmRepository / OCIRepository
(``source.toolkit.fluxcd.io/v1``, ``v1beta2``) are chart sources (:mod:`engine.sources.repository`).

A Flux field helmdeck does not implement (:data:`UNSUPPORTED`: ``spec.kubeConfig``, chart verification,
...) is an error naming the file, line and field; with ``allow_unsupported`` the
field is left out and a warning says so, except a verification helmdeck cannot do
(:data:`NEVER_LEFT_OUT`). A chart helmdeck cannot fetch (``chartRef`` to an ExternalArtifact, a
GitRepository or Bucket source) leaves the HelmRelease out: an error, or with ``allow_unsupported`` a
warning. Flux's HelmChart object is read as far as a HelmRelease's ``chartRef`` needs it
(:func:`engine.sources.repository.parse_helm_chart`): ``chartRef`` to a HelmChart means
``spec.chart.spec`` with the HelmChart's fields. Fields with no effect on the release (labels and annotations
of the object, ``persistentClient``, ``spec.chart.metadata``) are accepted and ignored.

A typo in a field Flux does not know stays an "unknown field" error, as for a Package.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from engine.base.fields import UNSUPPORTED_VALUE, PackageError, raise_all
from engine.base.wire import API_VERSION

HELM_RELEASE = "HelmRelease"
HELM_API_VERSIONS = ("helm.toolkit.fluxcd.io/v2", "helm.toolkit.fluxcd.io/v2beta2")
ALLOW_FLAG = "--allow-unsupported"

# helm's client-side check is left out only where it checks nothing (engine.helm.cli Helm.server_validates)
_OPENAPI = ("helm's OpenAPI check is left out where the API server validates fields itself (Kubernetes 1.27 and "
            "newer) and kept where it is the only check")
_SCHEMA = "a chart's values.schema.json is checked on every action"
_VERIFY = "a HelmChart's verification (cosign, notation) is not implemented: verify on an OCIRepository"
_CHART_VERIFY = "chart verification with cosign or notation is not implemented here (provider helm is)"
# Flux fields helmdeck does not implement, by dotted path (list indices left out), and why.
UNSUPPORTED: Mapping[str, str] = {
    "spec.kubeConfig": "helmdeck acts on the cluster of its own kubeconfig, never a remote one",
    "spec.chart.spec.verify": _CHART_VERIFY,
    "spec.chart.spec.valuesFile": "the deprecated single values file: use spec.chart.spec.valuesFiles",
    "spec.valuesFile": "the deprecated single values file: use spec.valuesFiles",  # a HelmChart's
    **{f"spec.{action}.{flag}": why for action in ("install", "upgrade")
       for flag, why in (("disableOpenAPIValidation", _OPENAPI), ("disableSchemaValidation", _SCHEMA))},
    "spec.install.skipCRDs": "deprecated by Flux: use spec.install.crds: Skip",
    "spec.install.remediation.ignoreTestFailures": "use spec.test.ignoreFailures",
    "spec.upgrade.remediation.ignoreTestFailures": "use spec.test.ignoreFailures",
    "spec.dependsOn.readyExpr": "CEL readiness expressions are not implemented",
    # Flux's sources (an OCIRepository's spec.verify is read: engine.sources.repository)
    "spec.verify": _VERIFY,
    "spec.provider": "cloud provider authentication is not implemented: use spec.secretRef",
    "spec.serviceAccountName": "image pull secrets of a ServiceAccount are not read: use spec.secretRef",
    "spec.proxySecretRef": "proxies are not implemented",
    "spec.ignore": "not a chart field",
    "spec.suspend": "a source is not suspended by helmdeck",
}
# Unsupported fields that ask for a chart's signature to be checked: refused even with --allow-unsupported, so a
# chart asked to be verified is never installed unverified (as an OCIRepository's keyless spec.verify).
NEVER_LEFT_OUT = frozenset({"spec.chart.spec.verify", "spec.verify"})
# Accepted and ignored: no effect on the release helmdeck renders.
IGNORED = ("spec.persistentClient", "spec.chart.metadata", "metadata.labels", "metadata.annotations",
           "metadata.uid", "metadata.resourceVersion", "metadata.generation", "metadata.creationTimestamp",
           "spec.accessFrom", "spec.chart.spec.sourceRef.apiVersion", "spec.sourceRef.apiVersion")
# chartRef / sourceRef kinds Flux knows and helmdeck cannot fetch from.
UNFETCHABLE = {"ExternalArtifact": "an ExternalArtifact is produced by another controller",
               "GitRepository": "charts from a Git repository are not implemented",
               "Bucket": "charts from a Bucket are not implemented"}

_INDEX = re.compile(r"\[\d+\]")
T = TypeVar("T")


@dataclass(frozen=True)
class LeftOut:
    """A Flux field left out with ``--allow-unsupported``: ``str()`` reads ``file:line: field: problem``, or
    with ``obj`` ``file (obj): field: problem`` (as :class:`~engine.base.fields.PackageError`)."""

    file: Path
    field: str
    problem: str
    line: int | None = None
    obj: str = ""

    def __str__(self) -> str:
        where = f"{self.file}:{self.line}" if self.line else str(self.file)
        where += f" ({self.obj})" if self.obj else ""
        return f"{where}: {self.field}: {self.problem}"


def never_left_out(field: str) -> bool:
    """Whether ``field`` (``spec.x[0].y``) is refused even with ``--allow-unsupported`` (:data:`NEVER_LEFT_OUT`)."""
    return _INDEX.sub("", field) in NEVER_LEFT_OUT


def unsupported_error(file: Path, field: str, why: str, line: int | None) -> PackageError:
    """The error for a Flux field helmdeck does not implement: the field, why, and the way on (no
    ``--allow-unsupported`` for a field of :data:`NEVER_LEFT_OUT`)."""
    if never_left_out(field):
        return PackageError(file, field, f"a Flux field helmdeck does not implement ({why}); not left out by "
                            f"{ALLOW_FLAG}, as the chart would install unverified",
                            "verify with provider helm (helm package --sign) or on an OCIRepository's spec.verify, "
                            "or remove it to install the chart unverified", line)
    return PackageError(file, field, f"a Flux field helmdeck does not implement ({why})",
                        f"remove it, or pass {ALLOW_FLAG} to go on without it", line)


def _drop(data: Any, path: str) -> bool:
    """Delete the field at dotted ``path`` (``a.b[2].c``) from ``data``; False when it is not there."""
    parts = re.findall(r"[^.\[\]]+|\[\d+\]", path)
    node = data
    for part in parts[:-1]:
        if part.startswith("["):
            index = int(part[1:-1])
            if not isinstance(node, list) or index >= len(node):
                return False
            node = node[index]
        elif isinstance(node, dict) and part in node:
            node = node[part]
        else:
            return False
    last = parts[-1] if parts else ""
    if isinstance(node, dict) and last in node:
        del node[last]
        return True
    return False


def tolerant(parse: Callable[[Any], T], data: Any, *, file: Path, lines: Mapping[str, int],
             allow_unsupported: bool) -> tuple[T, list[LeftOut]]:
    """``parse(data)`` of a Flux document, the fields of :data:`UNSUPPORTED` refused (an error naming file,
    line and field) or, with ``allow_unsupported``, left out with a warning; :data:`IGNORED` fields dropped.

    ``data`` is never changed (a copy is pruned). Raises PackageError: the parser's own errors, an
    unsupported field without ``allow_unsupported``; :class:`~engine.base.fields.FieldErrors` when the parser
    named several fields at once and more than one stays a problem (each unknown or unsupported one)."""
    work = copy.deepcopy(data)
    warnings: list[LeftOut] = []
    for _ in range(len(UNSUPPORTED) + len(IGNORED) + 64):  # each turn drops a field or ends
        try:
            return parse(work), warnings
        except PackageError as exc:
            problems: list[PackageError] = []  # every field of this turn that stays a problem
            for each in exc.each:
                general = _INDEX.sub("", each.field)
                if each.problem not in ("unknown field", UNSUPPORTED_VALUE) or not (
                        general in UNSUPPORTED or general in IGNORED):
                    problems.append(each)
                    continue
                line = lines.get(each.field, each.line)
                if general in UNSUPPORTED:
                    why = UNSUPPORTED[general]
                    if not allow_unsupported or never_left_out(general):
                        problems.append(unsupported_error(file, each.field, why, line))
                        continue
                    warnings.append(LeftOut(file, each.field, f"left out: a Flux field helmdeck does not implement "
                                             f"({why})", line))
                if not _drop(work, each.field):
                    problems.append(each)
            if problems:
                raise_all(problems)
    raise PackageError(file, "", "too many fields helmdeck does not implement")


def as_package(data: dict[str, Any]) -> dict[str, Any]:
    """A HelmRelease's data as a Package's (a shallow copy: apiVersion and kind replaced)."""
    return {**data, "apiVersion": API_VERSION, "kind": "Package"}


def chart_kind(data: Mapping[str, Any]) -> tuple[str, str]:
    """The dotted path and kind of a HelmRelease's chart source (``spec.chartRef.kind`` or
    ``spec.chart.spec.sourceRef.kind``), ``("", "")`` when neither is a string."""
    spec = data.get("spec")
    if not isinstance(spec, dict):
        return "", ""
    ref = spec.get("chartRef")
    if isinstance(ref, dict) and isinstance(ref.get("kind"), str):
        return "spec.chartRef.kind", ref["kind"]
    chart = spec.get("chart")
    inner = chart.get("spec") if isinstance(chart, dict) else None
    source = inner.get("sourceRef") if isinstance(inner, dict) else None
    if isinstance(source, dict) and isinstance(source.get("kind"), str):
        return "spec.chart.spec.sourceRef.kind", source["kind"]
    return "", ""
