"""One ``spec.dependsOn`` entry and its parsing; what the entries make (order, cycles, waiting) is
:mod:`engine.package.order`, which needs the whole PackageSpec this module's Dependency is part of."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.base.fields import Fields, PackageError
from engine.base.schema import allowed
from engine.package.schema import PACKAGE_SPEC

PackageId = tuple[str, str]  # (namespace, metadata.name)


@dataclass(frozen=True)
class Dependency:
    """One ``spec.dependsOn`` entry: the package ``namespace/name``; ``line`` where it is written (0 unknown)."""

    name: str
    namespace: str
    line: int = 0

    @property
    def id(self) -> PackageId:
        return (self.namespace, self.name)

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def parse_depends_on(raw: Any, *, file: Path, lines: Mapping[str, int], namespace: str,
                     name: str) -> tuple[Dependency, ...]:
    """``spec.dependsOn`` of one file as Dependencies. Raises PackageError (shape, a package depending on itself)."""
    def error(path: str, problem: str, fix: str) -> PackageError:
        return PackageError(file, path, problem, fix, lines.get(path) or lines.get("spec.dependsOn"))

    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise error("spec.dependsOn", "must be a list", "write a list of {name, namespace}")
    out: list[Dependency] = []
    for i, item in enumerate(raw):
        path = f"spec.dependsOn[{i}]"
        if not isinstance(item, dict):
            raise error(path, "must be a mapping", "write {name: other-package, namespace: its-namespace}")
        Fields(file, lines).mapping(item, path, allowed(PACKAGE_SPEC, "dependsOn"))
        dep_name, dep_ns = item.get("name"), item.get("namespace", namespace)
        if not isinstance(dep_name, str) or not dep_name:
            raise error(f"{path}.name", "is required (a string)", "name the package (its metadata.name)")
        if not isinstance(dep_ns, str) or not dep_ns:
            raise error(f"{path}.namespace", "must be a namespace name", "omit it for the package's own namespace")
        dep = Dependency(dep_name, dep_ns, lines.get(path, 0))
        if dep.id == (namespace, name):
            raise error(path, "a package cannot depend on itself", "remove this entry")
        if dep not in out:
            out.append(dep)
    return tuple(out)
