"""JSON pointers (RFC 6901) over plain JSON-like data: parse, read, replace and remove.

Used by the drift ignore rules (:mod:`engine.package.drift`): ``""`` is the
whole document, ``/spec/replicas`` a field, ``/spec/containers/0/image`` a
list item; ``~1`` stands for ``/`` and ``~0`` for ``~`` in a token.
"""

from __future__ import annotations

from typing import Any

_MISSING = object()


class PointerError(ValueError):
    """Not an RFC 6901 JSON pointer."""


def tokens(pointer: str) -> tuple[str, ...]:
    """The reference tokens of ``pointer`` (``()`` for the whole document). Raises PointerError."""
    if pointer == "":
        return ()
    if not pointer.startswith("/"):
        raise PointerError(f"{pointer!r} does not start with '/'")
    out = []
    for raw in pointer[1:].split("/"):
        if "~" in raw.replace("~0", "").replace("~1", ""):
            raise PointerError(f"{pointer!r} has a '~' not followed by 0 or 1")
        out.append(raw.replace("~1", "/").replace("~0", "~"))
    return tuple(out)


def _child(node: Any, token: str) -> Any:
    if isinstance(node, dict):
        return node.get(token, _MISSING)
    if isinstance(node, list) and token.isdigit() and int(token) < len(node):
        return node[int(token)]
    return _MISSING


def _parent(doc: Any, pointer: str) -> tuple[Any, str] | None:
    """The container holding the pointed-at value and its last token; None when a step is missing."""
    path = tokens(pointer)
    if not path:
        return None
    node = doc
    for token in path[:-1]:
        node = _child(node, token)
        if node is _MISSING:
            return None
    return node, path[-1]


def has(doc: Any, pointer: str) -> bool:
    """Does ``pointer`` name a value in ``doc``?"""
    found = _parent(doc, pointer)
    return pointer == "" or (found is not None and _child(*found) is not _MISSING)


def get(doc: Any, pointer: str) -> Any:
    """The value ``pointer`` names; KeyError when there is none."""
    if pointer == "":
        return doc
    found = _parent(doc, pointer)
    value = _child(*found) if found is not None else _MISSING
    if value is _MISSING:
        raise KeyError(pointer)
    return value


def remove(doc: Any, pointer: str) -> None:
    """Remove what ``pointer`` names from ``doc`` in place; nothing when it is absent (as Flux's
    ``AllowMissingPathOnRemove``). The whole document cannot be removed: ``""`` does nothing."""
    found = _parent(doc, pointer)
    if found is None or _child(*found) is _MISSING:
        return
    node, token = found
    if isinstance(node, dict):
        del node[token]
    else:
        del node[int(token)]


def replace(doc: Any, pointer: str, value: Any) -> None:
    """Replace the existing value ``pointer`` names with ``value``; KeyError when there is none."""
    found = _parent(doc, pointer)
    if found is None or _child(*found) is _MISSING:
        raise KeyError(pointer)
    node, token = found
    node[token if isinstance(node, dict) else int(token)] = value
