"""Index parsing is bounded (size, nesting, aliases) and keeps what version resolution needs."""

from __future__ import annotations

import io
import tarfile
import time
from pathlib import Path

import pytest

from engine.base import loader
from engine.sources.cache import ChartMeta, chart_file, chart_meta
from engine.sources.errors import NoMatchingVersion, PullFailed, SourceInvalid
from engine.sources.index import MAX_NODES, newest_first, parse_index
from engine.sources.source import _pick

INDEX = b"""apiVersion: v1
entries:
  web:
  - name: web
    version: 1.0.0
    appVersion: "2.1"
    created: "2026-01-01T00:00:00Z"
    digest: 5d2ad0c5b9e2f0a7d9c5cbcd0c8b1c7b6f2d0a5e3c4b1a2f9e8d7c6b5a4f3e2d
    urls: [charts/web-1.0.0.tgz]
  - name: web
    version: 1.10.0
    urls: [charts/web-1.10.0.tgz]
  - name: web
    version: not-semver
  - not a mapping
generated: "2026-01-01T00:00:00Z"
"""


def test_parse_keeps_entries_and_sorts_newest_first() -> None:
    index = parse_index(INDEX, "repo")
    entries = index.entries["web"]
    assert [e.version for e in newest_first(entries)] == ["1.10.0", "1.0.0"]
    first = next(e for e in entries if e.version == "1.0.0")
    assert first.app_version == "2.1" and first.digest.startswith("5d2a") and first.urls == ("charts/web-1.0.0.tgz",)
    assert len(index.digest) == 64


def test_alias_bomb_is_refused() -> None:
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 8):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    lines.append("entries: {web: *a7}")
    with pytest.raises(SourceInvalid, match=f"aliases expand past {MAX_NODES} nodes"):
        parse_index("\n".join(lines).encode(), "repo")


def test_deep_nesting_and_size_are_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(SourceInvalid, match="deeper"):
        parse_index(b"entries: " + b"[" * 100 + b"]" * 100, "repo")
    monkeypatch.setenv("HELMDECK_MAX_INDEX_BYTES", "100")
    with pytest.raises(SourceInvalid, match="HELMDECK_MAX_INDEX_BYTES"):
        parse_index(INDEX, "repo")


def test_too_many_nodes_are_refused_before_composing(monkeypatch: pytest.MonkeyPatch) -> None:
    # Over 1 MiB: counted on the parser's events; nothing may be composed.
    raw = ("entries:\n  c:\n" + "".join(f"  - {{name: c, version: 0.0.{i}, urls: [u{i}]}}\n"
                                        for i in range(25_000))).encode()
    assert len(raw) > loader.EVENT_CHECK_CHARS
    monkeypatch.setenv("HELMDECK_MAX_INDEX_NODES", "1000")

    def composed(*_: object) -> None:
        raise AssertionError("composed before the node count was checked")

    with monkeypatch.context() as m:
        m.setattr(loader, "_loading", composed)
        with pytest.raises(SourceInvalid, match=r"HelmRepository ns/big: index\.yaml at line \d+: more than 1000 "
                                                r"nodes \(set HELMDECK_MAX_INDEX_NODES to raise the limit\)"):
            parse_index(raw, "HelmRepository ns/big")
    monkeypatch.setenv("HELMDECK_MAX_INDEX_NODES", "300000")
    assert len(parse_index(raw, "HelmRepository ns/big").entries["c"]) == 25_000


def test_a_small_index_over_the_node_limit_names_the_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HELMDECK_MAX_INDEX_NODES", "10")
    with pytest.raises(SourceInvalid,
                       match=r"repo: index\.yaml at line \d+: more than 10 nodes \(set HELMDECK_MAX_INDEX_NODES"):
        parse_index(INDEX, "repo")


def test_a_hundred_thousand_versions_of_one_chart_are_read_without_composing(monkeypatch: pytest.MonkeyPatch) -> None:
    """Only the kept fields are built, on the parser's events: composing (the loader) is never reached, so
    memory follows the entries kept, not the nodes (composing 25 MB of such entries took over 1 GB)."""
    raw = ("apiVersion: v1\nentries:\n  web:\n" + "".join(
        f"  - {{name: web, version: {i // 1000}.{i % 1000}.0, description: a web chart, urls: [web-{i}.tgz],"
        f" maintainers: [{{name: ops}}]}}\n" for i in range(100_000))).encode()

    def composed(*_: object) -> None:
        raise AssertionError("the index was composed")

    monkeypatch.setattr(loader, "_loading", composed)
    start = time.monotonic()
    index = parse_index(raw, "repo")
    assert len(index.entries["web"]) == 100_000 and time.monotonic() - start < 60
    assert newest_first(index.entries["web"])[0].version == "99.999.0"
    monkeypatch.setenv("HELMDECK_MAX_INDEX_NODES", "100000")  # 15 nodes an entry: 1.5 million
    with pytest.raises(SourceInvalid, match=r"line \d+: more than 100000 nodes \(set HELMDECK_MAX_INDEX_NODES"):
        parse_index(raw, "repo")


