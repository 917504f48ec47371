"""Hostile chart sources, bounded with a clear error: an OCI registry listing 10,000 tags over 100 pages (as
registries that page by 100), more tags than the limit, a tag list whose pages loop, tags outside the
distribution grammar (a real HTTP server on 127.0.0.1 speaking the distribution API's tag list); an HTTP
repository whose index has 100,000 versions of one chart (localcluster's chart repository server)."""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest

from engine.helm import Helm
from engine.kube.client import KubeTarget
from engine.sources.credentials import Credentials
from engine.sources.errors import SourceInvalid
from engine.sources.oci import CHART_LAYER, Registry
from engine.sources.repository import ChartRequest, HelmRepositorySpec
from engine.sources.semver import sort_newest_first
from engine.sources.source import MAX_LISTED_HTTP, ChartSource
from engine.sources.updates import AvailableVersions
from localcluster.chartrepo import ChartRepoServer

MANIFEST = json.dumps({"schemaVersion": 2, "config": {"digest": "sha256:" + "c" * 64},
                       "layers": [{"mediaType": CHART_LAYER, "digest": "sha256:" + "d" * 64}]}).encode()
PAGE = 100  # this registry ignores n, as some page by 100 whatever is asked
TAGS = {
    "many": [f"{i // 100}.{i % 100}.0" for i in range(10_000)],  # the newest, 99.99.0, on the last page
    "over": [f"0.0.{i}" for i in range(10_001)],
    "odd": ["1.0.0", "1.0.0-ü", "2.0.0\n", "9" * 129, "x" * 128, "", "3.0.0 ", "_1"],
}


class _Registry(http.server.BaseHTTPRequestHandler):
    requests = 0

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        type(self).requests += 1
        parts = urlsplit(self.path)
        if "/manifests/" in parts.path:  # one chart manifest under any reference, said to be the one asked for
            self.send_response(200)
            self.send_header("Docker-Content-Digest", parts.path.rsplit("/", 1)[1])
            self.send_header("Content-Length", str(len(MANIFEST)))
            self.end_headers()
            self.wfile.write(MANIFEST)
            return
        repo = parts.path.removeprefix("/v2/").removesuffix("/tags/list")
        start = int(parse_qs(parts.query).get("last", ["0"])[0])
        headers = {}
        if repo == "loop":  # always links to its first page again
            tags, headers["Link"] = ["1.0.0"], f'</v2/loop/tags/list?n={PAGE}>; rel="next"'
        else:
            every = TAGS[repo]
            tags = every[start:start + PAGE]
            if start + PAGE < len(every):
                headers["Link"] = f'</v2/{repo}/tags/list?n={PAGE}&last={start + PAGE}>; rel="next"'
        body = json.dumps({"name": repo, "tags": [*tags, 5] if repo == "odd" else tags}).encode()
        self.send_response(200)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


@pytest.fixture
def registry() -> Iterator[Registry]:
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Registry)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        yield Registry(f"127.0.0.1:{srv.server_address[1]}", creds=Credentials(), plain_http=True, timeout=10,
                       what="OCIRepository t/web")
    finally:
        srv.shutdown()
        srv.server_close()


async def test_ten_thousand_tags_over_a_hundred_pages_are_all_read(registry: Registry) -> None:
    start = time.monotonic()
    tags = await registry.tags("many")
    assert len(tags) == 10_000 and sort_newest_first(tags)[0] == "99.99.0"
    assert registry.requests == 100 and time.monotonic() - start < 30


async def test_more_tags_than_the_limit_are_refused_not_cut(
    registry: Registry, monkeypatch: pytest.MonkeyPatch,
) -> None:
    with pytest.raises(SourceInvalid, match=r"has more than 10000 tags \(set HELMDECK_MAX_OCI_TAGS"):
        await registry.tags("over")
    monkeypatch.setenv("HELMDECK_MAX_OCI_TAGS", "20000")
    assert len(await registry.tags("over")) == 10_001


async def test_a_tag_list_whose_pages_loop_is_refused(registry: Registry) -> None:
    with pytest.raises(SourceInvalid, match="pages in a loop"):
        await registry.tags("loop")
    assert registry.requests == 2


async def test_tags_outside_the_distribution_grammar_are_left_out(registry: Registry) -> None:
    assert await registry.tags("odd") == ["1.0.0", "x" * 128, "_1"]


async def test_a_manifest_asked_by_digest_must_hash_to_it_whatever_the_registry_says(registry: Registry) -> None:
    """A pin by digest (``ref.digest``) is content addressing: bytes of another digest are refused even when the
    registry's Docker-Content-Digest header claims the digest asked for."""
    real = "sha256:" + hashlib.sha256(MANIFEST).hexdigest()
    assert (await registry.manifest("web", real)).digest == real
    other = "sha256:" + "0" * 64
    with pytest.raises(SourceInvalid, match=f"answered a manifest that is not {other}"):
        await registry.manifest("web", other)


async def test_an_index_of_a_hundred_thousand_versions_is_sorted_once_not_at_every_pass(tmp_path: Path) -> None:
    """Parsing, sorting (and the marker's parse) and the disk copy run in worker threads, once per index: a
    later pass, the marker and the picker's list cost the event loop milliseconds (each sorted the 100,000
    versions on the loop again: over a second each)."""
    lines = ["apiVersion: v1", "entries:", "  web:"]
    lines += [f"  - {{version: {i // 1000}.{i % 1000}.0, urls: [web-{i}.tgz]}}" for i in range(100_000)]
    server = ChartRepoServer(tmp_path / "repo")
    (server.folder / "index.yaml").write_text("\n".join(lines) + "\n")
    source = ChartSource(Helm("helm", KubeTarget(tmp_path / "none")), tmp_path / "cache")
    repo = HelmRepositorySpec(Path("charts.yaml"), "charts", "demo", server.url, interval=3600)
    try:
        await source.changed(ChartRequest(repo, "web", "^99.0.0"))  # fetched, parsed and sorted
        took = []
        for wanted in ("~98.5", "*", "99.999.0", "^99.0.0"):
            start = time.monotonic()
            await source.changed(ChartRequest(repo, "web", wanted))
            took.append(time.monotonic() - start)
        start = time.monotonic()
        offered = source.available(ChartRequest(repo, "web", "~98.5"))
        listed = await source.versions(ChartRequest(repo, "web"))
        took.append(time.monotonic() - start)
    finally:
        server.stop()
    assert max(took) < 0.5, took
    assert offered == AvailableVersions("99.999.0", "98.5.0")
    assert len(listed) == MAX_LISTED_HTTP and listed[0].version == "99.999.0"
    assert source.requests == 1
