"""Where a chart comes from, as the views show it: the Overview's source line, the CHART cell, the picker's rows.

Plain text over engine value types (a package's :class:`~engine.sources.ChartRequest`, a release's
:class:`~engine.sources.updates.ChartUpdate`, the picker's :class:`~engine.runtime.chart_versions.VersionList`).
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from engine.base.wire import SOURCE_VERIFIED
from engine.package.model import PackageSpec
from engine.runtime.state import ReleaseView
from engine.sources.repository import OCIRepositorySpec
from engine.sources.updates import ChartUpdate
from tui.format import Tone

if TYPE_CHECKING:  # the picker's module, imported when it is first opened
    from engine.runtime.chart_versions import VersionList


def origin_line(pkg: PackageSpec) -> str:
    """``HelmRepository demo/charts https://… chart web, range ^0.1``, ``OCIRepository demo/web oci://… ref
    semver '~1.0'`` or ``local ../charts/web`` (relative to the package file)."""
    request = pkg.chart_request
    if request is None:
        return f"local {os.path.relpath(pkg.chart_path, pkg.declared_file.parent)}"
    source = request.source
    kind = "OCIRepository" if isinstance(source, OCIRepositorySpec) else "HelmRepository"
    where = f"{kind} {source.namespace}/{source.name} {source.url}"
    if isinstance(source, OCIRepositorySpec):
        return f"{where}  ref {source.reference.describe()}"
    return f"{where}  chart {request.chart}, range {request.version or '*'}"


def verification_line(view: ReleaseView) -> tuple[str, Tone, str] | None:
    """The Overview's verification row for a remote chart (None for a local one): ``✔ Verified`` with who
    signed, ``✖ Failed`` with the tool's message (Flux's ``SourceVerified`` condition), or ``Not verified``
    (no ``verify`` asked, or not checked yet)."""
    pkg = view.package
    if pkg is None or pkg.chart_request is None:
        return None
    found = view.condition(SOURCE_VERIFIED)
    asked = pkg.chart_request.verify
    if found is not None and found.status == "True":
        return "✔ Verified", "ok", found.message
    if found is not None and found.status == "False":
        return "✖ Failed", "bad", f"{found.message} (not installed: the last verified chart is kept)"
    if asked is None:
        return "Not verified", "plain", "no verify is declared for this chart"
    return "Not verified", "warn", f"{asked.describe()}: not checked yet"


def update_text(update: ChartUpdate) -> str:
    """``↑0.3.0 (in range)`` (the next reconcile installs it), ``⇡1.0.0 (out of range)`` or ``⇡1.0.0 (pinned by
    digest)``."""
    said = "pinned by digest" if update.by_digest else "in range" if update.in_range else "out of range"
    return f"{update_mark(update)} ({said})"


def update_mark(update: ChartUpdate) -> str:
    """The row's short marker: ``↑0.3.0`` inside the range, ``⇡1.0.0`` outside it (pin it with v)."""
    return f"{'↑' if update.in_range else '⇡'}{update.version}"


def chart_cell(view: ReleaseView) -> tuple[str, Tone]:
    """The CHART column: ``web@0.2.0``, the one form of a chart everywhere in the app (the Overview, History, the
    dialogs) whatever its source, then the newer-version marker (:func:`update_mark`). A repository's name is the
    Overview's to say (:func:`origin_line`): in the cell it came and went with the marker (``charts/web@1.0.0``
    after a pin, ``web@0.2.0 ⇡1.0.0`` before), as the 21-cell column fitted both or not. A version inside the range
    is a warning (an upgrade is due)."""
    obs = view.observation
    if obs is None:
        return "-", "plain"
    chart = f"{obs.chart_name}@{obs.chart_version}"
    update = view.chart_update
    if update is None:
        return chart, "plain"
    return f"{chart} {update_mark(update)}", "warn" if update.in_range else "plain"


def newer_line(update: ChartUpdate) -> str:
    """The Overview's sentence about newer versions."""
    if update.by_digest:
        return (f"{update.version} is offered, but the chart is pinned by digest (spec.ref.digest): it stays on that "
                "artifact until spec.ref changes")
    if update.in_range:
        return f"{update.version} is inside the range: the next reconcile installs it"
    inside = f"; {update.in_range_version} is, and the next reconcile installs it" if update.in_range_version else ""
    return f"{update.version} is outside the range (pick it with v to pin it){inside}"


def picker_title(ref: str, listed: VersionList) -> str:
    """The picker's heading: what, from where, the range (``pinned by digest sha256:…``), what is deployed, and the
    column names."""
    action = "Versions of the chart of" if listed.by_digest else "Pin the chart of"
    goal = " (edit spec.ref by hand to move it)" if listed.by_digest else " to a version"
    return (f"{action} {ref}{goal}\n{listed.source}\n"
            f"range {listed.range} · deployed {listed.deployed or 'nothing'}\n\n"
            f"  {'VERSION':<{_width(listed)}}  {'APP VERSION':<14} {'CREATED':<10}  RANGE")


def _width(listed: VersionList) -> int:
    return max([len("VERSION"), *(len(r.version) for r in listed.rows)])


_VERIFIED_MARKS = {"Verified": "  ✔ verified", "Failed": "  ✖ fails verification"}


def picker_rows(listed: VersionList) -> list[str]:
    """One line per version, newest first: ``● 0.2.0  app-0.2.0  2026-11-30  in range  deployed``, then what
    verification found for it once known (``✔ verified``, ``✖ fails verification``); under a pin by digest the
    range column says ``-`` (no version is selected by the range: the digest is)."""
    width = _width(listed)
    marks = {True: "in range", False: "out of range", None: "-" if listed.by_digest else "?"}
    return [f"{'●' if r.deployed else ' '} {r.version:<{width}}  {r.app_version or '-':<14} "
            f"{r.created[:10] or '-':<10}  {marks[r.in_range]:<12}{'  deployed' if r.deployed else ''}"
            f"{_VERIFIED_MARKS.get(r.verification, '')}".rstrip()
            for r in listed.rows]
