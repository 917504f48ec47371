"""Bounded GETs: credentials follow a redirect to another host only with passCredentials (as Flux);
oversized bodies and refusals become typed errors. Two real HTTP servers on 127.0.0.1."""

from __future__ import annotations

import base64
import http.server
import threading
import time
from collections.abc import Iterator

import pytest

from engine.sources import http as source_http
from engine.sources.credentials import Credentials
from engine.sources.errors import SourceAuthFailed, SourceInvalid, SourceUnreachable
from engine.sources.oci import Registry
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
        elif self.path == "/space":  # a Location urllib would refuse with a bare ValueError
            self.send_response(302)
            self.send_header("Location", "/a b\x01")
            self.end_headers()
        elif self.path == "/drip":  # a body of 1,000 bytes, one byte every 50 ms: each wait is short
            self.send_response(200)
            self.send_header("Content-Length", "1000")
            self.end_headers()
            try:
                for _ in range(1000):
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(0.05)
            except OSError:
                pass  # the client gave up
        elif self.path == "/loop":  # a redirect to itself, for ever
            self.send_response(302)
            self.send_header("Location", "/loop")
            self.end_headers()
        elif self.path.startswith("/to-"):  # /to-file:///etc/hostname: a redirect to another scheme
            self.send_response(302)
            self.send_header("Location", self.path.removeprefix("/to-"))
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
    with pytest.raises(SourceInvalid, match=r"repo: more than 5 redirects from http://127\.0\.0\.1:\d+/loop"):
        source_http.get(f"{url}/loop", what="repo")
    assert [p for p, _ in servers[1]].count("/loop") == 6  # the first request and five redirects, no more
    with pytest.raises(SourceInvalid, match="redirects to a URL with spaces or control characters"):
        source_http.get(f"{url}/space", what="repo")
    start = time.monotonic()
    with pytest.raises(SourceUnreachable, match=r"repo: the answer took longer than its timeout \(spec.timeout\)"):
        source_http.get(f"{url}/drip", what="repo", timeout=1)
    assert time.monotonic() - start < 10  # 50 s to drip it all
    with pytest.raises(SourceUnreachable, match="repo: cannot reach"):
        source_http.get(f"http://127.0.0.1:{free_port()}/index.yaml", what="repo", timeout=5)


@pytest.mark.parametrize("location", ["file:///etc/hostname", "data:text/plain,entries:%20{}", "ftp://127.0.0.1/x"])
def test_a_redirect_leaves_http_never(
    servers: tuple[str, list[tuple[str, str | None]], str, list[tuple[str, str | None]]], location: str,
) -> None:
    """urllib would follow file:, data: and ftp: redirects (a server could have a local file read as its index);
    helm follows http and https only."""
    url = servers[0]
    scheme = location.split(":", 1)[0]
    with pytest.raises(SourceInvalid, match=f"repo: .*/to-.* redirects to a {scheme}: URL, not http"):
        source_http.get(f"{url}/to-{location}", what="repo")


class _TokenRegistry(http.server.BaseHTTPRequestHandler):
    """The distribution API's token dance (as ghcr.io and Docker Hub): 401 with a Bearer challenge, a token
    service answering to basic credentials, then the request with the token."""

    seen: list[tuple[str, str | None]]
    base: str = ""

    def log_message(self, format: str, *args: object) -> None:
        pass

    def _json(self, status: int, body: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        self.wfile.write(body.encode())

    def do_GET(self) -> None:
        self.seen.append((self.path, self.headers.get("Authorization")))
        if self.path.startswith("/token"):
            ok = self.headers.get("Authorization") == "Basic " + base64.b64encode(b"u:p").decode()
            assert "scope=repository%3Acharts%2Fweb%3Apull" in self.path and "service=reg" in self.path
            self._json(200, '{"token": "tok"}' if ok else "{}", None)
        elif self.headers.get("Authorization") == "Bearer tok":
            self._json(200, '{"name": "charts/web", "tags": ["1.0.0", "1.1.0"]}')
        else:
            challenge = f'Bearer realm="{self.base}/token",service="reg",scope="repository:charts/web:pull"'
            self._json(401, "{}", {"WWW-Authenticate": challenge})


async def test_bearer_token_auth() -> None:
    seen: list[tuple[str, str | None]] = []

    class Handler(_TokenRegistry):
        pass

    Handler.seen = seen
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    host = f"127.0.0.1:{srv.server_address[1]}"
    Handler.base = f"http://{host}"
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    try:
        reg = Registry(host, creds=Credentials("u", "p"), plain_http=True, timeout=5, what="repo")
        assert await reg.tags("charts/web") == ["1.0.0", "1.1.0"]
        assert [p.split("?")[0] for p, _ in seen] == ["/v2/charts/web/tags/list", "/token", "/v2/charts/web/tags/list"]
        assert seen[-1][1] == "Bearer tok"
        wrong = Registry(host, creds=Credentials("u", "x"), plain_http=True, timeout=5, what="repo")
        with pytest.raises(SourceAuthFailed, match="gave no token"):
            await wrong.tags("charts/web")
    finally:
        srv.shutdown()
        srv.server_close()
