"""HTTP Helm repository indexes: fetched at most once per interval, conditionally, parsed bounded.

``<url>/index.yaml`` is requested with ``If-None-Match`` / ``If-Modified-Since``
when an earlier copy exists (a 304 keeps it). The parsed entries (as JSON,
quick to read back) and the validators are kept under ``<cache>/sources/index/``
so a restarted helmdeck asks conditionally too and parses no YAML on a 304.
Parsing reads the parser's events and builds only the fields kept
(:mod:`engine.sources.index_events`), within the bounded loader's limits: a size limit
(``HELMDECK_MAX_INDEX_BYTES``, default 64 MiB), a node limit (``HELMDECK_MAX_INDEX_NODES``,
default 3 million: a real entry is about 60 nodes, so ~50,000 entries; it bounds the
time, about 3 s per million nodes), nesting; an index with aliases goes through the
loader itself (:mod:`engine.base.loader`, alias-expansion limits).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import math
import os
import time
from collections import defaultdict
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.base.loader import Limits, YamlLimitError, parse_text
from engine.sources import http
from engine.sources.credentials import Credentials
from engine.sources.errors import SourceInvalid
from engine.sources.index_events import FIELDS, Aliased, Entry, NotAnIndex, read_entries
from engine.sources.semver import SemverError, Version, parse_candidate

MAX_NODES = 3_000_000  # nodes once aliases are expanded (see the module docstring)
MAX_DEPTH = 64


def _env_int(name: str, default: int) -> int:
    raw = os.environ.get(name, "").strip()
    return int(raw) if raw.isdigit() and int(raw) > 0 else default


def max_index_bytes() -> int:
    return _env_int("HELMDECK_MAX_INDEX_BYTES", 64 * 1024 * 1024)


@dataclass(frozen=True)
class IndexEntry:
    """One chart version of an index: ``digest`` is the archive's sha256 hex ("" when the index has none)."""

    name: str
    version: str
    app_version: str = ""
    created: str = ""
    digest: str = ""
    urls: tuple[str, ...] = ()


@dataclass(frozen=True)
class Index:
    """A parsed index: chart name -> its entries (any order); ``digest`` is the sha256 hex of the index
    as served. :meth:`ordered` and :meth:`versions` are computed once per chart and index (100,000
    versions take about a second to parse and sort: do the first call off the event loop)."""

    entries: Mapping[str, tuple[IndexEntry, ...]]
    digest: str = ""
    _memo: dict[str, Any] = field(default_factory=dict, compare=False, repr=False)

    def ordered(self, chart: str) -> tuple[tuple[Version, IndexEntry], ...]:
        """``chart``'s entries whose version is one Flux chooses from (:func:`engine.sources.semver.parse_candidate`),
        newest first (equal versions in their order), each with its parsed version."""
        found = self._memo.get("ordered\0" + chart)
        if found is None:
            keyed = []
            for e in self.entries.get(chart, ()):
                try:
                    keyed.append((parse_candidate(e.version), e))
                except SemverError:
                    continue
            keyed.sort(key=lambda p: p[0], reverse=True)
            found = self._memo["ordered\0" + chart] = tuple(keyed)
        return found

    def is_ordered(self, chart: str) -> bool:
        """Whether :meth:`ordered` of ``chart`` is computed already."""
        return "ordered\0" + chart in self._memo

    def versions(self, chart: str) -> tuple[str, ...]:
        """``chart``'s versions as listed, one tuple per index (a cache key compared by identity first)."""
        found = self._memo.get("versions\0" + chart)
        if found is None:
            found = self._memo["versions\0" + chart] = tuple(e.version for e in self.entries.get(chart, ()))
        return found


def index_limits() -> Limits:
    """Bounds on an index: ``HELMDECK_MAX_INDEX_BYTES`` (64 MiB), ``HELMDECK_MAX_INDEX_NODES`` (3 million)
    nodes once aliases are expanded, 64 levels of nesting."""
    size = max_index_bytes()
    return Limits(size, "HELMDECK_MAX_INDEX_BYTES", max_nodes=_env_int("HELMDECK_MAX_INDEX_NODES", MAX_NODES),
                  max_chars=2 * size, max_depth=MAX_DEPTH, nodes_env="HELMDECK_MAX_INDEX_NODES")


def parse_index(raw: bytes, what: str) -> Index:
    """Parse an ``index.yaml`` on the parser's events (:func:`engine.sources.index_events.read_entries`,
    bounded as the loader; one with YAML aliases through the bounded loader itself). Raises SourceInvalid
    naming ``what``."""
    limits = index_limits()
    if len(raw) > limits.max_bytes:
        raise SourceInvalid(f"{what}: index.yaml is over {limits.max_bytes} bytes "
                            f"(set {limits.env} to raise the limit)", repository=what)
    file = Path("index.yaml")
    try:
        text = raw.decode("utf-8")
        try:
            charts = read_entries(text, file, limits)
        except Aliased:  # helm writes none: the loader bounds what they expand to
            charts = _composed(parse_text(text, file, limits).data)
    except UnicodeDecodeError as exc:
        raise SourceInvalid(f"{what}: index.yaml is not UTF-8 (byte {exc.start})", repository=what) from None
    except YamlLimitError as exc:
        where = f" at line {exc.line}" if exc.line else ""
        fix = f" ({exc.fix})" if exc.fix else ""
        raise SourceInvalid(f"{what}: index.yaml{where}: {exc.problem}{fix}", repository=what) from None
    except NotAnIndex:
        raise SourceInvalid(f"{what}: index.yaml has no entries mapping; is this a Helm repository?",
                            repository=what) from None
    entries: dict[str, tuple[IndexEntry, ...]] = {}
    for name, items in charts.items():
        found = []
        for item in items:
            version = item.get("version")
            if not isinstance(version, str):
                continue
            digest = str(item.get("digest") or "").removeprefix("sha256:")
            urls = item.get("urls")
            found.append(IndexEntry(
                name=name, version=version, app_version=str(item.get("appVersion") or ""),
                created=str(item.get("created") or ""), digest=digest if len(digest) == 64 else "",
                urls=urls if isinstance(urls, tuple) else (),
            ))
        entries[name] = tuple(found)
    return Index(entries, hashlib.sha256(raw).hexdigest())


