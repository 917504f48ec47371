"""The app (tui/) and the command line (helmdeck/) use only the engine facade's API.

Every attribute they read on an engine object (``engine``, ``self.engine``, ``client.engine``...) is a
method or property of :class:`~engine.runtime.engine.Engine` itself, or one of its documented plain
attributes: never a collaborator (``engine.book``, ``engine.controller``, ``engine.gate``, ...), whose
shape may change with the engine's insides (docs/ARCHITECTURE.md, "The engine API the app uses").
"""

from __future__ import annotations

import ast
from pathlib import Path

from engine.runtime.engine import Engine

ROOT = Path(__file__).resolve().parents[3]
# The facade's plain attributes: the one masking rule the app applies to what it shows, and the scope
# note the command line sets when it narrowed the namespaces.
PLAIN = {"masker", "scope_note"}


def _is_engine(node: ast.expr) -> bool:
    if isinstance(node, ast.Name):
        return node.id in ("engine", "_engine")
    return isinstance(node, ast.Attribute) and node.attr in ("engine", "_engine")


def reach_throughs(*folders: str) -> list[str]:
    """``file:line: engine.<name>`` for each attribute of an engine object that is not the facade's."""
    api = {n for n in dir(Engine) if not n.startswith("_")} | PLAIN
    found = []
    for folder in folders:
        for file in sorted((ROOT / folder).rglob("*.py")):
            for node in ast.walk(ast.parse(file.read_text(), str(file))):
                if isinstance(node, ast.Attribute) and _is_engine(node.value) and node.attr not in api:
                    found.append(f"{file.relative_to(ROOT)}:{node.lineno}: engine.{node.attr}")
    return found


def test_the_app_and_the_command_line_use_only_the_facade() -> None:
    assert reach_throughs("tui", "helmdeck") == []


def test_collaborators_are_not_part_of_the_facade() -> None:
    api = {n for n in dir(Engine) if not n.startswith("_")}
    assert not api & {"book", "gate", "controller", "operations", "observer", "service", "versions", "kube_events",
                      "inspector", "values_objects", "elector", "tasks"}
