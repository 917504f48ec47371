"""Pulled chart archives, content-addressed: ``<cache>/charts/sha256/<hex>.tgz``.

An archive is stored once under the sha256 of its bytes, whatever repository it
came from; ``refs/`` remembers which archive a (repository, chart, version) gave
when the source does not say its digest up front (an index without ``digest``).
Writes go through a temporary name and a rename, so a killed pull leaves no
half archive under a digest.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import io
import os
import re
import tarfile
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.base.loader import YamlLimitError, chart_limits, parse_text
from engine.sources.errors import PullFailed

_MAX_CHART_YAML = 1024 * 1024


@dataclass(frozen=True)
class ChartMeta:
    """What a chart archive's Chart.yaml says."""

    name: str
    version: str
    app_version: str


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def chart_meta(archive: Path, what: str = "") -> ChartMeta:
    """Read ``<chart>/Chart.yaml`` from a chart archive, with the bounded loader (a pulled chart is not
    trusted: a 233-byte archive whose ``name`` is an alias bomb took 40 s and 4 GB to print). Raises
    PullFailed."""
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                parts = member.name.split("/")
                if len(parts) == 2 and parts[1] == "Chart.yaml" and member.isfile():
                    if member.size > _MAX_CHART_YAML:
                        break
                    fh = tar.extractfile(member)
                    text = (fh.read() if fh else b"").decode("utf-8")
                    data = parse_text(text, Path(member.name), chart_limits()).data
                    if isinstance(data, dict) and all(isinstance(data.get(k), str | int | float) and data.get(k)
                                                      for k in ("name", "version")):
                        return ChartMeta(str(data["name"]), str(data["version"]), _scalar(data.get("appVersion")))
                    break
    except (OSError, tarfile.TarError) as exc:
        raise PullFailed(f"{what}: {archive.name} is not a chart archive ({exc})", repository=what) from None
    except (UnicodeDecodeError, YamlLimitError) as exc:
        raise PullFailed(f"{what}: {archive.name} has an unreadable Chart.yaml ({exc})", repository=what) from None
    raise PullFailed(f"{what}: {archive.name} has no valid Chart.yaml", repository=what)


# A top-level "version:" line of Chart.yaml (block style, as helm writes it), its value to the end of the line.
_VERSION_LINE = re.compile(r"^version:[ \t]*[^\n#]*?(?=[ \t]*(#[^\n]*)?$)", re.MULTILINE)


def with_build_metadata(version: str, digest: str) -> str:
    """``version`` with its build metadata set to the first 12 hex digits of ``digest`` (``sha256:<hex>``),
    replacing any it had, as Flux's ``mutateChartWithSourceRevision`` (semver ``SetMetadata``)."""
    return f"{version.split('+', 1)[0]}+{digest.split(':', 1)[-1][:12]}"


def set_chart_version(archive: Path, version: str, dest: Path, what: str = "") -> None:
    """Write ``archive`` to ``dest`` with ``<chart>/Chart.yaml``'s top-level ``version`` set to ``version``,
    every other member as it was (same order, names, modes). The output depends only on the input (gzip
    without a time stamp): the same archive and version give the same bytes. Raises PullFailed (no Chart.yaml,
    or no block-style ``version:`` line in it)."""
    def versioned(data: bytes | None) -> bytes | None:
        if data is None or len(data) > _MAX_CHART_YAML:
            return None
        new, count = _VERSION_LINE.subn(f"version: {version}", data.decode("utf-8"), count=1)
        return new.encode() if count == 1 else None

    if not _rewrite(archive, dest, "Chart.yaml", versioned, what, "set the chart version in"):
        raise PullFailed(f"{what}: {archive.name} has no Chart.yaml with a version line", repository=what)


def set_chart_values(archive: Path, values: bytes, dest: Path, what: str = "") -> None:
    """Write ``archive`` to ``dest`` with ``<chart>/values.yaml`` holding ``values`` (added when the chart has
    none), every other member as it was; as :func:`set_chart_version`, the bytes depend on the input only.
    What source-controller does to a HelmChart's archive with ``valuesFiles`` (internal/helm/chart/metadata.go
    ``OverwriteChartDefaultValues``). Raises PullFailed (an unreadable archive)."""
    _rewrite(archive, dest, "values.yaml", lambda _old: values, what, "set the default values of", add=True)