def _composed(data: object) -> dict[str, list[Entry]]:
    """The entries of a composed index, in :func:`read_entries`'s shape (scalars as text)."""
    if not isinstance(data, dict) or not isinstance(data.get("entries", {}), dict):
        raise NotAnIndex
    charts: dict[str, list[Entry]] = {}
    for name, items in (data.get("entries") or {}).items():
        if isinstance(items, list):
            charts[str(name)] = [_scalars(item) for item in items if isinstance(item, dict)]
    return charts


def _scalars(item: dict[Any, Any]) -> Entry:
    entry: Entry = {k: str(item[k]) if isinstance(item.get(k), str | int | float) else None
                    for k in FIELDS if k != "urls" and k in item}
    urls = item.get("urls")
    entry["urls"] = tuple(u for u in urls if isinstance(u, str)) if isinstance(urls, list) else ()
    return entry


def newest_first(entries: tuple[IndexEntry, ...]) -> list[IndexEntry]:
    """Entries whose version parses, newest first (as helm sorts an index)."""
    return [e for _, e in Index({"": entries}).ordered("")]


@dataclass
class _Held:
    index: Index
    checked: float  # monotonic time of the last request (or load from disk: 0 = ask now)
    etag: str = ""
    last_modified: str = ""


class IndexStore:
    """The indexes of HTTP repositories, by URL: at most one request per repository per interval.

    ``requests`` counts HTTP requests made (tests and benchmarks read it).
    """

    def __init__(self, root: Path, clock: Callable[[], float] = time.monotonic):
        self.root = root
        self.clock = clock
        self.requests = 0
        self._held: dict[str, _Held] = {}
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    def _file(self, url: str) -> Path:
        return self.root / f"{hashlib.sha256(url.encode()).hexdigest()[:32]}.json"

    def _from_disk(self, url: str) -> _Held | None:
        try:
            info = json.loads(self._file(url).read_text())
            entries = {name: tuple(IndexEntry(name, str(v), str(app), str(created), str(digest), tuple(urls))
                                   for v, app, created, digest, urls in items)
                       for name, items in info["entries"].items()}
        except (OSError, ValueError, KeyError, TypeError, AttributeError):
            return None
        if info.get("url") != url:
            return None
        return _Held(Index(entries, str(info.get("digest", ""))), float("-inf"), str(info.get("etag", "")),
                     str(info.get("last_modified", "")))

    def _to_disk(self, url: str, held: _Held) -> None:
        entries = {name: [[e.version, e.app_version, e.created, e.digest, list(e.urls)] for e in items]
                   for name, items in held.index.entries.items()}
        path = self._file(url)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_text(json.dumps({"url": url, "digest": held.index.digest, "etag": held.etag,
                                   "last_modified": held.last_modified, "entries": entries}))
        tmp.replace(path)

    def cached(self, url: str) -> Index | None:
        """The index of ``url`` as last fetched, without any request (None before the first)."""
        held = self._held.get(url)
        return held.index if held is not None else None

    def age(self, url: str) -> float:
        """Seconds since the index of ``url`` was last asked for in this process (``inf``: never)."""
        held = self._held.get(url)
        return self.clock() - held.checked if held is not None else math.inf

    async def get(
        self, url: str, *, what: str, interval: float, timeout: float, creds: Credentials,
        pass_credentials: bool = False, force: bool = False,
    ) -> Index:
        """The index of the repository at ``url``, asking the server only when ``interval`` seconds passed
        since the last request (or ``force``). Raises the errors of :func:`http.get` and SourceInvalid."""
        # One request at a time per repository: packages resolving together share its answer.
        async with self._locks[url]:
            return await self._get(url, what=what, interval=interval, timeout=timeout, creds=creds,
                                   pass_credentials=pass_credentials, force=force)

    async def _get(
        self, url: str, *, what: str, interval: float, timeout: float, creds: Credentials, pass_credentials: bool,
        force: bool,
    ) -> Index:
        held = self._held.get(url) or await asyncio.to_thread(self._from_disk, url)  # 100,000 entries: ~1 s
        now = self.clock()
        if held is not None and not force and now - held.checked < interval:
            return held.index
        headers = {"Accept": "application/x-yaml, text/yaml, */*"}
        if held is not None:
            if held.etag:
                headers["If-None-Match"] = held.etag
            if held.last_modified:
                headers["If-Modified-Since"] = held.last_modified
        self.requests += 1
        resp = await http.aget(
            f"{url}/index.yaml", what=what, headers=headers,
            authorization=creds.authorization() if creds.basic else "", pass_credentials=pass_credentials,
            ssl_context=creds.ssl_context() if url.startswith("https:") else None, timeout=timeout,
            max_bytes=max_index_bytes(), ok=(200, 304),
        )
        if resp.status == 304 and held is not None:
            held.checked = now
            self._held[url] = held
            return held.index
        # Parsing a large index takes a while: off the event loop.
        index = await asyncio.to_thread(parse_index, resp.body, what)
        held = _Held(index, now, resp.headers.get("etag", ""), resp.headers.get("last-modified", ""))
        self._held[url] = held
        await asyncio.to_thread(self._to_disk, url, held)
        return index
