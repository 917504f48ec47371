"""The import graph of helmdeck's own modules: cycles, imports up the floors, deferred imports.

Every import counts, including those inside functions and under TYPE_CHECKING (`python
bench/import_graph.py`). Edges go to the imported module (``from a.b import c`` is ``a.b.c`` when
that is a module, else ``a.b``); a package's ``__init__`` is not implied by importing its children.
"""

from __future__ import annotations

import ast
import sys
from collections import defaultdict
from pathlib import Path

from engine.base.graph import strongly_connected

ROOTS = ("engine", "tui", "helmdeck", "localcluster")
# The floors, top first (docs/ARCHITECTURE.md); a module's floor is the longest prefix listed.
# BEFORE_FLOORS is the order ARCHITECTURE.md gave before engine/ was split into layers (`--before`).
BEFORE_FLOORS = (
    "helmdeck",
    "tui",
    "engine.runtime",
    "engine.reconcile",
    "engine.service",
    "engine.resolve",
    "engine.sources",
    "engine.monitor",
    "engine.helm",
    "engine.storage",
    "engine.package",
    "engine.spec",
    "engine.order",
    "engine.events",
    "engine.inspect",
    "engine.fields",
    "engine.listeners",
    "engine.labels",
    "engine.kube",
    "localcluster",
)
FLOORS = (
    "helmdeck",
    "tui",
    "localcluster",
    "engine.runtime",
    "engine.service",
    "engine.reconcile",
    "engine.resolve",
    "engine.package",
    "engine.monitor",
    "engine.sources",
    "engine.helm",
    "engine.storage",
    "engine.kube",
    "engine.base",
)


def modules(root: Path) -> dict[str, Path]:
    """Module name -> file for every .py under ROOTS."""
    found: dict[str, Path] = {}
    for top in ROOTS:
        for path in sorted((root / top).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts = parts[:-1]
            found[".".join(parts)] = path
    return found


def imports(name: str, path: Path, known: set[str]) -> list[tuple[str, bool]]:
    """(imported module, deferred) for each import of one module; deferred = inside a function."""
    tree = ast.parse(path.read_text())
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: list[tuple[str, bool]] = []

    def target(module: str) -> str | None:
        while module and module not in known:
            module = module.rpartition(".")[0]
        return module or None

    def visit(node: ast.AST, deferred: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = deferred or isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef)
            if isinstance(child, ast.Import):
                for alias in child.names:
                    if (hit := target(alias.name)) is not None:
                        found.append((hit, inner))
            elif isinstance(child, ast.ImportFrom):
                base = child.module or ""
                if child.level:
                    anchor = package.split(".")[: len(package.split(".")) - child.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                for alias in child.names:
                    full = f"{base}.{alias.name}"
                    hit = full if full in known else target(base)
                    if hit is not None:
                        found.append((hit, inner))
            visit(child, inner)

    visit(tree, False)
    return [(hit, deferred) for hit, deferred in found if hit != name]


def floor(module: str, floors: tuple[str, ...]) -> int | None:
    """Position of a module's floor (0 = top), None when no floor holds it."""
    best: tuple[int, int] | None = None
    for position, prefix in enumerate(floors):
        if (module == prefix or module.startswith(prefix + ".")) and (best is None or len(prefix) > best[1]):
            best = (position, len(prefix))
    return None if best is None else best[0]


def main() -> None:
    args = [arg for arg in sys.argv[1:] if arg != "--before"]
    floors = BEFORE_FLOORS if "--before" in sys.argv else FLOORS
    root = Path(args[0]) if args else Path(__file__).resolve().parents[1]
    found = modules(root)
    known = set(found)
    graph: dict[str, set[str]] = defaultdict(set)
    deferred_in_engine = 0
    upward: set[tuple[str, str]] = set()
    for name, path in found.items():
        graph[name]
        for hit, deferred in imports(name, path, known):
            graph[name].add(hit)
            if deferred and name.startswith("engine"):
                deferred_in_engine += 1
            mine, theirs = floor(name, floors), floor(hit, floors)
            if mine is not None and theirs is not None and theirs < mine:
                upward.add((name, hit))
    components = [sorted(c) for c in strongly_connected(graph)]
    print(f"modules: {len(found)}")
    print(f"import cycles (strongly connected components): {len(components)}")
    for component in components:
        print(f"  {len(component)} modules: {', '.join(component)}")
    pairs = {(floor(a, floors), floor(b, floors)) for a, b in upward}
    print(f"imports up the floors (module pairs): {len(upward)} across {len(pairs)} floor pairs")
    for a, b in sorted(upward):
        print(f"  {a} -> {b}")
    print(f"imports inside functions in engine/: {deferred_in_engine}")


if __name__ == "__main__":
    main()
