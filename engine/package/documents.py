"""The documents of a packages-folder file, and Packages linked to the repositories they name.

A file may hold any number of documents (objects), as a Flux repository's files do: Packages,
``HelmRepository`` / ``OCIRepository`` sources, and objects of other kinds (Namespaces,
Kustomizations, Secrets, ...), which helmdeck does not read and skips: :func:`read_file` sorts
them. The package loader (:func:`engine.package.load.load_packages`) reads each Package document
and, once every file is read, :func:`link` turns each remote Package's chart form into a
:class:`ChartRequest` against the sources found. A Package naming a missing repository is
reported (which one, and those known) and left out; the others carry on.
API objects are linked alike: :func:`engine.package.load.load_objects`.
"""

from __future__ import annotations

import dataclasses
import functools
import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.base.fields import PackageError, lines_by_path
from engine.base.loader import Parsed, YamlLimitError, load_documents, package_limits
from engine.base.wire import API_VERSION
from engine.package.flux import HELM_RELEASE, UNFETCHABLE, LeftOut, tolerant, unsupported_error
from engine.package.identity import service_account_user
from engine.package.model import KIND, PackageSpec
from engine.sources.repository import (
    HELM_CHART,
    SOURCE_KINDS,
    ChartRequest,
    HelmChartSpec,
    SourceRef,
    SourceSpec,
    find_source,
    parse_helm_chart,
    parse_package_chart,
    parse_source,
    request_for,
)

# A Kubernetes kind: an upper-case letter, then letters and digits (Go identifiers, as CRD kinds are).
_KIND = re.compile(r"[A-Z][A-Za-z0-9]{0,62}")


@dataclass(frozen=True)
class FileDocuments:
    """What one file holds: its Package and HelmRelease documents (index in the file, parse), its sources,
    its Flux HelmCharts, the kinds of the documents skipped (in file order), the problems of single documents
    (the others still count), and the Flux fields left out with ``--allow-unsupported``."""

    packages: tuple[tuple[int, Parsed], ...] = ()
    sources: tuple[SourceSpec, ...] = ()
    skipped: tuple[str, ...] = ()
    errors: tuple[PackageError, ...] = ()
    left_out: tuple[LeftOut, ...] = ()
    charts: tuple[HelmChartSpec, ...] = ()


def documents(file: Path) -> tuple[Parsed, ...]:
    """Every document of ``file`` within the package limits (cached per change of the file). Raises PackageError."""
    try:
        return load_documents(file, package_limits())  # cached: every reader of the file shares one parse
    except YamlLimitError as exc:
        raise PackageError(file, "", exc.problem, exc.fix, exc.line) from None


def lines_of(doc: Parsed) -> dict[str, int]:
    """Dotted field paths of ``doc`` to their 1-based lines."""
    return lines_by_path(doc.node) if doc.node is not None else {}


def _line(doc: Parsed) -> int | None:
    return doc.node.start_mark.line + 1 if doc.node is not None else None


