"""Bounded HTTP GETs for chart sources (stdlib ``urllib`` in a worker thread).

Responses are read up to a byte limit and within the timeout as a whole (a
server dripping bytes, each wait short, meets it too); redirects are followed by hand (at most
five) so that credentials go to another host only when the repository says so
(Flux's ``passCredentials``). Failures become the typed errors of
:mod:`engine.sources.errors`; no message holds a credential.
"""

from __future__ import annotations

import asyncio
import ssl
import time
import urllib.error
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import Message
from urllib.parse import urljoin, urlsplit

from engine.sources.errors import SourceAuthFailed, SourceInvalid, SourceUnreachable

MAX_REDIRECTS = 5
USER_AGENT = "helmdeck"


@dataclass(frozen=True)
class Response:
    """One HTTP answer: ``status``, lower-cased ``headers`` and the ``body`` (bounded)."""

    url: str
    status: int
    headers: Mapping[str, str]
    body: bytes


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None


def _opener(ctx: ssl.SSLContext | None) -> urllib.request.OpenerDirector:
    handlers: list[urllib.request.BaseHandler] = [_NoRedirect()]
    if ctx is not None:
        handlers.append(urllib.request.HTTPSHandler(context=ctx))
    return urllib.request.build_opener(*handlers)


def _headers(msg: Message) -> dict[str, str]:
    return {k.lower(): v for k, v in msg.items()}


def get(
    url: str, *, what: str, headers: Mapping[str, str] | None = None, authorization: str = "",
    pass_credentials: bool = False, ssl_context: ssl.SSLContext | None = None, timeout: float = 60.0,
    max_bytes: int = 4 * 1024 * 1024, method: str = "GET", ok: tuple[int, ...] = (200,),
) -> Response:
    """GET ``url`` (blocking; run it in a thread). ``what`` names the repository in errors.

    Returns a Response whose status is in ``ok`` (or 304, 401 when listed in ``ok``). Raises
    SourceUnreachable (network, TLS, 5xx), SourceAuthFailed (401/403), SourceInvalid (other
    statuses, a body over ``max_bytes``).
    """
    opener = _opener(ssl_context)
    host = urlsplit(url).netloc
    current = url
    deadline = time.monotonic() + timeout  # for the whole answer: a server dripping bytes meets it too
    for _ in range(MAX_REDIRECTS + 1):
        req = urllib.request.Request(current, method=method)
        req.add_header("User-Agent", USER_AGENT)
        for key, value in (headers or {}).items():
            req.add_header(key, value)
        if authorization and (pass_credentials or urlsplit(current).netloc == host):
            req.add_header("Authorization", authorization)
        try:
            resp = opener.open(req, timeout=timeout)
        except urllib.error.HTTPError as exc:
            status, hdrs = exc.code, _headers(exc.headers)
            if status in (301, 302, 303, 307, 308) and hdrs.get("location"):
                current = _redirect(current, hdrs["location"], what)
                continue
            if status in ok:
                return Response(current, status, hdrs, _read(exc, max_bytes, what, deadline))
            if status in (401, 403):
                raise SourceAuthFailed(f"{what}: access refused (HTTP {status}); check spec.secretRef",
                                       repository=what) from None
            if status >= 500:
                raise SourceUnreachable(f"{what}: server error (HTTP {status})", repository=what) from None
            if status == 304:
                return Response(current, status, hdrs, b"")
            raise SourceInvalid(f"{what}: HTTP {status} for {_safe(current)}", repository=what) from None
        except ssl.SSLError as exc:
            raise SourceUnreachable(f"{what}: TLS error ({exc.reason or exc}); check spec.certSecretRef",
                                    repository=what) from None
        except (TimeoutError, urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            if isinstance(reason, ssl.SSLError):
                raise SourceUnreachable(f"{what}: TLS error ({reason.reason or reason}); check spec.certSecretRef",
                                        repository=what) from None
            raise SourceUnreachable(f"{what}: cannot reach {_safe(current)} ({reason})", repository=what) from None
        with resp:
            return Response(current, resp.status, _headers(resp.headers), _read(resp, max_bytes, what, deadline))
    raise SourceInvalid(f"{what}: more than {MAX_REDIRECTS} redirects from {_safe(url)}", repository=what)


def _redirect(current: str, location: str, what: str) -> str:
    """Where a redirect from ``current`` leads. Raises SourceInvalid unless it is an http(s) URL without
    spaces or control characters (urllib would raise a bare ValueError for those):
    urllib's opener would also follow ``file:``, ``data:`` and ``ftp:`` (a server could make helmdeck
    read a local file as its index), while helm (Go's net/http) follows only http and https."""
    target = urljoin(current, location)
    if urlsplit(target).scheme not in ("http", "https"):
        raise SourceInvalid(f"{what}: {_safe(current)} redirects to a {urlsplit(target).scheme}: URL, "
                            "not http(s); fix spec.url or the server", repository=what)
    if any(c.isspace() or not c.isprintable() for c in target) or len(target) > 8192:
        raise SourceInvalid(f"{what}: {_safe(current)} redirects to a URL with spaces or control characters "
                            "(or over 8192 characters); fix the server", repository=what)
    return target


def _read(resp: object, max_bytes: int, what: str, deadline: float) -> bytes:
    """The body, at most ``max_bytes``, read by the chunk the socket gives so that ``deadline`` (monotonic)
    bounds the whole read: the socket's timeout only bounds each wait."""
    fp = getattr(resp, "fp", None) if not hasattr(resp, "read1") else resp  # HTTPError wraps the response
    read = getattr(fp, "read1", None) or getattr(resp, "read")  # noqa: B009 - HTTPResponse and HTTPError alike
    chunks: list[bytes] = []
    size = 0
    try:
        while size <= max_bytes:
            if time.monotonic() > deadline:
                raise SourceUnreachable(f"{what}: the answer took longer than its timeout (spec.timeout)",
                                        repository=what)
            chunk: bytes = read(min(1 << 16, max_bytes + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except (TimeoutError, OSError) as exc:
        raise SourceUnreachable(f"{what}: connection lost while reading ({exc})", repository=what) from None
    if size > max_bytes:
        raise SourceInvalid(f"{what}: response larger than {max_bytes} bytes", repository=what)
    return b"".join(chunks)


def _safe(url: str) -> str:
    """``url`` without user info or query (never print a credential)."""
    parts = urlsplit(url)
    return f"{parts.scheme}://{parts.hostname or ''}{':' + str(parts.port) if parts.port else ''}{parts.path}"


async def aget(url: str, **kwargs: object) -> Response:
    """:func:`get` in a worker thread."""
    return await asyncio.to_thread(lambda: get(url, **kwargs))  # type: ignore[arg-type]
