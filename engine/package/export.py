"""A packages folder as API objects (``helmdeck export``): Package, HelmRepository and OCIRepository objects of
``wire.API_VERSION`` that ``helmdeck controller`` reads the same way as the app reads the folder.

Each object's ``spec`` is its document's ``spec`` as written (values included: they are the operator's own and
go where the operator sends them; nothing here logs them). A Flux HelmRelease becomes the Package with the same
spec, and Flux's HelmRepository and OCIRepository become helmdeck's, without the Flux fields the loader leaves
out (those it ignores, and with ``allow_unsupported`` those helmdeck does not implement). The folder is read by
the package loader first (a document it refuses is not exported), then every object is checked by the
controller's loader (:func:`engine.package.load.load_objects`), which refuses what cannot move into the cluster:
a chart folder or values files on disk. Objects of other kinds are skipped, as the loader skips them.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.base.fields import PackageError
from engine.base.loader import Parsed
from engine.base.paths import resolved
from engine.base.wire import API_VERSION
from engine.package.documents import documents
from engine.package.flux import HELM_RELEASE, as_package, tolerant
from engine.package.load import load_folder, load_objects, object_origin, package_files, read_package
from engine.package.model import KIND
from engine.sources.repository import SOURCE_KINDS, parse_source

PACKAGES = "packages"
_PLURALS = {KIND: PACKAGES, "HelmRepository": "helmrepositories", "OCIRepository": "ocirepositories"}
_SOURCE_METADATA = ("labels", "annotations")  # what a source's metadata may carry besides its name


@dataclass(frozen=True)
class Export:
    """A folder exported: the ``objects`` (sources first, then packages, each in file order), the documents
    ``refused`` (the controller's loader would refuse them; each names its file and package) and the folder's
    own ``errors`` (documents the package loader refuses), which kinds were ``skipped`` (one line) and the
    ``warnings``."""

    objects: tuple[dict[str, Any], ...]
    refused: tuple[PackageError, ...] = ()
    errors: tuple[PackageError, ...] = ()
    skipped: str = ""
    warnings: tuple[str, ...] = ()  # Flux fields left out (--allow-unsupported), as the loader words them

    @property
    def ok(self) -> bool:
        return not self.refused and not self.errors


def export_folder(directory: Path, *, namespace: str = "default", allow_unsupported: bool = False) -> Export:
    """The Package, HelmRepository and OCIRepository objects of the packages folder ``directory``; a document
    without ``metadata.namespace`` gets ``namespace`` (the package loader's default is ``default``).

    Never raises for a bad folder or document: those are in the result's ``errors`` and ``refused``.
    """
    loaded = load_folder(directory, allow_unsupported=allow_unsupported)
    valid = {(spec.file, spec.document) for spec in loaded.specs}
    sources: list[tuple[Path, int, dict[str, Any]]] = []
    packages: list[tuple[Path, int, dict[str, Any]]] = []
    files = package_files(directory) if directory.is_dir() else []
    for file in (resolved(f) for f in files):
        try:
            docs = documents(file)
        except PackageError:
            continue  # the folder's loader reported it
        for index, parsed in enumerate(docs):
            data = parsed.data
            kind = data.get("kind") if isinstance(data, dict) else None
            if not isinstance(data, dict) or not ((kind in (KIND, HELM_RELEASE) and (file, index) in valid)
                                                  or kind in SOURCE_KINDS):
                continue
            try:
                data = _as_read(data, file, allow_unsupported)
            except PackageError:
                continue  # the folder's loader reported it
            if kind in SOURCE_KINDS:  # the controller's loader checks it below
                sources.append((file, index, _object(data, str(kind), namespace)))
            else:
                packages.append((file, index, _object(data, KIND, namespace)))
    checked, problems = load_objects([o for _, _, o in packages], [o for _, _, o in sources])
    by_origin = {_origin(o): (f, i, o) for f, i, o in [*sources, *packages]}
    accepted = {spec.file for spec in checked}
    refused: list[PackageError] = []
    for problem in problems:
        found = by_origin.get(problem.file)
        file = found[0] if found is not None else problem.file
        what = _describe(found[2]) if found is not None else str(problem.file)
        where = f"{problem.field}: " if problem.field else ""
        refused.append(PackageError(file, "", f"{what} not exported: {where}{problem.problem}", problem.fix))
    rejected = {p.file for p in problems}
    out = [o for _, _, o in sources if _origin(o) not in rejected]
    out += [o for _, _, o in packages if _origin(o) in accepted]
    return Export(tuple(out), tuple(refused), tuple(loaded.errors), loaded.skipped_line(),
                  tuple(str(w) for w in loaded.left_out))


def _as_read(data: dict[str, Any], file: Path, allow_unsupported: bool) -> dict[str, Any]:
    """A Flux document without the fields the loader leaves out of it (:func:`engine.package.flux.tolerant`:
    the ignored ones, and with ``allow_unsupported`` those helmdeck does not implement); helmdeck's own
    documents as they are. Raises PackageError as the loader does."""
    if data.get("apiVersion") == API_VERSION:
        return data
    if data.get("kind") == HELM_RELEASE:
        def check(d: Any) -> dict[str, Any]:
            read_package(file, Parsed(as_package(d), None), kind=HELM_RELEASE)
            return dict(d)
    else:
        def check(d: Any) -> dict[str, Any]:
            parse_source(d, file=file, lines={})
            return dict(d)
    kept, _ = tolerant(check, data, file=file, lines={}, allow_unsupported=allow_unsupported)
    return kept


def _object(data: Mapping[str, Any], kind: str, namespace: str) -> dict[str, Any]:
    """The ``wire.API_VERSION`` object of a document: its name and namespace (``namespace`` when it has
    none), a source's labels and annotations, and its spec as written (a copy)."""
    meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    assert isinstance(meta, dict)
    metadata: dict[str, Any] = {"name": meta.get("name"), "namespace": meta.get("namespace") or namespace}
    if kind != KIND:
        metadata.update({k: copy.deepcopy(meta[k]) for k in _SOURCE_METADATA if meta.get(k)})
    out: dict[str, Any] = {"apiVersion": API_VERSION, "kind": kind, "metadata": metadata}
    if "spec" in data:
        out["spec"] = copy.deepcopy(data["spec"])
    return out


def _origin(obj: Mapping[str, Any]) -> Path:
    meta = obj["metadata"]
    return object_origin(_PLURALS[str(obj["kind"])], str(meta["namespace"]), str(meta["name"]))


def _describe(obj: Mapping[str, Any]) -> str:
    return f"{obj['kind']} {obj['metadata']['namespace']}/{obj['metadata']['name']}"

