"""Reading an OCI registry through its distribution API: tags, manifests, the chart's config.

Only reads, bounded: at most ``HELMDECK_MAX_OCI_TAGS`` tags (default ``MAX_TAGS``) over
at most ``MAX_PAGES`` pages of the tag list, refused with an error past that (a partial list
could miss the newest version), manifests and config blobs of at most 4 MiB / 1 MiB.
Authentication as registries ask for it: HTTP basic, or a bearer token from the
realm of a ``WWW-Authenticate: Bearer`` challenge (anonymous or with the basic
credentials), as docker and helm do.
Pulls themselves go through ``helm pull`` (:mod:`engine.sources.helm_pull`).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import ssl
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode, urljoin, urlsplit

from engine.sources import http
from engine.sources.credentials import Credentials
from engine.sources.errors import NoMatchingVersion, SourceAuthFailed, SourceInvalid
from engine.sources.repository import OCI_TAG
from engine.sources.schema import CHART_LAYER as CHART_LAYER  # helm's chart layer, the one pulled

MAX_TAGS = 10_000  # default of HELMDECK_MAX_OCI_TAGS
MAX_PAGES = 1_000  # of the tag list: registries page by 100 or 1,000 (the ``n`` asked for)
CHART_CONFIG = "application/vnd.cncf.helm.config.v1+json"
_MANIFEST_TYPES = "application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json"
_CHALLENGE = re.compile(r'(\w+)="([^"]*)"')
_NEXT = re.compile(r'<([^>]+)>\s*;\s*rel="?next"?')


@dataclass(frozen=True)
class OciLocation:
    """``oci://host/repository`` split: ``host`` (with port) and ``repository`` (the path)."""

    host: str
    repository: str

    @classmethod
    def parse(cls, url: str) -> OciLocation:
        parts = urlsplit(url)
        return cls(parts.netloc, parts.path.strip("/"))

    @property
    def url(self) -> str:
        return f"oci://{self.host}/{self.repository}"


@dataclass(frozen=True)
class ChartManifest:
    """A chart's manifest: its ``digest`` (sha256:...), the archive's ``layer_digest`` and ``config_digest``,
    and the annotations (``org.opencontainers.image.created`` / ``.version``)."""

    digest: str
    layer_digest: str
    config_digest: str
    annotations: Mapping[str, str]


