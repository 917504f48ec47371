"""Semantic versions and version ranges with Helm's semantics.

Helm resolves ``--version`` ranges with the Go library Masterminds/semver v3;
this module follows its documented rules (checked against it, see
``tests/data/semver_cases.json``) so that helmdeck picks the version helm would:

- versions are lenient: ``v1``, ``1.2`` and leading zeros are accepted
  (``1.2`` is ``1.2.0``); build metadata is ignored when comparing;
- ranges: ``=``, ``!=``, ``>``, ``<``, ``>=``, ``<=``, ``~`` / ``~>``
  (patch-level), ``^`` (compatible), wildcards ``1.x`` / ``1.2.*`` / ``*``,
  hyphen ranges ``1.2 - 1.4.5``; AND by space or comma, OR by ``||``;
- a pre-release version matches only when its AND group names a
  pre-release (``>=1.0.0-0``), as Masterminds' ``Constraints.Check``;
- among candidates an exact string match wins, then the newest match, as
  Flux's source-controller chooses from an index or a registry's tags
  (:func:`pick`); a candidate is a version only with three parts, as Flux's
  ``ParseVersion`` (:func:`parse_candidate`: ``1.2`` is no chart version).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TypeVar

MAX_VERSION_LEN = 256  # as Masterminds' MaxVersionLen
MAX_RANGE_LEN = 512  # as Masterminds' MaxConstraintLen
MAX_RANGE_GROUPS = 32  # as Masterminds' MaxConstraintGroups

# Patterns, not compiled objects: ``re`` compiles each on first use and keeps it in its cache (compiling the
# five at import was ~5 ms of every command's start, and most commands never compare a version).
_VERSION = (
    r"^v?([0-9]+)(?:\.([0-9]+))?(?:\.([0-9]+))?"
    r"(?:-([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?"
    r"(?:\+([0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*))?$"
)
_PART = r"[0-9xX*]+"
_CV = (
    rf"v?({_PART})(\.{_PART})?(\.{_PART})?"
    r"(-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
    r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
)
_CV_PLAIN = (
    rf"v?{_PART}(?:\.{_PART})?(?:\.{_PART})?"
    r"(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
    r"(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?"
)
_OPS = r"!=|>=|=>|<=|=<|~>|>|<|~|\^|="
_ONE = rf"^\s*({_OPS}|)\s*({_CV})\s*$"
_FIND = rf"({_OPS}|)\s*({_CV_PLAIN})"
_VALID_GROUP = rf"^\s*(?:{_OPS}|)\s*{_CV_PLAIN}\s*(?:(?:\s+|,\s*)(?:{_OPS}|)\s*{_CV_PLAIN}\s*)*$"
_HYPHEN = rf"\s*({_CV_PLAIN})\s+-\s+({_CV_PLAIN})\s*"


class SemverError(ValueError):
    """A version or range does not parse; the message quotes it and says why."""


@functools.total_ordering
@dataclass(frozen=True)
class Version:
    """A semantic version; ordering and equality ignore build metadata (``meta``)."""

    major: int
    minor: int
    patch: int
    pre: str = ""
    meta: str = ""

    @classmethod
    def parse(cls, text: str) -> Version:
        """Parse leniently (``v1.2`` is 1.2.0). Raises SemverError."""
        if len(text) > MAX_VERSION_LEN:
            raise SemverError(f"version {text[:40]!r}... is longer than {MAX_VERSION_LEN} characters")
        m = re.match(_VERSION, text)
        if m is None:
            raise SemverError(f"{text!r} is not a semantic version")
        pre = m[4] or ""
        for ident in pre.split(".") if pre else ():
            if ident.isdigit() and len(ident) > 1 and ident[0] == "0":
                raise SemverError(f"{text!r}: numeric pre-release part {ident!r} starts with 0")
        return cls(int(m[1]), int(m[2] or 0), int(m[3] or 0), pre, m[5] or "")

    def __str__(self) -> str:
        out = f"{self.major}.{self.minor}.{self.patch}"
        if self.pre:
            out += f"-{self.pre}"
        if self.meta:
            out += f"+{self.meta}"
        return out

    def _key(self) -> tuple[int, int, int]:
        return (self.major, self.minor, self.patch)

    def compare(self, other: Version) -> int:
        """-1, 0 or 1; a pre-release sorts before its release, metadata is ignored."""
        if self._key() != other._key():
            return -1 if self._key() < other._key() else 1
        if self.pre == other.pre:
            return 0
        if not self.pre:
            return 1
        if not other.pre:
            return -1
        return _compare_pre(self.pre, other.pre)

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Version) and self.compare(other) == 0

    def __hash__(self) -> int:
        return hash((self._key(), self.pre))

    def __lt__(self, other: Version) -> bool:
        return self.compare(other) < 0


def _compare_pre(a: str, b: str) -> int:
    """Semver pre-release precedence: numeric parts numerically and below alphanumeric ones,
    a shorter list of equal parts first."""
    pa, pb = a.split("."), b.split(".")
    for i in range(max(len(pa), len(pb))):
        x = pa[i] if i < len(pa) else ""
        y = pb[i] if i < len(pb) else ""
        if x == y:
            continue
        if not x or not y:
            return -1 if not x else 1
        xd, yd = x.isdigit(), y.isdigit()
        if xd and yd:
            return -1 if int(x) < int(y) else 1
        if xd != yd:
            return -1 if xd else 1
        return -1 if x < y else 1
    return 0


def _is_x(part: str) -> bool:
    return part in ("x", "X", "*")


@dataclass(frozen=True)
class _Term:
    """One comparison: operator, the version it compares with, and which parts were wildcards."""

    op: str
    con: Version
    dirty: bool = False  # some part was a wildcard or missing
    minor_dirty: bool = False  # minor (and patch) were
    patch_dirty: bool = False  # only patch was

    @classmethod
    def parse(cls, text: str) -> _Term:
        m = re.match(_ONE, text)
        if m is None:
            raise SemverError(f"improper range term {text!r}")
        op, major, minor, patch, pre = m[1], m[3], (m[4] or "")[1:], (m[5] or "")[1:], m[6] or ""
        dirty = minor_dirty = patch_dirty = False
        if _is_x(major):
            dirty, base = True, "0.0.0"
        elif not minor or _is_x(minor):
            dirty = minor_dirty = True
            base = f"{major}.0.0"
        elif not patch or _is_x(patch):
            dirty = patch_dirty = True
            base = f"{major}.{minor}.0"
        else:
            base = f"{major}.{minor}.{patch}"
        try:
            con = Version.parse(base + pre)
        except SemverError as exc:
            raise SemverError(f"improper range term {text!r}: {exc}") from None
        return cls(op, con, dirty, minor_dirty, patch_dirty)

    def check(self, v: Version, include_pre: bool) -> bool:
        if v.pre and not include_pre:
            return False
        return _CHECKS[self.op](self, v)

    def __str__(self) -> str:
        return f"{self.op}{self.con}"


def _eq(t: _Term, v: Version) -> bool:
    return _tilde(t, v) if t.dirty else v == t.con


def _ne(t: _Term, v: Version) -> bool:
    c = t.con
    if t.dirty:
        if c.major != v.major:
            return True
        if c.minor != v.minor and not t.minor_dirty:
            return True
        if t.minor_dirty:
            return False
        if c.patch != v.patch and not t.patch_dirty:
            return True
        if t.patch_dirty:
            return bool(v.pre or c.pre) and _compare_pre(v.pre, c.pre) != 0
    return v != c


def _gt(t: _Term, v: Version) -> bool:
    c = t.con
    if not t.dirty:
        return v.compare(c) > 0
    if v.major != c.major:
        return v.major > c.major
    if t.minor_dirty:
        return False  # >1 needs 2.0.0 or later
    if t.patch_dirty:
        return v.minor > c.minor  # >1.1 needs 1.2.0 or later
    return v.compare(c) > 0


def _lt(t: _Term, v: Version) -> bool:
    return v.compare(t.con) < 0


def _ge(t: _Term, v: Version) -> bool:
    return v.compare(t.con) >= 0


def _le(t: _Term, v: Version) -> bool:
    c = t.con
    if not t.dirty:
        return v.compare(c) <= 0
    if v.major > c.major:
        return False
    return not (v.major == c.major and v.minor > c.minor and not t.minor_dirty)


def _tilde(t: _Term, v: Version) -> bool:
    c = t.con
    if v < c:
        return False
    if c._key() == (0, 0, 0) and not t.minor_dirty and not t.patch_dirty:
        return True  # ~0.0.0 and ~* accept everything
    if v.major != c.major:
        return False
    return v.minor == c.minor or t.minor_dirty


def _caret(t: _Term, v: Version) -> bool:
    c = t.con
    if v < c:
        return False
    if c.major > 0 or t.minor_dirty:
        return v.major == c.major
    if v.major > 0:
        return False
    if c.minor > 0 or t.patch_dirty:
        return v.minor == c.minor
    if v.minor > 0:
        return False
    return v.patch == c.patch


_CHECKS = {
    "": _eq, "=": _eq, "!=": _ne, ">": _gt, "<": _lt, ">=": _ge, "=>": _ge,
    "<=": _le, "=<": _le, "~": _tilde, "~>": _tilde, "^": _caret,
}


@dataclass(frozen=True)
class Range:
    """A version range (``text`` as written); ``groups`` are OR-ed groups of AND-ed terms."""

    text: str
    groups: tuple[tuple[_Term, ...], ...]

    @classmethod
    def parse(cls, text: str) -> Range:
        """Parse a range such as ``^1.2``, ``>=1.0.0 <2.0.0`` or ``1.x || 2.x``. Raises SemverError."""
        if len(text) > MAX_RANGE_LEN:
            raise SemverError(f"range is longer than {MAX_RANGE_LEN} characters")
        rewritten = re.sub(_HYPHEN, lambda m: f">= {m[1]}, <= {m[2]} ", text)
        ors = rewritten.split("||")
        if len(ors) > MAX_RANGE_GROUPS:
            raise SemverError(f"range {text!r} has more than {MAX_RANGE_GROUPS} '||' groups")
        groups = []
        for part in ors:
            if not re.match(_VALID_GROUP, part):
                raise SemverError(f"{text!r} is not a version range (at {part.strip()!r})")
            groups.append(tuple(_Term.parse(m[0]) for m in re.finditer(_FIND, part)))
        return cls(text, tuple(groups))

    def allows(self, v: Version) -> bool:
        """Whether ``v`` is in the range; pre-releases only where a group names one."""
        for group in self.groups:
            include_pre = any(t.con.pre for t in group)
            if all(t.check(v, include_pre) for t in group):
                return True
        return False

    def __str__(self) -> str:
        return self.text


def parse_candidate(text: str) -> Version:
    """A chart version or tag as Flux's source-controller reads the versions it chooses from (fluxcd/pkg/version
    version.go ``ParseVersion``): the text cut at its first two dots must have three parts (``1.2`` and ``v1``
    are left out, ``1.2-rc.1.0`` is 1.2.0-rc.1.0), then it is read as Masterminds' ``NewVersion`` reads it
    (:meth:`Version.parse`). Raises SemverError."""
    if len(text.split(".", 2)) != 3:
        raise SemverError(f"{text!r} is not a version of three parts (major.minor.patch)")
    return Version.parse(text)


T = TypeVar("T")


def pick(candidates: Iterable[tuple[str, T]], newest_first: Iterable[tuple[Version, T]], range_text: str) -> T | None:
    """The candidate Flux's source-controller picks for ``range_text`` (internal/helm/repository
    chart_repository.go ``ChartRepository.getChartVersion``, oci_chart_repository.go
    ``getLastMatchingVersionOrConstraint``): the first of ``candidates`` (version text, item) whose text is
    ``range_text`` (a non-empty one), else the first of ``newest_first`` (the candidates
    :func:`parse_candidate` reads, newest first, equal versions in their order) that the range allows; ""
    is ``*``. None when none does. Raises SemverError when ``range_text`` is not a range (and no exact match)."""
    if range_text:
        for text, item in candidates:
            if text == range_text:
                return item
    rng = Range.parse(range_text or "*")
    for version, item in newest_first:
        if rng.allows(version):
            return item
    return None


def newest_match(candidates: Iterable[str], range_text: str, *, exact: bool = True) -> str | None:
    """The version text of ``candidates`` Flux picks for ``range_text`` (:func:`pick`); None when none does.
    ``exact=False`` leaves out the exact match, as an OCIRepository's ``ref.semver`` is only a range
    (source-controller internal/controller/ocirepository_controller.go ``getTagBySemver``). Raises SemverError
    when ``range_text`` is not a range (and matches no candidate exactly)."""
    items = list(candidates)
    return pick(((c, c) for c in items) if exact else (), parsed_newest_first(items), range_text)


def parsed_newest_first(candidates: Iterable[str]) -> list[tuple[Version, str]]:
    """The versions :func:`parse_candidate` reads with their parsed form, newest first (ties keep their order);
    others dropped."""
    parsed: list[tuple[Version, str]] = []
    for item in candidates:
        try:
            parsed.append((parse_candidate(item), item))
        except SemverError:
            continue
    parsed.sort(key=lambda p: p[0], reverse=True)
    return parsed


def sort_newest_first(candidates: Iterable[str]) -> list[str]:
    """The versions :func:`parse_candidate` reads, newest first (ties keep their order); others dropped."""
    return [item for _, item in parsed_newest_first(candidates)]
