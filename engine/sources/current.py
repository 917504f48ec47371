"""Where a package's remote chart is found: one stable path per package, pointing at its current archive.

A Package whose chart comes from a repository gets ``chart_path`` =
``<cache>/charts/current/<namespace>_<name>-<hash of its file>.tgz`` at load
time; each resolution points that path (a symlink, replaced atomically) at the
archive in the content-addressed store. Everything that reads ``chart_path``
(render, diff, upgrade) sees the last resolved chart, and the path is absent
until the first resolution.

The cache directory is :func:`engine.base.paths.cache_root` (the same folder
``localcluster.build`` keeps its binaries in).
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from engine.base.paths import cache_root


def current_path(package_file: Path, namespace: str, name: str, root: Path | None = None) -> Path:
    """The stable chart path of the package ``namespace/name`` declared in ``package_file``."""
    tag = hashlib.sha256(str(package_file).encode()).hexdigest()[:12]
    return (root or cache_root()) / "charts" / "current" / f"{namespace}_{name}-{tag}.tgz"


def point(path: Path, archive: Path) -> bool:
    """Make ``path`` refer to ``archive`` (atomic); False when it already did."""
    try:
        if path.is_symlink() and path.readlink() == archive:
            return False
    except OSError:
        pass
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.unlink(missing_ok=True)
    tmp.symlink_to(archive)
    tmp.replace(path)
    return True
