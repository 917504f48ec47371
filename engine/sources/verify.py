"""Verification of a chart artifact before it can be used, as Flux's source-controller (``SourceVerified``).

A source that asks for verification (a Package's ``spec.chart.spec.verify`` with ``provider: helm``, a
helmdeck extension; an OCIRepository's ``spec.verify`` with ``provider: cosign``, Flux's) names a Secret of
public keys. :class:`Verifications` is the one place that decides whether an artifact may be used:

- the Secret is read as the package's ServiceAccount when it names one (:class:`VerifySpec` ``user``), at
  most once per source interval; its bytes reach a disk only through :func:`key_files` (0600 files in a
  private folder, removed after use) and never a log, a ``repr`` or a command line;
- results are kept by (provider, artifact digest, digest of the key set): a Verified one on disk under
  the cache folder (a no-op pass, in this process or the next, verifies nothing again), a Failed one in
  memory until the source's interval has passed (then the repository is asked again, as Flux retries);
- a Failed result raises :class:`VerifyError` (a SourceError with Flux's ``VerificationError`` reason):
  the pull that asked fails, so the artifact is never installed or upgraded to, and the chart source
  keeps serving the last verified artifact (``ChartSource.last``).

The provider's own check (``helm pull --verify``, ``cosign verify``) is the ``run`` callback the chart
source gives :meth:`Verifications.check`; it returns a :class:`Verification`.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import math
import os
import shutil
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, Iterator, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path

from engine.base.wire import VERIFICATION_ERROR
from engine.helm.cli import values_dir
from engine.sources.errors import CredentialsError, SourceError

HELM = "helm"  # Helm provenance (.prov, OpenPGP): a helmdeck extension of Flux's providers
COSIGN = "cosign"  # Flux's
PROVIDERS = (HELM, COSIGN)
VERIFIED, FAILED, NOT_VERIFIED = "Verified", "Failed", "NotVerified"

# Flux's condition type and reasons (source-controller: SourceVerifiedCondition, meta.SucceededReason,
# sourcev1.VerificationError).

MAX_KEY_BYTES = 1024 * 1024  # a keyring or a set of public keys larger than this is refused
_MAX_MESSAGE = 2048  # a tool's message is kept up to this many characters


@dataclass(frozen=True)
class VerifySpec:
    """What a source asks to verify with: ``provider`` (:data:`PROVIDERS`), the Secret ``secret_ref`` in
    ``namespace`` holding the public keys, ``user`` the Kubernetes user that reads it (a package's
    ServiceAccount, impersonated; "" for helmdeck's own), ``field`` where it was declared (for messages).
    ``match_oidc_identity``: cosign's keyless fields, (issuer, subject) pairs, accepted and refused."""

    provider: str
    secret_ref: str
    namespace: str
    user: str = ""
    field: str = "spec.verify"
    match_oidc_identity: tuple[tuple[str, str], ...] = ()

    def describe(self) -> str:
        return f"{self.provider} verification with Secret {self.namespace}/{self.secret_ref}"


@dataclass(frozen=True)
class Verification:
    """The outcome of verifying one artifact with one key set.

    ``outcome``: ``Verified`` | ``Failed`` | ``NotVerified`` (no verification asked); ``identity``: who
    signed (the key's user ID and fingerprint, or the key's name); ``message``: the tool's message on
    failure; ``artifact_digest``: ``sha256:<hex>`` of the archive (Helm) or the OCI manifest (cosign);
    ``keys_digest``: ``sha256:<hex>`` of the key set (:attr:`KeySet.digest`)."""

    provider: str
    outcome: str
    identity: str = ""
    message: str = ""
    artifact_digest: str = ""
    keys_digest: str = ""

    @property
    def verified(self) -> bool:
        return self.outcome == VERIFIED


NOT_ASKED = Verification("", NOT_VERIFIED)


def verified_message(result: Verification) -> str:
    """``SourceVerified``'s message (the app shows it as it is): who signed, and with which provider, or the
    tool's message on failure."""
    if result.verified:
        return f"signed by {result.identity or 'an unnamed key'} ({result.provider})"
    return result.message or "verification failed"


class VerifyError(SourceError):
    """An artifact failed verification (or could not be verified: keys missing, keyless refused);
    ``verification`` says how. Flux's reason: ``VerificationError``."""

    reason = VERIFICATION_ERROR

    def __init__(self, message: str, *, repository: str = "", verification: Verification | None = None):
        super().__init__(message, repository=repository)
        self.verification = verification


@dataclass(frozen=True)
class KeySet:
    """Public key material read from a Secret: ``files`` (Secret key -> bytes, never in a ``repr``) and
    ``digest`` (``sha256:<hex>`` over the keys and their names, sorted: the cache's key)."""

    files: Mapping[str, bytes] = field(repr=False)
    digest: str

    @classmethod
    def of(cls, files: Mapping[str, bytes]) -> KeySet:
        h = hashlib.sha256()
        for name in sorted(files):
            h.update(name.encode() + b"\0" + hashlib.sha256(files[name]).digest())
        return cls(dict(files), f"sha256:{h.hexdigest()}")


# (user, namespace, name) -> the Secret's data, or None when there is no such Secret. ``user`` "" reads as
# helmdeck itself; otherwise as that (impersonated) user.
KeyReader = Callable[[str, str, str], Awaitable[Mapping[str, bytes] | None]]


@contextlib.contextmanager
def key_files(keys: KeySet, directory: Path | None = None) -> Iterator[dict[str, Path]]:
    """The key set written to 0600 files (one per Secret key, named ``key-<n>`` plus the key's suffix, so
    no Secret key becomes a path) in a private 0700 folder (in ``directory``, default the helm runner's
    private folder, as :func:`engine.sources.credentials.tls_files`), all removed on exit."""
    folder = Path(tempfile.mkdtemp(prefix=f"keys-{os.getpid()}-", dir=directory or values_dir()))
    try:
        out: dict[str, Path] = {}
        for n, name in enumerate(sorted(keys.files)):
            path = folder / f"key-{n}{_suffix(name)}"
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(keys.files[name])
            out[name] = path
        yield out
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def _suffix(name: str) -> str:
    suffix = Path(name).suffix
    return suffix if suffix.isascii() and suffix[1:].isalnum() and len(suffix) <= 8 else ""


def wanted(provider: str) -> Callable[[str], bool]:
    """Which keys of the Secret hold public keys for ``provider``: ``pubring.gpg`` (Helm's keyring, as
    ``helm verify --keyring``), every ``*.pub`` (cosign, as Flux)."""
    if provider == HELM:
        return lambda name: name == "pubring.gpg"
    return lambda name: name.endswith(".pub")


def clip(message: str) -> str:
    """A tool's message, one line of at most ``_MAX_MESSAGE`` characters."""
    text = " ".join(message.split())
    return text if len(text) <= _MAX_MESSAGE else text[: _MAX_MESSAGE - 1] + "…"


class VerificationCache:
    """Verified results on disk under ``root`` (one small JSON file per (provider, artifact, key set)),
    Failed ones in memory for ``retry`` seconds. Both lookups are in memory after the first."""

    def __init__(self, root: Path, clock: Callable[[], float] = time.monotonic):
        self.root = root
        self.clock = clock
        self._verified: dict[tuple[str, str, str], Verification] = {}
        self._failed: dict[tuple[str, str, str], tuple[float, Verification]] = {}

    def _file(self, key: tuple[str, str, str]) -> Path:
        return self.root / hashlib.sha256("\0".join(key).encode()).hexdigest()[:40]

    def get(self, provider: str, artifact_digest: str, keys_digest: str, retry: float) -> Verification | None:
        key = (provider, artifact_digest, keys_digest)
        known = self._verified.get(key)
        if known is not None:
            return known
        failed = self._failed.get(key)
        if failed is not None and self.clock() - failed[0] < retry:
            return failed[1]
        try:
            data = json.loads(self._file(key).read_text())
            found = Verification(**{k: str(data.get(k, "")) for k in Verification.__dataclass_fields__})
        except (OSError, ValueError, TypeError, AttributeError):
            return None
        if (found.provider, found.artifact_digest, found.keys_digest) != key or not found.verified:
            return None
        self._verified[key] = found
        return found

    def put(self, result: Verification) -> None:
        key = (result.provider, result.artifact_digest, result.keys_digest)
        if not result.verified:
            self._failed[key] = (self.clock(), result)
            return
        self._failed.pop(key, None)
        self._verified[key] = result
        path = self._file(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(asdict(result)))
        tmp.replace(path)


class Verifications:
    """The one decision whether an artifact may be used: keys read, cache asked, the provider's check run
    on a miss. ``runs`` counts the checks run (tests and benchmarks read it)."""

    def __init__(self, cache: VerificationCache, reader: KeyReader | None):
        self.cache = cache
        self.reader = reader
        self.runs = 0
        self._keys: dict[tuple[str, str, str, str], tuple[float, KeySet]] = {}
        self._reading: defaultdict[tuple[str, str, str, str], asyncio.Lock] = defaultdict(asyncio.Lock)

    async def keys(self, spec: VerifySpec, wanted: Callable[[str], bool], interval: float, what: str) -> KeySet:
        """The Secret's keys ``wanted`` admits (e.g. ``pubring.gpg``, ``*.pub``), read at most once per
        ``interval`` seconds. Raises VerifyError (no access to the cluster, no such Secret, no such key,
        keys over :data:`MAX_KEY_BYTES`); the messages name the Secret, never its content."""
        cache_key = (spec.provider, spec.user, spec.namespace, spec.secret_ref)
        async with self._reading[cache_key]:  # packages passing together share one read
            seen = self._keys.get(cache_key)
            if seen is not None and self.cache.clock() - seen[0] < interval:
                return seen[1]
            keys = await self._read(spec, wanted, what)
            self._keys[cache_key] = (self.cache.clock(), keys)
            return keys

    async def _read(self, spec: VerifySpec, wanted: Callable[[str], bool], what: str) -> KeySet:
        secret = f"Secret {spec.namespace}/{spec.secret_ref}"
        if self.reader is None:
            raise VerifyError(f"{what}: {spec.field} needs the cluster's Secrets to read {secret}",
                              repository=what)
        try:
            data = await self.reader(spec.user, spec.namespace, spec.secret_ref)
        except CredentialsError as exc:
            raise VerifyError(f"{what}: {spec.field}: {exc.message}", repository=what) from None
        if data is None:
            as_user = f" (read as {spec.user})" if spec.user else ""
            raise VerifyError(f"{what}: {spec.field}: {secret} does not exist or cannot be read{as_user}",
                              repository=what)
        files = {k: v for k, v in data.items() if wanted(k)}
        if not files:
            raise VerifyError(f"{what}: {spec.field}: {secret} holds no public keys for {spec.provider} "
                              f"(keys: {', '.join(sorted(data)) or 'none'})", repository=what)
        if sum(len(v) for v in files.values()) > MAX_KEY_BYTES:
            raise VerifyError(f"{what}: {spec.field}: the keys in {secret} are over {MAX_KEY_BYTES} bytes",
                              repository=what)
        return KeySet.of(files)

    def known(self, spec: VerifySpec, artifact_digest: str) -> Verification | None:
        """The last result for ``artifact_digest`` with the key set last read for ``spec`` (no I/O; a failure
        however old: it stands until checked again), None when there is none: what the version picker marks."""
        seen = self._keys.get((spec.provider, spec.user, spec.namespace, spec.secret_ref))
        return self.cache.get(spec.provider, artifact_digest, seen[1].digest, math.inf) if seen else None

    async def check(self, spec: VerifySpec, keys: KeySet, artifact_digest: str, retry: float, what: str,
                    run: Callable[[KeySet], Awaitable[Verification]]) -> Verification:
        """The verification of ``artifact_digest`` with ``keys``: the kept one, else ``run(keys)``'s (kept).
        Returns a Verified result; raises VerifyError with the Failed one. ``retry``: seconds a failure is
        kept before the check runs again (the source's interval)."""
        found = self.cache.get(spec.provider, artifact_digest, keys.digest, retry) if artifact_digest else None
        if found is None:
            self.runs += 1
            found = await run(keys)
            if found.artifact_digest:  # a failure before the artifact's digest was known is not kept
                self.cache.put(found)
        if not found.verified:
            raise VerifyError(f"{what}: {found.message}", repository=what, verification=found)
        return found
