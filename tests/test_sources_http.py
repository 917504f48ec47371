"""Bounded GETs: credentials follow a redirect to another host only with passCredentials (as Flux);
oversized bodies and refusals become typed errors. Two real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator

import pytest

from engine.sources import http as source_http
from engine.sources.errors import SourceAuthFailed, SourceInvalid, SourceUnreachable
from localcluster.process import free_port


class _Handler(http.server.BaseHTTPRequestHandler):
    seen: list[tuple[str, str | None]]
    target: str = ""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def do_GET(self) -> None:
        self.seen.append((self.path, self.headers.get("Authorization")))
        if self.path == "/redirect":
            self.send_response(302)
            self.send_header("Location", self.target + "/file")
            self.end_headers()
        elif self.path == "/big":
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"x" * 5000)
        elif self.path == "/denied":
            self.send_response(403)
            self.end_headers()
        else:
            self.send_response(200)
            self.end_headers()
            self.wfile.write(b"ok")


def _serve() -> tuple[http.server.ThreadingHTTPServer, list[tuple[str, str | None]]]:
    seen: list[tuple[str, str | None]] = []
    handler = type("H", (_Handler,), {"seen": seen})
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, seen


@pytest.fixture
def servers() -> Iterator[tuple[str, list[tuple[str, str | None]], str, list[tuple[str, str | None]]]]:
    first, seen_first = _serve()
    second, seen_second = _serve()
    url_second = f"http://localhost:{second.server_address[1]}"
    first.RequestHandlerClass.target = url_second  # type: ignore[attr-defined]
    yield f"http://127.0.0.1:{first.server_address[1]}", seen_first, url_second, seen_second
    for srv in (first, second):
        srv.shutdown()
        srv.server_close()


@pytest.mark.parametrize("passing", [False, True])
def test_credentials_follow_a_redirect_only_when_passed(
    servers: tuple[str, list[tuple[str, str | None]], str, list[tuple[str, str | None]]], passing: bool,
) -> None:
    url, seen_first, _, seen_second = servers
    resp = source_http.get(f"{url}/redirect", what="repo", authorization="Basic abc", pass_credentials=passing)
    assert resp.body == b"ok" and resp.url.endswith("/file")
    assert seen_first == [("/redirect", "Basic abc")]
    assert seen_second == [("/file", "Basic abc" if passing else None)]


def test_limits_and_refusals(
    servers: tuple[str, list[tuple[str, str | None]], str, list[tuple[str, str | None]]],
) -> None:
    url = servers[0]
    with pytest.raises(SourceInvalid, match="larger than 1000 bytes"):
        source_http.get(f"{url}/big", what="repo", max_bytes=1000)
    with pytest.raises(SourceAuthFailed, match="HTTP 403"):
        source_http.get(f"{url}/denied", what="repo")
    with pytest.raises(SourceUnreachable, match="repo: cannot reach"):
        source_http.get(f"http://127.0.0.1:{free_port()}/index.yaml", what="repo", timeout=5)
