"""A chart from an OCI repository is installed with the version ``<version>+<manifest digest[:12]>``, as Flux's
``mutateChartWithSourceRevision``: the archive is rewritten with only Chart.yaml's version changed."""

from __future__ import annotations

import io
import tarfile
from pathlib import Path

import pytest

from engine.sources.cache import chart_meta, set_chart_version, with_build_metadata
from engine.sources.errors import PullFailed

DIGEST = "sha256:0123456789abcdef" + "0" * 48


def archive(path: Path, chart_yaml: str) -> Path:
    with tarfile.open(path, "w:gz") as tar:
        for name, text in (("web/Chart.yaml", chart_yaml), ("web/values.yaml", "replicas: 1\n"),
                           ("web/templates/cm.yaml", "kind: ConfigMap\nversion: not-the-chart's\n")):
            data = text.encode()
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), 0o640
            tar.addfile(info, io.BytesIO(data))
    return path


def members(path: Path) -> dict[str, tuple[bytes, int]]:
    with tarfile.open(path, "r:gz") as tar:
        return {m.name: ((f.read() if (f := tar.extractfile(m)) else b""), m.mode) for m in tar}


def test_build_metadata_is_set_or_replaced_as_semver_set_metadata() -> None:
    assert with_build_metadata("1.2.3", DIGEST) == "1.2.3+0123456789ab"
    assert with_build_metadata("1.2.3-rc.1+b.7", DIGEST) == "1.2.3-rc.1+0123456789ab"


def test_only_the_chart_version_changes_and_the_output_is_reproducible(tmp_path: Path) -> None:
    src = archive(tmp_path / "web.tgz", "apiVersion: v2\nname: web\nversion: \"0.1.0\"  # released\nappVersion: 1.0\n")
    version = with_build_metadata("0.1.0", DIGEST)
    set_chart_version(src, version, tmp_path / "a.tgz")
    set_chart_version(src, version, tmp_path / "b.tgz")
    assert (tmp_path / "a.tgz").read_bytes() == (tmp_path / "b.tgz").read_bytes()
    meta = chart_meta(tmp_path / "a.tgz")
    assert (meta.name, meta.version, meta.app_version) == ("web", "0.1.0+0123456789ab", "1.0")
    before, after = members(src), members(tmp_path / "a.tgz")
    assert list(before) == list(after)
    assert after["web/Chart.yaml"][0] == (b"apiVersion: v2\nname: web\nversion: 0.1.0+0123456789ab  # released\n"
                                          b"appVersion: 1.0\n")
    assert {k: v for k, v in after.items() if k != "web/Chart.yaml"} == {
        k: v for k, v in before.items() if k != "web/Chart.yaml"}


def test_a_chart_without_a_version_line_is_a_pull_error(tmp_path: Path) -> None:
    src = archive(tmp_path / "web.tgz", "{apiVersion: v2, name: web, version: 0.1.0}\n")
    with pytest.raises(PullFailed, match=r"no Chart\.yaml with a version line"):
        set_chart_version(src, "0.1.0+0123456789ab", tmp_path / "out.tgz", "OCIRepository x")
    assert not (tmp_path / "out.tgz").exists()
