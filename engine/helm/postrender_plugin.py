"""Lay out helmdeck's post-renderer for helm 3 (an executable) and helm 4 (a plugin).

helm 3's ``--post-renderer`` takes an executable path; helm 4's takes the
name of an installed plugin of type ``postrenderer/v1`` (helm 4's plugin
loader: ``<HELM_PLUGINS>/*/plugin.yaml`` with ``apiVersion: v1``, ``name``
matching ``[A-Za-z0-9_-]+``, a SemVer ``version``, ``runtime: subprocess``
and ``runtimeConfig.platformCommand``; the command sees
``$HELM_PLUGIN_DIR``). One directory serves both::

    <cache>/postrender/<digest>/plugins/helmdeck-labels/
        plugin.yaml                        the helm 4 plugin
        helmdeck-postrender                sh wrapper (helm 3's executable, helm 4's command)
        engine/helm/postrender_client.py   a copy of the executable the wrapper starts (python -S -E)
        engine/helm/postrender.py          a copy of the post-renderer, when the client renders alone
        engine/base/loader.py              a copy of the bounded YAML loader it imports

The post-render itself runs in the helmdeck process that runs helm: :meth:`PostRendererLayout.renderer`
starts (once per process) a server on a Unix socket in a private temporary directory (mode 0700, removed
at exit) and passes ``--socket=PATH``, so each helm run costs a few milliseconds of client start, not a
Python start with PyYAML (:mod:`engine.helm.postrender_client`; alone, without the server, it renders
itself, the same bytes).

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

import atexit
import contextlib
import hashlib
import json
import logging
import os
import shlex
import shutil
import socket
import sys
import tempfile
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.base import loader
from engine.base.paths import cache_root
from engine.helm import postrender, postrender_client
from engine.helm.cli import PostRenderer
from engine.helm.kustomize import find_kustomize
from engine.helm.postrender_client import SOCKET_FLAG, decode_request

log = logging.getLogger(__name__)

CONFIG_MAX_AGE = 7 * 86400.0  # seconds since last use
CONFIG_MAX_FILES = 256
CONFIG_IN_USE = 3600.0  # seconds: a file used this recently is never removed

PLUGIN_NAME = "helmdeck-labels"
PLUGIN_VERSION = "1.0.0"
WRAPPER = "helmdeck-postrender"
_CLIENT = "engine/helm/postrender_client.py"

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
        served = serve()
        if served:
            args = (*args, f"{SOCKET_FLAG}{served}")
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


class _Server:
    """Post-renders for the helm runs of this process, on a Unix socket (the wire format of
    :mod:`engine.helm.postrender_client`), one daemon thread per connection."""

    def __init__(self) -> None:
        self.folder = Path(tempfile.mkdtemp(prefix="helmdeck-postrender-"))  # mode 0700: only this user connects
        self.path = str(self.folder / "socket")
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            self._sock.bind(self.path)
            self._sock.listen(128)
        except OSError:
            self.close()
            raise
        self.pid = os.getpid()
        threading.Thread(target=self._accept, name="helmdeck-postrender", daemon=True).start()
        atexit.register(self.close)

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    @staticmethod
    def _serve(conn: socket.socket) -> None:
        with conn:
            try:
                chunks = []
                while chunk := conn.recv(1 << 16):
                    chunks.append(chunk)
                args, manifests = decode_request(b"".join(chunks))
                code, out, message = postrender.run(args, manifests)
                conn.sendall(bytes([code]) + (out if code == 0 else message.encode("utf-8")))
            except Exception:  # whatever went wrong: no answer, so the client renders alone and says it
                return

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._sock.close()
        shutil.rmtree(self.folder, ignore_errors=True)


_server: _Server | None = None
_server_lock = threading.Lock()


def serve() -> str:
    """The socket path of this process's post-render server, started on first use (and again in a forked
    child, which does not inherit the thread); "" when no socket can be made (the client then renders alone)."""
    global _server
    with _server_lock:
        if _server is None or _server.pid != os.getpid():
            try:
                _server = _Server()
            except OSError as exc:
                log.warning("post-renders run in helm's own process: no socket for them: %s", exc)
                return ""
        return _server.path


def _files(python: str) -> dict[str, tuple[bytes, int]]:
    """File name -> (content, mode) of the plugin directory."""
    # -S -E: no site (the client needs only built-in modules; it loads the site packages itself when it must
    # render alone), no PYTHON* variables; ${0%/*}: the wrapper's directory without a dirname process.
    wrapper = f'#!/bin/sh\nexec {shlex.quote(python)} -S -E "${{0%/*}}/{_CLIENT}" "$@"\n'
    return {
        "plugin.yaml": (_PLUGIN_YAML.encode(), 0o644),
        "engine/__init__.py": (b"", 0o644),
        "engine/base/__init__.py": (b"", 0o644),
        "engine/base/loader.py": (Path(loader.__file__).read_bytes(), 0o644),
        "engine/helm/__init__.py": (b"", 0o644),
        "engine/helm/postrender.py": (Path(postrender.__file__).read_bytes(), 0o644),
        _CLIENT: (Path(postrender_client.__file__).read_bytes(), 0o644),
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
