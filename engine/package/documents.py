"""Source documents in the packages folder, and Packages linked to the repositories they name.

A file of the packages folder may hold several documents: one Package at most, and
any number of ``HelmRepository`` / ``OCIRepository`` documents. The package loader
(:func:`engine.package.load.load_packages`) asks :func:`read_sources` for each file's
sources (and whether it holds a Package, read by :func:`package_document`) and,
once every file is read, :func:`link` turns each remote Package's chart form into
a :class:`ChartRequest` against the sources found.
A Package naming a missing repository is reported (which one, and those known)
and left out; the others carry on.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from engine.base.fields import PackageError, lines_by_path
from engine.base.loader import Parsed, YamlLimitError, load_documents, package_limits
from engine.package.model import PackageSpec
from engine.sources.repository import SOURCE_KINDS, SourceRef, SourceSpec, parse_package_chart, parse_source
from engine.sources.source import request_for


def _documents(file: Path) -> tuple[Parsed, ...]:
    try:
        return load_documents(file, package_limits())  # cached: the package loader reads the same parse
    except YamlLimitError as exc:
        fix = exc.fix.replace("one document per file", "one package per file")
        raise PackageError(file, "", exc.problem, fix, exc.line) from None


def _is_source(doc: Parsed) -> bool:
    return isinstance(doc.data, dict) and doc.data.get("kind") in SOURCE_KINDS


def package_document(file: Path) -> Parsed:
    """The document of ``file`` that is not a source (its Package); the first document when every one is a
    source (the package loader then says what is wrong with it). Raises PackageError: a bad file, or two
    documents that are not sources (one Package per file; its sources may share it)."""
    docs = _documents(file)
    others = [d for d in docs if not _is_source(d)]
    if len(others) > 1:
        second = others[1].node
        raise PackageError(file, "", f"{len(others)} documents are not a HelmRepository or OCIRepository",
                           "write one package per file (its HelmRepository / OCIRepository may share the file)",
                           second.start_mark.line + 1 if second is not None else None)
    return others[0] if others else docs[0]


def read_sources(file: Path) -> tuple[list[SourceSpec], bool]:
    """The source documents of ``file`` (HelmRepository / OCIRepository, in file order) and whether it holds
    anything else (a Package, for :func:`engine.package.load.load_package`). Raises PackageError naming the file,
    line and field of the first bad source document."""
    docs = _documents(file)
    sources = [parse_source(d.data, file=file, lines=_lines(d)) for d in docs if _is_source(d)]
    return sources, len(sources) < len(docs)


def _lines(doc: Parsed) -> dict[str, int]:
    return lines_by_path(doc.node) if doc.node is not None else {}


def remote_chart(spec: dict[str, Any], *, file: Path, lines: dict[str, int], namespace: str) -> Any:
    """A Package's remote chart form (ChartTemplate or SourceRef), None for a local chart. Raises PackageError."""
    return parse_package_chart(spec, file=file, lines=lines, namespace=namespace)


def link(specs: list[PackageSpec], sources: list[SourceSpec]) -> tuple[list[PackageSpec], list[PackageError]]:
    """``specs`` with each remote chart linked to its source (``chart_request`` set); the errors: a source
    declared twice, a Package naming a missing source (that Package is left out)."""
    errors: list[PackageError] = []
    by_ref: dict[SourceRef, SourceSpec] = {}
    twice: set[SourceRef] = set()
    for source in sources:
        if source.ref in by_ref:
            twice.add(source.ref)
            errors.append(PackageError(source.file, "metadata.name", f"{source.ref} is also declared in "
                                       f"{by_ref[source.ref].file.name}", "give each source its own name"))
        by_ref.setdefault(source.ref, source)
    for ref in twice:
        del by_ref[ref]
    out = []
    for spec in specs:
        if spec.chart_source is None:
            out.append(spec)
            continue
        path = "spec.chartRef" if isinstance(spec.chart_source, SourceRef) else "spec.chart"
        try:
            lines = _lines(package_document(spec.file))
            request = request_for(spec.chart_source, by_ref, file=spec.file, lines=lines, path=path)
        except PackageError as exc:
            errors.append(exc)
            continue
        out.append(dataclasses.replace(spec, chart_request=request))
    return out, errors
