"""Newer chart versions: what a package's repository offers beyond the deployed version, and its range.

Pure functions over version strings, with Helm's semver rules (:mod:`engine.sources.semver`):

- :func:`in_range` / :func:`range_text`: whether a version is inside what a request asks for
  (``spec.chart.spec.version``, or an OCIRepository's ``ref``); :func:`admitted`: whether the source
  considers a version at all (an OCIRepository's ``ref.semverFilter``, the resolution's rule);
- :func:`available`: from every version a repository lists, the newest release and the newest version
  inside the range (:class:`AvailableVersions`; computed once per repository answer, not per event);
- :func:`newer`: given the deployed version, what is newer (:class:`ChartUpdate`, the row marker); cached,
  so a release event costs a dictionary lookup.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from engine.sources.repository import ChartRequest, OCIRepositorySpec
from engine.sources.semver import Range, SemverError, Version, parsed_newest_first


@dataclass(frozen=True)
class AvailableVersions:
    """What a repository offered for one package when last asked: ``newest`` its newest release (pre-releases
    only when nothing else), ``newest_in_range`` the newest version the package's range selects ("" none);
    ``by_digest``: the package is pinned by digest (an OCIRepository's ``ref.digest``), so no version is."""

    newest: str
    newest_in_range: str = ""
    by_digest: bool = False


@dataclass(frozen=True)
class ChartUpdate:
    """A newer chart version than the deployed one: ``version`` the newest offered, ``in_range`` whether the
    package's range selects it, ``in_range_version`` the newest newer one inside the range ("" none);
    ``by_digest``: the package is pinned by digest, which no newer version moves."""

    version: str
    in_range: bool
    in_range_version: str = ""
    by_digest: bool = False


def range_text(request: ChartRequest) -> str:
    """The package's range as written (``*`` by default; the OCI reference for an OCIRepository, ``pinned by
    digest sha256:…`` for its ``ref.digest``, which takes precedence over tag and semver as in Flux)."""
    if isinstance(request.source, OCIRepositorySpec):
        ref = request.source.reference
        return f"pinned by digest {ref.digest}" if ref.digest else ref.describe()
    return request.version or "*"


def admitted(request: ChartRequest, version: str) -> bool:
    """Whether ``request``'s source considers ``version`` at all: False only for a tag an OCIRepository's
    ``ref.semverFilter`` drops (:meth:`OCIReference.admits`, the resolution's rule), which is neither offered
    nor inside the range."""
    source = request.source
    return not isinstance(source, OCIRepositorySpec) or source.reference.admits_version(version)


def _wanted(request: ChartRequest) -> tuple[str, str]:
    """``("tag", tag)``, ``("digest", "")`` or ``("range", text)``: how ``request`` selects a version."""
    source = request.source
    if isinstance(source, OCIRepositorySpec):
        ref = source.reference
        if ref.digest:
            return "digest", ""
        if not ref.semver:
            return "tag", (ref.tag or "latest").replace("_", "+")
        return "range", ref.semver
    return "range", request.version


@functools.lru_cache(maxsize=1024)
def _range(text: str) -> Range | None:
    try:
        return Range.parse(text or "*")
    except SemverError:
        return None


def _inside(how: str, text: str, version: Version | None, raw: str) -> bool | None:
    if how == "digest":
        return None
    if how == "tag" or raw == text:  # Helm takes an exact match first
        return raw == text
    rng = _range(text)
    return None if rng is None or version is None else rng.allows(version)


def in_range(request: ChartRequest, version: str) -> bool | None:
    """Whether ``version`` is inside what ``request`` asks for, with Helm's semver rules; None when that
    cannot be said (an OCIRepository pinned to a digest, or an unparseable version or range). A tag the
    OCIRepository's ``ref.semverFilter`` drops is not inside (:func:`admitted`)."""
    how, text = _wanted(request)
    if how == "range" and not admitted(request, version):
        return False
    try:
        parsed: Version | None = Version.parse(version)
    except SemverError:
        parsed = None
    return _inside(how, text, parsed, version)


@functools.lru_cache(maxsize=256)
def _newest_first(versions: tuple[str, ...]) -> tuple[tuple[Version, str], ...]:
    """``versions`` that parse, newest first, each with its parsed form (one parse per repository answer)."""
    return tuple(parsed_newest_first(versions))


def prepare(versions: tuple[str, ...]) -> None:
    """Parse and sort ``versions`` for :func:`available` now (100,000 take about a second: call it in a worker
    thread; :func:`available` of the same tuple then finds them)."""
    _newest_first(versions)


@functools.lru_cache(maxsize=1024)
def available(request: ChartRequest, versions: tuple[str, ...]) -> AvailableVersions | None:
    """The newest release among ``versions`` and the newest inside ``request``'s range; None when no version
    parses. Pre-releases count as newest only when the repository has nothing else (as ``helm search``).
    Tags an OCIRepository's ``ref.semverFilter`` drops are not offered (:func:`admitted`, as the resolution).
    The versions are parsed and sorted once per repository answer, whatever the number of packages."""
    ordered = _newest_first(versions)
    source = request.source
    if isinstance(source, OCIRepositorySpec) and source.reference.semver_filter:
        ordered = tuple(p for p in ordered if admitted(request, p[1]))
    if not ordered:
        return None
    newest = next((raw for v, raw in ordered if not v.pre), ordered[0][1])
    how, text = _wanted(request)
    if how == "digest":
        return AvailableVersions(newest, by_digest=True)
    exact = next((raw for _, raw in ordered if raw == text), "") if how == "range" else ""
    inside = exact or next((raw for v, raw in ordered if _inside(how, text, v, raw)), "")
    return AvailableVersions(newest, inside)


_DIGEST_METADATA = re.compile(r"\+[0-9a-f]{12}\Z")  # the build metadata an OCI chart is installed with


def published(request: ChartRequest, deployed: str, last: tuple[str, str] | None = None) -> str:
    """The version the repository published for the ``deployed`` chart version (what the version lists mark as
    deployed). A chart from an OCIRepository is installed as ``<version>+<digest[:12]>`` (Flux's
    mutateChartWithSourceRevision, ChartRequest.revision_digest):
    ``last`` (the last pull's ``(revision, version)``) says which version gave that revision; without it the
    deployed version loses its 12-hex build metadata."""
    if last is not None and last[0] == deployed:
        return last[1]
    if request.revision_digest:
        return _DIGEST_METADATA.sub("", deployed)
    return deployed


@functools.lru_cache(maxsize=4096)
def newer(deployed: str, offered: AvailableVersions | None) -> ChartUpdate | None:
    """What ``offered`` has that is newer than ``deployed`` (None: nothing, or unknown)."""
    if offered is None or not deployed:
        return None
    try:
        current = Version.parse(deployed)
        newest = Version.parse(offered.newest)
        inside = Version.parse(offered.newest_in_range) if offered.newest_in_range else None
    except SemverError:
        return None
    inside_newer = offered.newest_in_range if inside is not None and inside > current else ""
    if newest > current:
        return ChartUpdate(offered.newest, offered.newest == offered.newest_in_range, inside_newer, offered.by_digest)
    if inside_newer:  # a pre-release inside the range, newer than deployed
        return ChartUpdate(inside_newer, True, inside_newer)
    return None
