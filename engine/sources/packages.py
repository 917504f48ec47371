"""Source documents in the packages folder, and Packages linked to the repositories they name.

The package loader (:func:`engine.package.load_packages`) asks :func:`read_source`
for each file (a ``HelmRepository`` / ``OCIRepository`` document, or None for
anything else) and, once every file is read, :func:`link` turns each remote
Package's chart form into a :class:`ChartRequest` against the sources found.
A Package naming a missing repository is reported (which one, and those known)
and left out; the others carry on.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

from engine.package import PackageError, PackageSpec, _lines_by_path
from engine.resolve.loader import YamlLimitError, load_yaml, package_limits
from engine.sources.source import request_for
from engine.sources.spec import SOURCE_KINDS, SourceRef, SourceSpec, parse_package_chart, parse_source


def _parsed(file: Path) -> tuple[Any, dict[str, int]]:
    try:
        parsed = load_yaml(file, package_limits())  # cached: the package loader reads the same parse
    except YamlLimitError as exc:
        raise PackageError(file, "", exc.problem, exc.fix, exc.line) from None
    return parsed.data, _lines_by_path(parsed.node) if parsed.node is not None else {}


def read_source(file: Path) -> SourceSpec | None:
    """The source document in ``file``, or None when its kind is not a source kind. Raises PackageError."""
    data, lines = _parsed(file)
    if not isinstance(data, dict) or data.get("kind") not in SOURCE_KINDS:
        return None
    return parse_source(data, file=file, lines=lines)


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
            _, lines = _parsed(spec.file)
            request = request_for(spec.chart_source, by_ref, file=spec.file, lines=lines, path=path)
        except PackageError as exc:
            errors.append(exc)
            continue
        out.append(dataclasses.replace(spec, chart_request=request))
    return out, errors
