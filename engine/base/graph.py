"""Strongly connected components of a directed graph: the one cycle finder (``dependsOn`` cycles,
bench/import_graph.py's import cycles)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TypeVar

# Nodes are sorted for a deterministic answer: package ids or module names.
Node = TypeVar("Node", str, tuple[str, str])


def strongly_connected(graph: Mapping[Node, Iterable[Node]]) -> list[list[Node]]:
    """The strongly connected components of ``graph`` (node -> the nodes it points at) of more than one
    node, in the order Tarjan's algorithm closes them; nodes only pointed at need no entry."""
    index: dict[Node, int] = {}
    low: dict[Node, int] = {}
    stack: list[Node] = []
    on_stack: set[Node] = set()
    components: list[list[Node]] = []

    def visit(start: Node) -> None:  # Tarjan's algorithm, iterative (no recursion limit)
        work = [(start, iter(sorted(graph.get(start, ()))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(graph.get(nxt, ())))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                comp = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    comp.append(member)
                    if member == node:
                        break
                if len(comp) > 1:
                    components.append(comp)

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return components
