"""A chart's subchart tree as helm sees it for one release: which subcharts its values enable.

Helm drops the dependencies a chart's ``Chart.yaml`` disables before it renders
or collects CRDs (``chartutil.ProcessDependencies``); :func:`enabled_files`
does the same so that helmdeck's CRD policy acts only on what helm would
install:

- a subchart in ``charts/`` that ``Chart.yaml`` does not declare is always in;
- a declared dependency is matched to the subchart of its ``name`` (the
  version range is not checked) and takes its ``alias`` as its name (one
  subchart may serve several aliases);
- its ``tags`` are looked up in the top-level ``tags`` map: disabled when one
  is false and none true; then the first of its ``condition`` paths
  (comma-separated, relative to the parent chart's values) that holds a
  boolean decides. Neither: enabled;
- both are read from the release's values coalesced over the chart's defaults
  (each chart's ``values.yaml``, a subchart's under its name), a null in the
  release's values removing the default as helm's coalescing does.

The tree is read from a chart directory or ``.tgz`` (subcharts as directories
or packaged, inside either), bounded by the caller's byte budget and
:data:`MAX_DEPTH`; ``Chart.yaml`` and ``values.yaml`` go through the bounded
YAML loader.
"""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from engine.base.loader import Limits, YamlLimitError, parse_text

MAX_DEPTH = 5
SUFFIXES = (".yaml", ".yml", ".json")  # helm's Chart.CRDObjects: the files of crds/ that count

Take = Callable[[int, str], None]  # the caller's budget: (bytes, what) -> None, raises when over


class ChartTreeError(ValueError):
    """A Chart.yaml or values.yaml in the tree is not readable YAML of the right shape."""


@dataclass
class ChartNode:
    """One chart of the tree: its ``Chart.yaml`` name and dependencies, default values, ``crds/`` files
    (``(path, text)``, file order) and subcharts."""

    name: str
    dependencies: list[Mapping[str, Any]] = field(default_factory=list)
    values: Mapping[str, Any] = field(default_factory=dict)
    crds: list[tuple[str, str]] = field(default_factory=list)
    subcharts: list[ChartNode] = field(default_factory=list)


def load_tree(chart: Path, take: Take, limits: Limits) -> ChartNode:
    """The tree of ``chart`` (a directory or ``.tgz``). Raises OSError, tarfile.TarError, ChartTreeError,
    or what ``take`` raises."""
    if chart.is_dir():
        return _from_dir(chart, take, limits, 0)
    with tarfile.open(chart, "r:gz") as tar:
        return _from_tar(tar, take, limits, 0)


def _from_dir(root: Path, take: Take, limits: Limits, depth: int) -> ChartNode:
    def read(rel: str) -> str | None:
        path = root / rel
        if not path.is_file():
            return None
        take(path.stat().st_size, str(path))
        return path.read_text(errors="replace")

    node = _node(str(root), read("Chart.yaml"), read("values.yaml"), limits)
    crds = root / "crds"
    if crds.is_dir():
        for file in sorted(p for p in crds.rglob("*") if p.suffix in SUFFIXES and p.is_file()):
            take(file.stat().st_size, str(file))
            node.crds.append((str(file.relative_to(root)), file.read_text(errors="replace")))
    charts = root / "charts"
    if depth < MAX_DEPTH and charts.is_dir():
        for sub in sorted(charts.iterdir()):
            if (sub / "Chart.yaml").is_file():
                node.subcharts.append(_from_dir(sub, take, limits, depth + 1))
            elif sub.suffix == ".tgz" and sub.is_file():
                take(sub.stat().st_size, str(sub))
                with tarfile.open(sub, "r:gz") as tar:
                    node.subcharts.append(_from_tar(tar, take, limits, depth + 1))
    return node


def _from_tar(tar: tarfile.TarFile, take: Take, limits: Limits, depth: int) -> ChartNode:
    """A packaged chart: members ``<chart>/...``; subcharts as ``charts/<sub>/...`` or ``charts/<sub>.tgz``."""
    files = {PurePosixPath(m.name).parts[1:]: m for m in tar.getmembers() if m.isfile()}
    return _from_members(tar, files, (), take, limits, depth)


def _from_members(tar: tarfile.TarFile, files: dict[tuple[str, ...], tarfile.TarInfo], prefix: tuple[str, ...],
                  take: Take, limits: Limits, depth: int) -> ChartNode:
    def read(*rel: str) -> str | None:
        member = files.get(prefix + rel)
        return None if member is None else _read(tar, member, take).decode(errors="replace")

    n = len(prefix)
    node = _node("/".join(prefix) or str(tar.name or "chart"), read("Chart.yaml"), read("values.yaml"), limits)
    mine = sorted((k, m) for k, m in files.items() if k[:n] == prefix and len(k) > n + 1)
    for key, member in mine:
        if key[n] == "crds" and PurePosixPath(member.name).suffix in SUFFIXES:
            node.crds.append((member.name, _read(tar, member, take).decode(errors="replace")))
    if depth >= MAX_DEPTH:
        return node
    dirs = sorted({k[n + 1] for k, _ in mine if k[n] == "charts" and (*prefix, "charts", k[n + 1], "Chart.yaml")
                   in files})
    for sub in dirs:
        node.subcharts.append(_from_members(tar, files, (*prefix, "charts", sub), take, limits, depth + 1))
    for key, member in mine:
        if len(key) == n + 2 and key[n] == "charts" and key[n + 1].endswith(".tgz"):
            with tarfile.open(fileobj=io.BytesIO(_read(tar, member, take)), mode="r:gz") as sub_tar:
                node.subcharts.append(_from_tar(sub_tar, take, limits, depth + 1))
    return node