class Registry:
    """One registry host. ``plain_http`` is Flux's ``insecure``; ``requests`` counts HTTP requests."""

    def __init__(self, host: str, *, creds: Credentials, plain_http: bool, timeout: float, what: str):
        self.host = host
        self.creds = creds
        self.scheme = "http" if plain_http else "https"
        self.timeout = timeout
        self.what = what
        self.requests = 0
        self._token: dict[str, str] = {}  # scope -> bearer token
        self._ssl: ssl.SSLContext | None = None if plain_http else creds.ssl_context()

    async def _get(self, path: str, scope: str, *, accept: str = "", max_bytes: int = 4 * 1024 * 1024,
                   method: str = "GET") -> http.Response:
        url = path if path.startswith("http") else f"{self.scheme}://{self.host}{path}"
        headers = {"Accept": accept} if accept else {}
        for attempt in range(2):
            token = self._token.get(scope)
            auth = f"Bearer {token}" if token else (self.creds.authorization() if self.creds.basic else "")
            self.requests += 1
            resp = await http.aget(url, what=self.what, headers=headers, authorization=auth,
                                   ssl_context=self._ssl, timeout=self.timeout, max_bytes=max_bytes,
                                   method=method, ok=(200, 401, 404))
            if resp.status != 401:
                return resp
            challenge = resp.headers.get("www-authenticate", "")
            if attempt == 0 and challenge.lower().startswith("bearer"):
                await self._fetch_token(challenge, scope)
                continue
            break  # basic auth was sent with the first request already
        hint = "check spec.secretRef" if self.creds.basic else "the registry needs credentials: set spec.secretRef"
        raise SourceAuthFailed(f"{self.what}: access refused (HTTP 401); {hint}", repository=self.what)

    async def _fetch_token(self, challenge: str, scope: str) -> None:
        params = dict(_CHALLENGE.findall(challenge))
        realm = params.pop("realm", "")
        if not realm:
            raise SourceInvalid(f"{self.what}: bearer challenge without a realm", repository=self.what)
        query = {k: v for k, v in params.items() if k in ("service",)}
        query["scope"] = params.get("scope") or scope
        self.requests += 1
        resp = await http.aget(
            f"{realm}?{urlencode(query)}", what=self.what,
            authorization=self.creds.authorization() if self.creds.basic else "", pass_credentials=True,
            ssl_context=self._ssl if realm.startswith("https:") else None, timeout=self.timeout, max_bytes=1 << 20,
        )
        try:
            body = json.loads(resp.body)
            token = str(body.get("token") or body.get("access_token") or "")
        except (ValueError, AttributeError):
            token = ""
        if not token:
            raise SourceAuthFailed(f"{self.what}: the token service gave no token", repository=self.what)
        self._token[scope] = token

    async def tags(self, repository: str) -> list[str]:
        """The repository's tags, every page of the list (``Link: <...>; rel="next"``); a tag outside the
        distribution spec's grammar (:data:`OCI_TAG`: at most 128 characters, ASCII) is left out.

        Raises NoMatchingVersion when the repository does not exist; SourceInvalid past
        ``HELMDECK_MAX_OCI_TAGS`` tags or ``MAX_PAGES`` pages, or for pages that lead back to one already
        read (a loop): a partial list could miss the newest version, so none is chosen from it.
        """
        scope = f"repository:{repository}:pull"
        path = f"/v2/{repository}/tags/list?n=1000"
        limit = max_tags()
        where = f"{self.host}/{repository}"
        read: set[str] = set()
        out: list[str] = []
        for _ in range(MAX_PAGES):
            read.add(path)
            resp = await self._get(path, scope, max_bytes=4 * 1024 * 1024)
            if resp.status == 404:
                raise NoMatchingVersion(f"{self.what}: no chart at {where}", repository=self.what)
            body = _json(resp.body, self.what)
            page = body.get("tags") or []
            out += [t for t in page if isinstance(t, str) and OCI_TAG.match(t)] if isinstance(page, list) else []
            if len(out) > limit:
                raise SourceInvalid(f"{self.what}: {where} has more than {limit} tags (set HELMDECK_MAX_OCI_TAGS "
                                    "to raise the limit, or select one with spec.ref.tag)", repository=self.what)
            link = _NEXT.search(resp.headers.get("link", ""))
            if not link:
                return out
            path = urljoin(f"{self.scheme}://{self.host}/", link[1])
            if path in read:
                raise SourceInvalid(f"{self.what}: the tag list of {where} pages in a loop (the registry's Link "
                                    "header leads back to a page already read)", repository=self.what)
        raise SourceInvalid(f"{self.what}: the tag list of {where} has more than {MAX_PAGES} pages",
                            repository=self.what)

    async def manifest(self, repository: str, reference: str) -> ChartManifest:
        """The manifest of ``reference`` (tag or digest). NoMatchingVersion when absent; SourceInvalid when
        it is not a Helm chart, or asked by digest its bytes have another digest."""
        resp = await self._get(f"/v2/{repository}/manifests/{reference}", f"repository:{repository}:pull",
                               accept=_MANIFEST_TYPES)
        if resp.status == 404:
            raise NoMatchingVersion(f"{self.what}: no {reference} in {self.host}/{repository}", repository=self.what)
        body = _json(resp.body, self.what)
        digest = resp.headers.get("docker-content-digest") or "sha256:" + hashlib.sha256(resp.body).hexdigest()
        if reference.startswith("sha256:") and "sha256:" + hashlib.sha256(resp.body).hexdigest() != reference:
            # Content addressing: a manifest asked for by digest is that digest's bytes, whatever the registry says.
            raise SourceInvalid(f"{self.what}: {self.host}/{repository} answered a manifest that is not {reference}",
                                repository=self.what)
        layers = [x for x in body.get("layers") or [] if isinstance(x, dict) and x.get("mediaType") == CHART_LAYER]
        config = body["config"] if isinstance(body.get("config"), dict) else {}
        if not layers:
            raise SourceInvalid(f"{self.what}: {self.host}/{repository}:{reference} is not a Helm chart",
                                repository=self.what)
        notes = body["annotations"] if isinstance(body.get("annotations"), dict) else {}
        return ChartManifest(digest, str(layers[0].get("digest", "")), str(config.get("digest", "")),
                             {str(k): str(v) for k, v in notes.items()})

    async def chart_config(self, repository: str, digest: str) -> dict[str, Any]:
        """The chart's config blob (Chart.yaml as JSON: name, version, appVersion, ...); {} when absent."""
        if not digest:
            return {}
        resp = await self._get(f"/v2/{repository}/blobs/{digest}", f"repository:{repository}:pull",
                               max_bytes=1024 * 1024)
        return _json(resp.body, self.what) if resp.status == 200 else {}


def max_tags() -> int:
    """``HELMDECK_MAX_OCI_TAGS`` (default ``MAX_TAGS``): the most tags a repository's list may have."""
    raw = os.environ.get("HELMDECK_MAX_OCI_TAGS", "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else MAX_TAGS


def _json(raw: bytes, what: str) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except ValueError:
        raise SourceInvalid(f"{what}: the registry answered something that is not JSON", repository=what) from None
    if not isinstance(data, dict):
        raise SourceInvalid(f"{what}: the registry answered unexpected JSON", repository=what)
    return data


def tag_to_version(tag: str) -> str:
    """OCI tags cannot hold '+': helm pushes ``1.0.0+build`` as ``1.0.0_build``."""
    return tag.replace("_", "+")
