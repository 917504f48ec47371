"""ChartSource: from a chart request (repository + chart + range) to a local chart archive.

``pull`` asks the repository which version the range picks (an HTTP index,
or an OCI registry's tags and manifest), at most once per repository per
interval; then the archive is taken from the content-addressed cache or, only
when it is not there, pulled with ``helm pull`` (:mod:`engine.sources.helm_pull`).
Version choice is Helm's (:mod:`engine.sources.semver`); the revision is the
chart version, and for an OCIRepository's chart, as Flux, ``<version>+<manifest digest[:12]>`` so a
re-pushed tag with new content is a new revision (a HelmRepository of type oci keeps the chart's version).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import math
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.helm import Helm
from engine.sources import helm_pull
from engine.sources.cache import ChartCache, chart_meta, set_chart_version, with_build_metadata
from engine.sources.cosign import verify_cosign
from engine.sources.credentials import Credentials, SecretReader, load_credentials
from engine.sources.errors import NoMatchingVersion, PullFailed, SourceAuthFailed, SourceError, SourceUnreachable
from engine.sources.index import Index, IndexEntry, IndexStore
from engine.sources.oci import ChartManifest, OciLocation, Registry, tag_to_version
from engine.sources.repository import (
    ChartRequest,
    HelmRepositorySpec,
    OCIRepositorySpec,
    SourceSpec,
)
from engine.sources.semver import SemverError, Version, newest_match, pick, sort_newest_first
from engine.sources.updates import AvailableVersions, available, prepare
from engine.sources.verify import (
    COSIGN,
    FAILED,
    HELM,
    NOT_ASKED,
    VERIFIED,
    KeyReader,
    KeySet,
    Verification,
    VerificationCache,
    Verifications,
    VerifyError,
    VerifySpec,
    clip,
    wanted,
)

MAX_LISTED = 100  # versions() describes at most this many OCI tags (one manifest + config each)
MAX_LISTED_HTTP = 1_000  # and lists at most this many versions of an HTTP repository's chart


@dataclass(frozen=True)
class ChartArtifact:
    """A chart archive on disk: ``digest`` is ``sha256:<hex>`` of the archive, ``revision`` Flux's
    (version, or ``version+digest12`` for OCI), ``source`` a one-line description of where it came from.
    ``version`` is the version the repository published; for OCI the archive at ``path`` says ``revision``
    in its Chart.yaml (as Flux's helm-controller installs it). ``verification``: how the request's
    ``verify`` judged it (``NotVerified`` when it asks none); a pull never returns a failed one. ``oci_digest``:
    for a chart from an OCIRepository, its manifest's digest (``sha256:<hex>``, the digest of source-controller's
    artifact revision ``<tag>@<digest>``), which Flux records as ``status.lastAttemptedRevisionDigest`` and a
    snapshot's ``ociDigest`` (helm-controller v1.6.3 internal/controller/helmrelease_controller.go
    ``mutateChartWithSourceRevision``); ``""`` for any other chart."""

    path: Path
    digest: str
    name: str
    version: str
    app_version: str
    revision: str
    source: str
    verification: Verification = NOT_ASKED
    oci_digest: str = ""


@dataclass(frozen=True)
class ChartVersionInfo:
    """One available version: ``created`` as the repository gives it (RFC 3339, or ""); ``digest``
    (``sha256:<hex>``, "" when the repository does not say) the archive's for an HTTP repository, the
    manifest's for OCI: the artifact digest verification results are kept by."""

    version: str
    app_version: str = ""
    created: str = ""
    digest: str = ""


@dataclass(frozen=True)
class _Choice:
    """What a repository offers for a request: the version, how to fetch it and the digests known."""

    version: str
    archive_hex: str  # sha256 hex of the archive when the repository says it up front
    manifest_digest: str = ""  # OCI only
    app_version: str = ""


@dataclass(frozen=True)
class _Selection:
    """A choice with what fetching it needs: the credentials, the cache's reference key, and the index
    entry (HTTP) or registry location (OCI)."""

    choice: _Choice
    creds: Credentials
    ref_key: str
    entry: IndexEntry | None = None
    location: OciLocation | None = None


