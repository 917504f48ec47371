"""Lay out helmdeck's post-renderer for helm 3 (an executable) and helm 4 (a plugin).

helm 3's ``--post-renderer`` takes an executable path; helm 4's takes the
name of an installed plugin of type ``postrenderer/v1`` (helm 4's plugin
loader: ``<HELM_PLUGINS>/*/plugin.yaml`` with ``apiVersion: v1``, ``name``
matching ``[A-Za-z0-9_-]+``, a SemVer ``version``, ``runtime: subprocess``
and ``runtimeConfig.platformCommand``; the command sees
``$HELM_PLUGIN_DIR``). One directory serves both::

    <cache>/postrender/<digest>/plugins/helmdeck-labels/
        plugin.yaml            the helm 4 plugin
        helmdeck-postrender    sh wrapper (helm 3's executable, helm 4's command)
        postrender.py          a copy of engine/helm/postrender.py
        engine/base/loader.py  a copy of the bounded YAML loader it imports

``<cache>`` is :func:`engine.base.paths.cache_root` (the same rule as the local cluster's binaries), never
the repository nor the user's helm plugin directory: helm 4 reaches the
plugin through ``HELM_PLUGINS`` set for helmdeck's own helm runs only.
``<digest>`` covers the Python interpreter and the files' contents, so
helmdeck installs with different interpreters or versions never share one.

A package's own post-rendering (kustomize steps, commonMetadata) goes to the
script as ``--config=<cache>/postrender/configs/<digest>.json``: the settings
and the kustomize binary, content-addressed (written once, never changed, so
concurrent renders share it safely), in a directory only this user can read.
Each use touches the file; writing a new one prunes the folder (every helmdeck
of this user shares it, whatever its packages, so nothing is removed for not
being in one's own packages): files unused for :data:`CONFIG_MAX_AGE`, then the
least recently used beyond :data:`CONFIG_MAX_FILES`, never one used within
:data:`CONFIG_IN_USE` (a render may be reading it).
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.base import loader
from engine.base.paths import cache_root
from engine.helm import postrender
from engine.helm.cli import PostRenderer
from engine.helm.kustomize import find_kustomize

CONFIG_MAX_AGE = 7 * 86400.0  # seconds since last use
CONFIG_MAX_FILES = 256
CONFIG_IN_USE = 3600.0  # seconds: a file used this recently is never removed

PLUGIN_NAME = "helmdeck-labels"
PLUGIN_VERSION = "1.0.0"
WRAPPER = "helmdeck-postrender"

_PLUGIN_YAML = f"""\
# helmdeck's label-stamping post-renderer (helm 4 plugin format, apiVersion v1).
apiVersion: v1
name: {PLUGIN_NAME}
type: postrenderer/v1
runtime: subprocess
version: {PLUGIN_VERSION}
runtimeConfig:
  platformCommand:
    - command: ${{HELM_PLUGIN_DIR}}/{WRAPPER}
"""


@dataclass(frozen=True)
class PostRendererLayout:
    """Where the post-renderer lives: ``plugins_dir`` holds the plugin directory ``PLUGIN_NAME``."""

    plugins_dir: Path

    @property
    def executable(self) -> Path:
        """helm 3's ``--post-renderer`` path."""
        return self.plugins_dir / PLUGIN_NAME / WRAPPER

    def renderer(self, labels: Mapping[str, str], config: Mapping[str, Any] | None = None) -> PostRenderer:
        """A :class:`PostRenderer` stamping ``labels`` (``key -> value``) on every object, sorted by key,
        after the package's own post-rendering ``config`` (:meth:`engine.package.postrender.Rendering.document`;
        empty or None: none). Raises KustomizeMissing when ``config`` has kustomize steps and no
        kustomize is found, OSError when the config cannot be written."""
        args = tuple(f"{k}={v}" for k, v in sorted(labels.items()))
        if config:
            args = (f"{postrender.CONFIG_FLAG}{self._config_file(config)}", *args)
        return PostRenderer(executable=self.executable, plugin_name=PLUGIN_NAME, plugins_dir=self.plugins_dir,
                            args=args)

    def _config_file(self, config: Mapping[str, Any]) -> Path:
        data = dict(config)
        if data.get("postRenderers"):
            data["kustomize"] = str(find_kustomize())
        body = json.dumps(data, sort_keys=True, separators=(",", ":")).encode()
        folder = self.plugins_dir.parent.parent / "configs"
        folder.mkdir(mode=0o700, parents=True, exist_ok=True)
        path = folder / f"{hashlib.sha256(body).hexdigest()[:32]}.json"
        try:
            os.utime(path)  # in use: the pruning below goes by last use
            return path
        except FileNotFoundError:
            pass
        fd, tmp = tempfile.mkstemp(dir=folder, prefix=".config-")  # mode 0600
        with os.fdopen(fd, "wb") as fh:
            fh.write(body)
        Path(tmp).replace(path)
        prune_configs(folder, keep=path)
        return path