def read_file(file: Path, *, allow_unsupported: bool = False) -> FileDocuments:
    """Sort the documents of ``file``: Packages and HelmReleases, sources and Flux's HelmCharts (validated;
    Flux's with :func:`engine.package.flux.tolerant`), other kinds (skipped).

    Raises PackageError when the file as a whole is unreadable (YAML syntax, a size, nesting,
    alias or document-count limit); a bad document is reported in ``errors`` and the others count.
    A document that is not an object (no ``apiVersion`` and ``kind``) is an error: it is most often
    a values file put in the packages folder.
    """
    packages: list[tuple[int, Parsed]] = []
    sources: list[SourceSpec] = []
    skipped: list[str] = []
    errors: list[PackageError] = []
    left_out: list[LeftOut] = []
    charts: list[HelmChartSpec] = []
    for index, doc in enumerate(documents(file)):
        data = doc.data
        if data is None:
            continue  # an empty document ("---" at the end)
        kind = data.get("kind") if isinstance(data, dict) else None
        if not isinstance(data, dict) or ("apiVersion" not in data and kind is None):
            errors.append(PackageError(
                file, "", f"not a {KIND} or another Kubernetes object (no apiVersion or kind)",
                "values files must live outside the packages folder: every YAML file there holds objects",
                _line(doc)))
            continue
        if not isinstance(kind, str) or not _KIND.fullmatch(kind):
            lines = lines_of(doc)
            errors.append(PackageError(file, "kind", f"{kind!r} is not a Kubernetes kind",
                                       f"write e.g. kind: {KIND}", lines.get("kind", _line(doc))))
            continue
        if kind in (KIND, HELM_RELEASE):
            packages.append((index, doc))
        elif kind in SOURCE_KINDS:
            lines = lines_of(doc)
            try:
                if data.get("apiVersion") == API_VERSION:  # helmdeck's own: every field known
                    sources.append(parse_source(data, file=file, lines=lines))
                else:
                    source, dropped = tolerant(functools.partial(parse_source, file=file, lines=lines), data, file=file,
                                               lines=lines, allow_unsupported=allow_unsupported)
                    sources.append(source)
                    left_out += dropped
            except PackageError as exc:
                errors += exc.each
        elif kind == HELM_CHART:
            try:
                chart, dropped = _helm_chart(file, doc, allow_unsupported)
                charts.append(chart)
                left_out += dropped
            except PackageError as exc:
                errors += exc.each
        else:
            skipped.append(kind)
    return FileDocuments(tuple(packages), tuple(sources), tuple(skipped), tuple(errors), tuple(left_out),
                         tuple(charts))


def _helm_chart(file: Path, doc: Parsed, allow_unsupported: bool) -> tuple[HelmChartSpec, list[LeftOut]]:
    """A Flux HelmChart document, its unsupported fields refused or left out (:func:`tolerant`); a
    GitRepository or Bucket source is refused, or with ``allow_unsupported`` kept as unfetchable (a
    HelmRelease naming it is then refused in its turn). Raises PackageError."""
    lines = lines_of(doc)
    spec = doc.data.get("spec") if isinstance(doc.data, dict) else None
    source = spec.get("sourceRef") if isinstance(spec, dict) else None
    kind = source.get("kind") if isinstance(source, dict) else None
    why = UNFETCHABLE.get(kind, "") if isinstance(kind, str) else ""
    dropped: list[LeftOut] = []
    if why:
        where = lines.get("spec.sourceRef.kind", lines.get("spec.sourceRef"))
        if not allow_unsupported:
            raise unsupported_error(file, "spec.sourceRef.kind", why, where)
        dropped.append(LeftOut(file, "spec.sourceRef.kind", f"{HELM_CHART} unusable: {why}", where))
    chart, more = tolerant(functools.partial(parse_helm_chart, file=file, lines=lines, unfetchable=why), doc.data,
                           file=file, lines=lines, allow_unsupported=allow_unsupported)
    return chart, dropped + more


def skipped_line(kinds: Iterable[str]) -> str:
    """One line saying which kinds were skipped and how many of each (``""`` when none), e.g.
    ``skipped 3 objects helmdeck does not read: Kustomization (1), Namespace (2)``."""
    counts = Counter(kinds)
    if not counts:
        return ""
    total = sum(counts.values())
    listed = ", ".join(f"{kind} ({n})" for kind, n in sorted(counts.items()))
    return f"skipped {total} object{'s' if total != 1 else ''} helmdeck does not read: {listed}"


def remote_chart(spec: dict[str, Any], *, file: Path, lines: dict[str, int], namespace: str) -> Any:
    """A Package's remote chart form (ChartTemplate or SourceRef), None for a local chart. Raises PackageError."""
    return parse_package_chart(spec, file=file, lines=lines, namespace=namespace)


