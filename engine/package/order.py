"""Package ordering: ``spec.dependsOn`` (Flux's HelmRelease field) and the dependency graph.

A package names other packages it depends on (parsed by :mod:`engine.package.depends`)::

    spec:
      dependsOn:
        - name: base              # metadata.name of another package
          namespace: infra        # optional; default the package's own namespace

At load (:func:`check_dependencies`), a cycle is refused, naming the files and
lines (it lists every member); a reference to no package of the folder is not:
that package waits for it (``DependencyNotReady``), as Flux's helm-controller
waits for a dependency it cannot get (internal/controller/helmrelease_controller.go,
``checkDependencies``). :func:`dependency_order` gives an order where each package comes
after its dependencies (as ``helmfile show-dag``); the reverse is the order of
removal. A package reconciles only when each dependency is Ready (Flux's
``DependencyNotReady``); the controller asks :func:`waiting_for`.
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Mapping

from engine.base.fields import PackageError
from engine.base.graph import strongly_connected
from engine.package.depends import Dependency, PackageId
from engine.package.model import PackageSpec


def package_id(spec: PackageSpec) -> PackageId:
    """``(namespace, metadata.name)``: what ``dependsOn`` names (not the release key)."""
    return (spec.namespace, spec.name)


def _where(spec: PackageSpec, dep: Dependency | None = None) -> str:
    line = dep.line if dep is not None else 0
    return f"{spec.file.name}:{line}" if line else spec.file.name


def check_dependencies(specs: list[PackageSpec]) -> tuple[list[PackageSpec], list[PackageError]]:
    """``specs`` without those in a ``dependsOn`` cycle (or depending on such a package); the errors name the
    files and lines, a cycle every member. A dependency on no package of the set is left to wait for it."""
    by_id = {package_id(s): s for s in specs}
    errors: list[PackageError] = []
    bad: set[PackageId] = set()
    for cycle in find_cycles({pid: [d.id for d in s.depends_on if d.id in by_id] for pid, s in by_id.items()}):
        members = " -> ".join(f"{p[0]}/{p[1]} ({_where(by_id[p], _edge(by_id[p], q))})"
                              for p, q in zip(cycle, cycle[1:] + cycle[:1], strict=True))
        for pid, nxt in zip(cycle, cycle[1:] + cycle[:1], strict=True):
            spec = by_id[pid]
            edge = _edge(spec, nxt)
            index = spec.depends_on.index(edge) if edge is not None else 0
            errors.append(PackageError(spec.file, f"spec.dependsOn[{index}]", f"dependency cycle: {members}",
                                       "remove one of these dependsOn entries", edge.line if edge else None))
            bad.add(pid)
    # A package whose dependency is refused cannot be ordered either: it is held out, and said so.
    changed = True
    while changed:
        changed = False
        for spec in specs:
            pid = package_id(spec)
            if pid in bad:
                continue
            refused = next((d for d in spec.depends_on if d.id in bad), None)
            if refused is not None:
                errors.append(PackageError(spec.file, f"spec.dependsOn[{spec.depends_on.index(refused)}]",
                                           f"depends on {refused}, which is refused", "fix that package first",
                                           refused.line or None))
                bad.add(pid)
                changed = True
    return [s for s in specs if package_id(s) not in bad], errors


def _edge(spec: PackageSpec, target: PackageId) -> Dependency | None:
    return next((d for d in spec.depends_on if d.id == target), None)


def find_cycles(graph: Mapping[PackageId, Iterable[PackageId]]) -> list[list[PackageId]]:
    """The cycles of ``graph`` (node -> the nodes it depends on), one per strongly connected component of
    more than one node, each as a path ``[a, b, ...]`` with ``a -> b -> ... -> a``; sorted, deterministic."""
    components = strongly_connected(graph)
    return [_cycle_path(set(c), graph) for c in sorted(components, key=min)]


def _cycle_path(members: set[PackageId], graph: Mapping[PackageId, Iterable[PackageId]]) -> list[PackageId]:
    """A simple cycle through the smallest member of a strongly connected component."""
    start = min(members)
    # Breadth-first from start's successors back to start, inside the component: the shortest cycle.
    parents: dict[PackageId, PackageId] = {}
    frontier = [start]
    while frontier:
        nxt_frontier = []
        for node in frontier:
            for succ in sorted(graph.get(node, ())):
                if succ not in members or succ in parents:
                    continue
                parents[succ] = node
                if succ == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return path[::-1]
                nxt_frontier.append(succ)
        frontier = nxt_frontier
    return sorted(members)  # unreachable for a strongly connected component


def topological(nodes: Iterable[PackageId], depends: Callable[[PackageId], Iterable[PackageId]]) -> list[PackageId]:
    """``nodes`` with each after the nodes it depends on (edges outside ``nodes`` ignored); ties by name
    (Kahn's algorithm with a heap: deterministic). Raises ValueError naming the nodes left in a cycle."""
    nodes = list(dict.fromkeys(nodes))
    present = set(nodes)
    deps = {n: {d for d in depends(n) if d in present and d != n} for n in nodes}
    dependents: dict[PackageId, list[PackageId]] = {n: [] for n in nodes}
    for n, ds in deps.items():
        for d in ds:
            dependents[d].append(n)
    ready = [n for n in nodes if not deps[n]]
    heapq.heapify(ready)
    out: list[PackageId] = []
    while ready:
        n = heapq.heappop(ready)
        out.append(n)
        for m in dependents[n]:
            deps[m].discard(n)
            if not deps[m]:
                heapq.heappush(ready, m)
    if len(out) != len(nodes):
        left = sorted(present - set(out))
        raise ValueError("dependency cycle among " + ", ".join(f"{n[0]}/{n[1]}" for n in left))
    return out


def dependency_order(specs: Iterable[PackageSpec]) -> list[PackageSpec]:
    """``specs`` with every package after its dependencies (dependencies outside ``specs`` ignored).
    Raises ValueError on a cycle (the loader refuses those)."""
    by_id = {package_id(s): s for s in specs}
    return [by_id[p] for p in topological(by_id, lambda p: (d.id for d in by_id[p].depends_on))]


def removal_order(keys: Iterable[PackageId], package: Callable[[PackageId], str],
                  depends_on: Callable[[PackageId], Iterable[str]]) -> list[PackageId]:
    """``keys`` (releases) with every dependent before its dependencies: the order of removal. ``package(k)``
    is the ``namespace/name`` of the package that drove ``k``, ``depends_on(k)`` what that package depended
    on (as persisted; a release without either is ordered by name alone)."""
    keys = list(keys)
    by_package: dict[str, list[PackageId]] = {}
    for key in keys:
        by_package.setdefault(package(key), []).append(key)
    by_package.pop("", None)
    order = topological(keys, lambda k: [d for dep in depends_on(k) for d in by_package.get(dep, ())])
    return order[::-1]


def waiting_for(spec: PackageSpec, ready: Callable[[PackageId], bool | None]) -> list[Dependency]:
    """The dependencies of ``spec`` not Ready now (``ready(id)``: True, False, or None for no such package)."""
    return [d for d in spec.depends_on if ready(d.id) is not True]