def _read(tar: tarfile.TarFile, member: tarfile.TarInfo, take: Take) -> bytes:
    take(member.size, member.name)
    fh = tar.extractfile(member)
    return fh.read() if fh is not None else b""


def _node(where: str, chart_yaml: str | None, values_yaml: str | None, limits: Limits) -> ChartNode:
    meta = _mapping(chart_yaml, f"{where}/Chart.yaml", limits)
    deps = meta.get("dependencies") or []
    if not isinstance(deps, list) or not all(isinstance(d, dict) for d in deps):
        raise ChartTreeError(f"{where}/Chart.yaml: dependencies must be a list of mappings")
    return ChartNode(str(meta.get("name") or PurePosixPath(where).name), deps,
                     _mapping(values_yaml, f"{where}/values.yaml", limits))


def _mapping(text: str | None, name: str, limits: Limits) -> dict[str, Any]:
    if text is None:
        return {}
    try:
        data = parse_text(text, Path(name), limits).data
    except YamlLimitError as exc:
        raise ChartTreeError(f"{name}: {exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ChartTreeError(f"{name} must hold a mapping")
    return data


def instances(node: ChartNode) -> list[tuple[str, ChartNode, Mapping[str, Any] | None]]:
    """``node``'s dependencies as helm sets them up: ``(name, subchart, declaration)``, the name being the
    alias when there is one; an undeclared subchart has no declaration."""
    declared = {str(d.get("name") or "") for d in node.dependencies}
    out: list[tuple[str, ChartNode, Mapping[str, Any] | None]] = [
        (sub.name, sub, None) for sub in node.subcharts if sub.name not in declared]
    for dep in node.dependencies:
        sub = next((s for s in node.subcharts if s.name == dep.get("name")), None)
        if sub is not None:
            out.append((str(dep.get("alias") or sub.name), sub, dep))
    return out


def coalesce(node: ChartNode, values: Mapping[str, Any]) -> dict[str, Any]:
    """``values`` over ``node``'s defaults, each dependency's under its name, as helm's CoalesceValues
    (a null in ``values`` removes the default)."""
    out = _over(node.values, values)
    for name, sub, _ in instances(node):
        mine = out.get(name)
        out[name] = coalesce(sub, mine if isinstance(mine, Mapping) else {})
    return out


def _over(defaults: Mapping[str, Any], values: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(defaults)
    for key, value in values.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, Mapping) and isinstance(out.get(key), Mapping):
            out[key] = _over(out[key], value)
        else:
            out[key] = value
    return out


def enabled(dep: Mapping[str, Any], scope: Mapping[str, Any], tags: Mapping[str, Any]) -> bool:
    """Is dependency ``dep`` enabled by ``tags`` (the top-level ``tags`` map) and its ``condition`` (read in
    ``scope``, the parent chart's coalesced values)? As helm's processDependencyTags, then Conditions."""
    on = True
    seen = [tags.get(t) for t in dep.get("tags") or () if isinstance(t, str)]
    if any(v is False for v in seen) and not any(v is True for v in seen):
        on = False
    for path in str(dep.get("condition") or "").strip().split(","):
        value = _path_value(scope, path.strip()) if path.strip() else None
        if isinstance(value, bool):
            return value
    return on


def _path_value(values: Mapping[str, Any], path: str) -> Any:
    node: Any = values
    for key in path.split("."):
        if not isinstance(node, Mapping) or key not in node:
            return None
        node = node[key]
    return node


def enabled_files(root: ChartNode, values: Mapping[str, Any]) -> list[tuple[str, str]]:
    """The ``crds/`` files of ``root`` and of the subcharts ``values`` (the release's) leave enabled,
    chart first, then its dependencies in helm's order."""
    scope = coalesce(root, values)
    tags = scope.get("tags")
    return _files(root, scope, tags if isinstance(tags, Mapping) else {})


def _files(node: ChartNode, scope: Mapping[str, Any], tags: Mapping[str, Any]) -> list[tuple[str, str]]:
    out = list(node.crds)
    for name, sub, dep in instances(node):
        if dep is None or enabled(dep, scope, tags):
            inner = scope.get(name)
            out += _files(sub, inner if isinstance(inner, Mapping) else {}, tags)
    return out