def link(specs: list[PackageSpec], sources: list[SourceSpec], *, files: bool = True,
         charts: Iterable[HelmChartSpec] = ()) -> tuple[list[PackageSpec], list[PackageError]]:
    """``specs`` with each remote chart linked to its source (``chart_request`` set; a ``chartRef`` to a
    HelmChart becomes that HelmChart's ``spec.chart.spec``, ``chart_object`` naming it); the errors: a source
    or HelmChart declared twice, a Package naming a missing one (that Package is left out). ``files`` False:
    the specs are API objects, whose errors name no line."""
    errors: list[PackageError] = []
    by_ref: dict[SourceRef, SourceSpec | HelmChartSpec] = {}
    twice: set[SourceRef] = set()
    for source in [*sources, *charts]:
        if source.ref in by_ref:
            twice.add(source.ref)
            errors.append(PackageError(source.file, "metadata.name", f"{source.ref} is also declared in "
                                       f"{by_ref[source.ref].file.name}", "give each source its own name"))
        by_ref.setdefault(source.ref, source)
    for ref in twice:
        del by_ref[ref]
    chart_objects = {ref: s for ref, s in by_ref.items() if isinstance(s, HelmChartSpec)}
    repositories = {ref: s for ref, s in by_ref.items() if not isinstance(s, HelmChartSpec)}
    out = []
    for spec in specs:
        if spec.chart_source is None:
            out.append(spec)
            continue
        path = "spec.chartRef" if isinstance(spec.chart_source, SourceRef) else "spec.chart"
        try:
            lines = lines_of(documents(spec.file)[spec.document]) if files else {}
            if isinstance(spec.chart_source, SourceRef) and spec.chart_source.kind == HELM_CHART:
                found = find_source(spec.chart_source, chart_objects, file=spec.file, lines=lines, path=path)
                out.append(_through_helm_chart(spec, found, repositories, lines, files=files))
                continue
            request = request_for(spec.chart_source, repositories, file=spec.file, lines=lines, path=path)
        except (PackageError, IndexError) as exc:
            errors.append(exc if isinstance(exc, PackageError) else
                          PackageError(spec.file, "", "the file changed while it was read", "save it again"))
            continue
        out.append(dataclasses.replace(spec, chart_request=_verify_as(spec, request)))
    return out, errors


def _verify_as(spec: PackageSpec, request: ChartRequest) -> ChartRequest:
    """``request`` whose verification keys are read as ``spec``'s ServiceAccount, when it names one (as its
    other reads of the cluster)."""
    if request.verify is None or not spec.service_account_name:
        return request
    user = service_account_user(spec.namespace, spec.service_account_name)
    return dataclasses.replace(request, verify=dataclasses.replace(request.verify, user=user))


def _through_helm_chart(spec: PackageSpec, chart: HelmChartSpec, sources: dict[SourceRef, SourceSpec],
                        lines: dict[str, int], *, files: bool) -> PackageSpec:
    """``spec`` whose ``chartRef`` names ``chart``, as if its ``spec.chart.spec`` held the HelmChart's fields
    (what Flux's helm-controller makes of either). Raises PackageError: an unfetchable HelmChart (named at the
    HelmRelease's chartRef), a HelmRepository missing (named at the HelmChart's sourceRef)."""
    if chart.unfetchable:
        raise PackageError(spec.file, "spec.chartRef", f"{chart.ref} names a chart helmdeck cannot fetch "
                           f"({chart.unfetchable})", f"point {HELM_CHART} {chart.name} at a HelmRepository",
                           lines.get("spec.chartRef"))
        # (with --allow-unsupported the HelmChart itself was a warning: its release cannot be reconciled)
    chart_lines = lines_of(_document(chart)) if files else {}
    source = find_source(chart.template.source_ref, sources, file=chart.file, lines=chart_lines,
                         path="spec.sourceRef")
    request = ChartRequest(source, chart.template.chart, chart.template.version, chart.template.verify)
    return dataclasses.replace(spec, chart_source=chart.template, chart_request=_verify_as(spec, request),
                               chart_object=chart)


def _document(chart: HelmChartSpec) -> Parsed:
    """The HelmChart's document in its file (the lines of its errors). Raises IndexError when it is gone."""
    for doc in documents(chart.file):
        data = doc.data
        if isinstance(data, dict) and data.get("kind") == HELM_CHART and isinstance(data.get("metadata"), dict) \
                and data["metadata"].get("name") == chart.name:
            return doc
    raise IndexError(chart.name)
