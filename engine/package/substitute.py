"""Flux's post-build variable substitution, applied to each object a ``kustomize build`` printed.

As Flux's kustomize-controller does for a Kustomization with ``spec.postBuild`` (its docs, "Post build
variable substitution", kustomize.toolkit.fluxcd.io/v1):

- the object's YAML text is substituted, then read again (a value may therefore add YAML structure, as
  in Flux);
- ``${var}`` is the variable's value; ``${var:=default}``, ``${var:-default}`` and ``${var=default}``
  the default when the variable is unset or empty (all three alike in Flux; a default may hold references);
  ``$$`` is the escape of one ``$`` (``$${var}`` is the literal ``${var}``). Only the braced form is a
  variable: ``$var`` stays as written. A ``${`` with no name, a reference with no ``}`` and
  ``${var-default}`` are errors, as in Flux's envsubst (fluxcd/pkg/envsubst, :class:`_Reader`); its
  other shell operators (``${#var}``, ``${var:1:2}``, ``${var^^}``, ``${var:+x}``) are refused naming
  the reference;
- with no variables at all nothing is substituted (Flux substitutes only when some variable is set,
  unless ``spec.postBuild.substituteStrategy: Always``, which helmdeck does not read);
- a variable's value loses its newlines, as Flux's ``LoadVariables`` strips them (fluxcd/pkg/kustomize
  kustomize_varsub.go) from ``substitute`` and ``substituteFrom`` values alike (:func:`variables`);
- an object annotated or labelled ``kustomize.toolkit.fluxcd.io/substitute: disabled`` is left as it is;
- variable names must match ``^[_[:alpha:]][_[:alpha:][:digit:]]*$`` (Flux's ``varsubRegex``, ASCII);
- a referenced variable that is unset and has no default is an error naming it and the object, as Flux
  with its ``StrictPostBuildSubstitutions`` feature gate on (by default Flux substitutes an empty
  string; helmdeck never guesses a plan's input).

:func:`read_vars_file` reads ``--vars-from FILE``; :func:`parse_var` one ``--var KEY=VALUE``.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.base.fields import PackageError
from engine.base.loader import YamlLimitError, load_documents, package_limits

DISABLE_KEY = "kustomize.toolkit.fluxcd.io/substitute"
DISABLED = "disabled"
# Flux's varsubRegex: "^[_[:alpha:]][_[:alpha:][:digit:]]*$" (Go's POSIX classes are ASCII).
NAME = re.compile(r"[_A-Za-z][_A-Za-z0-9]*")


class SubstitutionError(ValueError):
    """A substitution that cannot be made: ``names`` (the variables or references at fault) and the message."""

    def __init__(self, message: str, names: tuple[str, ...] = ()):
        self.names = names
        super().__init__(message)


@dataclass(frozen=True)
class Variables:
    """Post-build variables by name and where each came from (``--var``, a file, a ConfigMap/Secret), and
    which names came from a Secret (their values are secret: masked wherever helmdeck shows text)."""

    values: Mapping[str, str]
    origins: Mapping[str, str]
    secret: frozenset[str] = frozenset()

    def __bool__(self) -> bool:
        return bool(self.values)

    def over(self, lower: Variables) -> Variables:
        """These variables over ``lower`` (a name in both takes this one's value), as Flux lays
        ``spec.postBuild.substitute`` over ``substituteFrom``, and each entry of it over the ones before."""
        return Variables({**lower.values, **self.values}, {**lower.origins, **self.origins},
                         (lower.secret - set(self.values)) | self.secret)

    def secret_texts(self) -> frozenset[str]:
        """The values that came from Secrets (for the masker)."""
        return frozenset(v for k, v in self.values.items() if k in self.secret and v)


NO_VARIABLES = Variables({}, {})


def check_name(name: str, origin: str) -> None:
    """Raise SubstitutionError unless ``name`` is a valid variable name (Flux's rule, module docstring)."""
    if not NAME.fullmatch(name):
        raise SubstitutionError(f"{origin}: variable name {name!r} is invalid: it must match "
                                "^[_[:alpha:]][_[:alpha:][:digit:]]*$ (as Flux's post-build substitution)", (name,))


def variables(pairs: Iterable[tuple[str, str]], origin: str, *, secret: bool = False) -> Variables:
    """``pairs`` as Variables from ``origin``, each name checked (:func:`check_name`), each value without its
    newlines (as Flux reads every variable: fluxcd/pkg/kustomize kustomize_varsub.go ``SubstituteVariables``
    and ``LoadVariables``). Raises SubstitutionError."""
    values: dict[str, str] = {}
    for name, value in pairs:
        check_name(name, origin)
        values[name] = value.replace("\n", "")
    return Variables(values, dict.fromkeys(values, origin), frozenset(values) if secret else frozenset())


def parse_var(text: str) -> tuple[str, str]:
    """One ``--var KEY=VALUE`` (the value may hold ``=``). Raises SubstitutionError."""
    name, sep, value = text.partition("=")
    if not sep:
        raise SubstitutionError(f"--var {text!r}: write KEY=VALUE", (text,))
    check_name(name, "--var")
    return name, value


def disabled(obj: Any) -> bool:
    """Whether ``obj`` opts out of substitution (``kustomize.toolkit.fluxcd.io/substitute: disabled``, as an
    annotation or a label, as Flux checks both)."""
    meta = obj.get("metadata") if isinstance(obj, dict) else None
    if not isinstance(meta, dict):
        return False
    return any(isinstance(m, dict) and m.get(DISABLE_KEY) == DISABLED
               for m in (meta.get("annotations"), meta.get("labels")))


def references(text: str) -> bool:
    """Whether ``text`` holds a ``${`` (a reference a substitution would look at)."""
    return "${" in text


def substitutable(text: str) -> bool:
    """Whether a substitution may change ``text``: it holds a reference or a ``$$`` (an escape)."""
    return "${" in text or "$$" in text


def substitute(text: str, values: Mapping[str, str]) -> str:
    """``text`` with its variable references replaced (module docstring); ``text`` as it is when there are no
    variables (Flux substitutes only then, without ``substituteStrategy: Always``). Raises SubstitutionError
    naming every variable that is unset without a default, a reference that does not parse, or the first
    one helmdeck does not implement."""
    if not values:
        return text
    reader = _Reader(text, values)
    out = reader.text(top=True)
    if reader.missing:
        missing = reader.missing
        raise SubstitutionError(f"variable{'s' if len(missing) > 1 else ''} {', '.join(missing)} "
                                f"{'are' if len(missing) > 1 else 'is'} not set and "
                                f"{'have' if len(missing) > 1 else 'has'} no default", tuple(missing))
    return out


class _Reader:
    """A reader of the text Flux's envsubst (fluxcd/pkg/envsubst parse/parse.go ``Tree.parseAny``,
    ``parseFunc``, ``parseDefaultFunc``; scan.go) substitutes, for the references helmdeck implements:

    - ``$$`` is one ``$`` (outside references); any other ``$`` is text;
    - ``${`` starts a reference: a name of letters, digits and ``_`` (any, ``${1}`` included: only the
      variables' own names are checked), then ``}``, or ``:=``, ``:-``, ``=`` and a default up to the
      matching ``}``: text (no escapes) and nested references, all evaluated (an unset variable in a
      default is missing even when the default is not used, as Flux);
    - no name, no ``}`` or an unended default is an error, as ``${var-default}`` is in Flux."""

    def __init__(self, text: str, values: Mapping[str, str]):
        self.src, self.pos, self.values = text, 0, values
        self.missing: list[str] = []

    def text(self, *, top: bool) -> str:
        """Text and references up to the end (``top``) or up to the ``}`` ending a default (consumed)."""
        src, out = self.src, []
        while self.pos < len(src):
            ch = src[self.pos]
            if ch == "$" and src.startswith("${", self.pos):
                self.pos += 2
                out.append(self.reference())
            elif top and src.startswith("$$", self.pos):
                out.append("$")
                self.pos += 2
            elif not top and ch == "}":
                self.pos += 1
                return "".join(out)
            else:
                out.append(ch)
                self.pos += 1
        if not top:
            raise SubstitutionError(f"{self.src[:80]!r}: a default is not closed with '}}' (Flux: unable to parse "
                                    "substitution within function)")
        return "".join(out)

    def reference(self) -> str:
        src, start = self.src, self.pos - 2
        end = start + 2
        while end < len(src) and (src[end].isalpha() or src[end].isdecimal() or src[end] == "_"):
            end += 1
        name, self.pos = src[start + 2:end], end
        nxt = src[end:end + 2]
        if not name and nxt[:1] != "#":
            raise SubstitutionError(f"{src[start:start + 20]!r} is not a variable reference: a name must follow "
                                    "'${' (Flux: unable to parse variable name); escape a literal as '$${'")
        if nxt[:1] == "}":
            self.pos += 1
            return self._value(name)
        op = nxt if nxt in (":=", ":-") else "=" if nxt[:1] == "=" else ""
        if op:
            self.pos += len(op)
            default = self.text(top=False)
            value = self.values.get(name)
            return value or default
        if nxt[:1] in (":", ",", "^", "/", "#", "%"):
            close = src.find("}", end)
            whole = src[start:close + 1] if 0 <= close - start < 80 else src[start:start + 40] + "..."
            var = name or "var"
            raise SubstitutionError(f"{whole} is a substitution helmdeck does not implement: write ${{{var}}}, "
                                    f"${{{var}:=default}} or ${{{var}:-default}}", (name,))
        raise SubstitutionError(f"{src[start:end + 1]!r}: the reference is not closed with '}}' "
                                "(Flux: missing closing brace; ${var-default} is not Flux's: write ${var:-default})",
                                (name,))

    def _value(self, name: str) -> str:
        value = self.values.get(name)
        if value is None:
            if name not in self.missing:
                self.missing.append(name)
            return ""
        return value


def read_vars_file(file: Path) -> Variables:
    """``--vars-from FILE``: post-build variables from a file.

    A file named ``*.env`` holds ``KEY=VALUE`` lines (blank lines and ``#`` comments skipped, the value
    taken as written, no quotes removed). Any other file is YAML within the package limits: each document
    a flat mapping of names to scalars, or a ConfigMap (``data``) or Secret (``data`` base64, ``stringData``)
    as Flux's ``substituteFrom`` reads them (a Secret's values are then masked). Later documents override
    earlier ones. Raises PackageError naming the file, the line where known and the fix.
    """
    if file.suffix == ".env":
        return _env_file(file)
    try:
        docs = load_documents(file, package_limits())
    except YamlLimitError as exc:
        raise PackageError(file, "", exc.problem, exc.fix, exc.line) from None
    out = NO_VARIABLES
    for doc in docs:
        data = doc.data
        if data is None:
            continue
        line = doc.node.start_mark.line + 1 if doc.node is not None else None
        if not isinstance(data, dict):
            raise PackageError(file, "", "not a mapping of variables, a ConfigMap or a Secret",
                               "write name: value lines", line)
        secret = data.get("kind") == "Secret"
        pairs = _object_pairs(data, file, line) if data.get("kind") in ("ConfigMap", "Secret") else data.items()
        scalars = []
        for name, value in pairs:
            if isinstance(value, (dict, list)) or value is None:
                raise PackageError(file, str(name), "a variable's value must be a string or number",
                                   "give each variable one scalar value", line)
            scalars.append((str(name), value if isinstance(value, str) else _scalar(value)))
        try:
            out = variables(scalars, str(file), secret=secret).over(out)
        except SubstitutionError as exc:
            raise PackageError(file, "", str(exc).removeprefix(f"{file}: "), "rename the variable", line) from None
    return out


def _scalar(value: Any) -> str:
    """A YAML scalar as the string a ConfigMap would hold (``true``, not Python's ``True``)."""
    return "true" if value is True else "false" if value is False else str(value)


def _object_pairs(data: dict[str, Any], file: Path, line: int | None) -> list[tuple[str, Any]]:
    """A ConfigMap's ``data``; a Secret's ``data`` decoded and ``stringData`` (as the API server merges them)."""
    pairs: list[tuple[str, Any]] = []
    for field in ("data", "stringData") if data.get("kind") == "Secret" else ("data",):
        section = data.get(field) or {}
        if not isinstance(section, dict):
            raise PackageError(file, field, "must be a mapping", "write name: value lines", line)
        for name, value in section.items():
            if field == "data" and data.get("kind") == "Secret":
                value = decode_secret_value(str(value), f"{file}: data.{name}")
            pairs.append((str(name), value))
    return pairs


def decode_secret_value(encoded: str, where: str) -> str:
    """A Secret's ``data`` value (base64) as text. Raises SubstitutionError naming ``where`` (never the value)."""
    try:
        return base64.b64decode(encoded, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        raise SubstitutionError(f"{where}: not base64-encoded UTF-8 text") from None


def _env_file(file: Path) -> Variables:
    limit = package_limits().max_bytes
    try:
        raw = file.read_bytes()[: limit + 1]
    except OSError as exc:
        raise PackageError(file, "", f"cannot read file ({exc.strerror})") from None
    if len(raw) > limit:
        raise PackageError(file, "", f"file is over the limit of {limit} bytes", f"set {package_limits().env} "
                           "to raise it")
    pairs = []
    for number, line in enumerate(raw.decode("utf-8", errors="replace").splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        name, sep, value = line.partition("=")
        if not sep or not NAME.fullmatch(name.strip()):
            raise PackageError(file, "", "not a KEY=VALUE line with a valid variable name",  # no text: may be secret
                               "write KEY=VALUE, the name matching ^[_[:alpha:]][_[:alpha:][:digit:]]*$", number)
        pairs.append((name.strip(), value))
    return variables(pairs, str(file))