def prune_configs(folder: Path, keep: Path | None = None, now: float | None = None) -> list[Path]:
    """Remove from ``folder`` the config files (and left-over temporary ones) unused for
    :data:`CONFIG_MAX_AGE`, then the least recently used beyond :data:`CONFIG_MAX_FILES`, sparing ``keep``
    and any used within :data:`CONFIG_IN_USE`. Returns what was removed; errors (a file removed by
    another helmdeck meanwhile) are skipped."""
    now = time.time() if now is None else now
    found: list[tuple[float, Path]] = []
    for entry in folder.iterdir():
        if entry == keep or not (entry.suffix == ".json" or entry.name.startswith(".config-")):
            continue
        try:
            found.append((entry.stat().st_mtime, entry))
        except OSError:
            continue
    found.sort(reverse=True)  # most recently used first
    room = CONFIG_MAX_FILES - (keep is not None)  # ``keep`` counts too
    removed = []
    for rank, (used, entry) in enumerate(found):
        idle = now - used
        if idle < CONFIG_IN_USE or (idle < CONFIG_MAX_AGE and rank < room):
            continue
        try:
            entry.unlink()
            removed.append(entry)
        except OSError:
            continue
    return removed


def _files(python: str) -> dict[str, tuple[bytes, int]]:
    """File name -> (content, mode) of the plugin directory."""
    script = Path(postrender.__file__).read_bytes()
    # -E -s: ignore PYTHON* variables and the user's site directory; the interpreter's own packages (PyYAML)
    # stay, and the script's directory (helmdeck's own, with the loader's copy) comes first on sys.path.
    wrapper = f'#!/bin/sh\nexec {shlex.quote(python)} -E -s "$(dirname "$0")/postrender.py" "$@"\n'
    return {
        "plugin.yaml": (_PLUGIN_YAML.encode(), 0o644),
        "postrender.py": (script, 0o644),
        "engine/__init__.py": (b"", 0o644),
        "engine/base/__init__.py": (b"", 0o644),
        "engine/base/loader.py": (Path(loader.__file__).read_bytes(), 0o644),
        WRAPPER: (wrapper.encode(), 0o755),
    }


def install(root: Path | None = None, python: str | None = None) -> PostRendererLayout:
    """Write the post-renderer under ``root`` (default :func:`cache_root`) unless present.

    Idempotent and safe against a concurrent install (built aside, then
    renamed into place). ``python`` is the interpreter that runs it (default:
    this one). Raises OSError when the directory cannot be written.
    """
    python = python or sys.executable
    files = _files(python)
    h = hashlib.sha256(python.encode() + b"\0")
    for name, (content, mode) in sorted(files.items()):
        h.update(f"{name}\0{mode}\0".encode() + content + b"\0")
    base = (root or cache_root()) / "postrender"
    final = base / h.hexdigest()[:16]
    if not (final / "plugins" / PLUGIN_NAME / "plugin.yaml").is_file():
        base.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=".staging-", dir=base))
        plugin_dir = staging / "plugins" / PLUGIN_NAME
        plugin_dir.mkdir(parents=True)
        for name, (content, mode) in files.items():
            (plugin_dir / name).parent.mkdir(parents=True, exist_ok=True)
            (plugin_dir / name).write_bytes(content)
            (plugin_dir / name).chmod(mode)
        try:
            staging.rename(final)
        except OSError:
            if not final.is_dir():
                raise
            shutil.rmtree(staging)  # another process won the race with identical content
    return PostRendererLayout(final / "plugins")