def test_fields_are_kept_as_written_and_odd_entries_left_out() -> None:
    raw = """apiVersion: v1
entries:
  wéb/../x: [{version: 1.10, urls: [w.tgz, {a: b}, ~]}]
  web:
  - {version: 1.0.0, created: 2026-11-30T09:00:00.123456789Z, appVersion: ~, digest: [x]}
  - {version: null}
  - {version: [1]}
  - {version: "null", urls: w.tgz}
  notalist: {version: 1.0.0}
  ? [complex, key]
  : [{version: 9.9.9}]
""".encode()
    index = parse_index(raw, "repo")
    assert set(index.entries) == {"wéb/../x", "web"}
    odd = index.entries["wéb/../x"][0]
    assert (odd.version, odd.urls) == ("1.10", ("w.tgz",))  # not the float 1.1
    first, quoted = index.entries["web"]
    assert (first.created, first.app_version, first.digest) == ("2026-11-30T09:00:00.123456789Z", "", "")
    assert (quoted.version, quoted.urls) == ("null", ())  # a quoted string; urls must be a list


def test_an_index_with_aliases_is_read_by_the_loader() -> None:
    raw = b"entries:\n  web:\n  - {version: &v 1.0.0, appVersion: *v, urls: [w.tgz]}\n"
    entry = parse_index(raw, "repo").entries["web"][0]
    assert (entry.version, entry.app_version, entry.urls) == ("1.0.0", "1.0.0", ("w.tgz",))


@pytest.mark.parametrize(("raw", "says"), [
    (b"<html>not found</html>", "no entries mapping"),
    (b"entries: [1, 2]", "no entries mapping"),
    (b"entries:\n", "no entries mapping"),
    (b"", "no entries mapping"),
    (b"a: [unclosed", "line 2: YAML error"),
    (b"entries: {}\n---\nentries: {}\n", "more than one document"),
])
def test_what_is_not_an_index_says_why(raw: bytes, says: str) -> None:
    with pytest.raises(SourceInvalid, match=f"repo: index.yaml.*{says}"):
        parse_index(raw, "repo")


@pytest.mark.parametrize("raw", [b"<html>not found</html>", b"entries: [1, 2]", b"a: [unclosed"])
def test_not_an_index(raw: bytes) -> None:
    with pytest.raises(SourceInvalid, match="repo"):
        parse_index(raw, "repo")


def test_chart_files_are_read_from_the_archive(tmp_path: Path) -> None:
    archive = tmp_path / "web-1.0.0.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        for name, data in (("web/Chart.yaml", b"name: web\nversion: 1.0.0\nappVersion: '2'\n"),
                           ("web/values-prod.yaml", b"replicas: 3\n")):
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    assert chart_meta(archive) == ChartMeta("web", "1.0.0", "2")
    assert chart_file(archive, "values-prod.yaml") == b"replicas: 3\n"
    assert chart_file(archive, "values-missing.yaml") is None
    with pytest.raises(PullFailed, match="over 4 bytes"):
        chart_file(archive, "values-prod.yaml", max_bytes=4)


def test_a_pulled_chart_yaml_is_read_bounded(tmp_path: Path) -> None:
    """A 233-byte archive whose Chart.yaml names itself with an alias bomb took 40 s and 4 GB to read."""
    bomb = ("l0: &l0 [" + ",".join(["xxxxxxxxxx"] * 10) + "]\n"
            + "".join(f"l{i}: &l{i} [{','.join([f'*l{i - 1}'] * 10)}]\n" for i in range(1, 8))
            + "name: *l7\nversion: 0.1.0\n")
    archive = tmp_path / "bomb-0.1.0.tgz"
    with tarfile.open(archive, "w:gz") as tar:
        info = tarfile.TarInfo("bomb/Chart.yaml")
        info.size = len(bomb)
        tar.addfile(info, io.BytesIO(bomb.encode()))
    with pytest.raises(PullFailed, match=r"repo: bomb-0.1.0.tgz has an unreadable Chart.yaml .*bomb/Chart.yaml:6: "
                                         r"aliases expand past"):
        chart_meta(archive, "repo")


def test_the_version_picked_from_an_index_is_source_controllers() -> None:
    # source-controller internal/helm/repository chart_repository.go getChartVersion: an exact match among all
    # entries first (a version that is no semver too), else the newest version fluxcd/pkg/version ParseVersion
    # reads (three parts: 2.1 is no chart version) that the range allows. The same choice as semver.pick, which
    # tests/engine/package/test_flux_oracle.py compares with Flux's code.
    index = parse_index(INDEX.replace(b"version: 1.10.0", b"version: '2.1'"), "repo")
    entries = index.entries["web"]
    assert [e.version for e in newest_first(entries)] == ["1.0.0"]  # 2.1 and not-semver are not listed
    assert _pick(entries, index.ordered("web"), "not-semver", "repo", "web").version == "not-semver"
    assert _pick(entries, index.ordered("web"), "", "repo", "web").version == "1.0.0"
    with pytest.raises(NoMatchingVersion):
        _pick(entries, index.ordered("web"), ">=2.0.0", "repo", "web")
