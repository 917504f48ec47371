"""Locating a chart: a local chart directory or a packaged ``.tgz``, its metadata and content digest.

The digest of a directory is sha256 over its files' sorted relative paths and
contents; of a ``.tgz``, sha256 over the archive's bytes. Both are cached by
the files' stat signatures, so an unchanged chart is read once per change.
"""

from __future__ import annotations

import hashlib
import tarfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from engine.base.loader import YamlLimitError, chart_limits, load_yaml, parse_text, racy

# A packaged chart bigger than this is refused (helm itself refuses archives over 20 MiB... of files
# inside; we bound the archive and its Chart.yaml).
MAX_ARCHIVE_BYTES = 20 * 1024 * 1024
_CHART_YAML_MAX = 1024 * 1024


class ChartError(ValueError):
    """A chart cannot be used: ``file`` names what is wrong, ``str()`` says how to fix it."""

    def __init__(self, file: Path, problem: str, fix: str = "fix the chart"):
        self.file = file
        self.problem = problem
        self.fix = fix
        super().__init__(f"{file}: {problem} ({fix})")


@dataclass(frozen=True)
class Chart:
    """A chart: where it is (directory or ``.tgz``), its Chart.yaml metadata and content digest."""

    path: Path
    name: str
    version: str
    app_version: str
    digest: str  # sha256:<hex>


def is_chart(path: Path) -> bool:
    """True for a directory with a Chart.yaml or a ``.tgz`` file (helm's two local chart forms);
    False for a path the system cannot even look up (too long, not permitted)."""
    try:
        return (path / "Chart.yaml").is_file() or (path.suffix == ".tgz" and path.is_file())
    except OSError:
        return False


_lock = threading.Lock()
_digests: dict[Path, tuple[tuple[tuple[str, int, int, int], ...], Chart]] = {}


def load_chart(path: Path) -> Chart:
    """Read a chart's metadata and digest (cached per change of its files). Raises ChartError."""
    if path.suffix == ".tgz" and path.is_file():
        st = _stat(path)
        return _cached(path, (("", *st),), st[1], _archive)
    if not (path / "Chart.yaml").is_file():
        raise ChartError(path, "no Chart.yaml here", "point spec.chart at a chart directory or a .tgz")
    files = sorted(p for p in path.rglob("*") if p.is_file())
    signature = tuple((f.relative_to(path).as_posix(), *_stat(f)) for f in files)
    newest = max((entry[2] for entry in signature), default=0)
    return _cached(path, signature, newest, lambda p: _directory(p, files))


def _stat(file: Path) -> tuple[int, int, int]:
    st = file.stat()
    return (st.st_size, st.st_mtime_ns, st.st_ino)


def _cached(path: Path, signature: tuple[tuple[str, int, int, int], ...], newest_mtime: int,
            read: Callable[[Path], Chart]) -> Chart:
    with _lock:
        hit = _digests.get(path)
    if hit is not None and hit[0] == signature and not racy(newest_mtime):
        return hit[1]
    chart = read(path)
    with _lock:
        _digests[path] = (signature, chart)
    return chart


def _metadata(meta: object, where: Path) -> tuple[str, str, str]:
    if not isinstance(meta, dict) or not meta.get("name") or not meta.get("version"):
        raise ChartError(where, "Chart.yaml needs name and version")
    return str(meta["name"]), str(meta["version"]), str(meta.get("appVersion", ""))


def _directory(path: Path, files: list[Path]) -> Chart:
    try:
        meta = load_yaml(path / "Chart.yaml", chart_limits()).data
    except YamlLimitError as exc:
        raise ChartError(path / "Chart.yaml", f"cannot read Chart.yaml: {exc.problem}") from None
    name, version, app_version = _metadata(meta, path / "Chart.yaml")
    h = hashlib.sha256()
    for file in files:
        h.update(file.relative_to(path).as_posix().encode() + b"\0")
        h.update(file.read_bytes() + b"\0")
    return Chart(path, name, version, app_version, "sha256:" + h.hexdigest())


def _archive(path: Path) -> Chart:
    size = path.stat().st_size
    if size > MAX_ARCHIVE_BYTES:
        raise ChartError(path, f"archive is {size} bytes, over the limit of {MAX_ARCHIVE_BYTES} bytes")
    data = path.read_bytes()
    try:
        with tarfile.open(path, "r:gz") as tar:
            member = next((m for m in tar.getmembers()
                           if m.isfile() and m.name.count("/") == 1 and m.name.endswith("/Chart.yaml")), None)
            if member is None:
                raise ChartError(path, "no <chart>/Chart.yaml in the archive", "package the chart with helm package")
            if member.size > _CHART_YAML_MAX:
                raise ChartError(path, f"Chart.yaml is over {_CHART_YAML_MAX} bytes")
            fh = tar.extractfile(member)
            text = fh.read().decode("utf-8", errors="replace") if fh is not None else ""
    except (tarfile.TarError, OSError, EOFError) as exc:
        raise ChartError(path, f"not a readable chart archive ({exc})", "package the chart with helm package") from None
    try:
        meta = parse_text(text, path, chart_limits()).data
    except YamlLimitError as exc:
        raise ChartError(path, f"cannot read Chart.yaml: {exc.problem}") from None
    name, version, app_version = _metadata(meta, path)
    return Chart(path, name, version, app_version, "sha256:" + hashlib.sha256(data).hexdigest())