def _rewrite(archive: Path, dest: Path, name: str, change: Callable[[bytes | None], bytes | None], what: str,
             doing: str, *, add: bool = False) -> bool:
    """Copy ``archive`` to ``dest`` (gzip with no name or time: the bytes depend on the content only) with its
    top-level ``<chart>/<name>`` given ``change(content)``'s bytes; with ``add``, appended as ``change(None)``
    when there is no such member. False (``dest`` removed) when ``change`` refuses (None) or, without ``add``,
    no such member exists. Raises PullFailed for an unreadable archive."""
    found = False
    top = ""
    try:
        with tarfile.open(archive, "r:gz") as src, dest.open("wb") as raw, \
                gzip.GzipFile(filename="", fileobj=raw, mode="wb", mtime=0) as gz, \
                tarfile.open(fileobj=gz, mode="w", format=tarfile.PAX_FORMAT) as out:
            for member in src:
                fh = src.extractfile(member) if member.isfile() else None
                parts = member.name.split("/")
                top = top or parts[0]
                if fh is not None and len(parts) == 2 and parts[1] == name and not found:
                    data = change(fh.read())
                    if data is None:
                        break
                    member.size = len(data)
                    out.addfile(member, io.BytesIO(data))
                    found = True
                    continue
                out.addfile(member, fh)
            if add and not found and top:
                data = change(None)
                if data is not None:
                    info = tarfile.TarInfo(f"{top}/{name}")
                    info.size, info.mode = len(data), 0o644
                    out.addfile(info, io.BytesIO(data))
                    found = True
    except (OSError, tarfile.TarError, UnicodeDecodeError) as exc:
        dest.unlink(missing_ok=True)
        raise PullFailed(f"{what}: cannot {doing} {archive.name} ({exc})", repository=what) from None
    if not found:
        dest.unlink(missing_ok=True)
    return found


def _scalar(value: object) -> str:
    return str(value) if isinstance(value, str | int | float) and not isinstance(value, bool) else ""


def chart_file(archive: Path, relative: str, max_bytes: int = 8 * 1024 * 1024, what: str = "") -> bytes | None:
    """The bytes of ``<chart>/<relative>`` inside a chart archive (e.g. a ``valuesFiles`` entry of
    ``spec.chart.spec``), None when absent. Raises PullFailed for an unreadable archive or a file over
    ``max_bytes``."""
    want = relative.strip("/")
    try:
        with tarfile.open(archive, "r:gz") as tar:
            for member in tar:
                parts = member.name.split("/", 1)
                if len(parts) == 2 and parts[1] == want and member.isfile():
                    if member.size > max_bytes:
                        raise PullFailed(f"{what}: {want} in the chart is over {max_bytes} bytes", repository=what)
                    fh = tar.extractfile(member)
                    return fh.read() if fh else b""
    except (OSError, tarfile.TarError) as exc:
        raise PullFailed(f"{what}: {archive.name} is not a chart archive ({exc})", repository=what) from None
    return None


class ChartCache:
    """The archive store under ``root``; ``path(hex)`` is where an archive lives."""

    def __init__(self, root: Path):
        self.root = root

    def path(self, hex_digest: str) -> Path:
        return self.root / "sha256" / f"{hex_digest}.tgz"

    def has(self, hex_digest: str) -> bool:
        return bool(hex_digest) and self.path(hex_digest).is_file()

    def staging(self) -> Path:
        """A fresh path for a pull to write to (same file system as the store)."""
        folder = self.root / "tmp"
        folder.mkdir(parents=True, exist_ok=True)
        fd, name = tempfile.mkstemp(prefix=f"pull-{os.getpid()}-", suffix=".tgz", dir=folder)
        os.close(fd)
        Path(name).unlink()
        return Path(name)

    def put(self, staged: Path, expected: str = "", what: str = "") -> str:
        """Move ``staged`` into the store; return its sha256 hex. PullFailed when it differs from ``expected``."""
        try:
            actual = sha256_file(staged)
            if expected and actual != expected:
                raise PullFailed(f"{what}: the pulled archive has digest sha256:{actual[:12]}..., "
                                 f"the repository announced sha256:{expected[:12]}...", repository=what)
            target = self.path(actual)
            target.parent.mkdir(parents=True, exist_ok=True)
            staged.replace(target)
            return actual
        finally:
            with contextlib.suppress(OSError):
                staged.unlink()

    def _ref_file(self, key: str) -> Path:
        return self.root / "refs" / hashlib.sha256(key.encode()).hexdigest()[:40]

    def ref(self, key: str) -> str:
        """The archive digest remembered for ``key`` ("" when none, or when the archive is gone)."""
        try:
            hex_digest = self._ref_file(key).read_text().strip()
        except OSError:
            return ""
        return hex_digest if self.has(hex_digest) else ""

    def remember(self, key: str, hex_digest: str) -> None:
        path = self._ref_file(key)
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f"{path.name}.{os.getpid()}.{threading.get_ident()}.tmp")  # one per writer
        tmp.write_text(hex_digest)
        tmp.replace(path)