class ChartSource:
    """Resolves chart requests; one per engine. ``pulls`` counts ``helm pull`` runs and ``requests``
    HTTP requests to repositories (tests and benchmarks read them)."""

    def __init__(self, helm: Helm, cache_root: Path, *, secrets: SecretReader | None = None,
                 keys: KeyReader | None = None, clock: Callable[[], float] = time.monotonic):
        self.helm = helm
        self.secrets = secrets
        self.clock = clock
        self.cache = ChartCache(cache_root / "charts")
        self.verifications = Verifications(VerificationCache(cache_root / "sources" / "verified", clock), keys)
        self.indexes = IndexStore(cache_root / "sources" / "index", clock)
        self.pulls = 0
        self._oci_requests = 0
        # (repository URL, "" for its tag list | a tag or digest for its manifest) -> (when asked, answer)
        self._oci_seen: dict[tuple[str, str], tuple[float, object]] = {}
        self._artifacts: dict[str, ChartArtifact] = {}
        self._last: dict[ChartRequest, ChartArtifact] = {}
        self._chosen: dict[ChartRequest, _Choice] = {}  # what the last pull of each request chose
        self._locks: defaultdict[str, asyncio.Lock] = defaultdict(asyncio.Lock)

    @property
    def requests(self) -> int:
        return self.indexes.requests + self._oci_requests

    async def _creds(self, source: SourceSpec, host: str) -> Credentials:
        return await load_credentials(self.secrets, source.namespace, source.secret_ref, source.cert_secret_ref,
                                      host=host, what=source.describe())

    # -- choosing ------------------------------------------------------------
    async def _choose_http(self, source: HelmRepositorySpec, chart: str, version: str,
                           creds: Credentials) -> tuple[_Choice, IndexEntry]:
        what = source.describe()
        index = await self.indexes.get(source.url, what=what, interval=source.interval, timeout=source.timeout,
                                       creds=creds, pass_credentials=source.pass_credentials)
        if not index.entries.get(chart):
            raise NoMatchingVersion(f"{what}: no chart {chart!r} in the index", repository=what)
        picked = _pick(index.entries[chart], await _ordered(index, chart), version, what, chart)
        return _Choice(picked.version, picked.digest, app_version=picked.app_version), picked

    def _registry(self, source: SourceSpec, creds: Credentials, host: str) -> Registry:
        return Registry(host, creds=creds, plain_http=source.insecure, timeout=source.timeout,
                        what=source.describe())

    def _fresh(self, key: tuple[str, str], interval: float) -> object | None:
        seen = self._oci_seen.get(key)
        return seen[1] if seen is not None and self.clock() - seen[0] < interval else None

    async def _choose_oci(self, source: SourceSpec, location: OciLocation, version: str,
                          creds: Credentials) -> _Choice:
        """The tag (and manifest) the request selects: the tag list and each manifest are asked for at most
        once per repository per interval."""
        registry = self._registry(source, creds, location.host)
        try:
            async with self._locks[location.url]:  # packages pulling together share one answer
                reference = await self._oci_reference(source, registry, location, version)
                manifest = self._fresh((location.url, reference), source.interval)
                if not isinstance(manifest, ChartManifest):
                    manifest = await registry.manifest(location.repository, reference)
                    self._oci_seen[(location.url, reference)] = (self.clock(), manifest)
        finally:
            self._oci_requests += registry.requests
        picked = tag_to_version(reference) if not reference.startswith("sha256:") else ""
        return _Choice(picked, manifest.layer_digest.removeprefix("sha256:"), manifest.digest)

    async def _oci_reference(self, source: SourceSpec, registry: Registry, location: OciLocation,
                             version: str) -> str:
        what = source.describe()
        if isinstance(source, OCIRepositorySpec):
            ref = source.reference
            if ref.digest:
                return ref.digest
            if not ref.semver:
                return ref.tag or "latest"
            version = ref.semver
        tags = self._fresh((location.url, ""), source.interval)
        if not isinstance(tags, list):
            tags = await registry.tags(location.repository)
            self._oci_seen[(location.url, "")] = (self.clock(), tags)
        if isinstance(source, OCIRepositorySpec):
            tags = [t for t in tags if source.reference.admits(t)]
        by_version = {tag_to_version(t): t for t in tags}
        try:
            picked = newest_match(by_version, version, exact=not isinstance(source, OCIRepositorySpec))
        except SemverError as exc:
            raise NoMatchingVersion(f"{what}: {exc}", repository=what) from None
        if picked is None:
            raise NoMatchingVersion(f"{what}: no tag of {location.host}/{location.repository} matches "
                                    f"{version!r} (newest: {', '.join(sort_newest_first(by_version)[:3]) or 'none'})",
                                    repository=what)
        return by_version[picked]

    # -- pulling -------------------------------------------------------------
    async def pull(self, request: ChartRequest) -> ChartArtifact:
        """The chart archive ``request`` selects now, pulled only when not cached.

        Raises SourceUnreachable, SourceAuthFailed, SourceInvalid, CredentialsError (SourceNotReady),
        NoMatchingVersion, PullFailed (ArtifactFailed) or VerifyError (VerificationError: the request's
        ``verify`` refused the artifact, which is then not used); messages name the repository and the range.
        """
        try:
            return await self._pull(request)
        except SourceError as exc:
            wanted = request.wanted()
            if wanted in exc.message:
                raise
            said = type(exc)(f"{exc.message} (looking for {wanted})", repository=exc.repository)
            if isinstance(exc, VerifyError) and isinstance(said, VerifyError):
                said.verification = exc.verification
            raise said from None

    async def _select(self, request: ChartRequest) -> _Selection:
        """What the repository offers for ``request`` now (asking it at most once per interval)."""
        source = request.source
        location = _oci_location(request)
        creds = await self._creds(source, location.host if location else _host(source.url))
        if location is None:
            assert isinstance(source, HelmRepositorySpec)
            choice, entry = await self._choose_http(source, request.chart, request.version, creds)
            return _Selection(choice, creds, f"{source.url}\0{request.chart}\0{choice.version}", entry=entry)
        choice = await self._choose_oci(source, location, request.version, creds)
        return _Selection(choice, creds, f"{location.url}@{choice.manifest_digest}", location=location)

    async def _pull(self, request: ChartRequest) -> ChartArtifact:
        verify, what = request.verify, request.source.describe()
        keys: KeySet | None = None
        if verify is None:
            sel = await self._select(request)
        else:  # the repository and the keyring Secret asked together: a pass waits for the slower, not both
            sel, keys = await asyncio.gather(
                self._select(request),
                self.verifications.keys(verify, wanted(verify.provider), request.source.interval, what))
        choice = sel.choice
        # One pull per archive, however many packages (or repositories) want it.
        async with self._locks[choice.archive_hex or sel.ref_key]:
            verification = NOT_ASKED
            if verify is not None and keys is not None:  # before the archive can be used; raises VerifyError
                verification = await self._verify(request, verify, keys, sel)
            hex_digest = await self._fetch(request, choice, sel.entry, sel.location, sel.creds, sel.ref_key)
            # Off the loop, under the same lock (one writer of the versioned archive): reading Chart.yaml, and
            # for OCI writing the archive with its version set.
            artifact = await asyncio.to_thread(self._artifact, hex_digest, choice, sel.location, what,
                                               request.revision_digest)
        if verify is not None:
            artifact = dataclasses.replace(artifact, verification=verification)
        self._last[request] = artifact
        self._chosen[request] = choice
        return artifact

    # -- verifying -----------------------------------------------------------
    async def _verify(self, request: ChartRequest, verify: VerifySpec, keys: KeySet,
                      sel: _Selection) -> Verification:
        """The artifact ``sel`` chose, verified with ``keys`` (kept results first: a no-op pass runs no
        check). Returns a Verified result; raises VerifyError (the artifact is not used)."""
        source, what = request.source, request.source.describe()
        if verify.provider == HELM:
            if sel.location is not None or sel.entry is None:  # the loader refuses it; a guard for the API
                raise VerifyError(f"{what}: provider helm verifies charts of an HTTP HelmRepository",
                                  repository=what)
            hex_digest = sel.choice.archive_hex or self.cache.ref(sel.ref_key)
            digest = f"sha256:{hex_digest}" if hex_digest else ""
            return await self.verifications.check(
                verify, keys, digest, source.interval, what,
                lambda k: self._helm_verify(request, sel, k, digest))
        if verify.provider == COSIGN and sel.location is not None:
            location, digest = sel.location, sel.choice.manifest_digest
            return await self.verifications.check(
                verify, keys, digest, source.interval, what,
                lambda k: verify_cosign(location=f"{location.host}/{location.repository}", digest=digest, keys=k,
                                        secret=f"{verify.namespace}/{verify.secret_ref}", creds=sel.creds,
                                        plain_http=source.insecure, timeout=source.timeout, what=what))
        raise VerifyError(f"{what}: {verify.field}: provider {verify.provider!r} is not supported here",
                          repository=what)

    async def _helm_verify(self, request: ChartRequest, sel: _Selection, keys: KeySet,
                           digest: str) -> Verification:
        """``helm pull --verify --keyring``: helm checks the ``.prov`` next to the chart; the verified
        archive goes to the store (so the pass that follows pulls nothing)."""
        source, what = request.source, request.source.describe()
        assert isinstance(source, HelmRepositorySpec) and sel.entry is not None
        staged = self.cache.staging()
        self.pulls += 1
        try:
            said = await helm_pull.pull_http(
                self.helm, url=source.url, entry=sel.entry, creds=sel.creds,
                pass_credentials=source.pass_credentials, dest=staged, timeout=source.timeout, what=what, keys=keys)
        except (SourceUnreachable, SourceAuthFailed):
            raise  # not the artifact's fault: the repository's (Ready says it, SourceVerified stays)
        except PullFailed as exc:
            staged.unlink(missing_ok=True)
            return Verification(HELM, FAILED, message=clip(exc.message.removeprefix(f"{what}: ")),
                                artifact_digest=digest, keys_digest=keys.digest)
        hex_digest = self.cache.put(staged, sel.choice.archive_hex, what)
        self.cache.remember(sel.ref_key, hex_digest)
        return Verification(HELM, VERIFIED, identity=helm_pull.signer(said), artifact_digest=f"sha256:{hex_digest}",
                            keys_digest=keys.digest)

    async def read_keys(self, request: ChartRequest) -> None:
        """Read the keyring ``request``'s ``verify`` names (at most once per the source's interval), so that
        :meth:`verification_of` can say what is known in a process that pulled nothing yet (``helmdeck
        versions``). A keyring that cannot be read leaves the marks unknown: a pass says why."""
        verify = request.verify
        if verify is not None:
            with contextlib.suppress(VerifyError):
                await self.verifications.keys(verify, wanted(verify.provider), request.source.interval,
                                              request.source.describe())

    def verification_of(self, request: ChartRequest, digest: str) -> Verification | None:
        """The verification kept for the artifact ``digest`` with ``request``'s keys (no I/O): None when the
        request asks none or none is known yet (the version picker's marks)."""
        if request.verify is None or not digest:
            return None
        return self.verifications.known(request.verify, digest)

    def due(self, request: ChartRequest) -> float:
        """Seconds until the repository's answer for ``request`` is older than its ``interval`` (0: a
        request would ask the repository now; ``inf`` for an OCI digest, which never changes)."""
        source = request.source
        location = _oci_location(request)
        if location is None:
            age = self.indexes.age(source.url)
        else:
            if isinstance(source, OCIRepositorySpec) and source.reference.digest:
                return math.inf
            # The tag list answers a range; a fixed tag's manifest answers that tag.
            ref = source.reference if isinstance(source, OCIRepositorySpec) else None
            key = (ref.tag or "latest") if ref is not None and not ref.semver else ""
            seen = self._oci_seen.get((location.url, key))
            age = self.clock() - seen[0] if seen is not None else math.inf
        return max(0.0, source.interval - age)

    async def changed(self, request: ChartRequest) -> bool:
        """Does the repository now select another version (or, for OCI, digest) than the last
        :meth:`pull` of ``request`` gave? Asks the repository only when its answer is older than the
        interval, and pulls nothing; False for a request never pulled (asked all the same: what it offers
        serves :meth:`available`, e.g. for a read-only instance, which pulls nothing). Raises as
        :meth:`pull`."""
        before = self._chosen.get(request)
        selected = await self._select(request)
        return before is not None and selected.choice != before

    def last(self, request: ChartRequest) -> ChartArtifact | None:
        """The artifact the last successful :meth:`pull` of ``request`` gave (no I/O): what keeps serving
        drift detection and monitors while the repository fails."""
        return self._last.get(request)

    async def _fetch(self, request: ChartRequest, choice: _Choice, entry: IndexEntry | None,
                     location: OciLocation | None, creds: Credentials, ref_key: str) -> str:
        """The archive's sha256 hex, from the cache or (only when absent) pulled by helm."""
        source = request.source
        what = source.describe()
        hex_digest = choice.archive_hex or self.cache.ref(ref_key)
        if not self.cache.has(hex_digest):
            staged = self.cache.staging()
            self.pulls += 1
            if location is None:
                assert isinstance(source, HelmRepositorySpec) and entry is not None
                await helm_pull.pull_http(
                    self.helm, url=source.url, entry=entry, creds=creds, pass_credentials=source.pass_credentials,
                    dest=staged, timeout=source.timeout, what=what)
            else:
                await helm_pull.pull_oci(
                    self.helm, location=f"{location.host}/{location.repository}", digest=choice.manifest_digest,
                    creds=creds, plain_http=source.insecure, dest=staged, timeout=source.timeout, what=what)
            hex_digest = self.cache.put(staged, choice.archive_hex, what)
            self.cache.remember(ref_key, hex_digest)
        return hex_digest

    def _artifact(self, hex_digest: str, choice: _Choice, location: OciLocation | None, what: str,
                  revision_digest: bool) -> ChartArtifact:
        memo = f"{hex_digest}{choice.manifest_digest}{revision_digest}"
        known = self._artifacts.get(memo)
        if known is not None:
            return known
        path = self.cache.path(hex_digest)
        meta = chart_meta(path, what)
        version = revision = meta.version
        if revision_digest:
            # As Flux's mutateChartWithSourceRevision: the release's chart version says the manifest digest,
            # so a re-pushed tag is a new chart version in helm's history too.
            revision = with_build_metadata(version, choice.manifest_digest)
            hex_digest = self._with_version(hex_digest, revision, what)
            path = self.cache.path(hex_digest)
        source = f"{location.url}@{choice.manifest_digest}" if location else f"{meta.name} {version} from {what}"
        artifact = ChartArtifact(path, f"sha256:{hex_digest}", meta.name, version, meta.app_version, revision, source,
                                 oci_digest=choice.manifest_digest if revision_digest else "")
        self._artifacts[memo] = artifact
        return artifact

    def _with_version(self, hex_digest: str, version: str, what: str) -> str:
        """The archive ``hex_digest`` with its Chart.yaml version set to ``version``, in the store (made once:
        remembered by the original's digest and the version). Raises PullFailed."""
        key = f"{hex_digest}\0version\0{version}"
        known = self.cache.ref(key)
        if known:
            return known
        staged = self.cache.staging()
        set_chart_version(self.cache.path(hex_digest), version, staged, what)
        mutated = self.cache.put(staged, "", what)
        self.cache.remember(key, mutated)
        return mutated

    # -- listing -------------------------------------------------------------
    def available(self, request: ChartRequest) -> AvailableVersions | None:
        """The newest version the repository offered ``request`` when last asked, and the newest inside its
        range, from memory (no I/O). None before the repository answered (or for an OCIRepository selecting
        a tag or digest, whose tags are listed only by :meth:`versions`)."""
        location = _oci_location(request)
        if location is None:
            index = self.indexes.cached(request.source.url)
            found = index.versions(request.chart) if index is not None else None
        else:
            tags = self._oci_seen.get((location.url, ""), (0, None))[1]
            found = tuple(tag_to_version(t) for t in tags) if isinstance(tags, list) else None
        return available(request, found) if found is not None else None

    async def versions(self, request: ChartRequest) -> list[ChartVersionInfo]:
        """The versions the repository offers for the request's chart, newest first (pre-releases too): at
        most ``MAX_LISTED_HTTP`` from an HTTP index.

        For OCI, the newest ``MAX_LISTED`` tags an OCIRepository's ``ref.semverFilter`` admits
        (:meth:`OCIReference.admits`) are described (app version, creation time). Raises as
        :meth:`pull`, except NoMatchingVersion for an empty list.
        """
        source = request.source
        location = _oci_location(request)
        creds = await self._creds(source, location.host if location else _host(source.url))
        if location is None:
            assert isinstance(source, HelmRepositorySpec)
            what = source.describe()
            index = await self.indexes.get(source.url, what=what, interval=source.interval, timeout=source.timeout,
                                           creds=creds, pass_credentials=source.pass_credentials)
            return [ChartVersionInfo(e.version, e.app_version, e.created, f"sha256:{e.digest}" if e.digest else "")
                    for _, e in (await _ordered(index, request.chart))[:MAX_LISTED_HTTP]]
        registry = self._registry(source, creds, location.host)
        out = []
        try:
            tags = await registry.tags(location.repository)
            self._oci_seen[(location.url, "")] = (self.clock(), tags)
            if isinstance(source, OCIRepositorySpec):  # tags its semverFilter drops are not offered
                tags = [t for t in tags if source.reference.admits(t)]
            for tag in sort_newest_first(tag_to_version(t) for t in tags)[:MAX_LISTED]:
                manifest = await registry.manifest(location.repository, tag.replace("+", "_"))
                config = await registry.chart_config(location.repository, manifest.config_digest)
                out.append(ChartVersionInfo(tag, str(config.get("appVersion") or ""),
                                            manifest.annotations.get("org.opencontainers.image.created", ""),
                                            manifest.digest))
        finally:
            self._oci_requests += registry.requests
        return out


