"""Newer chart versions (the row marker) and the version picker's pin, on an engine without a cluster."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from engine.runtime import Engine
from engine.runtime.assemble import offline_engine
from engine.runtime.chart_versions import VersionList, VersionRow
from engine.runtime.engine import ActionRefused
from engine.sources.pin import PinError
from engine.sources.repository import ChartRequest, HelmRepositorySpec, OCIReference, OCIRepositorySpec
from engine.sources.updates import AvailableVersions, ChartUpdate, available, in_range, newer, range_text
from engine.storage.observer import Observer
from testkit.fixtures import EXAMPLES, storage_secret
from tests.engine.sources.test_sources_pin import FILE
from tui.chart_origin import newer_line, picker_rows, picker_title, update_text
from tui.engine_client import EngineClient

HTTP = HelmRepositorySpec(Path("charts.yaml"), "charts", "demo", "https://charts.example.com")
OCI = OCIRepositorySpec(Path("oci.yaml"), "web", "demo", "oci://registry.example.com/web",
                        OCIReference(semver="~1.0"))


def test_in_range_follows_helm_semver_and_the_oci_reference() -> None:
    request = ChartRequest(HTTP, "web", "^0.1")
    assert [in_range(request, v) for v in ("0.1.5", "0.2.0", "0.2.0-rc.1", "nope")] == [True, False, False, None]
    assert in_range(ChartRequest(OCI), "1.0.3") and not in_range(ChartRequest(OCI), "1.1.0")
    tagged = ChartRequest(OCIRepositorySpec(Path("o"), "w", "d", "oci://r/w", OCIReference(tag="1.0.0_b")))
    assert in_range(tagged, "1.0.0+b") and not in_range(tagged, "1.0.0")
    digest = OCIReference(digest="sha256:" + "a" * 64)
    assert in_range(ChartRequest(OCIRepositorySpec(Path("o"), "w", "d", "oci://r/w", digest)), "1.0.0") is None


def test_available_and_newer_name_the_newest_and_whether_the_range_holds_it() -> None:
    request = ChartRequest(HTTP, "web", "^0.1")
    offered = available(request, ("0.1.0", "1.0.0", "0.1.2", "2.0.0-rc.1", "junk"))
    assert offered == AvailableVersions("1.0.0", "0.1.2")
    assert newer("0.1.0", offered) == ChartUpdate("1.0.0", False, "0.1.2")
    assert newer("0.1.2", offered) == ChartUpdate("1.0.0", False, "")
    assert newer("1.0.0", offered) is None and newer("", offered) is None and newer("0.1.0", None) is None
    inside = available(ChartRequest(HTTP, "web", "*"), ("0.1.0", "0.3.0"))
    assert newer("0.1.0", inside) == ChartUpdate("0.3.0", True, "0.3.0")
    assert available(request, ("junk",)) is None


def test_semver_filter_drops_tags_from_the_marker_as_from_the_resolution() -> None:
    """Flux's ref.semverFilter: a tag it does not match is neither offered nor inside the range (the resolution
    never selects it); build metadata is matched in its tag form (``_``)."""
    versions = ("1.0.0", "1.1.0-rc.1", "1.1.0", "2.0.0", "1.2.0-rc.2")
    every = ChartRequest(dataclasses.replace(OCI, reference=OCIReference(semver=">=1.0.0-0")))
    rc = ChartRequest(dataclasses.replace(OCI, reference=OCIReference(semver=">=1.0.0-0", semver_filter="-rc")))
    assert newer("1.1.0-rc.1", available(every, versions)) == ChartUpdate("2.0.0", True, "2.0.0")
    assert available(rc, versions) == AvailableVersions("1.2.0-rc.2", "1.2.0-rc.2")
    assert newer("1.1.0-rc.1", available(rc, versions)) == ChartUpdate("1.2.0-rc.2", True, "1.2.0-rc.2")
    assert [in_range(rc, v) for v in ("2.0.0", "1.2.0-rc.2")] == [False, True]
    assert [in_range(every, v) for v in ("2.0.0", "1.2.0-rc.2")] == [True, True]
    assert available(rc, ("1.0.0", "2.0.0")) is None  # nothing the filter admits: nothing offered
    built = ChartRequest(dataclasses.replace(OCI, reference=OCIReference(semver="^1.0", semver_filter="_b$")))
    assert available(built, ("1.0.0+b", "1.0.1+c", "1.0.2")) == AvailableVersions("1.0.0+b", "1.0.0+b")


PACKAGES = FILE  # a HelmRepository and a Package with range ^1.2.0, comments on most lines

OCI_FILES = {
    "source.yaml": "apiVersion: helmdeck.dev/v1alpha1\nkind: OCIRepository\nmetadata: {name: web, namespace: demo}\n"
                   "spec:\n  url: oci://registry.example.com/web\n  ref:\n    semver: '~1.0'  # patch releases\n",
    "a.yaml": "apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata: {name: a, namespace: demo}\n"
              "spec:\n  chartRef: {kind: OCIRepository, name: web}\n",
    "b.yaml": "apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata: {name: b, namespace: demo}\n"
              "spec:\n  chartRef: {kind: OCIRepository, name: web}\n",
    "local.yaml": "apiVersion: helmdeck.dev/v1alpha1\nkind: Package\nmetadata: {name: local, namespace: demo}\n"
                  f"spec:\n  chart: {EXAMPLES / 'charts' / 'web'}\n",
}


def _engine(folder: Path) -> Engine:
    engine = offline_engine(folder, observer=Observer(None))
    engine.gate.online = True  # as a connected engine's gate answers; nothing here reaches a cluster
    return engine


async def test_pin_edits_the_version_in_place_and_reloads_the_package(tmp_path: Path) -> None:
    (tmp_path / "web.yaml").write_text(PACKAGES)
    engine = _engine(tmp_path)
    key = ("demo", "web")
    pinned = await engine.pin(key, "2.0.0")
    assert (pinned.before, pinned.after, pinned.field) == ("^1.2.0", "2.0.0", "spec.chart.spec.version")
    assert (tmp_path / "web.yaml").read_text() == PACKAGES.replace('"^1.2.0"', '"2.0.0"')
    request = engine.packages[key].chart_request
    assert request is not None and request.version == "2.0.0"
    assert any(e.action == "pin" and "^1.2.0 -> 2.0.0" in e.message for e in engine.events(key))


async def test_pin_of_an_oci_chart_edits_the_shared_oci_repository_and_names_who_shares_it(tmp_path: Path) -> None:
    for name, text in OCI_FILES.items():
        (tmp_path / name).write_text(text)
    engine = _engine(tmp_path)
    planned = engine.plan_pin(("demo", "a"), "1.1.0+build.1")
    assert planned.file == tmp_path / "source.yaml" and planned.field == "spec.ref.semver"
    assert planned.shared == ("demo/b",)
    assert planned.text == OCI_FILES["source.yaml"].replace("'~1.0'", "'1.1.0+build.1'")
    with pytest.raises(ActionRefused, match="uses a local chart"):
        engine.plan_pin(("demo", "local"), "1.0.0")
    assert "uses a local chart" in (engine.why_not("versions", ("demo", "local")) or "")
    assert engine.why_not("versions", ("demo", "a")) is None


def test_a_digest_reference_is_not_pinned_in_place(tmp_path: Path) -> None:
    digest = "sha256:" + "b" * 64
    (tmp_path / "source.yaml").write_text(OCI_FILES["source.yaml"].replace("semver: '~1.0'", f"digest: {digest}"))
    (tmp_path / "a.yaml").write_text(OCI_FILES["a.yaml"])
    with pytest.raises(PinError, match=r"is pinned by digest sha256:b{64} \(spec\.ref\.digest comes before tag"):
        _engine(tmp_path).versions().plan_pin(("demo", "a"), "1.0.0")


def test_a_digest_pin_is_said_by_the_marker_the_overview_and_the_picker() -> None:
    """As Flux, ``ref.digest`` comes before tag and semver: no newer version is inside a range, and each view
    says the version is pinned by digest rather than out of range."""
    digest = "sha256:" + "b" * 64
    pinned = ChartRequest(dataclasses.replace(OCI, reference=OCIReference(digest=digest, semver="~1.0", tag="1.0.0")))
    offered = available(pinned, ("1.0.0", "1.0.3", "2.0.0"))
    assert offered == AvailableVersions("2.0.0", "", by_digest=True)
    update = newer("1.0.0+abcdefabcdef", offered)
    assert update == ChartUpdate("2.0.0", False, "", by_digest=True)
    assert update_text(update) == "⇡2.0.0 (pinned by digest)"
    assert newer_line(update).startswith("2.0.0 is offered, but the chart is pinned by digest (spec.ref.digest)")
    assert newer("2.0.0+abcdefabcdef", offered) is None
    assert range_text(pinned) == f"pinned by digest {digest}" and in_range(pinned, "1.0.3") is None
    listed = VersionList(pinned.origin(), range_text(pinned), "1.0.0+abcdefabcdef",
                         (VersionRow("2.0.0", "", "", None, False), VersionRow("1.0.0", "", "", None, True)),
                         by_digest=True)
    title = picker_title("demo/web", listed)
    assert title.startswith("Versions of the chart of demo/web (edit spec.ref by hand to move it)\n")
    assert f"range pinned by digest {digest} · deployed 1.0.0+abcdefabcdef" in title
    assert [line.split()[-2:] for line in picker_rows(listed)] == [["-", "-"], ["-", "deployed"]]
    unpinned = dataclasses.replace(listed, by_digest=False)
    assert picker_title("demo/web", unpinned).startswith("Pin the chart of demo/web to a version\n")
    assert picker_rows(unpinned)[0].endswith("?")


def test_a_pin_the_semver_filter_would_drop_is_refused(tmp_path: Path) -> None:
    filtered = OCI_FILES["source.yaml"].replace("semver: '~1.0'  # patch releases",
                                                "semver: '~1.0'\n    semverFilter: '-rc'")
    (tmp_path / "source.yaml").write_text(filtered)
    (tmp_path / "a.yaml").write_text(OCI_FILES["a.yaml"])
    engine = _engine(tmp_path)
    with pytest.raises(PinError, match=r"does not match spec\.ref\.semverFilter '-rc'"):
        engine.plan_pin(("demo", "a"), "1.0.1")
    assert engine.plan_pin(("demo", "a"), "1.0.1-rc.1").text == filtered.replace("'~1.0'", "'1.0.1-rc.1'")


def test_the_row_marks_a_newer_version_from_what_the_repository_offered(tmp_path: Path) -> None:
    (tmp_path / "web.yaml").write_text(PACKAGES)
    observer = Observer(None)
    engine = offline_engine(tmp_path, observer=observer)
    observer.apply_object(storage_secret("web", "demo", 1, "deployed", "web", "1.2.0", "1.0", {},
                                         "2026-11-30T09:00:00Z"))
    engine.book.refresh(("demo", "web"))
    request = engine.packages[("demo", "web")].chart_request
    assert request is not None
    engine.book.set_offered(("demo", "web"), available(request, ("1.2.0", "1.4.0", "2.0.0")))
    view = engine.release(("demo", "web"))
    assert view is not None and view.chart_update == ChartUpdate("2.0.0", False, "1.4.0")


async def test_a_pin_while_an_action_runs_is_written_and_queued(tmp_path: Path) -> None:
    (tmp_path / "web.yaml").write_text(PACKAGES)
    engine = _engine(tmp_path)
    key = ("demo", "web")
    async with engine.book.running(key, "test", 60):
        pinned, outcome = await EngineClient(engine).pin(key, "2.0.0")
    assert pinned.after == "2.0.0" and '"2.0.0"' in (tmp_path / "web.yaml").read_text()
    assert outcome == "test is already running on demo/web"
    assert key in engine.controller.queue.queued()
