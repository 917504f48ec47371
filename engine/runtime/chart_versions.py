"""The version picker's engine side: list a package's chart versions, diff one, pin it in the package file.

- :meth:`ChartVersions.list`: every version the package's repository offers, newest first, with app
  version and date, marking the deployed one and those inside the range (the repository is asked at
  most once per interval, :class:`engine.sources.ChartSource`); it also refreshes the row's
  newer-version marker (:meth:`ReleaseBook.set_offered`);
- :meth:`ChartVersions.diff`: what upgrading to one version would change: its archive (pulled once,
  content-addressed) rendered with the package's values, against the deployed manifest;
- :meth:`ChartVersions.plan_pin` / :meth:`ChartVersions.pin`: a precise edit of one scalar of a YAML file
  (:func:`engine.sources.pin.set_scalar`; comments and layout stay): ``spec.chart.spec.version`` of the
  Package, or for ``spec.chartRef`` the OCIRepository's ``spec.ref.semver`` (``spec.ref.tag`` when it
  selects by tag) or the Flux HelmChart's ``spec.version``. The package folder is then reloaded, so the next
  pass deploys the pinned version. A package that is a Package object a live controller reconciles (the app
  attached to it) is pinned in the object: the same field patched (a JSON merge patch of the Package, or of its
  OCIRepository), and the controller deploys it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.package.model import PackageSpec
from engine.runtime.drive.controller import PackageController
from engine.runtime.drive.kustomized import KustomizeInput
from engine.runtime.ledger.book import ActionRefused, ReleaseBook
from engine.runtime.ledger.gate import ActionGate, local_chart_reason, no_package_reason
from engine.runtime.operations import Operations
from engine.runtime.state import ReleaseKey
from engine.sources import updates
from engine.sources.pin import PinError, document_index, set_scalar
from engine.sources.repository import ChartRequest, OCIReference, OCIRepositorySpec
from engine.sources.updates import available, in_range, range_text
from engine.sources.verify import Verification


@dataclass(frozen=True)
class VersionRow:
    """One offered version: ``created`` as the repository gives it (RFC 3339 or ""), ``in_range`` None when
    that cannot be said (an OCIRepository selecting a digest); ``verification`` the outcome known for its
    artifact (``Verified`` | ``Failed``; "" when the package asks none or it is not known yet)."""

    version: str
    app_version: str
    created: str
    in_range: bool | None
    deployed: bool
    verification: str = ""


def _outcome(found: Verification | None) -> str:
    return found.outcome if found is not None else ""


@dataclass(frozen=True)
class VersionList:
    """What the picker shows: the source (one line), the range as written, the deployed version ("" none);
    ``by_digest``: the package is pinned by digest (an OCIRepository's ``ref.digest``): no row can be pinned."""

    source: str
    range: str
    deployed: str
    rows: tuple[VersionRow, ...]
    by_digest: bool = False


@dataclass(frozen=True)
class Pin:
    """A planned edit: ``field`` of the document of ``kind`` in ``file`` goes from ``before`` (the range in
    force; a missing field is added) to ``after``; ``shared`` names the other packages the edit moves too (a shared
    OCIRepository); ``text`` is the whole new file."""

    file: Path
    kind: str
    field: str
    before: str
    after: str
    shared: tuple[str, ...]
    text: str


class ChartVersions:
    """The versions of each remote package's chart (see the module docstring)."""

    def __init__(self, book: ReleaseBook, gate: ActionGate, controller: PackageController, operations: Operations,
                 patch_object: Callable[[Path, dict[str, Any]], Awaitable[None]] | None = None):
        self.book = book
        self.gate = gate
        self.controller = controller
        self.operations = operations
        self.patch_object = patch_object  # merge-patches an API object by its origin (its API path)

    def _spec(self, key: ReleaseKey) -> PackageSpec | None:
        """``key``'s package: this engine's own, else the Package object a live controller reconciles."""
        view = self.book.view(key)
        return self.book.packages.get(key) or (view.package if view is not None and view.attached else None)

    def request(self, key: ReleaseKey) -> ChartRequest:
        """The chart request of ``key``'s package. Raises ActionRefused: no package, or a local chart."""
        spec = self._spec(key)
        if spec is None:
            raise ActionRefused(no_package_reason(key))
        if spec.chart_request is None:
            raise ActionRefused(local_chart_reason(key))
        return spec.chart_request

    async def list(self, key: ReleaseKey) -> VersionList:
        """Every version offered for ``key``'s chart, newest first. Raises ActionRefused and SourceError."""
        request = self.request(key)
        # The keyring too, so a verification kept from an earlier process is marked (helmdeck versions).
        infos, _ = await asyncio.gather(self.controller.charts.versions(request),
                                        self.controller.charts.read_keys(request))
        self.book.set_offered(key, available(request, tuple(i.version for i in infos)))
        obs = self.book.observer.latest(*key)
        deployed = obs.chart_version if obs is not None else ""
        last = self.controller.charts.last(request)
        published = updates.published(request, deployed, (last.revision, last.version) if last else None)
        charts = self.controller.charts
        rows = tuple(VersionRow(i.version, i.app_version, i.created, in_range(request, i.version),
                                bool(published) and i.version == published,
                                _outcome(charts.verification_of(request, i.digest))) for i in infos)
        by_digest = isinstance(request.source, OCIRepositorySpec) and bool(request.source.reference.digest)
        return VersionList(request.origin(), range_text(request), deployed, rows, by_digest)

    async def diff(self, key: ReleaseKey, version: str, *, reveal: bool = False) -> str:
        """What upgrading ``key`` to chart ``version`` would change (unified diff, "" = nothing), secrets masked
        unless ``reveal``. Raises ActionRefused, NotAvailable, SourceError, PackageError, HelmError."""
        self.gate.check("diff", key)
        exact = _exact(self.request(key), version)
        artifact = await self.controller.charts.pull(exact)
        spec = dataclasses.replace(self.book.spec(key), chart_path=artifact.path, chart_request=exact)
        desired = await self.operations.service.render(spec.release_namespace, spec)
        return await self.operations.diff_against(key, desired, reveal=reveal)

    def plan_pin(self, key: ReleaseKey, version: str) -> Pin:
        """The edit pinning ``key``'s chart to ``version`` (nothing written). Raises ActionRefused, PinError
        (an OCIRepository selecting a digest, a field that cannot be edited in place), OSError."""
        request = self.request(key)
        built = self.controller.package_input
        if isinstance(built, KustomizeInput):  # its file is kustomize's output, rewritten by the next build
            raise PinError(f"{key[0]}/{key[1]} is built by --kustomize from {built.directory}: pin the chart version "
                           "in the repository (the HelmRelease or the overlay patching it)")
        source = request.source
        if isinstance(source, OCIRepositorySpec):
            ref = source.reference
            if ref.digest:
                raise PinError(f"{source.describe()} is pinned by digest {ref.digest} (spec.ref.digest comes before "
                               "tag and semver): edit its spec.ref by hand")
            if ref.semver and not ref.admits_version(version):  # the resolution would never select it
                raise PinError(f"{source.describe()}: the tag of {version} does not match spec.ref.semverFilter "
                               f"{ref.semver_filter!r}; change the filter by hand")
            field, before, after = (("semver", ref.semver, version) if ref.semver
                                    else ("tag", ref.tag, version.replace("+", "_")))
            file, kind, name = source.file, "OCIRepository", source.name
            path: tuple[str, ...] = ("spec", "ref", field)
            document: int | None = None
            shared = tuple(sorted(f"{s.namespace}/{s.name}" for k, s in self.book.packages.items()
                                  if k != key and s.chart_request is not None and s.chart_request.source == source))
        elif (chart := self.book.spec(key).chart_object) is not None:  # a chartRef to a Flux HelmChart
            before, after, path, document = request.version, version, ("spec", "version"), None
            file, kind, name = chart.file, chart.ref.kind, chart.name
            shared = tuple(sorted(f"{s.namespace}/{s.name}" for k, s in self.book.packages.items()
                                  if k != key and s.chart_object == chart))
        else:
            spec = self._spec(key)
            assert spec is not None  # self.request found it
            before = request.version
            file, kind, name, path = spec.file, spec.kind, spec.name, ("spec", "chart", "spec", "version")
            after, shared = version, ()
            document = spec.document  # a file may hold several packages: the one of this release
        if is_object(file):  # an API object: patched, no text
            return Pin(file, kind, ".".join(path), before, after, shared, "")
        text = file.read_text()
        new = set_scalar(text, path, after, document=document_index(text, kind, name) if document is None else document)
        return Pin(file, kind, ".".join(path), before, after, shared, new)

    async def pin(self, key: ReleaseKey, version: str) -> Pin:
        """Pin ``key``'s chart to ``version`` in its file and reload the package folder (the next pass deploys
        it). Raises ActionRefused (read-only, lease, no package, local chart), PinError, OSError."""
        self.gate.check("versions", key)
        planned = self.plan_pin(key, version)
        if is_object(planned.file):
            if self.patch_object is None:
                raise ActionRefused(f"{planned.kind} {planned.file.name} is an API object: this engine cannot patch it")
            body: dict[str, Any] = {}
            node = body
            *parents, leaf = planned.field.split(".")
            for part in parents:
                node = node.setdefault(part, {})
            node[leaf] = planned.after
            await self.patch_object(planned.file, body)
            self.book.log(key, "pin", "info", f"chart version pinned: {planned.kind} {planned.file.name} "
                          f"{planned.field}: {planned.before} -> {planned.after} (patched; the controller deploys it)")
            return planned
        await asyncio.to_thread(_write, planned.file, planned.text)
        self.book.log(key, "pin", "info", f"chart version pinned: {planned.file.name} {planned.field}: "
                      f"{planned.before} -> {planned.after}")
        source = self.controller.package_input
        if source is not None:
            self.controller.apply_input(await asyncio.to_thread(source.load, {planned.file}))
        return planned


def is_object(origin: Path) -> bool:
    """Is ``origin`` an API object's (``/apis/<group>/<version>/namespaces/<ns>/<plural>/<name>``,
    :func:`engine.package.load.object_origin`) rather than a file's?"""
    parts = origin.parts
    return len(parts) == 8 and parts[:2] == ("/", "apis") and parts[4] == "namespaces"


def _exact(request: ChartRequest, version: str) -> ChartRequest:
    """``request`` asking for exactly ``version``."""
    source = request.source
    if isinstance(source, OCIRepositorySpec):
        return ChartRequest(dataclasses.replace(source, reference=OCIReference(tag=version.replace("+", "_"))))
    return dataclasses.replace(request, version=version)


def _write(file: Path, text: str) -> None:
    """Replace ``file`` with ``text`` at once, keeping its mode (a watcher never reads half a file)."""
    tmp = file.with_name(f".{file.name}.{os.getpid()}.pin")
    tmp.write_text(text)
    tmp.chmod(file.stat().st_mode & 0o7777)
    tmp.replace(file)