async def _ordered(index: Index, chart: str) -> tuple[tuple[Version, IndexEntry], ...]:
    """``index.ordered(chart)``, computed in a worker thread the first time (with the marker's parse of the
    same versions, :func:`engine.sources.updates.prepare`): 100,000 versions take about a second."""
    if not index.is_ordered(chart):
        await asyncio.to_thread(_order, index, chart)
    return index.ordered(chart)


def _order(index: Index, chart: str) -> None:
    index.ordered(chart)
    prepare(index.versions(chart))


def _pick(entries: tuple[IndexEntry, ...], ordered: tuple[tuple[Version, IndexEntry], ...], version: str, what: str,
          chart: str) -> IndexEntry:
    """The entry of ``chart`` for ``version`` (:func:`engine.sources.semver.pick`: an exact match among all
    ``entries``, else the newest of ``ordered`` in the range). Raises NoMatchingVersion."""
    try:
        picked = pick(((e.version, e) for e in entries), ordered, version)
    except SemverError as exc:
        raise NoMatchingVersion(f"{what}: {exc}", repository=what) from None
    if picked is not None:
        return picked
    newest = ", ".join(e.version for _, e in ordered[:3]) or "none"
    raise NoMatchingVersion(f"{what}: no version of chart {chart!r} matches {version!r} (newest: {newest})",
                            repository=what)


def _oci_location(request: ChartRequest) -> OciLocation | None:
    source = request.source
    if isinstance(source, OCIRepositorySpec):
        return OciLocation.parse(source.url)
    if source.is_oci:
        return OciLocation.parse(f"{source.url}/{request.chart}")
    return None


def _host(url: str) -> str:
    return url.split("://", 1)[-1].split("/", 1)[0]


