"""Kubernetes label selector expressions, as apimachinery's ``labels.Parse`` reads them.

``k``, ``!k``, ``k=v``, ``k==v``, ``k!=v``, ``k in (a,b)``, ``k notin (a,b)``, joined by commas (every
requirement must hold). Keys are qualified names (an optional DNS-subdomain prefix, then a 63-character
name), values label values (63 characters, may be empty). :func:`parse` gives the requirements; their
normal form (:func:`normalise`) sorts them by key and the values of a set, as apimachinery's
``Selector.String`` does, so two spellings of one selector name one shard.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass

# Kubernetes qualified names (apimachinery validation): optional DNS-subdomain prefix, 63-character name.
_NAME = r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?"
KEY = re.compile(rf"^([a-z0-9]([-a-z0-9.]{{0,251}}[a-z0-9])?/)?{_NAME}\Z")
LABEL_VALUE = re.compile(rf"^({_NAME})?\Z")
MAX_EXPRESSION = 4096  # characters; a selector is a flag or a label value, never a document
_TERM_KEY = r"[^\s=!(),]+"
_EXISTS = re.compile(rf"\s*(!?)\s*({_TERM_KEY})\s*")
_EQUALS = re.compile(rf"\s*({_TERM_KEY})\s*(==|=|!=)\s*([^\s=!(),]*)\s*")
_IN = re.compile(rf"\s*({_TERM_KEY})\s+(in|notin)\s*\(([^()]*)\)\s*")


class SelectorError(ValueError):
    """A label selector expression that does not parse; the message names the requirement at fault."""


@dataclass(frozen=True)
class Requirement:
    """One requirement: ``op`` is ``exists``, ``!`` (does not exist), ``=``, ``!=``, ``in`` or ``notin``;
    ``values`` sorted (one for ``=`` and ``!=``, none for the existence tests)."""

    key: str
    op: str
    values: tuple[str, ...] = ()

    def holds(self, labels: Mapping[str, str]) -> bool:
        """Does it hold for the label map ``labels`` (a missing key holds ``!=`` and ``notin``, as Kubernetes)?"""
        found = labels.get(self.key)
        if self.op == "exists":
            return found is not None
        if self.op == "!":
            return found is None
        if self.op in ("=", "in"):
            return found in self.values
        return found not in self.values  # != and notin

    def __str__(self) -> str:
        if self.op == "exists":
            return self.key
        if self.op == "!":
            return f"!{self.key}"
        if self.op in ("=", "!="):
            return f"{self.key}{self.op}{self.values[0]}"
        return f"{self.key} {self.op} ({','.join(self.values)})"


@functools.lru_cache(maxsize=256)
def parse(expression: str) -> tuple[Requirement, ...]:
    """The requirements of ``expression`` in the order written; "" is none (everything matches). Raises
    SelectorError naming the requirement, the key or the value that is not valid."""
    if len(expression) > MAX_EXPRESSION:
        raise SelectorError(f"the selector is {len(expression)} characters long (at most {MAX_EXPRESSION})")
    if not expression.strip():
        return ()
    terms, depth, start = [], 0, 0
    for i, char in enumerate(expression):
        depth += {"(": 1, ")": -1}.get(char, 0)
        if char == "," and depth == 0:
            terms.append(expression[start:i])
            start = i + 1
    terms.append(expression[start:])
    return tuple(_requirement(term) for term in terms)


def matches(requirements: tuple[Requirement, ...], labels: Mapping[str, str]) -> bool:
    """Do all ``requirements`` hold for ``labels``?"""
    return all(r.holds(labels) for r in requirements)


def normalise(expression: str) -> str:
    """``expression`` in its normal form: requirements sorted by key (then operator and values), values of a
    set sorted, no spaces but those of ``in``/``notin``. Raises SelectorError."""
    return ",".join(sorted((str(r) for r in parse(expression)),
                           key=lambda text: (_key_of(text), text)))


def _key_of(text: str) -> str:
    return re.split(r"[=! ]", text.lstrip("!"), maxsplit=1)[0]


def _requirement(term: str) -> Requirement:
    if not term.strip():
        raise SelectorError("an empty requirement (two commas in a row, or one at an end)")
    if m := _IN.fullmatch(term):
        if not m[3].strip():  # as apimachinery: the set of values cannot be empty
            raise SelectorError(f"{term.strip()!r}: {m[2]} needs at least one value in its parentheses")
        return Requirement(_key(m[1]), m[2], tuple(sorted({_value(v.strip()) for v in m[3].split(",")})))
    if m := _EQUALS.fullmatch(term):
        return Requirement(_key(m[1]), "!=" if m[2] == "!=" else "=", (_value(m[3]),))
    if m := _EXISTS.fullmatch(term):
        return Requirement(_key(m[2]), "!" if m[1] else "exists")
    raise SelectorError(f"{term.strip()!r} is not a selector requirement (k, !k, k=v, k!=v, k in (a,b), "
                        "k notin (a,b))")


def _key(key: str) -> str:
    if not KEY.match(key):
        raise SelectorError(f"{key!r} is not a label key (an optional DNS-subdomain prefix and '/', then at "
                            "most 63 letters, digits, '-', '_' or '.', starting and ending with a letter or digit)")
    return key


def _value(value: str) -> str:
    if not LABEL_VALUE.match(value):
        raise SelectorError(f"{value!r} is not a label value (at most 63 letters, digits, '-', '_' or '.', "
                            "starting and ending with a letter or digit)")
    return value
