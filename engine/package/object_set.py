"""The Package, HelmRepository and OCIRepository objects of the API server, validated incrementally: a change
re-validates the objects it touches and nothing else.

:func:`engine.package.load.load_objects` validates a whole set at once; :class:`ObjectSet` gives the same
answer (the same loader, :func:`~engine.package.load.package_object` and
:func:`~engine.sources.repository.parse_source`, and the same set checks,
:func:`~engine.package.load.package_set`), but keeps each object's parse by its document and runs the set
checks only over the packages a change can reach:

- the changed packages (a package whose document, apiVersion, kind, name, namespace and spec, is unchanged is
  not parsed again: a status write or an annotation costs no loader call);
- the packages naming a changed source (a source change refreshes exactly its dependents), and those naming
  a missing source of its kind (their error lists the known ones);
- and, transitively, the packages sharing a release key with one of these (two packages driving one release)
  and those whose ``dependsOn`` names one of these.

Those are checked together with what they depend on (transitively) and whoever shares their release keys, so
each verdict is the one the whole set gives. Work per change is independent of the number of packages.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.base.fields import PackageError
from engine.package.depends import PackageId
from engine.package.documents import link
from engine.package.load import object_document, package_object, package_set
from engine.package.model import PackageSpec
from engine.package.order import package_id
from engine.sources.repository import ChartTemplate, SourceRef, SourceSpec, parse_source

ReleaseKey = tuple[str, str]
Verdict = PackageSpec | tuple[PackageError, ...]


@dataclass(frozen=True)
class Checked:
    """What one :meth:`ObjectSet.update` decided: the new verdict of every package it looked at (its linked
    spec, or its errors), by origin, None for a package gone; and the errors of the sources it parsed, by
    origin (an empty tuple: the source is good, or gone)."""

    packages: Mapping[Path, Verdict | None]
    sources: Mapping[Path, tuple[PackageError, ...]]


def _source_ref(spec: PackageSpec) -> SourceRef | None:
    chart = spec.chart_source
    if chart is None:
        return None
    return chart.source_ref if isinstance(chart, ChartTemplate) else chart


class ObjectSet:
    """The objects known now, each parsed once per change of its document (see the module docstring);
    ``default_service_account`` as :func:`~engine.package.load.package_object`'s."""

    def __init__(self, default_service_account: str = "") -> None:
        self._default_account = default_service_account  # see package_object
        self._docs: dict[Path, dict[str, Any]] = {}  # origin -> the document last parsed
        self._parsed: dict[Path, PackageSpec | PackageError] = {}  # package origin -> its parse (not linked)
        self._source_docs: dict[Path, dict[str, Any]] = {}
        self._source_parsed: dict[Path, SourceSpec | PackageError] = {}
        self._by_ref: dict[SourceRef, SourceSpec] = {}  # the good sources
        self._origin_ref: dict[Path, SourceRef] = {}  # source origin -> the ref its good parse declared
        self._users: dict[SourceRef, set[Path]] = {}  # packages naming each source
        self._by_key: dict[ReleaseKey, set[Path]] = {}  # packages parsed to each release key
        self._by_id: dict[PackageId, Path] = {}
        self._dependents: dict[PackageId, set[Path]] = {}  # packages whose dependsOn names each package id
        self._pending: set[Path] = set()  # parsed (or reached by a parse) since the last update: to check

    def update(self, packages: Mapping[Path, Mapping[str, Any] | None],
               sources: Mapping[Path, Mapping[str, Any] | None] | None = None) -> Checked:
        """Take the changed objects (by origin; None: the object is gone, or no longer counts, e.g. being
        deleted) and return the verdicts that may have changed (:class:`Checked`)."""
        seeds: set[Path] = set()
        source_errors: dict[Path, tuple[PackageError, ...]] = {}
        kinds_changed: set[str] = set()
        for origin, obj in (sources or {}).items():
            before = self._origin_ref.get(origin)
            if not self._parse_source(origin, obj):
                continue
            after = self._origin_ref.get(origin)
            parsed = self._source_parsed.get(origin)
            source_errors[origin] = (parsed,) if isinstance(parsed, PackageError) else ()
            for ref in {before, after} - {None}:
                assert ref is not None
                seeds |= self._users.get(ref, set())
                if before != after:
                    kinds_changed.add(ref.kind)
        if kinds_changed:  # a source came or went: a "does not exist" lists the known sources of its kind
            seeds |= {o for ref, users in self._users.items() if ref.kind in kinds_changed and ref not in self._by_ref
                      for o in users}
        self.parse(packages)
        seeds |= self._pending
        self._pending = set()
        reached = self._reach(seeds)
        verdicts: dict[Path, Verdict | None] = {o: None for o in reached if o not in self._parsed}
        verdicts.update(self._check({o for o in reached if o in self._parsed}))
        return Checked(verdicts, source_errors)

    def parse(self, packages: Mapping[Path, Mapping[str, Any] | None]) -> None:
        """Parse the changed packages now, their verdicts left to the next :meth:`update`: what sources they
        name (:meth:`used_sources`) is then known before the sources are read."""
        for origin, obj in packages.items():
            old = self._parsed.get(origin)
            if not self._parse_package(origin, obj):
                continue
            self._pending.add(origin)
            for spec in (old, self._parsed.get(origin)):
                if isinstance(spec, PackageSpec):
                    self._pending |= self._by_key.get(spec.key, set())
                    self._pending |= self._dependents.get(package_id(spec), set())

    def used_sources(self) -> frozenset[SourceRef]:
        """The sources the parsed packages name (``spec.chartRef`` or ``spec.chart.spec.sourceRef``)."""
        return frozenset(ref for ref, users in self._users.items() if users)

    # -- parsing -------------------------------------------------------------------------------------
    def _parse_source(self, origin: Path, obj: Mapping[str, Any] | None) -> bool:
        """Parse a source again if its document changed; False when it did not."""
        doc = object_document(obj)[1] if obj is not None else None
        if doc == self._source_docs.get(origin):
            return False
        ref = self._origin_ref.pop(origin, None)
        if ref is not None:
            del self._by_ref[ref]
        if doc is None:
            self._source_docs.pop(origin, None)
            self._source_parsed.pop(origin, None)
            return True
        self._source_docs[origin] = doc
        try:
            source = parse_source(doc, file=origin, lines={})
        except PackageError as exc:
            self._source_parsed[origin] = exc
            return True
        self._source_parsed[origin] = source
        self._by_ref[source.ref] = source  # one object per kind, namespace and name: never declared twice
        self._origin_ref[origin] = source.ref
        return True

    def _parse_package(self, origin: Path, obj: Mapping[str, Any] | None) -> bool:
        """Parse a package again if its document changed (indexes kept); False when it did not."""
        doc = object_document(obj)[1] if obj is not None else None
        if doc == self._docs.get(origin):
            return False
        self._unindex(origin)
        if doc is None or obj is None:
            self._docs.pop(origin, None)
            return True
        self._docs[origin] = doc
        try:
            spec: PackageSpec | PackageError = package_object(obj, self._default_account)
        except PackageError as exc:
            spec = exc
        self._parsed[origin] = spec
        if isinstance(spec, PackageSpec):
            ref = _source_ref(spec)
            if ref is not None:
                self._users.setdefault(ref, set()).add(origin)
            self._by_key.setdefault(spec.key, set()).add(origin)
            self._by_id[package_id(spec)] = origin
            for dep in spec.depends_on:
                self._dependents.setdefault(dep.id, set()).add(origin)
        return True

    def _unindex(self, origin: Path) -> None:
        spec = self._parsed.pop(origin, None)
        if not isinstance(spec, PackageSpec):
            return
        ref = _source_ref(spec)
        if ref is not None:
            _discard(self._users, ref, origin)
        _discard(self._by_key, spec.key, origin)
        if self._by_id.get(package_id(spec)) == origin:
            del self._by_id[package_id(spec)]
        for dep in spec.depends_on:
            _discard(self._dependents, dep.id, origin)

    # -- the set checks ------------------------------------------------------------------------------
    def _reach(self, seeds: set[Path]) -> set[Path]:
        """``seeds`` and every package whose verdict may follow theirs: those sharing their release keys (one
        turning bad frees the key), those whose dependsOn names them, and so on."""
        reached, todo = set(seeds), list(seeds)
        while todo:
            spec = self._parsed.get(todo.pop())
            if isinstance(spec, PackageSpec):
                for other in (*self._dependents.get(package_id(spec), ()), *self._by_key.get(spec.key, ())):
                    if other not in reached:
                        reached.add(other)
                        todo.append(other)
        return reached

    def _check(self, origins: set[Path]) -> dict[Path, Verdict]:
        """The verdicts of ``origins`` (parsed packages), from the set checks over them, what they depend on
        and the packages sharing their release keys."""
        context, todo = set(origins), list(origins)
        while todo:  # what they depend on, transitively
            spec = self._parsed[todo.pop()]
            for dep in spec.depends_on if isinstance(spec, PackageSpec) else ():
                other = self._by_id.get(dep.id)
                if other is not None and other not in context:
                    context.add(other)
                    todo.append(other)
        specs = [s for s in (self._parsed[o] for o in context) if isinstance(s, PackageSpec)]
        partners = {o for s in specs for o in self._by_key.get(s.key, ())} - context
        specs += [s for s in (self._parsed[o] for o in sorted(partners)) if isinstance(s, PackageSpec)]
        good, errors = package_set(specs, list(self._by_ref.values()), functools.partial(link, files=False))
        out: dict[Path, Verdict] = {}
        for origin in origins:
            parsed = self._parsed[origin]
            if isinstance(parsed, PackageError):
                out[origin] = (parsed,)
        for err in errors:
            if err.file in origins:
                found = out.get(err.file)
                out[err.file] = (*(found if isinstance(found, tuple) else ()), err)
        for spec in good:
            if spec.file in origins and spec.file not in out:
                out[spec.file] = spec
        return out


def _discard(index: dict[Any, set[Path]], key: Any, origin: Path) -> None:
    found = index.get(key)
    if found is not None:
        found.discard(origin)
        if not found:
            del index[key]

